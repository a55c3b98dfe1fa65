"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (Kafka's
``GroupMetadataManager``, its classic half), on top of the rebalance in
:mod:`kompakt.broker.groups.classic.rebalance`.

Sans-IO and clock-injected. Requests that must wait for a rebalance (JoinGroup, SyncGroup) answer
with a :class:`~kompakt.broker.deferred.Deferred` that a later request or a timer resolves.

Every operation returns a :class:`~kompakt.broker.groups.result.Result`: the GroupMetadata record
Kafka writes when the leader's assignment is stored, when a rebalance leaves the group Empty, and
when a static member is replaced without a rebalance, plus the ``then`` that finishes the
operation once the record is written (the parked SyncGroup answers, the new member's JoinGroup)
or answers the write's error. The manager never writes: the coordinator appends, replays
(:meth:`ClassicMembership.replay` is where a stored assignment reaches the members, and where a
group is created at load and removed by its tombstone), then calls ``then``. As in Kafka, whose
classic groups are not in the coordinator's timeline and whose classic results are not replayed,
the rebalance in progress (parked requests, pending members, the phase) is soft state that the
operations change directly; what the log says of a group (:attr:`ClassicGroup.persisted`)
changes only in the replay. A validation failure raises a
:class:`~kompakt.broker.groups.errors.GroupError`; an answer that completes a parked request
carries its error code, as Kafka completes its response futures.

Not thread-safe: the coordinator serialises access.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kompakt.broker.deferred import Deferred
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.classic.group import (
    ClassicGroup,
    ClassicGroupMember,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from kompakt.broker.groups.classic.rebalance import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    ClassicRebalance,
)
from kompakt.broker.groups.errors import (
    CoordinatorNotAvailableError,
    GroupError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kompakt.broker.groups.records.schemas import GroupMetadataKey, GroupMetadataValue, GroupRecord
from kompakt.broker.groups.result import Downgrade, Result, Then, append_error_code
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)


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


class ClassicMembership(ClassicRebalance):
    """Every classic group of the broker: the request entry points, the replay of GroupMetadata
    records, and the steps of a conversion to or from a consumer group."""

    # -- lookup --------------------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group (tests and diagnostics read it)."""
        return self._groups.get(group_id)

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def groups(self) -> list[ClassicGroup]:
        return list(self._groups.values())

    # -- replay and conversions ----------------------------------------------------------------------

    def replay(
        self, key: GroupMetadataKey, value: GroupMetadataValue | None, *, loading: bool = False
    ) -> None:
        """Apply a GroupMetadata record: a tombstone removes the group; a value read at load (or
        one that names a group there is none of, a downgraded consumer group) builds the group it
        describes, as Kafka's replay does; one this coordinator just wrote leaves the live group's
        rebalance alone and gives its members the assignment it stores."""
        group_id = key.group
        if value is None:
            group = self._groups.pop(group_id, None)
            if group is not None:
                group.state = DEAD
            return
        group = self._groups.get(group_id)
        if group is None or loading:
            self._groups[group_id] = ClassicGroup.from_record(group_id, value)
            return
        group.persisted = value
        if group.state is COMPLETING and group.generation_id == value.generation:
            for stored in value.members:
                member = group.members.get(stored.member_id)
                if member is not None:
                    member.assignment = stored.assignment

    def on_loaded(self) -> None:
        """After the load: every restored member must heartbeat within its session timeout."""
        for group in self._groups.values():
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)

    def adopt_downgraded(self, note: Downgrade) -> Result[object]:
        """After a consumer group became this classic group (its record was replayed): the members'
        JoinGroup protocols, every member's heartbeat timer, and a rebalance, which asks the
        members to rejoin (``convertToClassicGroup``)."""
        group = self._groups.get(note.group_id)
        if group is None:
            return Result(None)
        with self._operation() as out:
            for member_id, protocols in note.protocols.items():
                member = group.members.get(member_id)
                if member is not None and protocols:
                    member.protocols = protocols
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
            self._prepare_rebalance(group)
        return out.result(None)

    def prepare_upgrade(self, group_id: str) -> None:
        """Before a classic group becomes a consumer group (``convertToConsumerGroup``): its parked
        JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS, and its timers end."""
        group = self._groups.get(group_id)
        if group is None:
            return
        for member in group.members.values():
            group.complete_join(
                member, JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            )
            group.complete_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
            self._timer.cancel(self._heartbeat_key(group, member.member_id))
        for member_id in group.pending_join_members:
            self._timer.cancel(self._heartbeat_key(group, member_id))
        self._timer.cancel(self._join_key(group))
        self._timer.cancel(self._sync_key(group))

    def snapshot(self) -> dict[str, GroupMetadataValue | None]:
        """What the log says of each classic group (tests check that only replay changes it)."""
        return {g.group_id: g.persisted for g in self._groups.values() if g.persisted is not None}

    # -- join, sync, heartbeat, leave ----------------------------------------------------------------

    def check_join(self, request: JoinRequest) -> None:
        """The service's checks in front of ``classicGroupJoin`` (Kafka's ``GroupCoordinatorService``)."""
        if not request.group_id:
            raise InvalidGroupIdError("The group id can't be empty.")
        lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
        if not lo <= request.session_timeout_ms <= hi:
            raise InvalidSessionTimeoutError(
                f"The session timeout {request.session_timeout_ms} is not within {lo}..{hi}."
            )

    def join(self, request: JoinRequest) -> Result[Deferred[JoinResult]]:
        """``classicGroupJoinToClassicGroup``, after :meth:`check_join` and the due timers."""
        with self._operation() as out:
            waiter: Deferred[JoinResult] = Deferred()
            self._join(request, waiter)
        return out.result(waiter)

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> Result[Deferred[SyncResult]]:
        """``classicGroupSyncToClassicGroup``, after the due timers; a refused SyncGroup raises."""
        if not group_id:
            raise InvalidGroupIdError("The group id can't be empty.")
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"Group {group_id} not found.")
        member = self._validate_sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
        )
        if group.state is PREPARING:
            raise RebalanceInProgressError(f"Group {group_id} is rebalancing.")
        if group.state is STABLE:
            self._remove_pending_sync_member(group, member_id)
            return Result(Deferred.resolved(group.sync_result(member)))
        with self._operation() as out:
            waiter: Deferred[SyncResult] = Deferred()
            if member.sync_waiter is not None:
                member.sync_waiter.resolve(SyncResult(ErrorCode.rebalance_in_progress))
            member.sync_waiter = waiter
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {m: assignments.get(m, b"") for m in group.members}
                self._store(group, assignment, then=self._assignment_stored(group, generation_id))
        return out.result(waiter)

    def _assignment_stored(self, group: ClassicGroup, generation_id: int) -> Then:
        """After the leader's assignment is written (the replay gave it to the members): answer
        every parked SyncGroup and become Stable; after a failed write, answer its error and
        rebalance. Nothing to do if the group moved on meanwhile."""

        def then(error: BaseException | None) -> None:
            if group.state is not COMPLETING or group.generation_id != generation_id:
                return
            if error is not None:
                self._reset_and_propagate_assignment_with_error(group, append_error_code(error))
                self._maybe_prepare_rebalance_or_complete_join(group)
            else:
                self._propagate_assignment(group, ErrorCode.none)
                group.transition_to(STABLE)

        return then

    @staticmethod
    def _validate_sync(
        group: ClassicGroup,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ClassicGroupMember:
        if group.state is DEAD:
            raise CoordinatorNotAvailableError(f"Group {group.group_id} is dead.")
        member = group.validate_member(member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(f"Generation {generation_id} is not {group.generation_id}.")
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            raise InconsistentGroupProtocolError(f"Group {group.group_id} uses another protocol.")
        return member

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> Result[ErrorCode]:
        """``classicGroupHeartbeatToClassicGroup``, after the due timers: REBALANCE_IN_PROGRESS
        tells the member to rejoin; a refused heartbeat raises."""
        if not group_id:
            raise InvalidGroupIdError("The group id can't be empty.")
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"Group {group_id} not found.")
        if group.state is DEAD:
            raise CoordinatorNotAvailableError(f"Group {group_id} is dead.")
        member = group.validate_member(member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(f"Generation {generation_id} is not {group.generation_id}.")
        if group.state is EMPTY:
            raise UnknownMemberIdError(f"Group {group_id} is empty.")
        with self._operation() as out:
            self._reschedule_heartbeat(group, member)
            self._run_timers()
        code = ErrorCode.rebalance_in_progress if group.state is PREPARING else ErrorCode.none
        return out.result(code)

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> Result[list[tuple[str, str | None, ErrorCode]]]:
        """``classicGroupLeaveToClassicGroup``: remove ``(member_id, group_instance_id)`` pairs.

        An empty member id with an instance id removes that static member (the admin path). The
        value is one error per requested member, in request order; a refused LeaveGroup raises.
        """
        if not group_id:
            raise InvalidGroupIdError("The group id can't be empty.")
        group = self._groups.get(group_id)
        if group is None:
            return Result([(m, i, ErrorCode.unknown_member_id) for m, i in members])
        if group.state is DEAD:
            raise CoordinatorNotAvailableError(f"Group {group_id} is dead.")
        results: list[tuple[str, str | None, ErrorCode]] = []
        with self._operation() as out:
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
                    try:
                        group.validate_member(member_id, instance_id)
                    except GroupError as exc:
                        error = error_code_for(exc)
                    else:
                        self._remove_current_member(group, member_id)
                removed = removed or error is ErrorCode.none
                results.append((member_id, instance_id, error))
            if removed:
                if group.state in (STABLE, COMPLETING):
                    self._maybe_prepare_rebalance_or_complete_join(group)
                elif group.state is PREPARING:
                    self._maybe_complete_join_phase(group)
        return out.result(results)

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        """``removeCurrentMemberFromClassicGroup``: a parked JoinGroup gets UNKNOWN_MEMBER_ID."""
        self._timer.cancel(self._heartbeat_key(group, member_id))
        log.info("group %s: member %s left", group.group_id, member_id)
        member = group.members[member_id]
        group.complete_join(member, JoinResult(ErrorCode.unknown_member_id))
        group.remove(member_id)

    # -- offsets -------------------------------------------------------------------------------------

    def validate_offset_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> None:
        """``ClassicGroup.validateOffsetCommit``, after the due timers. A commit in Stable or
        PreparingRebalance is a heartbeat; a "simple" commit (generation -1, a consumer using
        ``assign``) to an unknown group creates it Empty, as Kafka does."""
        if not group_id:
            raise InvalidGroupIdError("The group id can't be empty.")
        group = self._groups.get(group_id)
        if group is None or (generation_id < 0 and group.state is EMPTY):
            if generation_id >= 0:
                raise IllegalGenerationError(f"Group {group_id} has no generation {generation_id}.")
            if group is None:
                self._groups[group_id] = ClassicGroup(group_id)
            return
        if generation_id >= 0 or member_id or group_instance_id is not None:
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise IllegalGenerationError(f"Generation {generation_id} is not {group.generation_id}.")
        elif group.state is not EMPTY:
            raise UnknownMemberIdError(f"Group {group_id} has members; the commit names none.")
        if group.state is COMPLETING:
            raise RebalanceInProgressError(f"Group {group_id} is waiting for its assignment.")
        if group.state in (STABLE, PREPARING):
            self._reschedule_heartbeat(group, group.members[member_id])

    def validate_transactional_commit(self, group_id: str, generation_id: int, member_id: str) -> None:
        """``validateTransactionalOffsetCommit`` of a classic group (TxnOffsetCommit v3+ names the
        member and its generation; generation -1 without a member is a "simple" commit)."""
        group = self._groups.get(group_id)
        if generation_id < 0 and not member_id:
            return
        if group is None:
            raise IllegalGenerationError(f"Group {group_id} has no generation {generation_id}.")
        if member_id not in group.members:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        if generation_id != group.generation_id:
            raise IllegalGenerationError(f"Generation {generation_id} is not {group.generation_id}.")

    def validate_offset_delete(self, group_id: str) -> None:
        """OffsetDelete needs an empty group unless its members use the consumer protocol."""
        group = self._groups.get(group_id)
        if (
            group is not None
            and group.state in (STABLE, PREPARING, COMPLETING)
            and not group.uses_consumer_protocol()
        ):
            raise NonEmptyGroupError(f"Group {group_id} is not empty.")

    def is_subscribed_to(self, group_id: str, topic: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and group.is_subscribed_to(topic)

    # -- administration ------------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription | None:
        """DescribeGroups of a classic group; None when there is none under this id."""
        group = self._groups.get(group_id)
        if group is None:
            return None
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

    def tombstones(self, group_id: str) -> list[GroupRecord]:
        """DeleteGroups of a classic group (``createGroupTombstoneRecords``); one with members refuses."""
        group = self._groups.get(group_id)
        if group is not None and group.members:
            raise NonEmptyGroupError(f"Group {group_id} is not empty.")
        return [(GroupMetadataKey(group_id), None)]

    def forgettable(self, with_offsets: Collection[str]) -> list[str]:
        """Empty groups without committed offsets (expiry forgets them, with a tombstone)."""
        return [
            g.group_id
            for g in self._groups.values()
            if g.state is EMPTY and not g.pending_join_members and g.group_id not in with_offsets
        ]

    def drop_if_empty(self, group_id: str) -> list[GroupRecord] | None:
        """The tombstone that deletes an Empty classic group (a consumer group takes its id), or
        None when the group has members or pending members."""
        group = self._groups.get(group_id)
        if group is None or group.state is not EMPTY or group.members:
            return None
        return [(GroupMetadataKey(group_id), None)]
