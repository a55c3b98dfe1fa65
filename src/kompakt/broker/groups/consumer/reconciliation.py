"""Incremental reconciliation of a member towards its target (Kafka's ``CurrentAssignmentBuilder``).

KIP-848 never stops the group: each member moves from its current partitions to its target ones on
its own heartbeats, in two safe steps.

1. **Revoke first.** Partitions the member owns but the target no longer gives it are put *pending
   revocation*; the member stays in its epoch (state ``UNREVOKED_PARTITIONS``) and the heartbeat
   answer shrinks its assignment. Only once a heartbeat reports owned partitions without any of them
   does the member advance.
2. **Assign what is free.** A target partition still owned by another member (it is in someone's
   assigned or pending-revocation set, i.e. it has a *partition epoch*) is withheld; the member
   moves to the target epoch in state ``UNRELEASED_PARTITIONS`` and gets it on a later heartbeat,
   after its previous owner has revoked it. Otherwise the member is ``STABLE`` at the target epoch.

So no partition is ever owned by two members at once. The functions are pure: the caller passes the
partition-epoch lookup and applies the returned member.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kompakt.broker.groups.errors import FencedMemberEpochError
from kompakt.broker.groups.records.schemas import Assignment


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` with its record values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class MemberAssignmentState:
    """The reconciliation part of a member: what the CurrentMemberAssignment record holds."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int, **changes: object) -> MemberAssignmentState:
        """Kafka's ``updateMemberEpoch``: the previous epoch remembers the one being left."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)  # type: ignore[arg-type]


#: ``(topic id, partitions)`` pairs a heartbeat reports as owned; None when the heartbeat omits them.
OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]] | None


def owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    """Whether the reported partitions include any of ``partitions`` (unknown ownership counts as yes)."""
    if owned is None:
        return True
    return any(p in partitions.get(topic, ()) for topic, parts in owned for p in parts)


def is_subset(owned: OwnedPartitions, partitions: Assignment) -> bool:
    """Whether every reported partition is in ``partitions`` (Kafka's ``isSubset``)."""
    if owned is None:
        return False
    return all(p in partitions.get(topic, ()) for topic, parts in owned for p in parts)


def reconcile(
    member: MemberAssignmentState,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: OwnedPartitions,
) -> MemberAssignmentState:
    """The member's next state (``CurrentAssignmentBuilder.build``); ``member`` itself when nothing moves."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(
    member: MemberAssignmentState,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: OwnedPartitions,
) -> MemberAssignmentState:
    """Kafka's ``computeNextAssignment``."""
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    current = member.assigned_partitions
    for topic in set(target) | set(current):
        wanted = target.get(topic, frozenset())
        have = current.get(topic, frozenset())
        keep = have & wanted
        revoke = have - keep
        # A partition another member still holds (it has an epoch) is not handed out yet, unless it
        # is this member's own partition pending revocation.
        own_revoking = member.partitions_pending_revocation.get(topic, frozenset())
        to_assign = {p for p in wanted - keep if partition_epoch(topic, p) == -1 or p in own_revoking}
        if len(to_assign) < len(wanted - keep):
            unreleased = True
        if keep:
            assigned[topic] = keep
        if revoke:
            revoking[topic] = frozenset(revoke)
        if to_assign:
            pending[topic] = frozenset(to_assign)
    if revoking and owns_any(owned, revoking):
        return member.with_epoch(
            epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=assigned,
            partitions_pending_revocation=revoking,
        )
    for topic, parts in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | parts
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(
        target_epoch, state=state, assigned_partitions=assigned, partitions_pending_revocation={}
    )


def owned_from_request(topic_partitions: Sequence[object] | None) -> OwnedPartitions:
    """The heartbeat's ``topic_partitions`` as :data:`OwnedPartitions` (kio entities or pairs)."""
    if topic_partitions is None:
        return None
    owned: list[tuple[uuid.UUID, Sequence[int]]] = []
    for entry in topic_partitions:
        topic_id = getattr(entry, "topic_id", None)
        partitions = getattr(entry, "partitions", ())
        if topic_id is not None:
            owned.append((topic_id, tuple(int(p) for p in partitions)))
    return owned


def as_mapping(owned: OwnedPartitions) -> Mapping[uuid.UUID, frozenset[int]]:
    """The reported partitions as an assignment mapping (empty when not reported)."""
    if owned is None:
        return {}
    result: dict[uuid.UUID, frozenset[int]] = {}
    for topic, parts in owned:
        result[topic] = result.get(topic, frozenset()) | frozenset(parts)
    return {t: p for t, p in result.items() if p}
