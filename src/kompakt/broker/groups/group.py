"""One classic consumer group: its members and its rebalance state machine.

Theory of operation (Kafka's classic protocol)::

    Empty ──join──► PreparingRebalance ──all joined / rebalance timeout──► CompletingRebalance
      ▲                  ▲       │ (no members left)                           │ leader's SyncGroup
      │                  │       └──────────► Empty                            ▼
      └── last member ───┴──── join of a new member, leave, expiry ◄──────── Stable

* **PreparingRebalance** collects JoinGroup requests. Every member must rejoin; the phase ends when
  all known members have a pending join, or when the largest member rebalance timeout runs out (the
  members that did not rejoin are dropped). The first rebalance of an *empty* group additionally waits
  ``group.initial.rebalance.delay.ms``, extended by each newcomer up to the rebalance timeout, so that
  a fleet of consumers starting together lands in one generation instead of many.
* Completing the join bumps the generation, picks the protocol (each member votes for its most
  preferred protocol that every member supports; ties go to the leader's preference) and answers
  every pending JoinGroup: the leader gets the member list with metadata, followers get none.
* **CompletingRebalance** waits for the leader's SyncGroup, which carries the assignments; followers
  that sync first wait. Then the group is **Stable** and every pending SyncGroup is answered. If the
  leader does not sync within the rebalance timeout, the members that did not sync are dropped and a
  new rebalance starts.
* A member that stops heartbeating for ``session_timeout_ms`` is dropped, except while it waits for a
  JoinGroup or SyncGroup answer (it cannot heartbeat then).

Nothing here reads a clock or starts a timer: every method takes ``now_ms`` (monotonic), and the
coordinator's ``tick`` drives timeouts. Not thread-safe: the coordinator serialises access.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from kompakt.broker.deferred import Deferred
from kompakt.protocol.codec import ErrorCode


class GroupState(enum.Enum):
    """Kafka's classic group states; the values are the names DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One entry of the member list the leader receives."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """The coordinator's answer to JoinGroup, independent of the wire version."""

    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The coordinator's answer to SyncGroup."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, eq=False)
class Member:
    """A group member as the coordinator sees it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    #: ``(name, metadata)`` in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    last_heartbeat_ms: float
    assignment: bytes = b""
    join_waiter: Deferred[JoinResult] | None = None
    sync_waiter: Deferred[SyncResult] | None = None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def session_expired(self, now_ms: float) -> bool:
        waiting = self.join_waiter is not None or self.sync_waiter is not None
        return not waiting and now_ms > self.last_heartbeat_ms + self.session_timeout_ms


@dataclass(slots=True, eq=False)
class Group:
    """A classic group. See the module docstring for the state machine."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: ``group.instance.id`` -> member id, for static members.
    static_members: dict[str, str] = field(default_factory=dict)
    join_not_before_ms: float = 0.0
    initial_delay_cap_ms: float = 0.0
    rebalance_deadline_ms: float = 0.0
    sync_deadline_ms: float = 0.0

    # -- queries -----------------------------------------------------------------------------------

    def is_protocol_compatible(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's INCONSISTENT_GROUP_PROTOCOL check)."""
        if not protocol_type or not protocol_names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocol_names))

    def candidate_protocols(self) -> set[str]:
        """Protocols every current member supports."""
        members = iter(self.members.values())
        candidates = set(next(members).protocol_names())
        for member in members:
            candidates &= set(member.protocol_names())
        return candidates

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; ties go to the leader's order."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name in member.protocol_names() if name in candidates)] += 1
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        preference = leader.protocol_names() if leader else sorted(candidates)
        best = max(votes.values())
        return next(name for name in preference if votes.get(name) == best)

    def all_joined(self) -> bool:
        return all(member.join_waiter is not None for member in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def member_by_instance(self, group_instance_id: str) -> Member | None:
        member_id = self.static_members.get(group_instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def join_result(self, member: Member) -> JoinResult:
        """The JoinGroup answer for ``member`` in the current generation."""
        members: tuple[JoinedMember, ...] = ()
        if member.member_id == self.leader_id:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResult(
            error=ErrorCode.none,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    # -- transitions -------------------------------------------------------------------------------

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id not in self.members:
            self.leader_id = member.member_id

    def remove_member(self, member: Member, error: ErrorCode) -> None:
        """Drop ``member``; its pending JoinGroup/SyncGroup, if any, is answered with ``error``."""
        self.members.pop(member.member_id, None)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)
        if member.join_waiter is not None:
            waiter, member.join_waiter = member.join_waiter, None
            waiter.resolve(JoinResult(error=error, member_id=member.member_id))
        if member.sync_waiter is not None:
            sync_waiter, member.sync_waiter = member.sync_waiter, None
            sync_waiter.resolve(SyncResult(error=error))

    def prepare_rebalance(self, now_ms: float, initial_delay_ms: int) -> None:
        """Enter PreparingRebalance (a no-op when already there)."""
        if self.state is GroupState.PREPARING_REBALANCE:
            return
        if self.state is GroupState.COMPLETING_REBALANCE:
            self._fail_pending_syncs(ErrorCode.rebalance_in_progress)
        was_empty = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        self.rebalance_deadline_ms = now_ms + self.max_rebalance_timeout_ms()
        self.join_not_before_ms = now_ms + initial_delay_ms if was_empty else now_ms
        self.initial_delay_cap_ms = max(self.join_not_before_ms, self.rebalance_deadline_ms)

    def extend_initial_delay(self, now_ms: float, initial_delay_ms: int) -> None:
        """A newcomer during the initial delay pushes completion back, up to the rebalance timeout."""
        if self.state is GroupState.PREPARING_REBALANCE and now_ms < self.join_not_before_ms:
            self.join_not_before_ms = min(now_ms + initial_delay_ms, self.initial_delay_cap_ms)

    def maybe_complete_join(self, now_ms: float) -> bool:
        """Finish PreparingRebalance if every member rejoined or the rebalance timed out."""
        if self.state is not GroupState.PREPARING_REBALANCE or now_ms < self.join_not_before_ms:
            return False
        if not self.all_joined() and now_ms < self.rebalance_deadline_ms:
            return False
        for member in [m for m in self.members.values() if m.join_waiter is None]:
            self.remove_member(member, ErrorCode.unknown_member_id)
        self.generation_id += 1
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol_name = None
            self.leader_id = None
            return True
        self.protocol_name = self.select_protocol()
        self.state = GroupState.COMPLETING_REBALANCE
        self.sync_deadline_ms = now_ms + self.max_rebalance_timeout_ms()
        for member in self.members.values():
            member.assignment = b""
            member.last_heartbeat_ms = now_ms
        for member in list(self.members.values()):
            waiter, member.join_waiter = member.join_waiter, None
            if waiter is not None:
                waiter.resolve(self.join_result(member))
        return True

    def complete_sync(self, assignments: dict[str, bytes]) -> None:
        """The leader's SyncGroup arrived: store assignments, go Stable, answer every waiting member."""
        for member in self.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        self.state = GroupState.STABLE
        for member in list(self.members.values()):
            waiter, member.sync_waiter = member.sync_waiter, None
            if waiter is not None:
                waiter.resolve(self.sync_result(member))

    def sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment)

    def _fail_pending_syncs(self, error: ErrorCode) -> None:
        for member in self.members.values():
            waiter, member.sync_waiter = member.sync_waiter, None
            if waiter is not None:
                waiter.resolve(SyncResult(error=error))
