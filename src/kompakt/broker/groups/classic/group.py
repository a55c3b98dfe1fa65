"""One classic group: its members and the bookkeeping of Kafka's ``ClassicGroup``.

Theory of operation (Kafka's classic protocol, ``GroupMetadataManager`` drives it)::

    Empty ──join──► PreparingRebalance ──all joined / rebalance timeout──► CompletingRebalance
      ▲                  ▲       │ (no members left)                           │ leader's SyncGroup
      │                  │       └──────────► Empty                            ▼
      └── last member ───┴──── join of a new member, leave, expiry ◄──────── Stable

* **Member ids (KIP-394).** A JoinGroup v4+ without a member id is answered at once with
  MEMBER_ID_REQUIRED and a generated id, which is kept as a *pending* member until the client
  joins again with it (or its session timeout runs out). A client that discards an outdated
  JoinGroup answer therefore rejoins under the same id instead of leaving a ghost behind.
* **PreparingRebalance** collects JoinGroup requests. It ends when every member and no pending
  member is waiting (``has_all_members_joined``), or at the largest rebalance timeout; then the
  *dynamic* members that did not rejoin are dropped (static ones stay, KIP-345). The first
  rebalance of an empty group waits ``group.initial.rebalance.delay.ms``, once more for each
  period in which a newcomer arrived, up to the rebalance timeout.
* Completing the join bumps the generation, picks the protocol (each member votes for its most
  preferred protocol that every member supports; ties go to the leader's preference) and answers
  every waiting JoinGroup: the leader gets the member list with metadata, followers get none.
* **CompletingRebalance** waits for the leader's SyncGroup with the assignments; followers that
  sync first wait. Members that have not synced within the rebalance timeout are dropped and a new
  rebalance starts (``expirePendingSync``).
* **Static members (KIP-345).** A known ``group.instance.id`` joining without a member id takes
  over the old member's slot under a new id (``replace_static_member``): the old incarnation's
  pending requests are fenced with FENCED_INSTANCE_ID and it keeps the old assignment. In Stable
  with an unchanged protocol this needs no rebalance; any request naming the instance id with an
  older member id is FENCED_INSTANCE_ID from then on.
* A member that does not heartbeat within its session timeout is dropped, unless it waits for a
  JoinGroup or SyncGroup answer (``has_satisfied_heartbeat``); a new member waiting in its first
  rebalance gets Kafka's fixed 5-minute join timeout instead.

Nothing here reads a clock or starts a timer: the membership manager
(:mod:`kompakt.broker.groups.classic.membership`) owns the timers and the decisions; this class
keeps the state consistent. As Kafka's ``ClassicGroup``, it is soft state except for
:attr:`ClassicGroup.persisted`, the group's last GroupMetadata record, which only the replay of
that record sets. Not thread-safe: the coordinator serialises access.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kompakt.broker.deferred import Deferred
from kompakt.broker.groups.errors import FencedInstanceIdError, UnknownMemberIdError
from kompakt.broker.groups.records.schemas import GroupMetadataValue, MemberMetadata
from kompakt.protocol.codec import ErrorCode

#: ``ClassicGroup.type`` of every group here; KIP-848 groups report "consumer".
CLASSIC_GROUP_TYPE = "classic"
#: The protocol type of Kafka consumers (``ConsumerProtocol.PROTOCOL_TYPE``).
CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """Kafka's classic group states; the values are the names DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: ``ClassicGroupState.validPreviousStates``: the states each state may be entered from.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


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
    #: JoinGroup v9 (KIP-814): a static leader that rejoined in Stable must not compute a new
    #: assignment; it gets the member list only to keep its metadata current.
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The coordinator's answer to SyncGroup."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, eq=False)
class ClassicGroupMember:
    """A member as the coordinator sees it (Kafka's ``ClassicGroupMember``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    #: ``(name, metadata)`` in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_waiter: Deferred[JoinResult] | None = None
    sync_waiter: Deferred[SyncResult] | None = None
    #: Added in the current rebalance and not through a completed join yet.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Same protocols and metadata in the same order (``ClassicGroupMember.matches``)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        """Whether an expired heartbeat deadline spares this member (Kafka's rule)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


@dataclass(slots=True, eq=False)
class ClassicGroup:
    """A classic group. See the module docstring for the state machine."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    #: ``group.instance.id`` -> member id, for static members.
    static_members: dict[str, str] = field(default_factory=dict)
    #: KIP-394: member ids handed out with MEMBER_ID_REQUIRED and not joined with yet.
    pending_join_members: set[str] = field(default_factory=set)
    #: Members of the current generation that have not sent SyncGroup yet.
    pending_sync_members: set[str] = field(default_factory=set)
    #: A member joined during the initial rebalance delay, which extends it once more.
    new_member_added: bool = False
    #: Topics the members subscribe to (``computeSubscribedTopics``); ``None`` when unknown.
    subscribed_topics: frozenset[str] | None = None
    #: The last GroupMetadata record written for the group (None before the first one): what a
    #: restart would rebuild. Set only by the replay of that record.
    persisted: GroupMetadataValue | None = None

    @property
    def type(self) -> str:
        """The group type ListGroups v5 reports (KIP-848 groups are "consumer")."""
        return CLASSIC_GROUP_TYPE

    # -- queries -----------------------------------------------------------------------------------

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def num_awaiting_join(self) -> int:
        return sum(1 for member in self.members.values() if member.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_join_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        """KIP-496: whether OffsetDelete of ``topic`` must answer GROUP_SUBSCRIBED_TO_TOPIC."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ClassicGroupMember:
        """``ClassicGroup.validateMember``: the instance id must map to this member id."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise UnknownMemberIdError(
                    f"Static member with instance id {group_instance_id} is not in group {self.group_id}."
                )
            if existing != member_id:
                raise FencedInstanceIdError(
                    f"Static member {member_id} with instance id {group_instance_id} was fenced by member "
                    f"{existing}."
                )
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def _supported_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(set(member.protocol_names()))
        return counts

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """Whether a member with these protocols may join (else INCONSISTENT_GROUP_PROTOCOL)."""
        names = set(protocol_names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        counts = self._supported_counts()
        size = len(self.members)
        return protocol_type == self.protocol_type and any(counts.get(n, 0) == size for n in names)

    def candidate_protocols(self) -> set[str]:
        """Protocols every current member supports."""
        size = len(self.members)
        return {name for name, count in self._supported_counts().items() if count == size}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; ties go to the leader's order."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(member.vote(candidates) for member in self.members.values())
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        preference = leader.protocol_names() if leader else sorted(candidates)
        best = max(votes.values())
        return next(name for name in [*preference, *sorted(votes)] if votes.get(name) == best)

    def current_members(self) -> tuple[JoinedMember, ...]:
        """The member list a leader receives (``currentClassicGroupMembers``)."""
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    def join_result(
        self, member: ClassicGroupMember, *, with_members: bool, leader_id: str | None = None
    ) -> JoinResult:
        """A successful JoinGroup answer for ``member`` in the current generation."""
        return JoinResult(
            error=ErrorCode.none,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader_id=(self.leader_id if leader_id is None else leader_id) or "",
            member_id=member.member_id,
            members=self.current_members() if with_members else (),
        )

    def sync_result(self, member: ClassicGroupMember) -> SyncResult:
        return SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """``<instance id or client id>-<uuid>``, as Kafka names members."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    # -- transitions -------------------------------------------------------------------------------

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id} cannot go from {self.state.value} to {state.value}")
        self.previous_state, self.state = self.state, state

    def add(self, member: ClassicGroupMember, waiter: Deferred[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_waiter = waiter
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        """Drop a member or pending member; a new leader is the first remaining member.

        Callers answer the member's pending requests first, as Kafka's do; any left over here are
        answered with UNKNOWN_MEMBER_ID so that no connection waits forever.
        """
        member = self.members.pop(member_id, None)
        instance_id = member.group_instance_id if member is not None else None
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        if member is not None:
            self.complete_join(member, JoinResult(ErrorCode.unknown_member_id))
            self.complete_sync(member, SyncResult(ErrorCode.unknown_member_id))
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else elect one that did; False when no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """Give a static member's slot (and assignment) to a new member id, fencing the old one."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise KeyError(f"cannot replace non-existing member id {old_member_id}")
        self.complete_join(old, JoinResult(ErrorCode.fenced_instance_id, member_id=old_member_id))
        self.complete_sync(old, SyncResult(ErrorCode.fenced_instance_id))
        new = ClassicGroupMember(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            session_timeout_ms=old.session_timeout_ms,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: tuple[tuple[str, bytes], ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: Deferred[JoinResult] | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous, member.join_waiter = member.join_waiter, waiter
        if waiter is not None and previous is not None and previous is not waiter and not previous.done:
            # Kafka drops the older JoinGroup of a member that joined twice; answering it keeps
            # the older connection from waiting for its request timeout.
            previous.resolve(JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id))

    def complete_join(self, member: ClassicGroupMember, result: JoinResult) -> bool:
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is None:
            return False
        waiter.resolve(result)
        return True

    def complete_sync(self, member: ClassicGroupMember, result: SyncResult) -> bool:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is None:
            return False
        waiter.resolve(result)
        return True

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The union of the members' subscriptions (``ClassicGroup.computeSubscribedTopics``).

        Only consumer groups have a known subscription format; ``None`` means unknown.
        """
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    # -- records -----------------------------------------------------------------------------------

    def metadata_value(
        self, now_ms: int, assignment: Mapping[str, bytes] | None = None
    ) -> GroupMetadataValue:
        """``newGroupMetadataRecord``: the group as it stands, with ``assignment`` per member."""
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata_for(self.protocol_name),
                assignment=(assignment or {}).get(m.member_id, m.assignment),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name if self.members else None,
            leader=self.leader_id if self.members else None,
            current_state_timestamp_ms=now_ms,
            members=members,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """The group a GroupMetadata record describes (a restart, or a downgraded consumer group):
        Stable with its members and their assignments, or Empty without members."""
        group = cls(
            group_id,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
        )
        if value.members and value.protocol is not None:
            for stored in value.members:
                group.add(
                    ClassicGroupMember(
                        member_id=stored.member_id,
                        group_instance_id=stored.group_instance_id,
                        client_id=stored.client_id,
                        client_host=stored.client_host,
                        session_timeout_ms=stored.session_timeout_ms,
                        rebalance_timeout_ms=stored.rebalance_timeout_ms,
                        protocol_type=value.protocol_type,
                        protocols=((value.protocol, stored.subscription),),
                        assignment=stored.assignment,
                    )
                )
            if value.leader in group.members:
                group.leader_id = value.leader
            group.state = GroupState.STABLE
        else:
            group.protocol_name = None
        group.subscribed_topics = group.compute_subscribed_topics()
        group.persisted = value
        return group


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription, read with its v0 prefix; None if malformed.

    Every version starts with ``version int16, topics [string]`` (Kafka parses it the same way so
    as not to depend on later versions).
    """
    view = memoryview(metadata)
    if len(view) < 6:
        return None
    count = int.from_bytes(view[2:6], "big", signed=True)
    if count < 0 or count > (len(view) - 6) // 2:
        return None
    pos, topics = 6, []
    for _ in range(count):
        if pos + 2 > len(view):
            return None
        size = int.from_bytes(view[pos : pos + 2], "big", signed=True)
        pos += 2
        if size < 0 or pos + size > len(view):
            return None
        try:
            topics.append(bytes(view[pos : pos + size]).decode())
        except UnicodeDecodeError:
            return None
        pos += size
    return topics
