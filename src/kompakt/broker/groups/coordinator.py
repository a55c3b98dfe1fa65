"""The classic group coordinator: every group on this (single) broker, and their committed offsets.

Sans-IO and clock-injected. Requests that must wait for a rebalance (JoinGroup, SyncGroup) return a
:class:`~kompakt.broker.deferred.Deferred` that a later request or :meth:`GroupCoordinator.tick`
resolves; the server calls ``tick(clock.monotonic_ms())`` periodically, and nothing here starts a
timer. Results are version-independent dataclasses; the handlers shape them into wire responses.

Member ids are assigned directly on the first JoinGroup (the v4+ MEMBER_ID_REQUIRED round trip is
optional in the protocol and not used). Static members (``group.instance.id``) are tracked so that an
old incarnation is fenced (FENCED_INSTANCE_ID) when a new one joins; a static rejoin still triggers an
ordinary rebalance rather than Kafka's assignment-preserving shortcut.

Persistence (Kafka's): one offset-commit batch per OffsetCommit request (``commit_batch``), and the
group's metadata (generation, protocol, leader, members with their subscriptions and assignments)
after every completed rebalance and whenever a group becomes Empty (``store_group_metadata``). A new
coordinator restores the stored groups: a group with members is Stable again with the same
generation (its members carry on heartbeating and committing, or expire by session timeout), one
without is Empty. Offset expiry runs from :meth:`tick` every ``offsets.retention.check.interval.ms``
unless ``expire_on_tick`` is off, in which case the owner calls :meth:`expire_offsets` itself (the
server schedules it on its event loop).

Both group types share one namespace of group ids: KIP-848 consumer groups live in
:class:`~kompakt.broker.groups.consumer_coordinator.ConsumerGroupCoordinator` (``self.consumer``), and
the requests below route a consumer group's id there (offset commits, DescribeGroups, ListGroups,
DeleteGroups, expiry). A JoinGroup for an *empty* consumer group deletes it and makes a classic
group, the reverse of the consumer side's rule (Kafka's ``classicGroupJoinToClassicGroup``).

Not thread-safe: call it from one thread (the event loop); the handlers for groups are not blocking.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import kompakt.broker.error_codes as error_codes
from kompakt.broker.deferred import Deferred
from kompakt.broker.groups.config import ConsumerGroupConfig, GroupConfig
from kompakt.broker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kompakt.broker.groups.consumer_group import ConsumerGroupState
from kompakt.broker.groups.errors import GroupError
from kompakt.broker.groups.group import Group, GroupState, JoinResult, Member, SyncResult
from kompakt.broker.groups.offsets import CommittedOffset, GroupMemberRecord, GroupMetadataRecord, OffsetStore
from kompakt.clock import Clock
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    #: KIP-848's group type (ListGroups v5): "classic" or "consumer".
    group_type: str = "classic"


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
        self._next_offset_expiry_ms: float | None = None
        #: Whether :meth:`tick` runs the periodic offset expiry (off when the server schedules it).
        self.expire_on_tick = True
        #: ``group id -> (generation, state)`` last written to the offset store.
        self._persisted: dict[str, tuple[int, GroupState]] = {}
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
        if self._persisted.pop(group_id, None) is not None:
            self._offsets.store_group_metadata(group_id, None)
        return True

    # -- persistence -------------------------------------------------------------------------------

    def _restore(self) -> None:
        """Rebuild the groups the offset store remembers (after a broker restart)."""
        now = self._clock.monotonic_ms()
        for group_id, record in self._offsets.all_group_metadata().items():
            group = Group(
                group_id,
                generation_id=record.generation,
                protocol_type=record.protocol_type or None,
                protocol_name=record.protocol,
            )
            for stored in record.members:
                protocols = ((record.protocol, stored.subscription),) if record.protocol is not None else ()
                member = Member(
                    member_id=stored.member_id,
                    group_instance_id=stored.group_instance_id,
                    client_id=stored.client_id,
                    client_host=stored.client_host,
                    session_timeout_ms=stored.session_timeout_ms,
                    rebalance_timeout_ms=stored.rebalance_timeout_ms,
                    protocol_type=record.protocol_type,
                    protocols=protocols,
                    last_heartbeat_ms=now,
                    assignment=stored.assignment,
                )
                group.members[member.member_id] = member
                if member.group_instance_id is not None:
                    group.static_members[member.group_instance_id] = member.member_id
            if group.members and record.protocol is not None:
                group.state = GroupState.STABLE
                leader = record.leader
                group.leader_id = leader if leader in group.members else next(iter(group.members))
            else:
                group.members.clear()
                group.static_members.clear()
                group.protocol_name = None
            self._groups[group_id] = group
            self._persisted[group_id] = (group.generation_id, group.state)

    def _persist(self, group: Group) -> None:
        """Write the group's metadata when it reached a new Stable or Empty generation."""
        if group.generation_id <= 0 or group.state not in (GroupState.STABLE, GroupState.EMPTY):
            return
        key = (group.generation_id, group.state)
        if self._persisted.get(group.group_id) == key:
            return
        stable = group.state is GroupState.STABLE
        record = GroupMetadataRecord(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name if stable else None,
            leader=group.leader_id if stable else None,
            current_state_timestamp_ms=self._clock.now_ms(),
            members=tuple(
                GroupMemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(group.protocol_name),
                    assignment=m.assignment,
                )
                for m in group.members.values()
            )
            if stable
            else (),
        )
        try:
            self._offsets.store_group_metadata(group.group_id, record)
        except Exception:  # the group keeps working in memory; the next rebalance retries
            log.exception("group %s: could not persist its metadata", group.group_id)
            return
        self._persisted[group.group_id] = key

    def group(self, group_id: str) -> Group | None:
        """The live group state (tests and diagnostics read it)."""
        return self._groups.get(group_id)

    # -- membership --------------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        now = self._clock.monotonic_ms()
        error = self._check_join(request)
        if error is not ErrorCode.none:
            return Deferred.resolved(JoinResult(error=error, member_id=request.member_id))
        if self.consumer.has_group(request.group_id) and not self.consumer.delete_if_empty(request.group_id):
            # Kafka would let the classic member into the consumer group (KIP-848's online migration);
            # kompakt does not mix protocols in one group.
            return Deferred.resolved(
                JoinResult(ErrorCode.inconsistent_group_protocol, member_id=request.member_id)
            )
        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return Deferred.resolved(JoinResult(ErrorCode.unknown_member_id, member_id=request.member_id))
            group = self._groups[request.group_id] = Group(request.group_id)
        if not group.is_protocol_compatible(request.protocol_type, [name for name, _ in request.protocols]):
            return Deferred.resolved(
                JoinResult(ErrorCode.inconsistent_group_protocol, member_id=request.member_id)
            )
        if not request.member_id:
            return self._join_new_member(group, request, now)
        return self._rejoin(group, request, now)

    def _check_join(self, request: JoinRequest) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.invalid_group_id
        lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
        if not lo <= request.session_timeout_ms <= hi:
            return ErrorCode.invalid_session_timeout
        return ErrorCode.none

    def _join_new_member(self, group: Group, request: JoinRequest, now: float) -> Deferred[JoinResult]:
        if request.group_instance_id is not None:
            previous = group.member_by_instance(request.group_instance_id)
            if previous is not None:
                group.remove_member(previous, ErrorCode.fenced_instance_id)
        if len(group.members) >= self.config.group_max_size:
            return Deferred.resolved(JoinResult(ErrorCode.group_max_size_reached))
        prefix = request.group_instance_id or request.client_id or "member"
        member = Member(
            member_id=f"{prefix}-{uuid.uuid4()}",
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            last_heartbeat_ms=now,
        )
        waiter: Deferred[JoinResult] = Deferred()
        member.join_waiter = waiter
        group.add_member(member)
        if group.state is GroupState.PREPARING_REBALANCE:
            group.extend_initial_delay(now, self.config.group_initial_rebalance_delay_ms)
        else:
            group.prepare_rebalance(now, self.config.group_initial_rebalance_delay_ms)
        group.maybe_complete_join(now)
        return waiter

    def _rejoin(self, group: Group, request: JoinRequest, now: float) -> Deferred[JoinResult]:
        member = group.members.get(request.member_id)
        if member is None:
            return Deferred.resolved(JoinResult(ErrorCode.unknown_member_id, member_id=request.member_id))
        if self._fenced(member, request.group_instance_id):
            return Deferred.resolved(JoinResult(ErrorCode.fenced_instance_id, member_id=request.member_id))
        changed = member.protocols != request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.protocols = request.protocols
        member.last_heartbeat_ms = now
        if group.state is GroupState.COMPLETING_REBALANCE and not changed:
            return Deferred.resolved(group.join_result(member))
        if group.state is GroupState.STABLE and not changed and member.member_id != group.leader_id:
            return Deferred.resolved(group.join_result(member))
        waiter: Deferred[JoinResult] = Deferred()
        if member.join_waiter is not None:
            member.join_waiter.resolve(
                JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            )
        member.join_waiter = waiter
        group.prepare_rebalance(now, self.config.group_initial_rebalance_delay_ms)
        group.maybe_complete_join(now)
        return waiter

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
        now = self._clock.monotonic_ms()
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return Deferred.resolved(SyncResult(ErrorCode.unknown_member_id))
        if self._fenced(member, group_instance_id):
            return Deferred.resolved(SyncResult(ErrorCode.fenced_instance_id))
        if generation_id != group.generation_id:
            return Deferred.resolved(SyncResult(ErrorCode.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return Deferred.resolved(SyncResult(ErrorCode.inconsistent_group_protocol))
        member.last_heartbeat_ms = now
        if group.state is GroupState.PREPARING_REBALANCE:
            return Deferred.resolved(SyncResult(ErrorCode.rebalance_in_progress))
        if group.state is GroupState.STABLE:
            return Deferred.resolved(group.sync_result(member))
        waiter: Deferred[SyncResult] = Deferred()
        if member.sync_waiter is not None:
            member.sync_waiter.resolve(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            group.complete_sync(dict(assignments))
            self._persist(group)
        return waiter

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return ErrorCode.unknown_member_id
        if self._fenced(member, group_instance_id):
            return ErrorCode.fenced_instance_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.last_heartbeat_ms = self._clock.monotonic_ms()
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Remove ``(member_id, group_instance_id)`` pairs; a member id may be empty for static members.

        Returns the group-level error and one error per requested member.
        """
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id, [(m, i, ErrorCode.unknown_member_id) for m, i in members]
        results: list[tuple[str, str | None, ErrorCode]] = []
        removed = False
        for member_id, instance_id in members:
            if member_id:
                member = group.members.get(member_id)
            else:
                member = group.member_by_instance(instance_id) if instance_id is not None else None
            if member is None:
                results.append((member_id, instance_id, ErrorCode.unknown_member_id))
            elif self._fenced(member, instance_id):
                results.append((member_id, instance_id, ErrorCode.fenced_instance_id))
            else:
                group.remove_member(member, ErrorCode.unknown_member_id)
                results.append((member.member_id, instance_id, ErrorCode.none))
                removed = True
        if removed:
            self._after_removal(group, self._clock.monotonic_ms())
            self._persist(group)
        return ErrorCode.none, results

    def tick(self, now_ms: float) -> None:
        """Expire sessions, finish or time out rebalances, and expire old offsets."""
        for group in list(self._groups.values()):
            expired = [m for m in group.members.values() if m.session_expired(now_ms)]
            for member in expired:
                log.info("group %s: member %s session expired", group.group_id, member.member_id)
                group.remove_member(member, ErrorCode.unknown_member_id)
            if expired:
                self._after_removal(group, now_ms)
            group.maybe_complete_join(now_ms)
            if group.state is GroupState.COMPLETING_REBALANCE and now_ms >= group.sync_deadline_ms:
                for member in [m for m in group.members.values() if m.sync_waiter is None]:
                    log.info("group %s: member %s did not sync in time", group.group_id, member.member_id)
                    group.remove_member(member, ErrorCode.unknown_member_id)
                group.prepare_rebalance(now_ms, 0)
                group.maybe_complete_join(now_ms)
            self._persist(group)
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
        for group_id in [g for g, grp in self._groups.items() if not grp.members and g not in with_offsets]:
            del self._groups[group_id]
            if self._persisted.pop(group_id, None) is not None:
                self._offsets.store_group_metadata(group_id, None)  # its tombstone
        return removed

    def _after_removal(self, group: Group, now: float) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            group.prepare_rebalance(now, 0)
        group.maybe_complete_join(now)

    @staticmethod
    def _fenced(member: Member, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and member.group_instance_id != group_instance_id

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
                return [error_codes.error_code_for(exc)] * len(entries)
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
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(group_id)
        if group is None or (generation_id < 0 and group.state is GroupState.EMPTY):
            return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if self._fenced(member, group_instance_id):
            return ErrorCode.fenced_instance_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        member.last_heartbeat_ms = self._clock.monotonic_ms()
        return ErrorCode.none

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets for ``partitions`` (``None`` means every partition the group committed)."""
        committed = self._offsets.fetch(group_id)
        if partitions is None:
            return [(topic, partition, entry) for (topic, partition), entry in sorted(committed.items())]
        return [(topic, partition, committed.get((topic, partition))) for topic, partition in partitions]

    # -- administration ----------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self._groups.get(group_id)
        if group is None and self.consumer.has_group(group_id):
            # DescribeGroups describes classic groups only; Kafka answers Dead (GROUP_ID_NOT_FOUND from
            # v6) for a consumer group, which ConsumerGroupDescribe describes.
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        if group is None:
            state = GroupState.EMPTY if group_id in self._offsets.groups() else GroupState.DEAD
            return GroupDescription(group_id, state.value, "", "", ())
        stable = group.state is GroupState.STABLE
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

    def list_groups(self, states: Collection[str] = ()) -> list[GroupListing]:
        """Every known group, optionally only those whose state is in ``states`` (case-insensitive)."""
        wanted = {s.lower() for s in states}
        listings = {
            g.group_id: GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
        }
        for group_id in self.consumer.group_ids():
            listings[group_id] = GroupListing(
                group_id, "consumer", self.consumer.state_of(group_id).value, group_type="consumer"
            )
        for group_id in self._offsets.groups() - listings.keys():
            listings[group_id] = GroupListing(group_id, "", GroupState.EMPTY.value)
        return [
            listing
            for _, listing in sorted(listings.items())
            if not wanted or listing.state.lower() in wanted
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
                self._persisted.pop(group_id, None)
                self._offsets.delete_group(group_id)
                error = ErrorCode.none
            results.append((group_id, error))
        return results
