"""The KIP-848 consumer-group coordinator: ConsumerGroupHeartbeat, ConsumerGroupDescribe, and offsets.

Sans-IO and clock-injected, like the classic coordinator beside it; the classic
:class:`~kompakt.broker.groups.coordinator.GroupCoordinator` owns one of these and routes every
request for a group id of this type here (a group id is of one type at a time).

A heartbeat follows Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``:

1. validate the request (``GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid``);
   a member epoch of -1 leaves, -2 leaves temporarily (static members);
2. find or create the group (epoch 0 creates it; an *empty* classic group under the same id is
   deleted first, which is Kafka's conversion rule) and the member; check its epoch (a member that
   comes back with the previous epoch and a subset of its partitions is accepted: the answer that
   bumped it may have been lost);
3. update the member; a changed subscription, a new member, or a change of the subscribed topics'
   partitions bumps the **group epoch**;
4. when the group epoch is ahead of the assignment epoch, run the server assignor and store the
   new **target assignment**;
5. reconcile the member towards its target (:mod:`kompakt.broker.groups.reconciliation`): revoke
   first, then assign what its previous owners have released.

Each step yields ``__consumer_offsets`` records (Kafka's ``GroupCoordinatorRecordHelpers``); the
request's records are appended as one batch and then replayed into the group, so memory changes
only after the log has the change, and a restart that replays the log rebuilds the same group.

Timers are deadlines checked by :meth:`ConsumerGroupCoordinator.tick`: a member whose session
(the group's ``consumer.session.timeout.ms``, else the broker's ``group.consumer.session.timeout.ms``,
since its last heartbeat) runs out, or that still owns
partitions it must revoke when its rebalance timeout runs out, is fenced (its records tombstoned
and the group epoch bumped).

Not done (Kafka does them): online migration of a *non-empty* group between the classic and the
consumer protocol (a classic JoinGroup for a non-empty consumer group is refused with
INCONSISTENT_GROUP_PROTOCOL, a heartbeat for a non-empty classic group with GROUP_ID_NOT_FOUND, as
Kafka answers with ``group.consumer.migration.policy=disabled``); rack-aware assignment; the
ConsumerGroupRegularExpression records (regular expressions are resolved on every heartbeat
instead, so they are not persisted apart from the member's subscription).
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from kompakt.broker.groups import consumer_records as rec
from kompakt.broker.groups.assignors import (
    ASSIGNOR_CLASS_NAMES,
    ASSIGNORS,
    MemberSpec,
    PartitionAssignorError,
)
from kompakt.broker.groups.config import ConsumerGroupConfig
from kompakt.broker.groups.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
)
from kompakt.broker.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidGroupRequestError,
    InvalidRegularExpressionError,
    NonEmptyGroupError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedGroupVersionError,
)
from kompakt.broker.groups.reconciliation import (
    MemberAssignmentState,
    MemberState,
    OwnedPartitions,
    is_subset,
    reconcile,
)
from kompakt.clock import Clock
from kompakt.config.groups import GroupResourceConfig

log = logging.getLogger(__name__)

#: ConsumerGroupHeartbeat v1 (KIP-1082): the client generates its member id.
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
#: OffsetCommit version a consumer-protocol member must use (Kafka's ``ConsumerGroup.validateOffsetCommit``).
MIN_OFFSET_COMMIT_VERSION = 9
#: KIP-430 operations on a group when no authorizer runs: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
#: ALTER_CONFIGS (``AclOperation`` codes 3, 6, 8, 10, 11) as a bit field.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
#: The ``authorized_operations`` value when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

#: One record: encoded key and value (None is a tombstone).
Record = tuple[rec.ConsumerGroupRecordKey, rec.ConsumerGroupRecordValue | None]


class ConsumerRecordStore(Protocol):
    """The part of the offset store the consumer groups write their records through."""

    def append_group_records(self, group: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append ``(key, value)`` records of ``group`` as one batch (None values are tombstones)."""
        ...

    def consumer_group_records(self) -> dict[str, list[tuple[bytes, bytes]]]:
        """The live (latest, non-tombstone) consumer-group records per group, for a restart."""
        ...

    def groups(self) -> set[str]:
        """Every group that has committed offsets."""
        ...


class ClassicGroups(Protocol):
    """What the consumer side needs of the classic coordinator (one namespace of group ids)."""

    def has_classic_group(self, group_id: str) -> bool: ...

    def drop_empty_classic_group(self, group_id: str) -> bool:
        """Delete the classic group if it is empty (tombstoning its metadata); whether it was."""
        ...


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


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: rec.Assignment
    target_assignment: rec.Assignment


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]


def _topic_hash(topics: Mapping[str, tuple[uuid.UUID, int]], names: Sequence[str]) -> int:
    """The subscribed topics' hash (KIP-1101's role): 0 without topics, else a signed 64-bit digest.

    Kafka computes XXH3 over each topic's id, name, partitions and racks; kompakt digests the
    same facts (it has no racks) with BLAKE2b. The value only has to change when they change.
    """
    present = sorted(n for n in names if n in topics)
    if not present:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in present:
        topic_id, count = topics[name]
        digest.update(name.encode() + b"\0" + topic_id.bytes + count.to_bytes(4, "big"))
    value = int.from_bytes(digest.digest(), "big", signed=True)
    return value or 1


class ConsumerGroupCoordinator:
    """Every KIP-848 consumer group of the broker."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        clock: Clock,
        store: ConsumerRecordStore,
        classic: ClassicGroups,
        topics: TopicView | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._store = store
        self._classic = classic
        self.topics: TopicView = topics or (lambda: {})
        #: A group's own configs (a GROUP config resource), None when it has none; the broker
        #: installs its reader (``Broker.create``).
        self.group_config: Callable[[str], GroupResourceConfig | None] = lambda _group_id: None
        self._groups: dict[str, ConsumerGroup] = {}
        self._assignor_names = tuple(ASSIGNOR_CLASS_NAMES.get(a, a) for a in config.assignors)
        unknown = [a for a in self._assignor_names if a not in ASSIGNORS]
        if unknown:
            raise ValueError(f"group.consumer.assignors names unknown assignors: {', '.join(unknown)}")
        self._restore()

    # -- lookup ------------------------------------------------------------------------------

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        return list(self._groups)

    @property
    def default_assignor(self) -> str:
        return self._assignor_names[0]

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's ``consumer.session.timeout.ms``, else the broker's (Kafka's
        ``GroupMetadataManager.consumerGroupSessionTimeoutMs``)."""
        own = self.group_config(group_id)
        return self.config.session_timeout_ms if own is None else own.consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms``, else the broker's."""
        own = self.group_config(group_id)
        return self.config.heartbeat_interval_ms if own is None else own.consumer_heartbeat_interval_ms

    # -- persistence -------------------------------------------------------------------------

    def _restore(self) -> None:
        """Replay the stored records (after a restart) and start every member's session anew."""
        now = self._clock.monotonic_ms()
        order = {
            rec.CONSUMER_GROUP_METADATA: 0,
            rec.CONSUMER_GROUP_PARTITION_METADATA: 1,
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: 2,
            rec.CONSUMER_GROUP_MEMBER_METADATA: 3,
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: 4,
            rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: 5,
        }
        for group_id, raw in self._store.consumer_group_records().items():
            decoded: list[Record] = []
            for key_bytes, value_bytes in raw:
                try:
                    key = rec.decode_key(key_bytes)
                    if key is None or key.record_type not in order:
                        continue
                    decoded.append((key, rec.decode_value(key.record_type, value_bytes)))
                except rec.ConsumerRecordFormatError as exc:
                    log.warning("group %s: skipping an unreadable consumer-group record: %s", group_id, exc)
            if not any(k.record_type == rec.CONSUMER_GROUP_METADATA for k, _ in decoded):
                continue  # no group epoch record: the group was deleted (or never completed its first write)
            group = ConsumerGroup(group_id)
            for key, value in sorted(decoded, key=lambda kv: order[kv[0].record_type]):
                group.replay(key, value)
            for member in group.members.values():
                group.session_deadlines_ms[member.member_id] = now + self.session_timeout_ms(group_id)
                if member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                    group.revocation_deadlines_ms[member.member_id] = (
                        member.member_epoch,
                        now + max(member.rebalance_timeout_ms, 0),
                    )
            self._groups[group_id] = group
            log.info(
                "consumer group %s restored: epoch %d, %d members",
                group_id,
                group.group_epoch,
                len(group.members),
            )

    def _write(self, group: ConsumerGroup, records: Sequence[Record]) -> None:
        """Append the records as one batch, then replay them into ``group`` (Kafka's order)."""
        if not records:
            return
        self._store.append_group_records(
            group.group_id,
            [(rec.encode_key(k), None if v is None else rec.encode_value(v)) for k, v in records],
        )
        for key, value in records:
            group.replay(key, value)

    # -- heartbeat ---------------------------------------------------------------------------

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

    def heartbeat(self, request: HeartbeatRequest, api_version: int) -> HeartbeatResult:
        """Handle one ConsumerGroupHeartbeat; raises a :class:`GroupError` for an error answer."""
        self.validate(request, api_version)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request)
        return self._heartbeat(request)

    def _get_or_create_group(self, group_id: str, create: bool) -> tuple[ConsumerGroup, bool]:
        group = self._groups.get(group_id)
        if group is not None:
            return group, False
        if self._classic.has_classic_group(group_id):
            if not create:
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            if not self._classic.drop_empty_classic_group(group_id):
                raise GroupIdNotFoundError(
                    f"Cannot upgrade classic group {group_id} to consumer group: it has members, and kompakt "
                    "does not migrate a non-empty group between protocols."
                )
            log.info("group %s: converted the empty classic group to a consumer group", group_id)
        elif not create:
            raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id), True

    def _heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """``GroupMetadataManager.consumerGroupHeartbeat``: member, group epoch, target, reconcile.

        The records of each step are collected and written as one batch, so a failed write leaves
        the group as it was (the in-memory state follows the log only through ``_write``).
        """
        now = self._clock.monotonic_ms()
        joining = request.member_epoch == 0
        group, created = self._get_or_create_group(request.group_id, joining)
        member_id = request.member_id or str(uuid.uuid4())
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members."
            )
        records: list[Record] = []
        replaced: ConsumerGroupMember | None = None
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request, joining)
        else:
            member, replaced = self._static_member(group, member_id, request, joining, records)
        updated = _updated_member(member, request)
        if updated.subscribed_topic_regex:
            self._compile(updated.subscribed_topic_regex)

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
            reconciled = reconcile(
                updated.assignment, target_epoch, target, group.partition_epoch, request.owned_partitions
            )
        if reconciled != updated.assignment or member.member_id not in group.members:
            updated = replace(updated, assignment=reconciled)
            records.append(
                (
                    rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, member_id),
                    updated.assignment_value(),
                )
            )

        if created:
            self._groups[group.group_id] = group
        try:
            self._write(group, records)
        except Exception:
            if created and not group.members:
                self._groups.pop(group.group_id, None)
            raise
        self._restart_timers(group, member_id, updated, reconciled, now)
        full = (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.owned_partitions is not None
        )
        changed = reconciled.assigned_partitions != member.assignment.assigned_partitions
        return HeartbeatResult(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned_partitions if joining or full or changed else None,
        )

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
        metadata_hash = _topic_hash(topics, self._subscribed_names(members.values(), topics))
        if metadata_hash != group.metadata_hash:
            bump = True
        if not bump:
            return group.group_epoch
        group_epoch = group.group_epoch + 1
        records.append(
            (
                rec.group_key(rec.CONSUMER_GROUP_METADATA, group.group_id),
                rec.GroupMetadataValue(group_epoch, metadata_hash),
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
                        rec.TargetAssignmentMemberValue(new_targets.get(mid, {})),
                    )
                )
        records.append(
            (
                rec.group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id),
                rec.TargetAssignmentMetadataValue(group_epoch),
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
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            deadline = group.revocation_deadlines_ms.get(member_id)
            if deadline is None or deadline[0] != reconciled.member_epoch:
                group.revocation_deadlines_ms[member_id] = (
                    reconciled.member_epoch,
                    now + max(updated.rebalance_timeout_ms, 0),
                )
        else:
            group.revocation_deadlines_ms.pop(member_id, None)

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
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``: returns (member, member it replaces)."""
        assert request.instance_id is not None
        existing = group.static_member(request.instance_id)
        if joining:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            if existing.member_id == member_id:
                self._check_epoch(existing, request.member_epoch, request.owned_partitions)
                return existing, None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise UnreleasedInstanceIdError(
                    f"Static member {existing.member_id} with instance id {request.instance_id} "
                    "is not released."
                )
            # The new incarnation takes over the old one's partitions and target (replaceMember).
            new = replace(
                existing,
                member_id=member_id,
                assignment=replace(existing.assignment, member_epoch=0, previous_member_epoch=0),
            )
            records.extend(self._removal_records(group.group_id, existing.member_id))
            records.append(
                (
                    rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group.group_id, member_id),
                    new.metadata_value(),
                )
            )
            records.append(
                (
                    rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id),
                    rec.TargetAssignmentMemberValue(group.target_of(existing.member_id)),
                )
            )
            records.append(
                (
                    rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, member_id),
                    new.assignment_value(),
                )
            )
            log.info(
                "consumer group %s: static member %s replaces %s",
                group.group_id,
                member_id,
                existing.member_id,
            )
            return new, existing
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {request.instance_id} was fenced by member "
                f"{existing.member_id}."
            )
        self._check_epoch(existing, request.member_epoch, request.owned_partitions)
        return existing, None

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

    @staticmethod
    def _compile(regex: str) -> re.Pattern[str]:
        try:
            return re.compile(regex)
        except re.error as exc:
            raise InvalidRegularExpressionError(
                f"SubscribedTopicRegex {regex!r} is not a valid regex: {exc}"
            ) from None

    def _member_topics(
        self, member: ConsumerGroupMember, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = self._compile(member.subscribed_topic_regex)
            names.update(t for t in topics if not t.startswith("__") and pattern.fullmatch(t))
        return names

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

    # -- leaving and fencing -----------------------------------------------------------------

    @staticmethod
    def _removal_records(group_id: str, member_id: str) -> list[Record]:
        """Kafka's ``removeMember``: current assignment, target, then metadata tombstones."""
        return [
            (rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
            (rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
            (rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id), None),
        ]

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self._groups.get(request.group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {request.member_id} is not a member of group {group.group_id}."
                )
            log.info("consumer group %s: member %s left", group.group_id, member.member_id)
            self.fence(group, [member])
            return HeartbeatResult(request.member_id, request.member_epoch, 0)
        member = group.static_member(request.instance_id)
        if member is None:
            raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
        if member.member_id != request.member_id:
            raise FencedInstanceIdError(
                f"Static member {request.member_id} with instance id {request.instance_id} "
                "was fenced by member "
                f"{member.member_id}."
            )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A temporary leave: the member keeps its partitions until its session runs out.
            leaving = replace(
                member,
                assignment=replace(
                    member.assignment,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    partitions_pending_revocation={},
                ),
            )
            self._write(
                group,
                [
                    (
                        rec.member_key(
                            rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id
                        ),
                        leaving.assignment_value(),
                    )
                ],
            )
            return HeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0)
        self.fence(group, [member])
        return HeartbeatResult(request.member_id, request.member_epoch, 0)

    def fence(self, group: ConsumerGroup, members: Sequence[ConsumerGroupMember]) -> None:
        """Remove members and bump the group epoch (Kafka's ``consumerGroupFenceMembers``)."""
        if not members:
            return
        records: list[Record] = []
        for member in members:
            records.extend(self._removal_records(group.group_id, member.member_id))
        gone = {m.member_id for m in members}
        remaining = [m for mid, m in group.members.items() if mid not in gone]
        topics = self.topics()
        metadata_hash = _topic_hash(topics, self._subscribed_names(remaining, topics))
        records.append(
            (
                rec.group_key(rec.CONSUMER_GROUP_METADATA, group.group_id),
                rec.GroupMetadataValue(group.group_epoch + 1, metadata_hash),
            )
        )
        self._write(group, records)
        log.info(
            "consumer group %s: fenced %s; group epoch %d", group.group_id, sorted(gone), group.group_epoch
        )

    def tick(self, now_ms: float) -> None:
        """Fence members whose session expired or that did not revoke within their rebalance timeout."""
        for group in list(self._groups.values()):
            expired = [
                m
                for m in group.members.values()
                if now_ms > group.session_deadlines_ms.get(m.member_id, now_ms)
            ]
            for member in expired:
                log.info("consumer group %s: member %s session expired", group.group_id, member.member_id)
            late = [
                m
                for m in group.members.values()
                if m not in expired
                and (deadline := group.revocation_deadlines_ms.get(m.member_id)) is not None
                and deadline[0] == m.member_epoch
                and m.assignment.state is MemberState.UNREVOKED_PARTITIONS
                and now_ms > deadline[1]
            ]
            for member in late:
                log.info(
                    "consumer group %s: member %s did not revoke its partitions within %d ms",
                    group.group_id,
                    member.member_id,
                    member.rebalance_timeout_ms,
                )
            try:
                self.fence(group, [*expired, *late])
            except Exception:
                log.exception("consumer group %s: could not fence expired members", group.group_id)

    # -- offsets -----------------------------------------------------------------------------

    def check_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        api_version: int,
        *,
        transactional: bool = False,
    ) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``; a transactional commit (TxnOffsetCommit,
        from a producer's ``send_offsets_to_transaction``) is not held to OffsetCommit v9."""
        group = self._groups[group_id]
        if member_epoch < 0 and group.is_empty():
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if not transactional and api_version < MIN_OFFSET_COMMIT_VERSION:
            raise UnsupportedGroupVersionError(
                "OffsetCommit version 9 or above must be used by members using the modern group protocol"
            )
        if member_epoch != member.member_epoch:
            raise StaleMemberEpochError(
                f"The received member epoch {member_epoch} does not match the expected member epoch "
                f"{member.member_epoch}."
            )

    def check_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` (OffsetFetch v9+ carries the member)."""
        group = self._groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if member_epoch != member.member_epoch:
            raise StaleMemberEpochError(
                f"The received member epoch {member_epoch} does not match the expected member epoch "
                f"{member.member_epoch}."
            )

    # -- administration ----------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group; raises GroupIdNotFoundError for others."""
        group = self._groups.get(group_id)
        if group is None:
            if self._classic.has_classic_group(group_id):
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        preferred = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        assignor = preferred.most_common(1)[0][0] if preferred else self.default_assignor
        return DescribedConsumerGroup(
            group_id=group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=assignor,
            members=tuple(
                DescribedMember(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=m.assignment.assigned_partitions,
                    target_assignment=group.target_of(m.member_id),
                )
                for m in group.members.values()
            ),
        )

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics the group's members subscribe to (OffsetDelete keeps their offsets)."""
        group = self._groups.get(group_id)
        if group is None:
            return set()
        topics = self.topics()
        names: set[str] = set()
        for member in group.members.values():
            names |= self._member_topics(member, topics)
        return names

    def state_of(self, group_id: str) -> ConsumerGroupState:
        group = self._groups.get(group_id)
        return group.state if group is not None else ConsumerGroupState.DEAD

    def delete_group(self, group_id: str) -> None:
        """Tombstone every record of an empty group (Kafka's ``createGroupTombstoneRecords``)."""
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if not group.is_empty():
            raise NonEmptyGroupError(f"Group {group_id} is not empty.")
        records: list[Record] = [
            (rec.group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), None),
            (rec.group_key(rec.CONSUMER_GROUP_PARTITION_METADATA, group_id), None),
            (rec.group_key(rec.CONSUMER_GROUP_METADATA, group_id), None),
        ]
        self._write(group, records)
        del self._groups[group_id]
        log.info("consumer group %s deleted", group_id)

    def delete_if_empty(self, group_id: str) -> bool:
        """Delete the group when it has no members (a classic JoinGroup converts it); whether it did."""
        group = self._groups.get(group_id)
        if group is None or not group.is_empty():
            return False
        self.delete_group(group_id)
        log.info("group %s: converted the empty consumer group to a classic group", group_id)
        return True

    def member_state(self, group_id: str, member_id: str) -> MemberAssignmentState | None:
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        return member.assignment if member is not None else None


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
