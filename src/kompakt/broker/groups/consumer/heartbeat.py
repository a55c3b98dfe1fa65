"""ConsumerGroupHeartbeat (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``) and fencing.

:class:`ConsumerHeartbeat` holds the consumer groups and the steps of a heartbeat; the registry,
the replay, the timers and the classic members are in
:class:`~kompakt.broker.groups.consumer.membership.ConsumerMembership`, which is this class with
them. A heartbeat:

1. validate the request (``GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid``);
   a member epoch of -1 leaves, -2 leaves temporarily (static members);
2. find the group (epoch 0 creates it; the coordinator turns a classic group under the same id
   into a consumer group first) and the member; check its epoch (a member that comes back with the
   previous epoch and a subset of its partitions is accepted: the answer that bumped it may have
   been lost);
3. update the member; a changed subscription, a new member, or a change of the subscribed topics'
   partitions bumps the **group epoch**;
4. when the group epoch is ahead of the assignment epoch, run the server assignor and store the
   new **target assignment**;
5. reconcile the member towards its target (:mod:`kompakt.broker.groups.consumer.reconciliation`):
   revoke first, then assign what its previous owners have released.

Each step yields ``__consumer_offsets`` records (Kafka's ``GroupCoordinatorRecordHelpers``),
returned in a :class:`~kompakt.broker.groups.result.Result`; nothing here writes or changes a
group. Fencing removes members and bumps the epoch, or, when only members of the classic protocol
would remain and ``group.consumer.migration.policy`` allows it, turns the group into a classic
group (:mod:`kompakt.broker.groups.migration`).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from kompakt.broker.client_regex import RegexResolutions, RegexSyntaxError, compile_regex
from kompakt.broker.groups import migration
from kompakt.broker.groups.config import ConsumerGroupConfig
from kompakt.broker.groups.consumer.assignors import (
    ASSIGNOR_CLASS_NAMES,
    ASSIGNORS,
    MemberSpec,
    PartitionAssignorError,
)
from kompakt.broker.groups.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    topic_hash,
)
from kompakt.broker.groups.consumer.reconciliation import (
    MemberAssignmentState,
    MemberState,
    OwnedPartitions,
    is_subset,
    reconcile,
)
from kompakt.broker.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidGroupRequestError,
    InvalidRegularExpressionError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from kompakt.broker.groups.records import schemas as rec
from kompakt.broker.groups.result import Result
from kompakt.clock import Clock
from kompakt.config.groups import GroupResourceConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ConsumerGroupHeartbeat v1 (KIP-1082): the client generates its member id.
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
#: OffsetCommit version a consumer-protocol member must use (Kafka's ``ConsumerGroup.validateOffsetCommit``).
MIN_OFFSET_COMMIT_VERSION = 9

#: One record of a consumer group: its key and value (None is a tombstone).
Record = tuple[rec.ConsumerGroupRecordKey, rec.ConsumerGroupRecordValue | None]

#: Topic name -> (topic id, partition count), for every topic of the broker.
TopicView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """The ConsumerGroupHeartbeat fields, whatever the wire version."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: OwnedPartitions = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The ConsumerGroupHeartbeat answer; ``assignment`` is None when the member's did not change."""

    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: rec.Assignment | None = None


def removal_records(group_id: str, member_id: str) -> list[Record]:
    """Kafka's ``removeMember``: current assignment, target, then metadata tombstones."""
    return [
        (rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
        (rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
        (rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id), None),
    ]


class ConsumerHeartbeat:
    """The consumer groups and the steps of a heartbeat; see the module docstring."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        clock: Clock,
        *,
        topics: TopicView | None = None,
        classic_max_size: int = 2**31 - 1,
    ) -> None:
        self.config = config
        self._clock = clock
        self.topics: TopicView = topics or (lambda: {})
        #: A group's own configs (a GROUP config resource), None when it has none; the broker
        #: installs its reader (``Broker.create``).
        self.group_config: Callable[[str], GroupResourceConfig | None] = lambda _group_id: None
        self._classic_max_size = classic_max_size
        self._groups: dict[str, ConsumerGroup] = {}
        #: What each subscribed regex matched, per topic set (``kompakt.broker.client_regex``).
        self._regexes = RegexResolutions()
        #: The last topic mapping seen and the names a regex may match in it (see :meth:`_regex_names`).
        self._last_regex_names: tuple[object, frozenset[str]] | None = None
        self._assignor_names = tuple(ASSIGNOR_CLASS_NAMES.get(a, a) for a in config.assignors)
        unknown = [a for a in self._assignor_names if a not in ASSIGNORS]
        if unknown:
            raise ValueError(f"group.consumer.assignors names unknown assignors: {', '.join(unknown)}")

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's ``consumer.session.timeout.ms``, else the broker's (Kafka's
        ``GroupMetadataManager.consumerGroupSessionTimeoutMs``)."""
        own = self.group_config(group_id)
        return self.config.session_timeout_ms if own is None else own.consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms``, else the broker's."""
        own = self.group_config(group_id)
        return self.config.heartbeat_interval_ms if own is None else own.consumer_heartbeat_interval_ms

    @property
    def default_assignor(self) -> str:
        return self._assignor_names[0]

    # -- heartbeat -----------------------------------------------------------------------------------

    def validate(self, request: HeartbeatRequest, api_version: int) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if (
            api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
            or request.member_epoch > 0
            or request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
        ) and not request.member_id:
            raise InvalidGroupRequestError("MemberId can't be empty.")
        if not request.group_id:
            raise InvalidGroupRequestError("GroupId can't be empty.")
        if request.instance_id is not None and not request.instance_id:
            raise InvalidGroupRequestError("InstanceId can't be empty.")
        if request.rack_id is not None and not request.rack_id:
            raise InvalidGroupRequestError("RackId can't be empty.")
        if request.member_epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise InvalidGroupRequestError("RebalanceTimeoutMs must be provided in first request.")
            if request.owned_partitions is None or len(request.owned_partitions) > 0:
                raise InvalidGroupRequestError("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise InvalidGroupRequestError(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise InvalidGroupRequestError("InstanceId can't be null.")
        elif request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise InvalidGroupRequestError("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self._assignor_names:
            raise UnsupportedAssignorError(
                f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self._assignor_names)}."
            )

    def heartbeat(
        self, request: HeartbeatRequest, group: ConsumerGroup | None = None
    ) -> Result[HeartbeatResult]:
        """One validated ConsumerGroupHeartbeat; raises a :class:`GroupError` for an error answer.

        ``group`` is the group to work on when it is not (yet) a registered one: the consumer group
        a classic group converts into, which the replay of the conversion's records creates.
        """
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request)
        joining = request.member_epoch == 0
        if group is None:
            group = self._groups.get(request.group_id)
        if group is None:
            if not joining:
                raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
            group = ConsumerGroup(request.group_id)  # the replay of its records registers it
        return self._heartbeat(group, request)

    def _heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest) -> Result[HeartbeatResult]:
        """``GroupMetadataManager.consumerGroupHeartbeat``: member, group epoch, target, reconcile.

        The records of every step form one batch, so a failed write leaves the group as it was.
        """
        joining = request.member_epoch == 0
        member_id = request.member_id or str(uuid.uuid4())
        self._check_size(group, member_id)
        records: list[Record] = []
        replaced: ConsumerGroupMember | None = None
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request, joining)
        else:
            member, replaced = self._static_member(group, member_id, request, joining, records)
        updated = _updated_member(member, request)
        if updated.subscribed_topic_regex:
            self._validate_regex(updated.subscribed_topic_regex)
        updated = self._update_and_reconcile(
            group, member, updated, replaced, request.owned_partitions, records
        )
        reconciled = updated.assignment
        group_id = group.group_id
        now = self._clock.monotonic_ms()

        def then(error: BaseException | None) -> None:
            registered = self._groups.get(group_id)
            if error is None and registered is not None:
                self._restart_timers(registered, member_id, updated, reconciled, now)

        full = (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.owned_partitions is not None
        )
        changed = reconciled.assigned_partitions != member.assignment.assigned_partitions
        result = HeartbeatResult(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned_partitions if joining or full or changed else None,
        )
        return Result(result, records, then)

    def _check_size(self, group: ConsumerGroup, member_id: str) -> None:
        """``throwIfConsumerGroupIsFull``."""
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members."
            )

    def _update_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        replaced: ConsumerGroupMember | None,
        owned: OwnedPartitions,
        records: list[Record],
    ) -> ConsumerGroupMember:
        """Steps 1-3 of a heartbeat or of a classic member's JoinGroup: the member's record and the
        group epoch, the target assignment, the member's reconciliation; returns the member as it
        will be once ``records`` are replayed."""
        member_id = updated.member_id
        members = dict(group.members)
        if replaced is not None:
            members.pop(replaced.member_id, None)
        members[member_id] = updated
        topics = self.topics()
        group_epoch = self._group_epoch(group, member_id, member, updated, members, topics, records)
        target_epoch, target = self._target(
            group, member_id, group_epoch, members, replaced, updated, topics, records
        )
        reconciled = updated.assignment
        if not reconciled.is_reconciled_to(target_epoch):
            reconciled = reconcile(updated.assignment, target_epoch, target, group.partition_epoch, owned)
        if reconciled != updated.assignment or member.member_id not in group.members:
            updated = replace(updated, assignment=reconciled)
            records.append(
                (
                    rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, member_id),
                    updated.assignment_value(),
                )
            )
        return updated

    def _group_epoch(
        self,
        group: ConsumerGroup,
        member_id: str,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        members: Mapping[str, ConsumerGroupMember],
        topics: Mapping[str, tuple[uuid.UUID, int]],
        records: list[Record],
    ) -> int:
        """The group epoch after this heartbeat: bumped by a new member, a subscription change or a
        change of the subscribed topics' metadata (Kafka's metadata hash)."""
        bump = group.group_epoch == 0
        if updated.metadata_value() != member.metadata_value() or member.member_id not in group.members:
            records.append(
                (
                    rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group.group_id, member_id),
                    updated.metadata_value(),
                )
            )
            bump |= (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        metadata_hash = topic_hash(topics, self._subscribed_names(members.values(), topics))
        if metadata_hash != group.metadata_hash:
            bump = True
        if not bump:
            return group.group_epoch
        group_epoch = group.group_epoch + 1
        records.append(
            (
                rec.group_key(rec.CONSUMER_GROUP_METADATA, group.group_id),
                rec.ConsumerGroupMetadataValue(group_epoch, metadata_hash),
            )
        )
        log.info("consumer group %s: group epoch %d", group.group_id, group_epoch)
        if group.has_partition_metadata_record:
            records.append((rec.group_key(rec.CONSUMER_GROUP_PARTITION_METADATA, group.group_id), None))
        return group_epoch

    def _target(
        self,
        group: ConsumerGroup,
        member_id: str,
        group_epoch: int,
        members: Mapping[str, ConsumerGroupMember],
        replaced: ConsumerGroupMember | None,
        updated: ConsumerGroupMember,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        records: list[Record],
    ) -> tuple[int, rec.Assignment]:
        """``(target epoch, the member's target)``: a new target assignment when the epoch moved."""
        targets = dict(group.target_assignment)
        if replaced is not None:
            targets[member_id] = targets.pop(replaced.member_id, {})
        if group_epoch <= group.assignment_epoch:
            return group.assignment_epoch, targets.get(member_id, {})
        new_targets = self._assign(group, members, targets, updated, topics)
        for mid in members:
            if new_targets.get(mid, {}) != targets.get(mid):
                records.append(
                    (
                        rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id, mid),
                        rec.ConsumerGroupTargetAssignmentMemberValue(new_targets.get(mid, {})),
                    )
                )
        records.append(
            (
                rec.group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id),
                rec.ConsumerGroupTargetAssignmentMetadataValue(group_epoch),
            )
        )
        return group_epoch, new_targets.get(member_id, {})

    def _restart_timers(
        self,
        group: ConsumerGroup,
        member_id: str,
        updated: ConsumerGroupMember,
        reconciled: MemberAssignmentState,
        now: float,
    ) -> None:
        """The session restarts on every heartbeat; a member that must revoke has its rebalance
        timeout to do so (``scheduleConsumerGroupRebalanceTimeout``)."""
        group.session_deadlines_ms[member_id] = now + self.session_timeout_ms(group.group_id)
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS and not updated.uses_classic_protocol:
            deadline = group.revocation_deadlines_ms.get(member_id)
            if deadline is None or deadline[0] != reconciled.member_epoch:
                group.revocation_deadlines_ms[member_id] = (
                    reconciled.member_epoch,
                    now + max(updated.rebalance_timeout_ms, 0),
                )
        else:
            group.revocation_deadlines_ms.pop(member_id, None)

    # -- members and epochs --------------------------------------------------------------------------

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest, joining: bool
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("consumer group %s: member %s joins", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, request.member_epoch, request.owned_partitions)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        request: HeartbeatRequest,
        joining: bool,
        records: list[Record],
        classic: bool = False,
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``: returns (member, member it
        replaces). A member of either protocol may take over a classic member's instance id at
        once; between two members of the consumer protocol the old one must have left first."""
        assert request.instance_id is not None
        existing = group.static_member(request.instance_id)
        if joining:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            if existing.member_id == member_id:
                if not classic:
                    self._check_epoch(existing, request.member_epoch, request.owned_partitions)
                return existing, None
            if (
                not classic
                and not existing.uses_classic_protocol
                and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
            ):
                raise UnreleasedInstanceIdError(
                    f"Static member {existing.member_id} with instance id {request.instance_id} "
                    "is not released."
                )
            return self._replace(group, existing, member_id, records), existing
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {request.instance_id} was fenced by member "
                f"{existing.member_id}."
            )
        if not classic:
            self._check_epoch(existing, request.member_epoch, request.owned_partitions)
        return existing, None

    @staticmethod
    def _replace(
        group: ConsumerGroup, existing: ConsumerGroupMember, member_id: str, records: list[Record]
    ) -> ConsumerGroupMember:
        """Kafka's ``replaceMember``: the new incarnation of a static member takes over the old
        one's partitions and target under its new member id."""
        new = replace(
            existing,
            member_id=member_id,
            assignment=replace(existing.assignment, member_epoch=0, previous_member_epoch=0),
        )
        gid = group.group_id
        records.extend(removal_records(gid, existing.member_id))
        records += [
            (rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, gid, member_id), new.metadata_value()),
            (
                rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id),
                rec.ConsumerGroupTargetAssignmentMemberValue(group.target_of(existing.member_id)),
            ),
            (
                rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id),
                new.assignment_value(),
            ),
        ]
        log.info("consumer group %s: static member %s replaces %s", gid, member_id, existing.member_id)
        return new

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: OwnedPartitions) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``."""
        if epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin."
            )
        if epoch < member.member_epoch and (
            epoch != member.assignment.previous_member_epoch
            or not is_subset(owned, member.assignment.assigned_partitions)
        ):
            raise FencedMemberEpochError(
                f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin."
            )

    # -- subscriptions and the target assignment -----------------------------------------------------

    @staticmethod
    def _validate_regex(regex: str) -> None:
        """``throwIfRegularExpressionIsInvalid``: RE2 syntax, as Kafka's RE2J."""
        try:
            compile_regex(regex)
        except RegexSyntaxError as exc:
            raise InvalidRegularExpressionError(
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc.description}."
            ) from None

    def _regex_names(self, topics: Mapping[str, tuple[uuid.UUID, int]]) -> frozenset[str]:
        """The topics a regex may match (internal ``__`` topics never do), built once per mapping:
        one heartbeat resolves every member's regex against the same ``topics``."""
        last = self._last_regex_names
        if last is not None and last[0] is topics:
            return last[1]
        names = frozenset(t for t in topics if not t.startswith("__"))
        self._last_regex_names = (topics, names)
        return names

    def _member_topics(
        self, member: ConsumerGroupMember, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> set[str]:
        names = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex:
            try:
                names.update(self._regexes.resolve(regex, self._regex_names(topics)))
            except RegexSyntaxError as exc:
                # Only a member replayed from an older log can hold one (heartbeats validate it):
                # it matches nothing, as Kafka's refreshRegularExpressions ignores such a regex.
                log.warning(
                    "consumer group member %s: ignoring regex %r: %s",
                    member.member_id,
                    regex,
                    exc.description,
                )
        return names

    def subscription_regexes(self, group_id: str) -> set[str]:
        """The regexes the members of ``group_id`` subscribe with."""
        group = self._groups.get(group_id)
        if group is None:
            return set()
        return {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}

    def resolve_regexes(self, patterns: Iterable[str]) -> None:
        """Match ``patterns`` against the current topics ahead of the heartbeat that will use them.

        Needs no lock (the topic view and the resolutions are thread-safe): the handler calls it in
        a worker thread before the coordinator's lock is taken, so the matching blocks neither the
        event loop nor the group requests waiting for the lock. Invalid patterns are skipped; the
        heartbeat that sends one is answered with the error.
        """
        self._regexes.resolve_valid(patterns, self._regex_names(self.topics()))

    def _subscribed_names(
        self, members: Iterable[ConsumerGroupMember], topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> list[str]:
        names: set[str] = set()
        for member in members:
            names |= self._member_topics(member, topics)
        return sorted(names)

    def _preferred_assignor(
        self, members: Mapping[str, ConsumerGroupMember], updated: ConsumerGroupMember
    ) -> str:
        """Kafka's ``computePreferredServerAssignor``: the assignor most members name, else the default."""
        counts = Counter(m.server_assignor for m in members.values() if m.server_assignor)
        if not counts:
            return self.default_assignor
        best = max(counts.values())
        if updated.server_assignor and counts[updated.server_assignor] == best:
            return updated.server_assignor
        return next(name for name, count in counts.items() if count == best)

    def _assign(
        self,
        group: ConsumerGroup,
        members: Mapping[str, ConsumerGroupMember],
        targets: Mapping[str, rec.Assignment],
        updated: ConsumerGroupMember,
        topics: Mapping[str, tuple[uuid.UUID, int]],
    ) -> dict[str, rec.Assignment]:
        """Run the preferred assignor (Kafka's ``TargetAssignmentBuilder``)."""
        specs = [
            MemberSpec(
                member_id=m.member_id,
                instance_id=m.instance_id,
                subscribed_topic_ids=frozenset(
                    topics[n][0] for n in self._member_topics(m, topics) if n in topics
                ),
                assignment=targets.get(m.member_id, {}),
            )
            for m in members.values()
        ]
        partitions = dict(topics.values())
        assignor = ASSIGNORS[self._preferred_assignor(members, updated)]
        try:
            return dict(assignor.assign(specs, partitions))
        except PartitionAssignorError as exc:
            raise GroupError(
                f"Failed to compute a new target assignment for {group.group_id}: {exc}"
            ) from exc

    # -- leaving and fencing -------------------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> Result[HeartbeatResult]:
        """``consumerGroupLeave``: -1 leaves for good, -2 (a static member) for a while."""
        group = self._groups.get(request.group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
        left = HeartbeatResult(request.member_id, request.member_epoch, 0)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {request.member_id} is not a member of group {group.group_id}."
                )
            log.info("consumer group %s: member %s left", group.group_id, member.member_id)
            return self.fence(group, [member], left)
        member = self._static(group, request.instance_id, request.member_id)
        if request.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return self.fence(group, [member], left)
        # A temporary leave: the member keeps its partitions until its session runs out.
        leaving = replace(
            member,
            assignment=replace(
                member.assignment,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                partitions_pending_revocation={},
            ),
        )
        key = rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id)
        return Result(
            HeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0),
            [(key, leaving.assignment_value())],
        )

    @staticmethod
    def _static(group: ConsumerGroup, instance_id: str, member_id: str) -> ConsumerGroupMember:
        """The static member of ``instance_id``, which ``member_id`` must be (an empty member id,
        LeaveGroup's administrative removal, is any)."""
        member = group.static_member(instance_id)
        if member is None:
            raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
        if member_id and member.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{member.member_id}."
            )
        return member

    def fence(self, group: ConsumerGroup, members: Sequence[ConsumerGroupMember], value: T) -> Result[T]:
        """Remove members and bump the group epoch (Kafka's ``consumerGroupFenceMembers``); or, when
        only members of the classic protocol would remain and the policy allows it, turn the group
        into a classic group (``convertToClassicGroup``)."""
        if not members:
            return Result(value)
        gone = {m.member_id for m in members}
        if self._may_downgrade(group, members):
            conversion = migration.to_classic_group(group, gone, self.topics(), self._clock.now_ms())
            log.info(
                "consumer group %s: converted to a classic group as %s left", group.group_id, sorted(gone)
            )
            return Result(value, conversion.records, converted=(conversion.note,))
        records: list[Record] = []
        for member in members:
            records.extend(removal_records(group.group_id, member.member_id))
        remaining = [m for mid, m in group.members.items() if mid not in gone]
        topics = self.topics()
        metadata_hash = topic_hash(topics, self._subscribed_names(remaining, topics))
        epoch = group.group_epoch + 1
        records.append(
            (
                rec.group_key(rec.CONSUMER_GROUP_METADATA, group.group_id),
                rec.ConsumerGroupMetadataValue(epoch, metadata_hash),
            )
        )
        log.info("consumer group %s: fenced %s; group epoch %d", group.group_id, sorted(gone), epoch)
        return Result(value, records)

    def _may_downgrade(self, group: ConsumerGroup, leaving: Sequence[ConsumerGroupMember]) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers``."""
        if not group.all_use_classic_protocol_except(leaving):
            return False
        remaining = len(group.members) - len({m.member_id for m in leaving})
        if remaining <= 0:
            return False
        if self.config.migration_policy not in ("downgrade", "bidirectional"):
            log.info(
                "consumer group %s: not downgraded to a classic group: the policy is %s",
                group.group_id,
                self.config.migration_policy,
            )
            return False
        if remaining > self._classic_max_size:
            log.info(
                "consumer group %s: not downgraded: %d members exceed group.max.size",
                group.group_id,
                remaining,
            )
            return False
        return True


def _updated_member(member: ConsumerGroupMember, request: HeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the heartbeat sets (a field left null or -1 keeps its value)."""
    return replace(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor=request.server_assignor
        if request.server_assignor is not None
        else member.server_assignor,
        subscribed_topic_names=(
            tuple(sorted(request.subscribed_topic_names))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            request.subscribed_topic_regex
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=request.client_id,
        client_host=request.client_host,
        classic_member_metadata=None,
    )
