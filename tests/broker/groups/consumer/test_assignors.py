"""Server-side assignors: balance, stickiness, and Kafka's range layout."""

from __future__ import annotations

import uuid

import pytest

from kompakt.broker.groups.consumer.assignors import (
    MemberSpec,
    PartitionAssignorError,
    RangeAssignor,
    UniformAssignor,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def spec(
    member_id: str,
    *topics: uuid.UUID,
    owned: dict[uuid.UUID, set[int]] | None = None,
    instance: str | None = None,
) -> MemberSpec:
    return MemberSpec(
        member_id, instance, frozenset(topics), {t: frozenset(p) for t, p in (owned or {}).items()}
    )


def counts(assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in assignment.items()}


def all_partitions(assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for a in assignment.values() for t, parts in a.items() for p in parts)


def test_uniform_homogeneous_spreads_every_partition_once() -> None:
    result = UniformAssignor().assign(
        [spec("a", T1, T2), spec("b", T1, T2), spec("c", T1, T2)], {T1: 4, T2: 3}
    )
    assert sorted(counts(result).values()) == [2, 2, 3]
    assert all_partitions(result) == sorted([(T1, p) for p in range(4)] + [(T2, p) for p in range(3)])


def test_uniform_homogeneous_keeps_partitions_when_a_member_joins() -> None:
    before = UniformAssignor().assign([spec("a", T1), spec("b", T1)], {T1: 6})
    members = [spec("a", T1, owned=dict(before["a"])), spec("b", T1, owned=dict(before["b"])), spec("c", T1)]
    after = UniformAssignor().assign(members, {T1: 6})
    assert counts(after) == {"a": 2, "b": 2, "c": 2}
    assert after["a"][T1] <= before["a"][T1] and after["b"][T1] <= before["b"][T1]
    assert all_partitions(after) == [(T1, p) for p in range(6)]


def test_uniform_heterogeneous_respects_subscriptions_and_balances() -> None:
    members = [spec("a", T1), spec("b", T1, T2), spec("c", T2, T3)]
    result = UniformAssignor().assign(members, {T1: 3, T2: 3, T3: 3})
    assert set(result["a"]) <= {T1} and set(result["b"]) <= {T1, T2} and set(result["c"]) <= {T2, T3}
    assert all_partitions(result) == sorted((t, p) for t in (T1, T2, T3) for p in range(3))
    assert max(counts(result).values()) - min(counts(result).values()) <= 1


def test_uniform_drops_an_unsubscribed_topic() -> None:
    result = UniformAssignor().assign([spec("a", T2, owned={T1: {0, 1}})], {T1: 2, T2: 1})
    assert result == {"a": {T2: frozenset({0})}}


def test_uniform_refuses_a_missing_topic() -> None:
    with pytest.raises(PartitionAssignorError):
        UniformAssignor().assign([spec("a", T1)], {})


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    result = RangeAssignor().assign(
        [spec("m2", T1, T2), spec("m1", T1, T2), spec("x", T1, T2, instance="i0")], {T1: 5, T2: 2}
    )
    # the static member sorts first, then member ids; the first 5 % 3 members get one more
    assert result["x"] == {T1: frozenset({0, 1}), T2: frozenset({0})}
    assert result["m1"] == {T1: frozenset({2, 3}), T2: frozenset({1})}
    assert result["m2"] == {T1: frozenset({4})}


def test_no_members_no_assignment() -> None:
    assert UniformAssignor().assign([], {T1: 3}) == {}
    assert RangeAssignor().assign([], {T1: 3}) == {}
