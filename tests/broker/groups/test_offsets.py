"""Committed offsets: the coordinator's rules for both group types, OffsetCommit/OffsetFetch per version."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    OffsetCommitEntry,
)
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.groups.conftest import GroupsDir
from tests.support.wire import call


def entry(partition: int = 0, offset: int = 10, metadata: str | None = "m") -> OffsetCommitEntry:
    return OffsetCommitEntry("t", partition, offset, 3, metadata)


def join_one(coordinator: GroupCoordinator, group_id: str = "g", session_ms: int = 10_000) -> tuple[str, int]:
    result = coordinator.join(
        JoinRequest(group_id, "", None, session_ms, 10_000, "consumer", (("range", b""),), "c", "h")
    ).result()
    return result.member_id, result.generation_id


@pytest.fixture
def coordinator(groups_dir: GroupsDir) -> GroupCoordinator:
    return groups_dir.coordinator(GroupConfig(group_initial_rebalance_delay_ms=0))


def test_simple_commit_creates_an_empty_group(coordinator: GroupCoordinator, clock: FakeClock) -> None:
    assert coordinator.commit_offsets("g", -1, "", None, [entry()]) == [E.none]
    assert coordinator.group("g").state is GroupState.EMPTY  # type: ignore[union-attr]
    ((topic, partition, committed),) = coordinator.fetch_offsets("g", None)
    assert (topic, partition) == ("t", 0)
    assert committed is not None
    assert (committed.offset, committed.leader_epoch, committed.metadata) == (10, 3, "m")
    assert committed.commit_timestamp_ms == clock.now_ms()


def test_commit_rules_follow_the_generation(coordinator: GroupCoordinator) -> None:
    assert coordinator.commit_offsets("g", 5, "m", None, [entry()]) == [E.illegal_generation]
    member, generation = join_one(coordinator)
    # CompletingRebalance: the assignment is not known yet.
    assert coordinator.commit_offsets("g", generation, member, None, [entry()]) == [E.rebalance_in_progress]
    coordinator.sync("g", generation, member, None, None, None, {member: b""})
    assert coordinator.commit_offsets("g", generation, member, None, [entry()]) == [E.none]
    assert coordinator.commit_offsets("g", generation + 1, member, None, [entry()]) == [E.illegal_generation]
    assert coordinator.commit_offsets("g", generation, "other", None, [entry()]) == [E.unknown_member_id]
    assert coordinator.commit_offsets("g", -1, "", None, [entry()]) == [E.unknown_member_id]
    assert coordinator.commit_offsets("", -1, "", None, [entry()]) == [E.invalid_group_id]


def test_metadata_too_large_is_per_partition(coordinator: GroupCoordinator) -> None:
    results = coordinator.commit_offsets("g", -1, "", None, [entry(0, metadata="x" * 5000), entry(1)])
    assert results == [E.offset_metadata_too_large, E.none]
    assert [p for _, p, _ in coordinator.fetch_offsets("g", None)] == [1]


def test_fetch_unknown_partitions_gives_none(coordinator: GroupCoordinator) -> None:
    assert coordinator.fetch_offsets("nobody", [("t", 0)]) == [("t", 0, None)]


def test_offsets_expire_only_for_groups_without_members(clock: FakeClock, groups_dir: GroupsDir) -> None:
    # A retention shorter than the member's session, so the member outlives it without heartbeats.
    config = GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=10)
    coordinator = groups_dir.coordinator(config)
    coordinator.commit_offsets("idle", -1, "", None, [entry()])
    member, generation = join_one(coordinator, "busy", session_ms=config.group_max_session_timeout_ms)
    coordinator.sync("busy", generation, member, None, None, None, {})
    coordinator.commit_offsets("busy", generation, member, None, [entry()])
    retention_ms = coordinator.config.offsets_retention_ms
    coordinator.tick(clock.monotonic_ms())  # arms the periodic check
    clock.advance(retention_ms)
    coordinator.heartbeat("busy", generation, member, None)
    coordinator.tick(clock.monotonic_ms())
    assert coordinator.fetch_offsets("idle", None) == []
    assert coordinator.group("idle") is None
    assert len(coordinator.fetch_offsets("busy", None)) == 1


def test_explicit_retention_from_old_versions(coordinator: GroupCoordinator, clock: FakeClock) -> None:
    coordinator.commit_offsets("g", -1, "", None, [entry()], retention_ms=1_000)
    clock.advance(1_000)
    assert coordinator.expire_offsets() == 1


def test_delete_list_describe(coordinator: GroupCoordinator) -> None:
    coordinator.commit_offsets("idle", -1, "", None, [entry()])
    member, generation = join_one(coordinator, "busy")
    assert coordinator.delete_groups(["busy", "idle", "nope", ""]) == [
        ("busy", E.non_empty_group),
        ("idle", E.none),
        ("nope", E.group_id_not_found),
        ("", E.invalid_group_id),
    ]
    assert coordinator.fetch_offsets("idle", None) == []
    assert [(g.group_id, g.state) for g in coordinator.list_groups()] == [("busy", "CompletingRebalance")]
    assert coordinator.list_groups(["stable"]) == []
    described = coordinator.describe("busy")
    assert described.protocol_data == "" and described.members[0].metadata == b""
    coordinator.sync("busy", generation, member, None, None, None, {member: b"assigned"})
    described = coordinator.describe("busy")
    assert (described.state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert described.members[0].assignment == b"assigned"
    assert described.members[0].client_host == "h"
    assert coordinator.describe("nope").state == "Dead"


# -- through the handlers, per version ---------------------------------------------------------------


def commit_values(offset: int, partitions: tuple[int, ...] = (0, 1)) -> dict[str, object]:
    return {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offset + p,
                        "committed_leader_epoch": 7,
                        "committed_metadata": f"meta-{p}",
                    }
                    for p in partitions
                ],
            }
        ],
    }


@pytest.mark.parametrize("commit_version", range(2, 9))
@pytest.mark.parametrize("fetch_version", range(1, 9))
def test_commit_then_fetch_across_versions(
    dispatcher: Dispatcher, commit_version: int, fetch_version: int
) -> None:
    committed = call(dispatcher, ApiKey.OFFSET_COMMIT, commit_version, commit_values(100))
    assert [p.error_code for p in committed.topics[0].partitions] == [E.none, E.none]
    topics = [{"name": "t", "partition_indexes": [0, 1, 2]}]
    values = {"group_id": "g", "topics": topics, "groups": [{"group_id": "g", "topics": topics}]}
    response = call(dispatcher, ApiKey.OFFSET_FETCH, fetch_version, values)
    topic = response.groups[0].topics[0] if fetch_version >= 8 else response.topics[0]
    got = [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in topic.partitions]
    assert got == [(0, 100, "meta-0", E.none), (1, 101, "meta-1", E.none), (2, -1, "", E.none)]
    if fetch_version >= 5:
        expected_epoch = 7 if commit_version >= 6 else -1
        assert [p.committed_leader_epoch for p in topic.partitions] == [expected_epoch, expected_epoch, -1]


@pytest.mark.parametrize("version", range(2, 9))
def test_fetch_all_partitions_with_null_topics(dispatcher: Dispatcher, version: int) -> None:
    call(dispatcher, ApiKey.OFFSET_COMMIT, 8, commit_values(5, (0, 3)))
    values = {"group_id": "g", "topics": None, "groups": [{"group_id": "g", "topics": None}]}
    response = call(dispatcher, ApiKey.OFFSET_FETCH, version, values)
    topics = response.groups[0].topics if version >= 8 else response.topics
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in topics] == [
        ("t", [(0, 5), (3, 8)])
    ]


def test_fetch_v8_batches_groups(dispatcher: Dispatcher) -> None:
    call(dispatcher, ApiKey.OFFSET_COMMIT, 8, commit_values(1))
    values = {
        "groups": [
            {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]},
            {"group_id": "other", "topics": None},
        ]
    }
    response = call(dispatcher, ApiKey.OFFSET_FETCH, 8, values)
    assert [(g.group_id, g.error_code) for g in response.groups] == [("g", E.none), ("other", E.none)]
    assert response.groups[0].topics[0].partitions[0].committed_offset == 1
    assert response.groups[1].topics == ()


def test_commit_to_unknown_partition(clock: FakeClock, tmp_path: Path) -> None:
    log_manager = LogManager(tmp_path, BrokerConfig(), clock)
    log_manager.open()
    log_manager.create_topic("t", 1)  # only partition 0 exists
    try:
        broker = Broker.create(clock=clock, log_manager=log_manager)
        response = call(Dispatcher(broker), ApiKey.OFFSET_COMMIT, 8, commit_values(1))
    finally:
        log_manager.close()
    assert [p.error_code for p in response.topics[0].partitions] == [E.none, E.unknown_topic_or_partition]


def test_group_commit_through_handlers(dispatcher: Dispatcher, broker: Broker) -> None:
    member, generation = join_one(broker.groups)
    broker.groups.sync("g", generation, member, None, None, None, {})
    values = commit_values(50) | {"generation_id_or_member_epoch": generation, "member_id": member}
    response = call(dispatcher, ApiKey.OFFSET_COMMIT, 2, values)
    assert [p.error_code for p in response.topics[0].partitions] == [E.none, E.none]
    stale = commit_values(50) | {"generation_id_or_member_epoch": generation + 1, "member_id": member}
    response = call(dispatcher, ApiKey.OFFSET_COMMIT, 8, stale)
    assert [p.error_code for p in response.topics[0].partitions] == [E.illegal_generation] * 2
