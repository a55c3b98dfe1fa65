"""Server-side partition assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

An assignor maps the group's members (their subscriptions and their *current target* partitions)
and the subscribed topics' partition counts to a new target assignment. It is pure: no clock, no
state, the same inputs give the same output. Members come in the group's order (join order), which
is what "first member" means below.

* :class:`UniformAssignor` (Kafka's ``UniformAssignor``): spreads every subscribed partition as
  evenly as possible and moves as few as it can. With one subscription shared by every member
  (homogeneous) it follows ``UniformHomogeneousAssignmentBuilder`` step for step: a quota of
  ``partitions // members``, the first ``partitions % members`` members that can use one get an
  extra partition, every member keeps its current partitions up to its quota, and the rest are
  handed out in partition order to members below quota. With different subscriptions it keeps
  what each member may still own, hands each unassigned partition to the least-loaded member
  subscribed to its topic (topics with the fewest subscribers first) and then moves partitions
  from a member to another subscriber while their counts differ by more than one: balanced and
  sticky like Kafka's ``UniformHeterogeneousAssignmentBuilder``, though not always the same map.
* :class:`RangeAssignor` (Kafka's server ``RangeAssignor``): per topic, contiguous ranges in
  member order (static members by instance id first, then the others by member id); the first
  ``partitions % subscribers`` get one more. Not sticky, like Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kompakt.broker.groups.records.schemas import Assignment


class PartitionAssignorError(Exception):
    """The assignor cannot satisfy its inputs (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as an assignor sees it."""

    member_id: str
    instance_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    #: The member's partitions in the current target assignment (empty for a new member).
    assignment: Assignment = field(default_factory=dict)


#: ``member id -> topic id -> partitions``.
GroupAssignment = dict[str, dict[uuid.UUID, frozenset[int]]]


class ConsumerGroupAssignor(Protocol):
    name: str

    def assign(self, members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> GroupAssignment:
        """The new target assignment; ``partitions`` maps each subscribed topic id to its partition count."""
        ...


def _freeze(assignment: Mapping[uuid.UUID, set[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}


def _is_homogeneous(members: Sequence[MemberSpec]) -> bool:
    first = members[0].subscribed_topic_ids
    return all(m.subscribed_topic_ids == first for m in members)


class UniformAssignor:
    """Kafka's ``uniform`` assignor; see the module docstring."""

    name = "uniform"

    def assign(self, members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> GroupAssignment:
        if not members:
            return {}
        for topic in {t for m in members for t in m.subscribed_topic_ids}:
            if topic not in partitions:
                raise PartitionAssignorError(f"members are subscribed to topic {topic}, which does not exist")
        if _is_homogeneous(members):
            return self._homogeneous(members, partitions)
        return self._heterogeneous(members, partitions)

    @staticmethod
    def _homogeneous(members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> GroupAssignment:
        topics = members[0].subscribed_topic_ids
        if not topics:
            return {m.member_id: {} for m in members}
        owned = {(t, p) for m in members for t, parts in m.assignment.items() for p in parts}
        unassigned = [(t, p) for t in sorted(topics) for p in range(partitions[t]) if (t, p) not in owned]
        total = sum(partitions[t] for t in topics)
        min_quota, extra = divmod(total, len(members))
        result: dict[str, dict[uuid.UUID, set[int]]] = {}
        unfilled: list[tuple[str, int]] = []
        for index, member in enumerate(members):
            quota = min_quota
            has_extra = extra > 0
            if has_extra:
                quota += 1
            kept: dict[uuid.UUID, set[int]] = {}
            for topic in sorted(member.assignment):
                current = sorted(member.assignment[topic])
                if topic not in topics:
                    continue  # no longer subscribed: every partition of it goes
                valid = [p for p in current if p < partitions[topic]]
                keep, drop = valid[: max(quota, 0)], valid[max(quota, 0) :]
                quota -= len(keep)
                if keep:
                    kept[topic] = set(keep)
                unassigned.extend((topic, p) for p in drop)
            # Keep the extra slot only if enough members remain to take the others.
            if quota > 0 and has_extra and len(members) - index > extra:
                quota -= 1
                has_extra = False
            if quota > 0:
                unfilled.append((member.member_id, quota))
            if has_extra:
                extra -= 1
            result[member.member_id] = kept
        cursor = 0
        for member_id, quota in unfilled:
            target = result[member_id]
            for _ in range(quota):
                if cursor >= len(unassigned):
                    break
                topic, partition = unassigned[cursor]
                cursor += 1
                target.setdefault(topic, set()).add(partition)
        if cursor < len(unassigned):
            raise PartitionAssignorError("partitions were left unassigned")
        return {member_id: _freeze(a) for member_id, a in result.items()}

    @staticmethod
    def _heterogeneous(members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> GroupAssignment:
        order = {m.member_id: i for i, m in enumerate(members)}
        subscribers: dict[uuid.UUID, list[str]] = {}
        for m in members:
            for topic in m.subscribed_topic_ids:
                subscribers.setdefault(topic, []).append(m.member_id)
        result: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
        counts = {m.member_id: 0 for m in members}
        owner: dict[tuple[uuid.UUID, int], str] = {}
        for m in members:  # keep every partition the member may still own
            for topic, parts in sorted(m.assignment.items()):
                if topic not in m.subscribed_topic_ids:
                    continue
                for p in sorted(parts):
                    if p < partitions[topic] and (topic, p) not in owner:
                        owner[(topic, p)] = m.member_id
                        result[m.member_id].setdefault(topic, set()).add(p)
                        counts[m.member_id] += 1
        for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
            for p in range(partitions[topic]):
                if (topic, p) in owner:
                    continue
                chosen = min(subscribers[topic], key=lambda mid: (counts[mid], order[mid]))
                owner[(topic, p)] = chosen
                result[chosen].setdefault(topic, set()).add(p)
                counts[chosen] += 1
        moved = True
        while moved:  # move one partition at a time from an overloaded member to a lighter subscriber
            moved = False
            for (topic, p), current in sorted(owner.items(), key=lambda kv: (-counts[kv[1]], kv[0])):
                lighter = [mid for mid in subscribers[topic] if counts[mid] + 1 < counts[current]]
                if not lighter:
                    continue
                chosen = min(lighter, key=lambda mid: (counts[mid], order[mid]))
                result[current][topic].discard(p)
                result[chosen].setdefault(topic, set()).add(p)
                counts[current] -= 1
                counts[chosen] += 1
                owner[(topic, p)] = chosen
                moved = True
                break
        return {member_id: _freeze(a) for member_id, a in result.items()}


class RangeAssignor:
    """Kafka's server-side ``range`` assignor; see the module docstring."""

    name = "range"

    def assign(self, members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> GroupAssignment:
        ordered = sorted(
            members,
            key=lambda m: (0, m.instance_id, "") if m.instance_id is not None else (1, "", m.member_id),
        )
        subscribers: dict[uuid.UUID, int] = {}
        for m in ordered:
            for topic in m.subscribed_topic_ids:
                if topic not in partitions:
                    raise PartitionAssignorError(
                        f"member is subscribed to topic {topic}, which does not exist"
                    )
                subscribers[topic] = subscribers.get(topic, 0) + 1
        next_start = dict.fromkeys(subscribers, 0)
        extra = {t: partitions[t] % n for t, n in subscribers.items()}
        result: GroupAssignment = {}
        for m in ordered:
            assignment: dict[uuid.UUID, frozenset[int]] = {}
            for topic in sorted(m.subscribed_topic_ids):
                quota = partitions[topic] // subscribers[topic]
                if extra[topic] > 0:
                    quota += 1
                    extra[topic] -= 1
                start = next_start[topic]
                end = min(start + quota, partitions[topic])
                next_start[topic] = end
                if start < end:
                    assignment[topic] = frozenset(range(start, end))
            result[m.member_id] = assignment
        return result


#: Every assignor kompakt runs, by the name the heartbeat's ``server_assignor`` uses.
ASSIGNORS: Mapping[str, ConsumerGroupAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}

#: Kafka's ``group.consumer.assignors`` values may be class names; these map them to the short names.
ASSIGNOR_CLASS_NAMES: Mapping[str, str] = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
