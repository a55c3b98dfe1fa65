"""The classic group coordinator: every group on this (single) broker, and their committed offsets.

Sans-IO and clock-injected. Requests that must wait for a rebalance (JoinGroup, SyncGroup) return a
:class:`~kompakt.broker.deferred.Deferred` that a later request or :meth:`GroupCoordinator.tick`
resolves; the server calls ``tick(clock.monotonic_ms())`` periodically, and nothing here starts a
thread. Results are version-independent dataclasses; the handlers shape them into wire responses.

The classic protocol follows Kafka 4.1's ``GroupMetadataManager`` method by method (the names in
the docstrings below are Kafka's): KIP-394 member ids (``classicGroupJoinNewDynamicMember``),
KIP-345 static membership (``updateStaticMemberThenRebalanceOrCompleteJoin``), the initial
rebalance delay (``tryCompleteInitialRebalanceElseSchedule``), the sync timeout
(``expirePendingSync``) and heartbeat expiry (``expireClassicGroupMemberHeartbeat``). Its timers
are keyed as Kafka keys them (join and sync per group, heartbeat per member) in a
:class:`~kompakt.broker.groups.timer.KeyedTimer` that every request and tick runs.

Persistence (Kafka's): one offset-commit batch per OffsetCommit request (``commit_batch``), and the
group's metadata (generation, protocol, leader, members with their subscriptions and assignments)
when the leader's assignment is stored, when a rebalance leaves the group Empty, and when a static
member is replaced without a rebalance (``store_group_metadata``). A new coordinator restores the
stored groups: a group with members is Stable again with the same generation (its members carry on
heartbeating and committing, or expire by session timeout), one without is Empty. Offset expiry runs
from :meth:`tick` every ``offsets.retention.check.interval.ms`` unless ``expire_on_tick`` is off, in
which case the owner calls :meth:`expire_offsets` itself (the server schedules it on its event loop).

Both group types share one namespace of group ids: KIP-848 consumer groups live in
:class:`~kompakt.broker.groups.consumer_coordinator.ConsumerGroupCoordinator` (``self.consumer``), and
the requests below route a consumer group's id there (offset commits, DescribeGroups, ListGroups,
DeleteGroups, expiry). A JoinGroup for an *empty* consumer group deletes it and makes a classic
group, the reverse of the consumer side's rule (Kafka's ``classicGroupJoinToClassicGroup``).

Not thread-safe: call it from one thread (the event loop); the handlers for groups are not blocking.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kompakt.broker.deferred import Deferred
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.config import ConsumerGroupConfig, GroupConfig
from kompakt.broker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kompakt.broker.groups.consumer_group import ConsumerGroupState
from kompakt.broker.groups.errors import GroupError
from kompakt.broker.groups.group import (
    CLASSIC_GROUP_TYPE,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from kompakt.broker.groups.offsets import CommittedOffset, GroupMemberRecord, GroupMetadataRecord, OffsetStore
from kompakt.broker.groups.timer import KeyedTimer
from kompakt.clock import Clock
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)

#: ``GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS``: how long a member that has
#: not completed its first join may wait in a rebalance before it is dropped.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

PREPARING, COMPLETING, STABLE, EMPTY, DEAD = (
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.EMPTY,
    GroupState.DEAD,
)


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """The JoinGroup fields the coordinator needs, whatever the wire version."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    client_id: str = ""
    client_host: str = ""
    #: JoinGroup v4+ (KIP-394): a member without an id first gets MEMBER_ID_REQUIRED and an id.
    require_known_member_id: bool = False
    #: JoinGroup v9+ (KIP-814): a static leader rejoining in Stable is told to skip the assignment.
    supports_skip_assignment: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[MemberDescription, ...]
    #: False when no group of this id exists (DescribeGroups v6+ answers GROUP_ID_NOT_FOUND).
    exists: bool = True


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    #: ListGroups v5 (KIP-848): "classic" here; the consumer-group coordinator lists "consumer".
    group_type: str = CLASSIC_GROUP_TYPE


def _append_error(exc: BaseException) -> ErrorCode:
    """``appendGroupMetadataErrorToResponseError``: what a failed metadata write answers."""
    code = error_code_for(exc)
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.unknown_server_error
    return code


class GroupCoordinator:
    """All classic groups of the broker. See :mod:`kompakt.broker.groups.group` for the state machine."""

    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        offsets: OffsetStore,
        consumer_config: ConsumerGroupConfig | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._offsets = offsets
        self._groups: dict[str, Group] = {}
        self._timer = KeyedTimer()
        self._next_offset_expiry_ms: float | None = None
        #: Whether :meth:`tick` runs the periodic offset expiry (off when the server schedules it).
        self.expire_on_tick = True
        self._restore()
        #: The KIP-848 consumer groups (their ids are never classic groups at the same time).
        self.consumer = ConsumerGroupCoordinator(
            consumer_config or ConsumerGroupConfig(), clock, offsets, self
        )

    # -- the two group types -----------------------------------------------------------------------

    def has_classic_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def drop_empty_classic_group(self, group_id: str) -> bool:
        """Delete an Empty classic group, tombstoning its metadata (KIP-848's conversion rule)."""
        group = self._groups.get(group_id)
        if group is None or group.state is not GroupState.EMPTY or group.members:
            return False
        del self._groups[group_id]
        self._offsets.store_group_metadata(group_id, None)  # its tombstone, if it was stored
        return True

    # -- persistence -------------------------------------------------------------------------------

    def _restore(self) -> None:
        """Rebuild the groups the offset store remembers (after a broker restart)."""
        for group_id, record in self._offsets.all_group_metadata().items():
            group = Group(
                group_id,
                generation_id=record.generation,
                protocol_type=record.protocol_type or None,
                protocol_name=record.protocol,
            )
            if record.members and record.protocol is not None:
                for stored in record.members:
                    group.add(
                        Member(
                            member_id=stored.member_id,
                            group_instance_id=stored.group_instance_id,
                            client_id=stored.client_id,
                            client_host=stored.client_host,
                            session_timeout_ms=stored.session_timeout_ms,
                            rebalance_timeout_ms=stored.rebalance_timeout_ms,
                            protocol_type=record.protocol_type,
                            protocols=((record.protocol, stored.subscription),),
                            assignment=stored.assignment,
                        )
                    )
                if record.leader in group.members:
                    group.leader_id = record.leader
                group.state = STABLE
                for member in group.members.values():
                    self._reschedule_heartbeat(group, member)
            else:
                group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            self._groups[group_id] = group

    def _metadata_record(self, group: Group, assignment: Mapping[str, bytes] | None) -> GroupMetadataRecord:
        """``newGroupMetadataRecord``: the group as it stands, with ``assignment`` per member."""
        members: tuple[GroupMemberRecord, ...] = ()
        if group.members:
            members = tuple(
                GroupMemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(group.protocol_name),
                    assignment=(assignment or {}).get(m.member_id, m.assignment),
                )
                for m in group.members.values()
            )
        return GroupMetadataRecord(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name if group.members else None,
            leader=group.leader_id if group.members else None,
            current_state_timestamp_ms=self._clock.now_ms(),
            members=members,
        )

    def _store(self, group: Group, assignment: Mapping[str, bytes] | None = None) -> ErrorCode:
        """Write the group's metadata; the error a failed write answers with, else NONE."""
        try:
            self._offsets.store_group_metadata(group.group_id, self._metadata_record(group, assignment))
        except Exception as exc:  # noqa: BLE001 - any failure of the write is answered, not raised
            log.exception("group %s: could not persist its metadata", group.group_id)
            return _append_error(exc)
        return ErrorCode.none

    def group(self, group_id: str) -> Group | None:
        """The live group state (tests and diagnostics read it)."""
        return self._groups.get(group_id)

    # -- timers ------------------------------------------------------------------------------------

    @staticmethod
    def _join_key(group: Group) -> str:
        return f"join-{group.group_id}"

    @staticmethod
    def _sync_key(group: Group) -> str:
        return f"sync-{group.group_id}"

    @staticmethod
    def _heartbeat_key(group: Group, member_id: str) -> str:
        return f"heartbeat-{group.group_id}-{member_id}"

    def _now(self) -> float:
        return self._clock.monotonic_ms()

    def _run_timers(self) -> None:
        """Fire what is due: before a request, so it sees the group as of its arrival (Kafka's
        timer thread would have run), and after, for what the request scheduled "now"."""
        self._timer.run_due(self._now())

    def _reschedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """``rescheduleClassicGroupMemberHeartbeat``: the member must be heard from by then."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member_id = member.member_id
        self._timer.schedule(
            self._heartbeat_key(group, member_id),
            self._now() + timeout,
            lambda: self._expire_heartbeat(group.group_id, member_id),
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        """``expireClassicGroupMemberHeartbeat``."""
        group = self._groups.get(group_id)
        if group is None or group.state is DEAD:
            return
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s expired before it joined", group_id, member_id)
            group.remove(member_id)
            if group.state is PREPARING and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("group %s: member %s session expired", group_id, member_id)
            self._remove_member_and_update_group(group, member)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        """``removeMemberAndUpdateClassicGroup``."""
        group.complete_join(member, JoinResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is PREPARING and group.has_all_members_joined():
            self._complete_join(group)

    # -- membership --------------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        """``classicGroupJoinToClassicGroup`` with the service-level checks in front of it."""
        error = self._check_join(request)
        if error is not ErrorCode.none:
            return Deferred.resolved(JoinResult(error=error, member_id=request.member_id))
        if self.consumer.has_group(request.group_id) and not self.consumer.delete_if_empty(request.group_id):
            # Kafka would let the classic member into the consumer group (KIP-848's online migration);
            # kompakt does not mix protocols in one group.
            return Deferred.resolved(
                JoinResult(ErrorCode.inconsistent_group_protocol, member_id=request.member_id)
            )
        self._run_timers()
        waiter: Deferred[JoinResult] = Deferred()
        self._join(request, waiter)
        self._run_timers()
        return waiter

    def _check_join(self, request: JoinRequest) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
        if not lo <= request.session_timeout_ms <= hi:
            return ErrorCode.invalid_session_timeout
        return ErrorCode.none

    def _join(self, request: JoinRequest, waiter: Deferred[JoinResult]) -> None:
        unknown = request.member_id == ""
        group = self._groups.get(request.group_id)
        if group is None:
            if not unknown:
                waiter.resolve(JoinResult(ErrorCode.unknown_member_id, member_id=request.member_id))
                return
            group = self._groups[request.group_id] = Group(request.group_id)
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            waiter.resolve(JoinResult(ErrorCode.group_max_size_reached))
        elif unknown:
            self._join_new_member(group, request, waiter)
        else:
            self._join_existing_member(group, request, waiter)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """``acceptJoiningMember``: ``group.max.size`` counted as Kafka counts it per state."""
        limit = self.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING:
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, group: Group, request: JoinRequest, waiter: Deferred[JoinResult]) -> None:
        """``classicGroupJoinNewMember``."""
        if group.state is DEAD:
            waiter.resolve(JoinResult(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, (name for name, _ in request.protocols)):
            waiter.resolve(JoinResult(ErrorCode.inconsistent_group_protocol))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        if request.group_instance_id is not None:
            existing = group.static_member_id(request.group_instance_id)
            if existing is not None:
                log.info(
                    "group %s: static member %s rejoins in %s, replacing member %s",
                    group.group_id,
                    request.group_instance_id,
                    group.state.value,
                    existing,
                )
                self._update_static_member(group, request, existing, new_member_id, waiter)
            else:
                self._add_member_then_rebalance_or_complete_join(group, request, new_member_id, waiter)
        elif request.require_known_member_id:
            # KIP-394: hand out the id, remember it as pending, and let the member come back with it.
            group.pending_join_members.add(new_member_id)
            self._timer.schedule(
                self._heartbeat_key(group, new_member_id),
                self._now() + request.session_timeout_ms,
                lambda: self._expire_heartbeat(group.group_id, new_member_id),
            )
            waiter.resolve(JoinResult(ErrorCode.member_id_required, member_id=new_member_id))
        else:
            self._add_member_then_rebalance_or_complete_join(group, request, new_member_id, waiter)

    def _join_existing_member(self, group: Group, request: JoinRequest, waiter: Deferred[JoinResult]) -> None:
        """``classicGroupJoinExistingMember``."""
        member_id = request.member_id
        if group.state is DEAD:
            waiter.resolve(JoinResult(ErrorCode.coordinator_not_available, member_id=member_id))
            return
        if not group.supports_protocols(request.protocol_type, (name for name, _ in request.protocols)):
            waiter.resolve(JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                # Kafka raises IllegalStateException here: pending members are never static.
                waiter.resolve(JoinResult(ErrorCode.unknown_server_error, member_id=member_id))
                return
            log.info("group %s: pending member %s joins in %s", group.group_id, member_id, group.state.value)
            self._add_member_then_rebalance_or_complete_join(group, request, member_id, waiter)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            waiter.resolve(JoinResult(error, member_id=member_id))
            return
        member = group.members[member_id]
        if group.state is PREPARING:
            self._update_member_then_rebalance_or_complete_join(group, request, member, waiter)
        elif group.state is COMPLETING:
            if member.matches(request.protocols):
                # The member lost its JoinGroup answer: give it the current generation again.
                waiter.resolve(group.join_result(member, with_members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance_or_complete_join(group, request, member, waiter)
        elif group.state is STABLE:
            if group.is_leader(member_id) or not member.matches(request.protocols):
                # A leader's JoinGroup always rebalances: it may have seen a metadata change.
                self._update_member_then_rebalance_or_complete_join(group, request, member, waiter)
            else:
                waiter.resolve(group.join_result(member, with_members=False))
        else:
            waiter.resolve(JoinResult(ErrorCode.unknown_member_id, member_id=member_id))

    def _add_member_then_rebalance_or_complete_join(
        self, group: Group, request: JoinRequest, member_id: str, waiter: Deferred[JoinResult]
    ) -> None:
        """``addMemberThenRebalanceOrCompleteJoin``."""
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.state is PREPARING and group.previous_state is EMPTY:
            group.new_member_added = True
        group.add(member, waiter)
        # A new member cannot heartbeat while its JoinGroup is parked, and a client that gave up
        # and retried would otherwise leave defunct members behind: Kafka's fixed join timeout.
        self._reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_then_rebalance_or_complete_join(
        self, group: Group, request: JoinRequest, member: Member, waiter: Deferred[JoinResult]
    ) -> None:
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, waiter
        )
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(
        self,
        group: Group,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        waiter: Deferred[JoinResult],
    ) -> None:
        """``updateStaticMemberThenRebalanceOrCompleteJoin`` (KIP-345)."""
        assert request.group_instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        self._timer.cancel(self._heartbeat_key(group, old_member_id))
        self._reschedule_heartbeat(group, member)
        old_protocols = member.protocols
        old_rebalance_ms, old_session_ms = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, waiter
        )
        if group.state is STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol next generation: keep the assignment, store the new member id.
                error = self._store(group)
                if error is not ErrorCode.none:
                    group.update_member(member, old_protocols, old_rebalance_ms, old_session_ms, None)
                    old = group.replace_static_member(request.group_instance_id, new_member_id, old_member_id)
                    self._timer.cancel(self._heartbeat_key(group, new_member_id))
                    self._reschedule_heartbeat(group, old)
                    waiter.resolve(
                        JoinResult(
                            error,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader_id=current_leader or "",
                        )
                    )
                elif request.supports_skip_assignment:
                    is_leader = group.is_leader(new_member_id)
                    result = group.join_result(member, with_members=is_leader)
                    group.complete_join(member, _with_skip(result, is_leader))
                else:
                    # Before v9 the answer names the old leader id, so a rejoining leader acts as
                    # a follower and simply syncs to get its old assignment back.
                    group.complete_join(
                        member, group.join_result(member, with_members=False, leader_id=current_leader)
                    )
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is COMPLETING:
            # The leader may already be computing an assignment that names the old member id.
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    # -- the rebalance -----------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: Group) -> None:
        """``prepareRebalance``."""
        if group.state is COMPLETING:
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        initial = group.state is EMPTY
        if initial:
            delay_ms = self.config.group_initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            self._schedule_initial_rebalance(group, delay_ms, remaining_ms)
        group.transition_to(PREPARING)
        log.info("group %s: preparing to rebalance (generation %d)", group.group_id, group.generation_id)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _schedule_initial_rebalance(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        self._timer.schedule(
            self._join_key(group),
            self._now() + delay_ms,
            lambda: self._try_complete_initial_rebalance(group.group_id, delay_ms, remaining_ms),
        )

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        """``tryCompleteInitialRebalanceElseSchedule``: one more delay per period with a newcomer."""
        group = self._groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay_ms = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_rebalance(group, new_delay_ms, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _maybe_complete_join_else_schedule(self, group: Group) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._schedule_join_timeout(group)

    def _schedule_join_timeout(self, group: Group) -> None:
        group_id = group.group_id
        self._timer.schedule(
            self._join_key(group),
            self._now() + group.rebalance_timeout_ms(),
            lambda: self._complete_join_by_id(group_id),
        )

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: Group) -> None:
        """``maybeCompleteJoinPhase``: never during the initial rebalance (its timer ends it)."""
        if group.state is not PREPARING or group.previous_state is EMPTY:
            return
        if group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """``completeClassicGroupJoin``: drop dynamic members that did not rejoin, next generation."""
        if group.state is not PREPARING:
            return
        self._timer.cancel(self._join_key(group))
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
                group.remove(member.member_id)
                self._timer.cancel(self._heartbeat_key(group, member.member_id))
        if group.members and not group.maybe_elect_new_joined_leader():
            log.error("group %s: no member rejoined; waiting another rebalance timeout", group.group_id)
            self._schedule_join_timeout(group)
            return
        group.init_next_generation()
        if group.state is EMPTY:
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._store(group)
            return
        log.info(
            "group %s: generation %d with %d members", group.group_id, group.generation_id, len(group.members)
        )
        for member in list(group.members.values()):
            group.complete_join(
                member, group.join_result(member, with_members=group.is_leader(member.member_id))
            )
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self._timer.schedule(
            self._sync_key(group),
            self._now() + group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group.group_id, generation),
        )

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        """``expirePendingSync``: members that never synced are dropped and the group rebalances."""
        group = self._groups.get(group_id)
        if group is None or generation_id != group.generation_id or group.state not in (COMPLETING, STABLE):
            return
        if group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                log.info("group %s: member %s did not sync in time", group_id, member_id)
                group.remove(member_id)
                self._timer.cancel(self._heartbeat_key(group, member_id))
            self._prepare_rebalance(group)

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self._timer.cancel(self._sync_key(group))

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state not in (COMPLETING, STABLE) or not group.pending_sync_members:
            self._timer.cancel(self._sync_key(group))

    def _reset_and_propagate_assignment_with_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            result = group.sync_result(member) if error is ErrorCode.none else SyncResult(error)
            if group.complete_sync(member, result):
                self._reschedule_heartbeat(group, member)

    # -- sync, heartbeat, leave --------------------------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> Deferred[SyncResult]:
        """``classicGroupSyncToClassicGroup``."""
        if not group_id:
            return Deferred.resolved(SyncResult(ErrorCode.invalid_group_id))
        self._run_timers()
        group = self._groups.get(group_id)
        if group is None:
            return Deferred.resolved(SyncResult(ErrorCode.unknown_member_id))
        error = self._validate_sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
        )
        if error is not ErrorCode.none:
            return Deferred.resolved(SyncResult(error))
        if group.state is PREPARING:
            return Deferred.resolved(SyncResult(ErrorCode.rebalance_in_progress))
        member = group.members[member_id]
        if group.state is STABLE:
            self._remove_pending_sync_member(group, member_id)
            return Deferred.resolved(group.sync_result(member))
        waiter: Deferred[SyncResult] = Deferred()
        if member.sync_waiter is not None:
            member.sync_waiter.resolve(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            assignment = {m: assignments.get(m, b"") for m in group.members}
            stored = self._store(group, assignment)
            if stored is not ErrorCode.none:
                self._reset_and_propagate_assignment_with_error(group, stored)
                self._maybe_prepare_rebalance_or_complete_join(group)
            else:
                for other in group.members.values():
                    other.assignment = assignment[other.member_id]
                self._propagate_assignment(group, ErrorCode.none)
                group.transition_to(STABLE)
        self._run_timers()
        return waiter

    @staticmethod
    def _validate_sync(
        group: Group,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode:
        if group.state is DEAD:
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return ErrorCode.none

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """``classicGroupHeartbeatToClassicGroup``."""
        if not group_id:
            return ErrorCode.invalid_group_id
        self._run_timers()
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is DEAD:
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state is EMPTY:
            return ErrorCode.unknown_member_id
        self._reschedule_heartbeat(group, group.members[member_id])
        self._run_timers()
        if group.state is PREPARING:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """``classicGroupLeaveToClassicGroup``: remove ``(member_id, group_instance_id)`` pairs.

        An empty member id with an instance id removes that static member (the admin path). Returns
        the group-level error and one error per requested member, in request order.
        """
        if not group_id:
            return ErrorCode.invalid_group_id, []
        self._run_timers()
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.none, [(m, i, ErrorCode.unknown_member_id) for m, i in members]
        if group.state is DEAD:
            return ErrorCode.coordinator_not_available, []
        results: list[tuple[str, str | None, ErrorCode]] = []
        removed = False
        for member_id, instance_id in members:
            error = ErrorCode.none
            if member_id == "":
                static_id = group.static_member_id(instance_id) if instance_id is not None else None
                if static_id is None:
                    error = ErrorCode.unknown_member_id
                else:
                    self._remove_current_member(group, static_id)
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self._timer.cancel(self._heartbeat_key(group, member_id))
            else:
                error = group.validate_member(member_id, instance_id)
                if error is ErrorCode.none:
                    self._remove_current_member(group, member_id)
            removed = removed or error is ErrorCode.none
            results.append((member_id, instance_id, error))
        if removed:
            if group.state in (STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.state is PREPARING:
                self._maybe_complete_join_phase(group)
        self._run_timers()
        return ErrorCode.none, results

    def _remove_current_member(self, group: Group, member_id: str) -> None:
        """``removeCurrentMemberFromClassicGroup``: a parked JoinGroup gets UNKNOWN_MEMBER_ID."""
        self._timer.cancel(self._heartbeat_key(group, member_id))
        log.info("group %s: member %s left", group.group_id, member_id)
        member = group.members[member_id]
        group.complete_join(member, JoinResult(ErrorCode.unknown_member_id))
        group.remove(member_id)

    def tick(self, now_ms: float) -> None:
        """Fire due timers (sessions, rebalance and sync timeouts), and expire old offsets."""
        self._timer.run_due(now_ms)
        self.consumer.tick(now_ms)
        if not self.expire_on_tick:
            return
        if self._next_offset_expiry_ms is None:
            self._next_offset_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
        elif now_ms >= self._next_offset_expiry_ms:
            self._next_offset_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self.expire_offsets()

    def expire_offsets(self) -> int:
        """Drop expired offsets of groups without members, and forget empty groups without offsets."""
        active = {g.group_id for g in self._groups.values() if g.members}
        active |= {
            g for g in self.consumer.group_ids() if self.consumer.state_of(g) is not ConsumerGroupState.EMPTY
        }
        removed = self._offsets.expire(self._clock.now_ms(), self.config.offsets_retention_ms, active)
        with_offsets = self._offsets.groups()
        for group_id in self.consumer.group_ids():
            if group_id not in active and group_id not in with_offsets:
                self.consumer.delete_group(group_id)
        for group_id in [g for g, grp in self._groups.items() if self._is_forgettable(grp, with_offsets)]:
            del self._groups[group_id]
            self._offsets.store_group_metadata(group_id, None)  # its tombstone, if it was stored
        return removed

    @staticmethod
    def _is_forgettable(group: Group, with_offsets: Collection[str]) -> bool:
        return group.state is EMPTY and not group.pending_join_members and group.group_id not in with_offsets

    # -- offsets -----------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
        retention_ms: int | None = None,
        api_version: int = 8,
    ) -> list[ErrorCode]:
        """Commit ``entries``; one error per entry, in order.

        Generation -1 with an empty group is a "simple" commit (a consumer using ``assign``); otherwise
        the member and generation must match the group, and commits are refused while the group waits
        for the leader's assignment (CompletingRebalance).
        """
        if self.consumer.has_group(group_id):
            try:
                self.consumer.check_commit(group_id, member_id, generation_id, api_version)
            except GroupError as exc:
                return [error_code_for(exc)] * len(entries)
        else:
            error = self._check_commit(group_id, generation_id, member_id, group_instance_id)
            if error is not ErrorCode.none:
                return [error] * len(entries)
        if group_id not in self._groups and not self.consumer.has_group(group_id):
            self._groups[group_id] = Group(group_id)
        now_ms = self._clock.now_ms()
        expire_ts = now_ms + retention_ms if retention_ms is not None and retention_ms >= 0 else None
        results = []
        batch: list[tuple[str, int, CommittedOffset]] = []
        for entry in entries:
            metadata_size = len(entry.metadata.encode()) if entry.metadata else 0
            if metadata_size > self.config.offset_metadata_max_bytes:
                results.append(ErrorCode.offset_metadata_too_large)
                continue
            committed = CommittedOffset(entry.offset, entry.leader_epoch, entry.metadata, now_ms, expire_ts)
            batch.append((entry.topic, entry.partition, committed))
            results.append(ErrorCode.none)
        if batch:
            try:
                self._offsets.commit_batch(group_id, batch)
            except Exception:
                log.exception("group %s: could not store %d committed offsets", group_id, len(batch))
                return [
                    ErrorCode.unknown_server_error if error is ErrorCode.none else error for error in results
                ]
        return results

    def _check_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """``ClassicGroup.validateOffsetCommit``; a commit in Stable or PreparingRebalance is a heartbeat."""
        if not group_id:
            return ErrorCode.invalid_group_id
        self._run_timers()
        group = self._groups.get(group_id)
        if group is None or (generation_id < 0 and group.state is EMPTY):
            return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
        elif group.state is not EMPTY:
            return ErrorCode.unknown_member_id
        if group.state is COMPLETING:
            return ErrorCode.rebalance_in_progress
        if group.state in (STABLE, PREPARING):
            self._reschedule_heartbeat(group, group.members[member_id])
        return ErrorCode.none

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets for ``partitions`` (``None`` means every partition the group committed)."""
        committed = self._offsets.fetch(group_id)
        if partitions is None:
            return [(topic, partition, entry) for (topic, partition), entry in sorted(committed.items())]
        return [(topic, partition, committed.get((topic, partition))) for topic, partition in partitions]

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        """OffsetDelete (KIP-496, ``OffsetMetadataManager.deleteOffsets``).

        The group must exist (GROUP_ID_NOT_FOUND) and be empty unless it is a consumer group
        (NON_EMPTY_GROUP); a topic the members subscribe to answers GROUP_SUBSCRIBED_TO_TOPIC for
        each of its partitions and keeps its offsets. Returns the group-level error and, per topic,
        the error of each partition.
        """
        if not group_id:
            return ErrorCode.invalid_group_id, []
        group = self._groups.get(group_id)
        if group is None and group_id not in self._offsets.groups() and not self.consumer.has_group(group_id):
            return ErrorCode.group_id_not_found, []
        if (
            group is not None
            and group.state in (STABLE, PREPARING, COMPLETING)
            and not group.uses_consumer_protocol()
        ):
            return ErrorCode.non_empty_group, []
        results: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
        doomed: list[tuple[str, int]] = []
        consumer_subscribed = self.consumer.subscribed_topics(group_id)
        for topic, partitions in topics:
            if topic in consumer_subscribed or (group is not None and group.is_subscribed_to(topic)):
                results.append((topic, [(p, ErrorCode.group_subscribed_to_topic) for p in partitions]))
                continue
            results.append((topic, [(p, ErrorCode.none) for p in partitions]))
            doomed.extend((topic, p) for p in partitions)
        if doomed:
            try:
                self._offsets.delete_offsets(group_id, doomed)
            except Exception as exc:  # noqa: BLE001 - answered as the group-level error
                log.exception("group %s: could not delete %d offsets", group_id, len(doomed))
                return _append_error(exc), []
        return ErrorCode.none, results

    # -- administration ----------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self._groups.get(group_id)
        if group is None and self.consumer.has_group(group_id):
            # DescribeGroups describes classic groups only; Kafka answers Dead (GROUP_ID_NOT_FOUND from
            # v6) for a consumer group, which ConsumerGroupDescribe describes.
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        if group is None:
            if group_id in self._offsets.groups():
                return GroupDescription(group_id, EMPTY.value, "", "", ())
            return GroupDescription(group_id, DEAD.value, "", "", (), exists=False)
        stable = group.state is STABLE
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata_for(group.protocol_name) if stable else b"",
                assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id=group_id,
            state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "",
            members=members,
        )

    def list_groups(self, states: Collection[str] = (), types: Collection[str] = ()) -> list[GroupListing]:
        """Every known group, filtered by state and by type (both case-insensitive, empty = all)."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        listings = {
            g.group_id: GroupListing(g.group_id, g.protocol_type or "", g.state.value, g.type)
            for g in self._groups.values()
        }
        for group_id in self.consumer.group_ids():
            listings[group_id] = GroupListing(
                group_id, "consumer", self.consumer.state_of(group_id).value, group_type="consumer"
            )
        for group_id in self._offsets.groups() - listings.keys():
            listings[group_id] = GroupListing(group_id, "", EMPTY.value)
        return [
            listing
            for _, listing in sorted(listings.items())
            if (not wanted_states or listing.state.lower() in wanted_states)
            and (not wanted_types or listing.group_type in wanted_types)
        ]

    def delete_groups(self, group_ids: Sequence[str]) -> list[tuple[str, ErrorCode]]:
        results = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if not group_id:
                error = ErrorCode.invalid_group_id
            elif self.consumer.has_group(group_id):
                if self.consumer.state_of(group_id) is not ConsumerGroupState.EMPTY:
                    error = ErrorCode.non_empty_group
                else:
                    self.consumer.delete_group(group_id)
                    self._offsets.delete_group(group_id)
                    error = ErrorCode.none
            elif group is not None and group.members:
                error = ErrorCode.non_empty_group
            elif group is None and group_id not in self._offsets.groups():
                error = ErrorCode.group_id_not_found
            else:
                self._groups.pop(group_id, None)
                self._offsets.delete_group(group_id)
                error = ErrorCode.none
            results.append((group_id, error))
        return results


def _with_skip(result: JoinResult, skip: bool) -> JoinResult:
    return JoinResult(
        error=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader_id=result.leader_id,
        member_id=result.member_id,
        members=result.members,
        skip_assignment=skip,
    )
