"""KIP-848 consumer groups: their registry and replay, their timers, the classic members of a
consumer group, and their offsets checks and descriptions (Kafka's ``GroupMetadataManager``, its
consumer half), on top of the heartbeat in :mod:`kompakt.broker.groups.consumer.heartbeat`.

A group changes only when the coordinator replays records (:meth:`ConsumerMembership.replay`, as
Kafka's ``GroupMetadataManager.replay``): a record of an unknown group creates it, the tombstone
of its epoch record removes it, and a restart that replays the log rebuilds the same group.

Members of the classic protocol (KIP-848's online migration, Kafka 4.1's
``classicGroupJoinToConsumerGroup`` and its Sync, Heartbeat and Leave siblings) are members like
the others, reconciled one JoinGroup and SyncGroup per step: the JoinGroup answers at once with
the member epoch as generation, the SyncGroup with the member's partitions in the embedded
consumer protocol, and a heartbeat asks the member to rejoin (REBALANCE_IN_PROGRESS) while it is
behind the group epoch.

Timers are deadlines checked by :meth:`ConsumerMembership.run_due`: a member whose session
(``group.consumer.session.timeout.ms``, or the classic member's own) runs out, that still owns
partitions it must revoke when its rebalance timeout runs out, or a classic member that does not
rejoin or sync within its rebalance timeout, is fenced.

Not done (Kafka does them): rack-aware assignment; the ConsumerGroupRegularExpression records
(regular expressions are resolved on every heartbeat instead, so they are not persisted apart from
the member's subscription); per-group dynamic configs (``consumer.session.timeout.ms`` and the
like); the downgrade Kafka makes when a classic static member replaces the last member of the
consumer protocol (``validateOnlineDowngradeWithReplacedMember``).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from kompakt.broker.deferred import Deferred
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups import migration
from kompakt.broker.groups.classic.group import JoinResult, SyncResult
from kompakt.broker.groups.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
)
from kompakt.broker.groups.consumer.heartbeat import ConsumerHeartbeat, HeartbeatRequest
from kompakt.broker.groups.consumer.reconciliation import (
    MemberState,
)
from kompakt.broker.groups.errors import (
    FencedInstanceIdError,
    GroupError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    NonEmptyGroupError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedGroupVersionError,
)
from kompakt.broker.groups.records import consumer_protocol
from kompakt.broker.groups.records import schemas as rec
from kompakt.broker.groups.result import Downgrade, Result, Then, append_error_code
from kompakt.protocol.codec import ErrorCode

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
    #: A member that joined with the classic protocol (JoinGroup).
    classic: bool = False


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """A JoinGroup of a classic member to a consumer group (the classic request's fields)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    client_id: str
    client_host: str
    require_known_member_id: bool


class ConsumerMembership(ConsumerHeartbeat):
    """Every KIP-848 consumer group of the broker."""

    # -- lookup --------------------------------------------------------------------------------------

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def state_of(self, group_id: str) -> ConsumerGroupState:
        group = self._groups.get(group_id)
        return group.state if group is not None else ConsumerGroupState.DEAD

    # -- replay and timers ---------------------------------------------------------------------------

    def replay(self, key: rec.ConsumerGroupRecordKey, value: rec.ConsumerGroupRecordValue | None) -> None:
        """Apply one record (Kafka's ``replay``): a record of an unknown group creates it, the
        tombstone of its epoch record removes it."""
        group = self._groups.get(key.group)
        if key.record_type == rec.CONSUMER_GROUP_METADATA and value is None:
            if group is not None:
                del self._groups[key.group]
                log.info("consumer group %s deleted", key.group)
            return
        if group is None:
            if value is None:
                return
            group = self._groups[key.group] = ConsumerGroup(key.group)
        group.replay(key, value)

    def on_loaded(self) -> None:
        """After the load: every member's session starts anew, and a member that must revoke has
        its rebalance timeout to do so. A group without its epoch record was not fully written."""
        now = self._clock.monotonic_ms()
        for group_id, group in list(self._groups.items()):
            if group.group_epoch == 0:
                del self._groups[group_id]
                continue
            for member in group.members.values():
                group.session_deadlines_ms[member.member_id] = now + member.session_timeout_ms(
                    self.session_timeout_ms(group_id)
                )
                if (
                    member.assignment.state is MemberState.UNREVOKED_PARTITIONS
                    and not member.uses_classic_protocol
                ):
                    group.revocation_deadlines_ms[member.member_id] = (
                        member.member_epoch,
                        now + max(member.rebalance_timeout_ms, 0),
                    )
            log.info(
                "consumer group %s restored: epoch %d, %d members",
                group_id,
                group.group_epoch,
                len(group.members),
            )

    def start_sessions(self, group_id: str, member_ids: Sequence[str]) -> Then:
        """After a classic group became this consumer group: each converted member's session
        starts, with the timeout it joined with."""

        def then(error: BaseException | None) -> None:
            group = self._groups.get(group_id)
            if error is not None or group is None:
                return
            now = self._clock.monotonic_ms()
            for member_id in member_ids:
                member = group.members.get(member_id)
                if member is not None:
                    timeout = member.session_timeout_ms(self.session_timeout_ms(group_id))
                    group.session_deadlines_ms[member_id] = now + timeout

        return then

    def snapshot(self) -> dict[str, object]:
        """The groups' state as the log describes it (tests check that only replay changes it)."""
        return {
            g.group_id: (
                g.group_epoch,
                g.metadata_hash,
                g.assignment_epoch,
                dict(g.members),
                dict(g.target_assignment),
                dict(g.partition_epochs),
            )
            for g in self._groups.values()
        }

    def run_due(self) -> Result[object]:
        """Fence the members whose timers ran out (:meth:`_overdue`), group by group."""
        now = self._clock.monotonic_ms()
        records: list[rec.GroupRecord] = []
        converted: list[Downgrade] = []
        for group in list(self._groups.values()):
            fenced = self.fence(group, self._overdue(group, now), None)
            records.extend(fenced.records)
            converted.extend(fenced.converted)
        return Result(None, records, converted=tuple(converted))

    @staticmethod
    def _overdue(group: ConsumerGroup, now: float) -> list[ConsumerGroupMember]:
        """Members whose session expired, that did not revoke within their rebalance timeout, or
        (classic members) that did not rejoin or sync within theirs."""
        overdue = []
        for member in group.members.values():
            member_id = member.member_id
            revocation = group.revocation_deadlines_ms.get(member_id)
            classic = [group.join_deadlines_ms.get(member_id), group.sync_deadlines_ms.get(member_id)]
            if now > group.session_deadlines_ms.get(member_id, now):
                reason = "its session expired"
            elif (
                revocation is not None
                and revocation[0] == member.member_epoch
                and member.assignment.state is MemberState.UNREVOKED_PARTITIONS
                and now > revocation[1]
            ):
                reason = f"it did not revoke its partitions within {member.rebalance_timeout_ms} ms"
            elif any(d is not None and now >= d for d in classic):
                reason = "it did not rejoin or sync in time"
            else:
                continue
            log.info("consumer group %s: member %s fenced: %s", group.group_id, member_id, reason)
            overdue.append(member)
        return overdue

    # -- classic members (online migration) ----------------------------------------------------------

    def classic_join(self, group: ConsumerGroup, request: ClassicJoin) -> Result[Deferred[JoinResult]]:
        """Kafka's ``classicGroupJoinToConsumerGroup``: a JoinGroup of the classic protocol joins the
        consumer group as one of its members and is answered at once, its member epoch as the
        generation; a refused JoinGroup raises."""
        waiter: Deferred[JoinResult] = Deferred()
        member_id = request.member_id or str(uuid.uuid4())
        self._check_size(group, member_id)
        if not group.supports_classic_protocols(request.protocol_type, (n for n, _ in request.protocols)):
            raise InconsistentGroupProtocolError(f"Member {member_id}'s protocols are not supported.")
        if request.require_known_member_id:
            waiter.resolve(JoinResult(ErrorCode.member_id_required, member_id=member_id))
            return Result(waiter)
        records: list[Record] = []
        probe = HeartbeatRequest(
            request.group_id, member_id, -1, instance_id=request.group_instance_id, owned_partitions=[]
        )
        replaced: ConsumerGroupMember | None = None
        if request.group_instance_id is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
        else:
            member, replaced = self._static_member(
                group, member_id, probe, not request.member_id, records, classic=True
            )
        try:
            subscription = consumer_protocol.decode_subscription(request.protocols[0][1])
        except rec.GroupRecordFormatError as exc:
            # Kafka's IllegalStateException: answered UNKNOWN_SERVER_ERROR.
            raise GroupError(
                f"Malformed embedded consumer protocol in subscription deserialization: {exc}"
            ) from exc
        updated = _classic_member(member, request, subscription)
        owned = migration.owned_partitions(subscription.owned_partitions, self.topics())
        updated = self._update_and_reconcile(group, member, updated, replaced, owned, records)
        answer = JoinResult(
            ErrorCode.none,
            generation_id=updated.member_epoch,
            protocol_type="consumer",
            protocol_name=request.protocols[0][0],
            member_id=member_id,
        )
        group_id, now = group.group_id, self._clock.monotonic_ms()

        def then(error: BaseException | None) -> None:
            registered = self._groups.get(group_id)
            if error is not None or registered is None:
                code = append_error_code(error) if error is not None else ErrorCode.unknown_member_id
                waiter.resolve(JoinResult(code, member_id=member_id))
                return
            registered.join_deadlines_ms.pop(member_id, None)
            registered.session_deadlines_ms[member_id] = now + request.session_timeout_ms
            registered.sync_deadlines_ms[member_id] = now + request.rebalance_timeout_ms
            waiter.resolve(answer)

        return Result(waiter, records, then, answers_failure=True)

    def classic_sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> Result[Deferred[SyncResult]]:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's partitions in the embedded
        consumer protocol, unless it must rejoin first (REBALANCE_IN_PROGRESS)."""
        member = self._classic_member(group, member_id, instance_id, generation_id)
        supported = member.classic_member_metadata.supported_protocols  # type: ignore[union-attr]
        if (protocol_type is not None and protocol_type != "consumer") or (
            protocol_name is not None and protocol_name != supported[0][0]
        ):
            raise InconsistentGroupProtocolError(f"Member {member_id} joined with another protocol.")
        self._raise_if_rebalancing(group, member)
        assignment = consumer_protocol.encode_assignment(
            migration.by_topic_name(member.assignment.assigned_partitions, self.topics()),
            consumer_protocol.version_of(supported[0][1]),
        )
        group.sync_deadlines_ms.pop(member.member_id, None)
        group.session_deadlines_ms[member.member_id] = self._clock.monotonic_ms() + member.session_timeout_ms(
            self.session_timeout_ms(group.group_id)
        )
        return Result(Deferred.resolved(SyncResult(ErrorCode.none, protocol_type, protocol_name, assignment)))

    def classic_heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> Result[ErrorCode]:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS while the member
        is behind the group epoch, must revoke, or may now collect partitions others released."""
        member = self._classic_member(group, member_id, instance_id, generation_id)
        now = self._clock.monotonic_ms()
        group.session_deadlines_ms[member.member_id] = now + member.session_timeout_ms(
            self.session_timeout_ms(group.group_id)
        )
        state = member.assignment.state
        if (
            member.member_epoch < group.group_epoch
            or state is MemberState.UNREVOKED_PARTITIONS
            or (
                state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member)
            )
        ):
            group.join_deadlines_ms.setdefault(member.member_id, now + max(member.rebalance_timeout_ms, 0))
            return Result(ErrorCode.rebalance_in_progress)
        return Result(ErrorCode.none)

    def classic_leave(
        self, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
    ) -> Result[list[tuple[str, str | None, ErrorCode]]]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: one error per member, then the valid ones fenced."""
        results: list[tuple[str, str | None, ErrorCode]] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise UnknownMemberIdError(
                            f"Member {member_id} is not a member of group {group.group_id}."
                        )
                else:
                    member = self._static(group, instance_id, member_id)
            except GroupError as exc:
                results.append((member_id, instance_id, error_code_for(exc)))
                continue
            log.info("consumer group %s: member %s left through LeaveGroup", group.group_id, member.member_id)
            leaving[member.member_id] = member
            results.append((member_id, instance_id, ErrorCode.none))
        fenced = self.fence(group, list(leaving.values()), None)
        return Result(results, fenced.records, fenced.then, converted=fenced.converted)

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ConsumerGroupMember:
        """``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol`` +
        ``throwIfGenerationIdUnmatched``."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member with instance id {instance_id} is not a member of group {group.group_id}."
                )
            if member.member_id != member_id:
                raise FencedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} was fenced."
                )
        if not member.uses_classic_protocol:
            raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
        if member.member_epoch != generation_id:
            raise IllegalGenerationError(
                f"The request generation id {generation_id} is not equal to the member epoch "
                f"{member.member_epoch} of member {member.member_id}."
            )
        return member

    def _raise_if_rebalancing(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """``throwIfRebalanceInProgress``: a member behind the group epoch must rejoin first (unless
        it is still revoking: its next JoinGroup catches up)."""
        if (
            group.group_epoch > member.member_epoch
            and member.assignment.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            group.join_deadlines_ms.setdefault(
                member.member_id, self._clock.monotonic_ms() + max(member.rebalance_timeout_ms, 0)
            )
            raise RebalanceInProgressError(
                f"A new rebalance is triggered in group {group.group_id} and member {member.member_id} "
                "should "
                "rejoin to catch up."
            )

    # -- offsets -------------------------------------------------------------------------------------

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
        from a producer's ``send_offsets_to_transaction``) is not held to OffsetCommit v9, and a
        classic member commits with its generation (its member epoch) at any version."""
        group = self._groups[group_id]
        if member_epoch < 0 and group.is_empty():
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if member.uses_classic_protocol:
            if member_epoch != member.member_epoch:
                raise IllegalGenerationError(
                    f"The received generation id {member_epoch} does not match the expected member epoch "
                    f"{member.member_epoch}."
                )
            return
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

    # -- administration ------------------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group; raises GroupIdNotFoundError for others."""
        group = self._groups.get(group_id)
        if group is None:
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
                    classic=m.uses_classic_protocol,
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

    def tombstones(self, group_id: str) -> list[rec.GroupRecord]:
        """DeleteGroups of an empty group (``createGroupTombstoneRecords``)."""
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if not group.is_empty():
            raise NonEmptyGroupError(f"Group {group_id} is not empty.")
        return list(migration.consumer_group_tombstones(group))

    def drop_if_empty(self, group_id: str) -> list[rec.GroupRecord] | None:
        """The tombstones that delete the group when it has no members (a classic JoinGroup takes
        its id, Kafka's ``maybeDeleteEmptyConsumerGroup``), else None."""
        group = self._groups.get(group_id)
        if group is None or not group.is_empty():
            return None
        log.info("group %s: converting the empty consumer group to a classic group", group_id)
        return self.tombstones(group_id)


def _classic_member(
    member: ConsumerGroupMember, request: ClassicJoin, subscription: consumer_protocol.Subscription
) -> ConsumerGroupMember:
    """The member with what a classic JoinGroup sets (``classicGroupJoinToConsumerGroup``'s
    builder): its subscription from the embedded protocol, no regex, how it joined."""
    return replace(
        member,
        instance_id=request.group_instance_id
        if request.group_instance_id is not None
        else member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(subscription.topics)),
        subscribed_topic_regex="",
        client_id=request.client_id,
        client_host=request.client_host,
        classic_member_metadata=rec.ClassicMemberMetadata(request.session_timeout_ms, request.protocols),
    )
