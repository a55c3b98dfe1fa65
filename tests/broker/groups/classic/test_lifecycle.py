"""The classic group state machine, driven directly with a FakeClock (no sockets, no sleeping)."""

from __future__ import annotations

import pytest

from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from kompakt.clock import FakeClock
from kompakt.protocol.codec import ErrorCode
from tests.broker.groups.conftest import GroupsDir

SESSION_MS = 10_000
REBALANCE_MS = 30_000
E = ErrorCode


@pytest.fixture
def coordinator(groups_dir: GroupsDir) -> GroupCoordinator:
    return groups_dir.coordinator(GroupConfig(group_initial_rebalance_delay_ms=0))


def join(
    coordinator: GroupCoordinator,
    member_id: str = "",
    protocols: tuple[str, ...] = ("range",),
    *,
    group_id: str = "g",
    instance_id: str | None = None,
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
) -> Deferred[JoinResult]:
    return coordinator.join(
        JoinRequest(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=REBALANCE_MS,
            protocol_type=protocol_type,
            protocols=tuple((name, f"{name}-meta".encode()) for name in protocols),
            client_id="client",
            client_host="10.0.0.1",
        )
    )


def sync(
    coordinator: GroupCoordinator,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
) -> Deferred[SyncResult]:
    return coordinator.sync("g", generation, member_id, None, None, None, assignments or {})


def state(coordinator: GroupCoordinator) -> GroupState:
    group = coordinator.group("g")
    assert group is not None
    return group.state


def stable_pair(coordinator: GroupCoordinator) -> tuple[str, str, int]:
    """Bring members A (leader) and B to Stable; return their ids and the generation."""
    a = join(coordinator).result()
    sync(coordinator, a.member_id, a.generation_id, {a.member_id: b"A1"})
    b_join = join(coordinator)
    assert not b_join.done and state(coordinator) is GroupState.PREPARING_REBALANCE
    a2 = join(coordinator, a.member_id).result()
    b = b_join.result()
    assert a2.generation_id == b.generation_id == 2
    leader_sync = sync(coordinator, a.member_id, 2, {a.member_id: b"A2", b.member_id: b"B2"})
    assert leader_sync.result().assignment == b"A2"
    assert sync(coordinator, b.member_id, 2).result().assignment == b"B2"
    return a.member_id, b.member_id, 2


def test_single_member_join_sync_heartbeat(coordinator: GroupCoordinator) -> None:
    joined = join(coordinator)
    assert joined.done
    result = joined.result()
    assert result.error is E.none
    assert result.generation_id == 1
    assert result.leader_id == result.member_id
    assert result.member_id.startswith("client-")
    assert result.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in result.members] == [(result.member_id, b"range-meta")]
    assert state(coordinator) is GroupState.COMPLETING_REBALANCE
    synced = sync(coordinator, result.member_id, 1, {result.member_id: b"assignment"})
    assert synced.result() == SyncResult(E.none, "consumer", "range", b"assignment")
    assert state(coordinator) is GroupState.STABLE
    assert coordinator.heartbeat("g", 1, result.member_id, None) is E.none


def test_second_member_triggers_rebalance_and_follower_waits_for_leader(
    coordinator: GroupCoordinator,
) -> None:
    a = join(coordinator).result()
    sync(coordinator, a.member_id, 1, {a.member_id: b"A1"})
    b_join = join(coordinator)
    assert not b_join.done
    assert coordinator.heartbeat("g", 1, a.member_id, None) is E.rebalance_in_progress
    a2 = join(coordinator, a.member_id).result()
    b = b_join.result()
    assert a2.leader_id == b.leader_id == a.member_id
    assert {m.member_id for m in a2.members} == {a.member_id, b.member_id}
    assert b.members == ()
    follower = sync(coordinator, b.member_id, 2)
    assert not follower.done
    assert state(coordinator) is GroupState.COMPLETING_REBALANCE
    leader = sync(coordinator, a.member_id, 2, {a.member_id: b"A", b.member_id: b"B"})
    assert leader.result().assignment == b"A"
    assert follower.result().assignment == b"B"
    assert coordinator.heartbeat("g", 1, a.member_id, None) is E.illegal_generation
    assert coordinator.heartbeat("g", 2, b.member_id, None) is E.none


def test_follower_rejoin_in_stable_with_same_metadata_needs_no_rebalance(
    coordinator: GroupCoordinator,
) -> None:
    _, b, generation = stable_pair(coordinator)
    again = join(coordinator, b).result()
    assert again.generation_id == generation
    assert state(coordinator) is GroupState.STABLE


def test_leave_triggers_rebalance_for_the_rest(coordinator: GroupCoordinator) -> None:
    a, b, _ = stable_pair(coordinator)
    error, results = coordinator.leave("g", [(b, None), ("ghost", None)])
    assert error is E.none
    assert [r[2] for r in results] == [E.none, E.unknown_member_id]
    assert coordinator.heartbeat("g", 2, a, None) is E.rebalance_in_progress
    assert coordinator.heartbeat("g", 2, b, None) is E.unknown_member_id
    rejoined = join(coordinator, a).result()
    assert rejoined.generation_id == 3
    assert [m.member_id for m in rejoined.members] == [a]


def test_last_member_leaving_empties_the_group(coordinator: GroupCoordinator) -> None:
    a = join(coordinator).result()
    coordinator.leave("g", [(a.member_id, None)])
    assert state(coordinator) is GroupState.EMPTY
    assert coordinator.group("g").generation_id == 2  # type: ignore[union-attr]


def test_session_expiry_removes_a_silent_member(coordinator: GroupCoordinator, clock: FakeClock) -> None:
    a, b, _ = stable_pair(coordinator)
    clock.advance(SESSION_MS // 2)
    assert coordinator.heartbeat("g", 2, a, None) is E.none
    clock.advance(SESSION_MS // 2 + 1)
    coordinator.tick(clock.monotonic_ms())
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    assert b not in coordinator.group("g").members  # type: ignore[union-attr]
    assert coordinator.heartbeat("g", 2, a, None) is E.rebalance_in_progress
    assert join(coordinator, a).result().generation_id == 3


def test_expiry_of_every_member_leaves_an_empty_group(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    stable_pair(coordinator)
    clock.advance(SESSION_MS + 1)
    coordinator.tick(clock.monotonic_ms())
    assert state(coordinator) is GroupState.EMPTY
    assert coordinator.group("g").members == {}  # type: ignore[union-attr]


def test_rebalance_timeout_drops_members_that_did_not_rejoin(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a, b, _ = stable_pair(coordinator)
    c_join = join(coordinator)
    a_join = join(coordinator, a)
    for _ in range(3):  # B keeps heartbeating but never rejoins
        clock.advance(9_000)
        coordinator.heartbeat("g", 2, b, None)
        coordinator.tick(clock.monotonic_ms())
    assert not a_join.done
    clock.advance(REBALANCE_MS - 27_000)
    coordinator.tick(clock.monotonic_ms())
    assert a_join.result().generation_id == c_join.result().generation_id == 3
    assert {m.member_id for m in a_join.result().members} == {a, c_join.result().member_id}
    assert coordinator.heartbeat("g", 3, b, None) is E.unknown_member_id


def test_leader_that_never_syncs_is_dropped_after_the_rebalance_timeout(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = join(coordinator).result()
    sync(coordinator, a.member_id, 1)
    b_join = join(coordinator)
    join(coordinator, a.member_id)
    b = b_join.result()
    follower = sync(coordinator, b.member_id, 2)
    clock.advance(REBALANCE_MS)
    coordinator.tick(clock.monotonic_ms())
    assert follower.result().error is E.rebalance_in_progress
    assert a.member_id not in coordinator.group("g").members  # type: ignore[union-attr]
    assert join(coordinator, b.member_id).result().generation_id == 3


def test_initial_rebalance_delay_collects_members(clock: FakeClock, groups_dir: GroupsDir) -> None:
    coordinator = groups_dir.coordinator(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    first = join(coordinator)
    clock.advance(1_000)
    second = join(coordinator)
    clock.advance(2_000)
    coordinator.tick(clock.monotonic_ms())
    # Kafka's tryCompleteInitialRebalanceElseSchedule: a newcomer within the first delay buys
    # one more full delay, so completion moves from +3000 to +6000.
    assert not first.done
    clock.advance(2_999)
    coordinator.tick(clock.monotonic_ms())
    assert not first.done
    clock.advance(1)
    coordinator.tick(clock.monotonic_ms())
    assert first.result().generation_id == second.result().generation_id == 1
    assert len(first.result().members) == 2


def test_protocol_is_chosen_by_vote_among_common_protocols(coordinator: GroupCoordinator) -> None:
    a_join = join(coordinator, protocols=("range", "roundrobin", "sticky"))
    a = a_join.result()
    b_join = join(coordinator, protocols=("roundrobin", "range"))
    c_join = join(coordinator, protocols=("roundrobin", "range"))
    a2 = join(coordinator, a.member_id, protocols=("range", "roundrobin", "sticky")).result()
    assert a2.protocol_name == b_join.result().protocol_name == c_join.result().protocol_name == "roundrobin"


def test_protocol_vote_tie_goes_to_the_leaders_preference(coordinator: GroupCoordinator) -> None:
    a = join(coordinator, protocols=("range", "roundrobin")).result()
    b_join = join(coordinator, protocols=("roundrobin", "range"))
    assert join(coordinator, a.member_id, protocols=("range", "roundrobin")).result().protocol_name == "range"
    assert b_join.result().protocol_name == "range"


def test_join_errors(coordinator: GroupCoordinator) -> None:
    assert join(coordinator, group_id="").result().error is E.invalid_group_id
    assert join(coordinator, session_ms=10).result().error is E.invalid_session_timeout
    assert join(coordinator, "made-up").result().error is E.unknown_member_id
    assert join(coordinator, protocols=()).result().error is E.inconsistent_group_protocol
    join(coordinator, protocols=("range",))
    assert join(coordinator, protocols=("sticky",)).result().error is E.inconsistent_group_protocol
    assert join(coordinator, protocol_type="connect").result().error is E.inconsistent_group_protocol
    assert join(coordinator, "made-up").result().error is E.unknown_member_id


def test_group_max_size(clock: FakeClock, groups_dir: GroupsDir) -> None:
    coordinator = groups_dir.coordinator(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=1))
    join(coordinator)
    assert join(coordinator).result().error is E.group_max_size_reached


def test_sync_and_heartbeat_errors(coordinator: GroupCoordinator) -> None:
    assert sync(coordinator, "x", 1).result().error is E.unknown_member_id
    assert coordinator.heartbeat("g", 1, "x", None) is E.unknown_member_id
    a = join(coordinator).result()
    assert sync(coordinator, a.member_id, 7).result().error is E.illegal_generation
    mismatch = coordinator.sync("g", 1, a.member_id, None, "consumer", "sticky", {})
    assert mismatch.result().error is E.inconsistent_group_protocol
    b_join = join(coordinator)
    assert not b_join.done
    assert sync(coordinator, a.member_id, 1).result().error is E.rebalance_in_progress


def test_static_member_rejoin_fences_the_old_incarnation(coordinator: GroupCoordinator) -> None:
    old = join(coordinator, instance_id="i-1").result()
    assert old.member_id.startswith("i-1-")
    sync(coordinator, old.member_id, 1)
    new_join = join(coordinator, instance_id="i-1")
    new = new_join.result()
    assert new.member_id != old.member_id
    # KIP-345: the known instance takes over in Stable without a rebalance.
    assert (new.generation_id, state(coordinator)) == (1, GroupState.STABLE)
    assert coordinator.heartbeat("g", new.generation_id, old.member_id, "i-1") is E.fenced_instance_id
    assert coordinator.heartbeat("g", new.generation_id, new.member_id, "i-2") is E.unknown_member_id
    assert coordinator.heartbeat("g", new.generation_id, new.member_id, "i-1") is E.none
    error, results = coordinator.leave("g", [("", "i-1")])
    assert results == [("", "i-1", E.none)]
    assert state(coordinator) is GroupState.EMPTY


def test_pending_join_of_a_leaving_member_is_answered(coordinator: GroupCoordinator) -> None:
    a = join(coordinator).result()
    sync(coordinator, a.member_id, 1)
    b_join = join(coordinator)
    b_id = coordinator.group("g").members  # type: ignore[union-attr]
    b_member = next(m for m in b_id if m != a.member_id)
    coordinator.leave("g", [(b_member, None)])
    assert b_join.result().error is E.unknown_member_id


def test_deferred_map_failure_reaches_the_waiter_and_spares_other_callbacks() -> None:
    source: Deferred[int] = Deferred()
    broken = source.map(lambda value: 1 // (value - value))
    doubled = source.map(lambda value: value * 2)
    seen: list[int] = []
    source.add_done_callback(lambda d: seen.append(d.result()))
    source.resolve(21)
    with pytest.raises(ZeroDivisionError):
        broken.result()
    assert doubled.result() == 42
    assert seen == [21]
    with pytest.raises(RuntimeError):
        source.resolve(1)
