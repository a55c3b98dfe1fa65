"""KIP-394 member ids and KIP-345 static membership, as Kafka 4.1's GroupMetadataManager does them.

Driven on the coordinator with a FakeClock (no sockets, no sleeping); the JoinGroup flags are the
ones the handler sets for the wire version (v4+: member id required; v9+: skip assignment).
"""

from __future__ import annotations

import pytest

from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import (
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from kompakt.broker.groups.records.schemas import GroupMetadataKey, GroupMetadataValue
from kompakt.clock import FakeClock
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.groups.conftest import GroupsDir

SESSION_MS = 10_000
REBALANCE_MS = 30_000


@pytest.fixture
def fake_clock(clock: FakeClock) -> FakeClock:
    return clock


@pytest.fixture
def coord(groups_dir: GroupsDir) -> GroupCoordinator:
    return groups_dir.coordinator()


def request(
    member_id: str = "",
    instance_id: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"sub"),),
    *,
    version: int = 5,
    session_ms: int = SESSION_MS,
) -> JoinRequest:
    return JoinRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=instance_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer",
        protocols=protocols,
        client_id="client",
        client_host="10.0.0.1",
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )


def join(
    coord: GroupCoordinator, member_id: str = "", instance_id: str | None = None, **kw: object
) -> Deferred[JoinResult]:
    return coord.join(request(member_id, instance_id, **kw))  # type: ignore[arg-type]


def join_new(coord: GroupCoordinator, **kw: object) -> Deferred[JoinResult]:
    """A dynamic member's two JoinGroups (KIP-394): the id first, then the join proper."""
    required = join(coord, **kw).result()  # type: ignore[arg-type]
    assert required.error is E.member_id_required and required.member_id.startswith("client-")
    return join(coord, required.member_id, **kw)  # type: ignore[arg-type]


def sync(
    coord: GroupCoordinator,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    instance_id: str | None = None,
) -> Deferred[SyncResult]:
    return coord.sync("g", generation, member_id, instance_id, None, None, assignments or {})


def group_state(coord: GroupCoordinator) -> GroupState:
    group = coord.group("g")
    assert group is not None
    return group.state


def stable_static_pair(coord: GroupCoordinator) -> tuple[str, str]:
    """Static members "a" (leader) and "b", Stable in generation 2 with assignments A and B."""
    a = join(coord, instance_id="a").result()
    assert (a.error, a.generation_id) == (E.none, 1)  # static members need no id round trip
    sync(coord, a.member_id, 1, {a.member_id: b"A1"}, "a")
    b_join = join(coord, instance_id="b")
    a2 = join(coord, a.member_id, "a").result()
    b = b_join.result()
    assert a2.generation_id == b.generation_id == 2
    sync(coord, a.member_id, 2, {a.member_id: b"A", b.member_id: b"B"}, "a")
    assert sync(coord, b.member_id, 2, instance_id="b").result().assignment == b"B"
    assert group_state(coord) is GroupState.STABLE
    return a.member_id, b.member_id


# ---- KIP-394 --------------------------------------------------------------------------------------


def test_first_join_answers_member_id_required_and_adds_only_a_pending_member(
    coord: GroupCoordinator,
) -> None:
    required = join(coord).result()
    assert required.error is E.member_id_required
    assert required.generation_id == -1 and required.members == ()
    group = coord.group("g")
    assert group is not None and group.members == {} and group.pending_join_members == {required.member_id}
    joined = join(coord, required.member_id).result()
    assert (joined.error, joined.member_id, joined.generation_id) == (E.none, required.member_id, 1)
    assert joined.leader_id == required.member_id and group.pending_join_members == set()


def test_v3_join_still_gets_a_member_at_once(coord: GroupCoordinator) -> None:
    joined = join(coord, version=3).result()
    assert (joined.error, joined.generation_id) == (E.none, 1)


def test_pending_member_expires_after_its_session_timeout(
    coord: GroupCoordinator, fake_clock: FakeClock
) -> None:
    required = join(coord).result()
    fake_clock.advance(SESSION_MS - 1)
    coord.tick(fake_clock.monotonic_ms())
    assert coord.group("g").pending_join_members == {required.member_id}  # type: ignore[union-attr]
    fake_clock.advance(1)
    coord.tick(fake_clock.monotonic_ms())
    assert coord.group("g").pending_join_members == set()  # type: ignore[union-attr]
    assert join(coord, required.member_id).result().error is E.unknown_member_id


def test_a_pending_member_holds_a_rebalance_until_it_joins_or_expires(
    coord: GroupCoordinator, fake_clock: FakeClock
) -> None:
    a = join_new(coord).result()
    sync(coord, a.member_id, 1, {a.member_id: b"A"})
    b_join = join_new(coord)  # B joins: rebalance
    pending = join(coord).result()  # C only got its id so far
    a_join = join(coord, a.member_id)
    assert not a_join.done and not b_join.done
    fake_clock.advance(SESSION_MS)  # C's id expires: now every member has joined
    coord.tick(fake_clock.monotonic_ms())
    assert a_join.result().generation_id == b_join.result().generation_id == 2
    assert pending.member_id not in {m.member_id for m in a_join.result().members}


def test_discarded_join_response_leaves_no_ghost_member(
    coord: GroupCoordinator, fake_clock: FakeClock
) -> None:
    a = join_new(coord).result()
    sync(coord, a.member_id, 1, {a.member_id: b"A"})
    required = join(coord).result()
    first = join(coord, required.member_id)
    a2 = join(coord, a.member_id).result()
    assert first.result().generation_id == a2.generation_id == 2
    # The client discards that answer (its state moved on) and joins again under the same id:
    again = join(coord, required.member_id).result()
    assert (again.error, again.generation_id, again.member_id) == (E.none, 2, required.member_id)
    sync(coord, a.member_id, 2, {a.member_id: b"A", required.member_id: b"B"})
    assert sync(coord, required.member_id, 2).result().assignment == b"B"
    group = coord.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert set(group.members) == {a.member_id, required.member_id}
    # The next rebalance waits for nobody else: both rejoin and it completes at once.
    a3 = join(coord, a.member_id)
    b3 = join(coord, required.member_id).result()
    assert a3.result().generation_id == b3.generation_id == 3


def test_leave_of_a_pending_member(coord: GroupCoordinator) -> None:
    required = join(coord).result()
    assert coord.leave("g", [(required.member_id, None)]) == (E.none, [(required.member_id, None, E.none)])
    assert coord.group("g").pending_join_members == set()  # type: ignore[union-attr]


# ---- KIP-345: static membership -------------------------------------------------------------------


def test_static_rejoin_in_stable_keeps_the_assignment_without_a_rebalance(coord: GroupCoordinator) -> None:
    a, b = stable_static_pair(coord)
    rejoined = join(coord, instance_id="b").result()
    assert rejoined.error is E.none and rejoined.member_id != b and rejoined.member_id.startswith("b-")
    assert (rejoined.generation_id, rejoined.leader_id, rejoined.members) == (2, a, ())
    assert group_state(coord) is GroupState.STABLE
    assert coord.heartbeat("g", 2, a, "a") is E.none  # the other member sees no rebalance
    assert sync(coord, rejoined.member_id, 2, instance_id="b").result().assignment == b"B"
    assert coord.heartbeat("g", 2, b, "b") is E.fenced_instance_id
    assert coord.heartbeat("g", 2, b, None) is E.unknown_member_id


def test_static_leader_rejoin_before_v9_acts_as_a_follower(coord: GroupCoordinator) -> None:
    a, b = stable_static_pair(coord)
    rejoined = join(coord, instance_id="a").result()
    # The answer names the old leader id, so the new incarnation does not assign; it just syncs.
    assert (rejoined.leader_id, rejoined.members, rejoined.skip_assignment) == (a, (), False)
    assert coord.group("g").leader_id == rejoined.member_id  # type: ignore[union-attr]
    assert sync(coord, rejoined.member_id, 2, instance_id="a").result().assignment == b"A"
    assert group_state(coord) is GroupState.STABLE and coord.heartbeat("g", 2, b, "b") is E.none


def test_static_leader_rejoin_at_v9_skips_the_assignment(coord: GroupCoordinator) -> None:
    a, b = stable_static_pair(coord)
    rejoined = join(coord, instance_id="a", version=9).result()
    assert rejoined.skip_assignment and rejoined.leader_id == rejoined.member_id
    assert {m.member_id for m in rejoined.members} == {rejoined.member_id, b}
    assert sync(coord, rejoined.member_id, 2, instance_id="a").result().assignment == b"A"
    assert group_state(coord) is GroupState.STABLE


def test_static_rejoin_that_changes_the_protocol_rebalances(coord: GroupCoordinator) -> None:
    a = join(coord, instance_id="a", protocols=(("range", b""), ("sticky", b""))).result()
    sync(coord, a.member_id, 1, {a.member_id: b"A"}, "a")
    rejoined = join(coord, instance_id="a", protocols=(("sticky", b""),))
    assert group_state(coord) is GroupState.PREPARING_REBALANCE or rejoined.result().generation_id == 2
    assert rejoined.result().protocol_name == "sticky"


def test_static_rejoin_during_completing_rebalance_restarts_the_rebalance(coord: GroupCoordinator) -> None:
    a, b = stable_static_pair(coord)
    a_join = join(coord, a, "a")
    b_join = join(coord, b, "b")
    assert a_join.result().generation_id == b_join.result().generation_id == 3
    assert group_state(coord) is GroupState.COMPLETING_REBALANCE
    waiting = sync(coord, b, 3, instance_id="b")
    new_b = join(coord, instance_id="b")
    assert waiting.result().error is E.fenced_instance_id  # the old incarnation is fenced at once
    assert group_state(coord) is GroupState.PREPARING_REBALANCE
    join(coord, a, "a")
    assert new_b.result().generation_id == 4


def test_duplicate_instance_fences_the_older_client(coord: GroupCoordinator) -> None:
    first = join(coord, instance_id="x").result()
    sync(coord, first.member_id, 1, {first.member_id: b"X"}, "x")
    second = join(coord, instance_id="x").result()
    assert coord.heartbeat("g", 1, first.member_id, "x") is E.fenced_instance_id
    assert join(coord, first.member_id, "x").result().error is E.fenced_instance_id
    assert sync(coord, first.member_id, 1, instance_id="x").result().error is E.fenced_instance_id
    assert coord.commit_offsets("g", 1, first.member_id, "x", []) == []
    assert coord.heartbeat("g", 1, second.member_id, "x") is E.none


def test_a_static_member_that_misses_a_rebalance_is_kept_until_its_session_runs_out(
    coord: GroupCoordinator, fake_clock: FakeClock
) -> None:
    a, b = stable_static_pair(coord)
    c_join = join_new(coord)
    a_join = join(coord, a, "a")
    for _ in range(REBALANCE_MS // 5_000 - 1):  # b heartbeats but never rejoins; it is static: kept
        fake_clock.advance(5_000)
        assert coord.heartbeat("g", 2, b, "b") is E.rebalance_in_progress
    fake_clock.advance(5_000)
    coord.tick(fake_clock.monotonic_ms())
    c = c_join.result().member_id
    assert {m.member_id for m in a_join.result().members} == {a, b, c}
    sync(coord, a, 3, {a: b"A", b: b"B", c: b"C"}, "a")
    sync(coord, c, 3)
    assert group_state(coord) is GroupState.STABLE
    # b is still on generation 2: its heartbeats are refused and do not keep its session alive.
    fake_clock.advance(SESSION_MS // 2)
    assert coord.heartbeat("g", 2, b, "b") is E.illegal_generation
    assert coord.heartbeat("g", 3, a, "a") is coord.heartbeat("g", 3, c, None) is E.none
    fake_clock.advance(SESSION_MS // 2)
    coord.tick(fake_clock.monotonic_ms())
    assert b not in coord.group("g").members  # type: ignore[union-attr]
    assert group_state(coord) is GroupState.PREPARING_REBALANCE


def test_a_silent_static_member_expires_after_its_session_timeout(
    coord: GroupCoordinator, fake_clock: FakeClock
) -> None:
    a, b = stable_static_pair(coord)
    fake_clock.advance(SESSION_MS // 2)
    assert coord.heartbeat("g", 2, a, "a") is E.none
    fake_clock.advance(SESSION_MS // 2 - 1)
    coord.tick(fake_clock.monotonic_ms())
    assert b in coord.group("g").members  # type: ignore[union-attr]
    fake_clock.advance(1)
    coord.tick(fake_clock.monotonic_ms())
    assert b not in coord.group("g").members  # type: ignore[union-attr]
    assert coord.group("g").static_members == {"a": a}  # type: ignore[union-attr]
    assert coord.heartbeat("g", 2, a, "a") is E.rebalance_in_progress


def test_batch_leave_by_member_id_and_by_instance_id(coord: GroupCoordinator) -> None:
    a, b = stable_static_pair(coord)
    error, results = coord.leave("g", [("", "b"), ("wrong", "a"), ("nobody", None), ("", "zz")])
    assert error is E.none
    assert results == [
        ("", "b", E.none),
        ("wrong", "a", E.fenced_instance_id),
        ("nobody", None, E.unknown_member_id),
        ("", "zz", E.unknown_member_id),
    ]
    assert set(coord.group("g").members) == {a}  # type: ignore[union-attr]
    assert coord.leave("h", [("x", None)]) == (E.none, [("x", None, E.unknown_member_id)])


def test_static_replacement_is_persisted_and_restored(coord: GroupCoordinator, groups_dir: GroupsDir) -> None:
    a, b = stable_static_pair(coord)
    rejoined = join(coord, instance_id="b").result()
    record = groups_dir.stored()[GroupMetadataKey("g")]
    assert isinstance(record, GroupMetadataValue)
    assert {m.member_id for m in record.members} == {a, rejoined.member_id}
    groups_dir.restart()
    restarted = groups_dir.coordinator()
    assert restarted.heartbeat("g", 2, rejoined.member_id, "b") is E.none
    assert restarted.heartbeat("g", 2, b, "b") is E.fenced_instance_id
