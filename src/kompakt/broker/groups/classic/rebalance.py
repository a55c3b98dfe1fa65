"""The classic rebalance: JoinGroup and the state machine behind it (Kafka's
``GroupMetadataManager``, the classic group's join, sync and heartbeat timers).

:class:`ClassicRebalance` holds the classic groups and drives their rebalances; the request entry
points and the replay are in :class:`~kompakt.broker.groups.classic.membership.ClassicMembership`,
which is this class with them. The names in the docstrings are Kafka's methods: KIP-394 member ids
(``classicGroupJoinNewDynamicMember``), KIP-345 static membership
(``updateStaticMemberThenRebalanceOrCompleteJoin``), the initial rebalance delay
(``tryCompleteInitialRebalanceElseSchedule``), the sync timeout (``expirePendingSync``) and
heartbeat expiry (``expireClassicGroupMemberHeartbeat``). Timers are keyed as Kafka keys them
(join and sync per group, heartbeat per member) in the coordinator's
:class:`~kompakt.broker.groups.timer.KeyedTimer`.

A step that writes (the GroupMetadata record of a group left Empty, of a replaced static member,
of the leader's assignment) queues the record in the operation's collector with the ``then`` that
follows the write; nothing here appends or replays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar

from kompakt.broker.deferred import Deferred
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.classic.group import (
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from kompakt.broker.groups.config import GroupConfig
from kompakt.broker.groups.errors import GroupError
from kompakt.broker.groups.records.schemas import GroupMetadataKey, GroupRecord
from kompakt.broker.groups.result import Result, Then, append_error_code, chain
from kompakt.broker.groups.timer import KeyedTimer
from kompakt.clock import Clock
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")

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


class _Out:
    """What one operation produced: its records and the ``then`` steps that follow their write."""

    __slots__ = ("records", "thens")

    def __init__(self) -> None:
        self.records: list[GroupRecord] = []
        self.thens: list[Then] = []

    def result(self, value: T) -> Result[T]:
        """The operation's result; its ``then`` steps answer a failed write (every record of a
        classic operation has one: the parked request it completes, or a logged failure)."""
        return Result(value, tuple(self.records), chain(*self.thens), answers_failure=True)


class ClassicRebalance:
    """The classic groups and their rebalances; see the module docstring."""

    def __init__(self, config: GroupConfig, clock: Clock, timer: KeyedTimer) -> None:
        self.config = config
        self._clock = clock
        self._timer = timer
        self._groups: dict[str, ClassicGroup] = {}
        #: The collector of the operation in progress; outside one (a ``then`` that rebalances after
        #: a failed write), records wait in ``_spilled`` until the coordinator takes them.
        self._out: _Out | None = None
        self._spilled = _Out()

    # -- operations and their records ----------------------------------------------------------------

    @contextmanager
    def _operation(self) -> Iterator[_Out]:
        """Collect what the enclosed code produces (nested operations share the outer collector).
        A GroupError that escapes after records were collected hands them to ``_spilled``: a
        decision already taken (a timer that fired) is still written."""
        outer = self._out
        out = self._out = outer if outer is not None else _Out()
        try:
            yield out
        except BaseException:
            if outer is None and (out.records or out.thens):
                self._spilled.records += out.records
                self._spilled.thens += out.thens
            raise
        finally:
            self._out = outer

    def take_spilled(self) -> Result[object]:
        """Records produced outside an operation (the coordinator applies them after each ``then``)."""
        spilled, self._spilled = self._spilled, _Out()
        return spilled.result(None)

    def _store(
        self, group: ClassicGroup, assignment: Mapping[str, bytes] | None = None, then: Then | None = None
    ) -> None:
        """Queue the group's GroupMetadata record; ``then`` follows its write (a failed write is
        logged when nothing else answers it)."""
        out = self._out if self._out is not None else self._spilled
        out.records.append(
            (GroupMetadataKey(group.group_id), group.metadata_value(self._clock.now_ms(), assignment))
        )
        group_id = group.group_id

        def logged(error: BaseException | None) -> None:
            if error is not None:
                log.error("group %s: could not persist its metadata: %s", group_id, error)

        out.thens.append(then or logged)

    # -- timers --------------------------------------------------------------------------------------

    @staticmethod
    def _join_key(group: ClassicGroup) -> str:
        return f"join-{group.group_id}"

    @staticmethod
    def _sync_key(group: ClassicGroup) -> str:
        return f"sync-{group.group_id}"

    @staticmethod
    def _heartbeat_key(group: ClassicGroup, member_id: str) -> str:
        return f"heartbeat-{group.group_id}-{member_id}"

    def _now(self) -> float:
        return self._clock.monotonic_ms()

    def _run_timers(self) -> None:
        """Fire what is due, inside the current operation (its records join the operation's)."""
        self._timer.run_due(self._now())

    def run_due(self) -> Result[object]:
        """Fire the due timers (sessions, rebalance and sync timeouts) as one operation."""
        with self._operation() as out:
            self._run_timers()
        return out.result(None)

    def _reschedule_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None
    ) -> None:
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

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """``removeMemberAndUpdateClassicGroup``."""
        group.complete_join(member, JoinResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is PREPARING and group.has_all_members_joined():
            self._complete_join(group)

    # -- joining -------------------------------------------------------------------------------------

    def _join(self, request: JoinRequest, waiter: Deferred[JoinResult]) -> None:
        unknown = request.member_id == ""
        group = self._groups.get(request.group_id)
        if group is None:
            if not unknown:
                waiter.resolve(JoinResult(ErrorCode.unknown_member_id, member_id=request.member_id))
                return
            group = self._groups[request.group_id] = ClassicGroup(request.group_id)
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            waiter.resolve(JoinResult(ErrorCode.group_max_size_reached))
        elif unknown:
            self._join_new_member(group, request, waiter)
        else:
            self._join_existing_member(group, request, waiter)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """``acceptJoiningMember``: ``group.max.size`` counted as Kafka counts it per state."""
        limit = self.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING:
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(
        self, group: ClassicGroup, request: JoinRequest, waiter: Deferred[JoinResult]
    ) -> None:
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

    def _join_existing_member(
        self, group: ClassicGroup, request: JoinRequest, waiter: Deferred[JoinResult]
    ) -> None:
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
        try:
            member = group.validate_member(member_id, request.group_instance_id)
        except GroupError as exc:
            waiter.resolve(JoinResult(error_code_for(exc), member_id=member_id))
            return
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
        self, group: ClassicGroup, request: JoinRequest, member_id: str, waiter: Deferred[JoinResult]
    ) -> None:
        """``addMemberThenRebalanceOrCompleteJoin``."""
        member = ClassicGroupMember(
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
        self,
        group: ClassicGroup,
        request: JoinRequest,
        member: ClassicGroupMember,
        waiter: Deferred[JoinResult],
    ) -> None:
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, waiter
        )
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(
        self,
        group: ClassicGroup,
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
                self._store(
                    group,
                    then=self._static_member_stored(
                        group,
                        request,
                        member,
                        old_member_id,
                        (old_protocols, old_rebalance_ms, old_session_ms),
                        current_leader,
                        waiter,
                    ),
                )
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is COMPLETING:
            # The leader may already be computing an assignment that names the old member id.
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _static_member_stored(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        member: ClassicGroupMember,
        old_member_id: str,
        old: tuple[tuple[tuple[str, bytes], ...], int, int],
        current_leader: str | None,
        waiter: Deferred[JoinResult],
    ) -> Then:
        """What follows the write of a replaced static member: its JoinGroup answer, or the old
        member back in its slot and the write's error."""
        new_member_id = member.member_id

        def then(error: BaseException | None) -> None:
            if error is not None:
                assert request.group_instance_id is not None
                group.update_member(member, old[0], old[1], old[2], None)
                previous = group.replace_static_member(
                    request.group_instance_id, new_member_id, old_member_id
                )
                self._timer.cancel(self._heartbeat_key(group, new_member_id))
                self._reschedule_heartbeat(group, previous)
                waiter.resolve(
                    JoinResult(
                        append_error_code(error),
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=current_leader or "",
                    )
                )
            elif request.supports_skip_assignment:
                is_leader = group.is_leader(new_member_id)
                result = group.join_result(member, with_members=is_leader)
                group.complete_join(member, replace(result, skip_assignment=is_leader))
            else:
                # Before v9 the answer names the old leader id, so a rejoining leader acts as
                # a follower and simply syncs to get its old assignment back.
                group.complete_join(
                    member, group.join_result(member, with_members=False, leader_id=current_leader)
                )

        return then

    # -- the rebalance -------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
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

    def _schedule_initial_rebalance(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
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

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._schedule_join_timeout(group)

    def _schedule_join_timeout(self, group: ClassicGroup) -> None:
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

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        """``maybeCompleteJoinPhase``: never during the initial rebalance (its timer ends it)."""
        if group.state is not PREPARING or group.previous_state is EMPTY:
            return
        if group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
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

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._timer.cancel(self._sync_key(group))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state not in (COMPLETING, STABLE) or not group.pending_sync_members:
            self._timer.cancel(self._sync_key(group))

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            result = group.sync_result(member) if error is ErrorCode.none else SyncResult(error)
            if group.complete_sync(member, result):
                self._reschedule_heartbeat(group, member)
