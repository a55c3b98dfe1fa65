"""One KIP-848 consumer group: members, epochs, target assignment, and the replay of its records.

The group is changed only by replaying its ``__consumer_offsets`` records
(:meth:`ConsumerGroup.replay`), as Kafka's ``GroupMetadataManager.replay`` does: the coordinator
computes the records a heartbeat produces, appends them, then replays them here. A restart replays
the same records (what compaction left of them), so a restored group is exactly the group that was
written, by construction.

Three epochs (KIP-848):

* the **group epoch** goes up whenever the group's subscriptions change (a member joins, leaves,
  changes what it subscribes to, or a subscribed topic changes its partitions);
* the **assignment epoch** is the group epoch the target assignment was last computed for;
* each **member epoch** is the target epoch the member has reconciled to (see
  :mod:`kompakt.broker.groups.consumer.reconciliation`). A partition's *partition epoch* is the epoch of the
  member that owns it (assigned or pending revocation); an unowned partition has none (-1).

State (``ConsumerGroup.computeState`` in Kafka): Empty without members, Assigning while the group
epoch is ahead of the assignment epoch, Reconciling while a member is not yet at the assignment
epoch in state STABLE, else Stable.

A member that joined with the classic protocol (KIP-848's online migration: a JoinGroup to a
consumer group, or a classic group upgraded by a member of the consumer protocol) keeps how it
joined in its ``classic_member_metadata``; it is reconciled like the others, one JoinGroup and
SyncGroup per step, and its session is the one it asked for in its JoinGroup.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kompakt.broker.groups.consumer.reconciliation import MemberAssignmentState, MemberState
from kompakt.broker.groups.records.schemas import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRecordValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)

#: Member epoch of a member leaving the group (KIP-848).
LEAVE_GROUP_MEMBER_EPOCH = -1
#: Member epoch of a static member leaving temporarily (it keeps its partitions until its session ends).
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def topic_hash(topics: Mapping[str, tuple[uuid.UUID, int]], names: Iterable[str]) -> int:
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


class ConsumerGroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``; values are what ListGroups/describe report."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """A member: its subscription (the MemberMetadata record) and its reconciliation state."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    #: Sorted, as Kafka writes them.
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    #: Set for a member that joined with the classic protocol (JoinGroup): how it joined.
    classic_member_metadata: ClassicMemberMetadata | None = None
    assignment: MemberAssignmentState = field(default_factory=MemberAssignmentState)

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def session_timeout_ms(self, default: int) -> int:
        """A classic member's own session timeout, else the group's."""
        classic = self.classic_member_metadata
        return classic.session_timeout_ms if classic is not None else default

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic_member_metadata,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        a = self.assignment
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=a.member_epoch,
            previous_member_epoch=a.previous_member_epoch,
            state=int(a.state),
            assigned_partitions=a.assigned_partitions,
            partitions_pending_revocation=a.partitions_pending_revocation,
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic_member_metadata=value.classic_member_metadata,
        )


def _state_of(value: int) -> MemberState:
    try:
        return MemberState(value)
    except ValueError:
        return MemberState.UNKNOWN


@dataclass(slots=True, eq=False)
class ConsumerGroup:
    """The durable state of one consumer group, plus the soft state (timers) the coordinator keeps."""

    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    #: ``member id -> its target partitions``.
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    #: ``(topic id, partition) -> epoch of the member owning it``.
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    #: Whether a pre-4.1 ConsumerGroupPartitionMetadata record is live (4.1 tombstones it).
    has_partition_metadata_record: bool = False
    # -- soft state, not persisted ----------------------------------------------------------
    #: ``member id -> monotonic ms after which its session has expired``.
    session_deadlines_ms: dict[str, float] = field(default_factory=dict)
    #: ``member id -> (epoch, deadline)``: fenced if still revoking in that epoch past the deadline.
    revocation_deadlines_ms: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: Classic members told to rejoin: fenced if no JoinGroup comes by then (Kafka's join timeout).
    join_deadlines_ms: dict[str, float] = field(default_factory=dict)
    #: Classic members that joined: fenced if no SyncGroup comes by then (Kafka's sync timeout).
    sync_deadlines_ms: dict[str, float] = field(default_factory=dict)

    # -- queries ---------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.assignment.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.uses_classic_protocol]

    def all_use_classic_protocol_except(self, leaving: Iterable[ConsumerGroupMember]) -> bool:
        """Whether every member but ``leaving`` uses the classic protocol
        (``allMembersUseClassicProtocolExcept``)."""
        gone = {m.member_id for m in leaving}
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid not in gone)

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a classic member with these protocols may join (``supportsClassicProtocols``): the
        consumer protocol type, and a protocol every classic member supports."""
        if protocol_type != "consumer":
            return False
        wanted = set(names)
        if not self.members:
            return bool(wanted)
        classic = self.classic_members()
        return any(
            all(name in {n for n, _ in m.classic_member_metadata.supported_protocols} for m in classic)  # type: ignore[union-attr]
            for name in wanted
        )

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether a target partition of the member is still owned by another
        (``waitingOnUnreleasedPartition``)."""
        if member.assignment.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_of(member.member_id).items():
            assigned = member.assignment.assigned_partitions.get(topic_id, frozenset())
            if any(p not in assigned and self.partition_epoch(topic_id, p) != -1 for p in partitions):
                return True
        return False

    # -- replay ----------------------------------------------------------------------------

    def replay(self, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None) -> None:
        """Apply one record (a ``None`` value is a tombstone) as Kafka's replay does."""
        kind = key.record_type
        if kind == CONSUMER_GROUP_METADATA:
            if isinstance(value, ConsumerGroupMetadataValue):
                self.group_epoch = value.epoch
                self.metadata_hash = value.metadata_hash
            return  # its tombstone is handled by the coordinator (it drops the group)
        if kind == CONSUMER_GROUP_PARTITION_METADATA:
            self.has_partition_metadata_record = value is not None
            return
        if kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = (
                value.assignment_epoch if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue) else 0
            )
            return
        member_id = key.member_id
        if member_id is None:
            return
        if kind == CONSUMER_GROUP_MEMBER_METADATA:
            if isinstance(value, ConsumerGroupMemberMetadataValue):
                member = self.members.get(member_id) or ConsumerGroupMember(member_id)
                self.members[member_id] = member.with_metadata(value)
            else:
                self._remove_member(member_id)
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                self.target_assignment[member_id] = dict(value.partitions)
            else:
                self.target_assignment.pop(member_id, None)
        elif kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            current = self.members.get(member_id)
            if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
                state = MemberAssignmentState(
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=_state_of(value.state),
                    assigned_partitions=dict(value.assigned_partitions),
                    partitions_pending_revocation=dict(value.partitions_pending_revocation),
                )
                self._set_assignment(current or ConsumerGroupMember(member_id), state)
            elif current is not None:
                self._set_assignment(
                    current, MemberAssignmentState(LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH)
                )

    def _set_assignment(self, member: ConsumerGroupMember, state: MemberAssignmentState) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._drop_epochs(old)
        updated = replace(member, assignment=state)
        self.members[member.member_id] = updated
        for topic, parts in (
            *state.assigned_partitions.items(),
            *state.partitions_pending_revocation.items(),
        ):
            for p in parts:
                self.partition_epochs[(topic, p)] = state.member_epoch

    def _drop_epochs(self, member: ConsumerGroupMember) -> None:
        a = member.assignment
        for topic, parts in (*a.assigned_partitions.items(), *a.partitions_pending_revocation.items()):
            for p in parts:
                if self.partition_epochs.get((topic, p)) == a.member_epoch:
                    del self.partition_epochs[(topic, p)]

    def _remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._drop_epochs(member)
        self.session_deadlines_ms.pop(member_id, None)
        self.revocation_deadlines_ms.pop(member_id, None)
        self.join_deadlines_ms.pop(member_id, None)
        self.sync_deadlines_ms.pop(member_id, None)
