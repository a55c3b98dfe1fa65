"""KIP-848 consumer groups through the wire: join, reconcile, expire, commit, convert, restore.

A FakeClock drives sessions and rebalance timeouts (``tick``); the broker has a real LogManager,
so the group's records go to ``__consumer_offsets`` and a second broker over the same directory
restores the group from them, also after the cleaner has compacted them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import OFFSETS_TOPIC, Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.broker.groups.config import ConsumerGroupConfig
from kompakt.cleaner.offline import compact_directory
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call

NOW_MS = 1_700_000_000_000
SESSION_MS = 45_000
TOPIC = "orders"


class Cluster:
    """A broker over a data directory that can be reopened (a restart)."""

    def __init__(self, data_dir: Path, clock: FakeClock) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self.open()

    def open(self) -> None:
        self.logs = LogManager(
            self.data_dir, BrokerConfig.from_properties({"offsets.topic.num.partitions": "3"}), self.clock
        )
        self.logs.open()
        self.broker = Broker.create(
            clock=self.clock,
            group_config=GroupConfig(group_initial_rebalance_delay_ms=0),
            consumer_group_config=ConsumerGroupConfig(),
            log_manager=self.logs,
        )
        self.dispatcher = Dispatcher(self.broker)

    def restart(self) -> None:
        self.logs.close()
        self.open()

    def topic_id(self, name: str = TOPIC) -> uuid.UUID:
        return self.logs.topics()[name].topic_id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def cluster(tmp_path: Path, clock: FakeClock) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "data", clock)
    c.logs.create_topic(TOPIC, 4)
    yield c
    c.logs.close()


def heartbeat(
    c: Cluster,
    member_id: str,
    epoch: int,
    *,
    topics: list[str] | None = None,
    owned: list[int] | None = None,
    group: str = "g",
    assignor: str | None = None,
    instance_id: str | None = None,
) -> Any:
    values: dict[str, object] = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": instance_id,
        "rack_id": None,
        "rebalance_timeout": 30_000 if epoch == 0 else -1,
        "subscribed_topic_names": topics,
        "subscribed_topic_regex": None,
        "server_assignor": assignor,
        "topic_partitions": None
        if owned is None
        else ([{"topic_id": c.topic_id(), "partitions": owned}] if owned else []),
    }
    return call(c.dispatcher, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, values)


def assigned(response: Any) -> list[int]:
    assert response.assignment is not None, response
    return sorted(p for tp in response.assignment.topic_partitions for p in tp.partitions)


def join(c: Cluster, member_id: str, **kwargs: Any) -> Any:
    response = heartbeat(c, member_id, 0, topics=[TOPIC], owned=[], **kwargs)
    assert response.error_code is E.none, response
    return response


def describe(c: Cluster, group: str = "g") -> Any:
    return call(
        c.dispatcher,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        1,
        {"group_ids": [group], "include_authorized_operations": True},
    ).groups[0]


def test_two_members_reconcile_revoking_before_assigning(cluster: Cluster) -> None:
    first = join(cluster, "m1")
    assert (first.member_epoch, assigned(first)) == (1, [0, 1, 2, 3])
    second = join(cluster, "m2")
    # m2 is at epoch 2 but its partitions still belong to m1: none yet (UNRELEASED_PARTITIONS)
    assert (second.member_epoch, assigned(second)) == (2, [])
    # m1's next heartbeat asks it to revoke two partitions; it stays in epoch 1 meanwhile
    revoke = heartbeat(cluster, "m1", 1, owned=[0, 1, 2, 3])
    assert revoke.member_epoch == 1 and len(assigned(revoke)) == 2
    kept = assigned(revoke)
    assert describe(cluster).group_state == "Reconciling"
    done = heartbeat(cluster, "m1", 1, owned=kept)
    assert done.member_epoch == 2
    got = heartbeat(cluster, "m2", 2, owned=[])
    assert sorted(assigned(got) + kept) == [0, 1, 2, 3]
    group = describe(cluster)
    assert (group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "Stable",
        2,
        2,
        "uniform",
    )
    assert group.authorized_operations == 3400
    assert {m.member_id: m.member_epoch for m in group.members} == {"m1": 2, "m2": 2}
    assert {m.member_type for m in group.members} == {1}


def test_session_expiry_fences_a_silent_member(cluster: Cluster, clock: FakeClock) -> None:
    join(cluster, "m1")
    heartbeat(cluster, "m1", 1, owned=[0, 1, 2, 3])
    join(cluster, "m2")
    kept = assigned(heartbeat(cluster, "m1", 1, owned=[0, 1, 2, 3]))
    heartbeat(cluster, "m1", 1, owned=kept)
    clock.advance(SESSION_MS - 1_000)
    heartbeat(cluster, "m1", 2, owned=kept)  # m1 keeps heartbeating, m2 goes silent
    clock.advance(2_000)
    cluster.broker.groups.tick(clock.monotonic_ms())
    assert [m.member_id for m in describe(cluster).members] == ["m1"]
    back = heartbeat(cluster, "m1", 2, owned=kept)
    assert (back.member_epoch, assigned(back)) == (3, [0, 1, 2, 3])
    assert heartbeat(cluster, "m2", 2, owned=[]).error_code is E.unknown_member_id


def test_epoch_checks(cluster: Cluster) -> None:
    join(cluster, "m1")
    assert heartbeat(cluster, "m1", 5, owned=[]).error_code is E.fenced_member_epoch
    assert heartbeat(cluster, "nobody", 1, owned=[]).error_code is E.unknown_member_id
    assert heartbeat(cluster, "", 0, topics=[TOPIC], owned=[]).error_code is E.invalid_request
    assert (
        heartbeat(cluster, "m3", 0, topics=[TOPIC], owned=[], assignor="sticky").error_code
        is E.unsupported_assignor
    )
    assert heartbeat(cluster, "m4", 1, owned=[], group="other").error_code is E.group_id_not_found


def commit(c: Cluster, member_id: str, epoch: int, version: int = 9, offset: int = 7) -> Any:
    values = {
        "group_id": "g",
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    response = call(c.dispatcher, ApiKey.OFFSET_COMMIT, version, values)
    return response.topics[0].partitions[0].error_code


def fetch(c: Cluster, member_id: str | None, epoch: int) -> Any:
    values = {
        "groups": [
            {
                "group_id": "g",
                "member_id": member_id,
                "member_epoch": epoch,
                "topics": [{"name": TOPIC, "partition_indexes": [0]}],
            }
        ],
        "require_stable": False,
    }
    return call(c.dispatcher, ApiKey.OFFSET_FETCH, 9, values).groups[0]


def test_offset_commit_and_fetch_use_the_member_epoch(cluster: Cluster) -> None:
    join(cluster, "m1")
    assert commit(cluster, "m1", 1) is E.none
    assert commit(cluster, "m1", 0) is E.stale_member_epoch
    assert commit(cluster, "m1", 1, version=8) is E.unsupported_version
    assert commit(cluster, "ghost", 1) is E.unknown_member_id
    assert fetch(cluster, "m1", 0).error_code is E.stale_member_epoch
    good = fetch(cluster, "m1", 1)
    assert (good.error_code, good.topics[0].partitions[0].committed_offset) == (E.none, 7)
    assert fetch(cluster, None, -1).topics[0].partitions[0].committed_offset == 7  # the admin client's fetch


def test_leave_and_static_member_temporary_leave(cluster: Cluster) -> None:
    join(cluster, "m1", instance_id="i1")
    join(cluster, "m2")
    left = heartbeat(cluster, "m2", -1)
    assert (left.error_code, left.member_epoch) == (E.none, -1)
    away = heartbeat(cluster, "m1", -2, instance_id="i1")
    assert (away.error_code, away.member_epoch) == (E.none, -2)
    # a new incarnation of i1 takes over its partitions without waiting for a session timeout
    back = join(cluster, "m1b", instance_id="i1")
    assert assigned(back) == [0, 1, 2, 3]
    assert [m.member_id for m in describe(cluster).members] == ["m1b"]
    # while i1 is held by a live member, another one is refused
    assert (
        heartbeat(cluster, "m1c", 0, topics=[TOPIC], owned=[], instance_id="i1").error_code
        is E.unreleased_instance_id
    )


def test_range_assignor_on_request(cluster: Cluster) -> None:
    join(cluster, "a", assignor="range")
    join(cluster, "b", assignor="range")
    group = describe(cluster)
    assert group.assignor_name == "range"
    targets = {
        m.member_id: sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions)
        for m in group.members
    }
    assert targets == {"a": [0, 1], "b": [2, 3]}


def test_a_new_partition_bumps_the_group_epoch(cluster: Cluster) -> None:
    join(cluster, "m1")
    cluster.logs.create_partitions(TOPIC, 6)
    response = heartbeat(cluster, "m1", 1, owned=[0, 1, 2, 3])
    assert (response.member_epoch, assigned(response)) == (2, [0, 1, 2, 3, 4, 5])


def join_group(c: Cluster, group: str, protocol_type: str = "consumer") -> Any:
    values = {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": protocol_type,
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }
    response = call(c.dispatcher, ApiKey.JOIN_GROUP, 5, values)
    if response.error_code is E.member_id_required:  # KIP-394: rejoin with the id handed out
        response = call(c.dispatcher, ApiKey.JOIN_GROUP, 5, values | {"member_id": response.member_id})
    return response


def list_groups(c: Cluster) -> dict[str, tuple[str, str]]:
    response = call(c.dispatcher, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    return {g.group_id: (g.protocol_type, g.group_state) for g in response.groups}


def test_both_protocols_side_by_side_and_empty_groups_convert(cluster: Cluster) -> None:
    assert join_group(cluster, "classic").error_code is E.none
    join(cluster, "m1", group="modern")
    assert list_groups(cluster) == {
        "classic": ("consumer", "CompletingRebalance"),
        "modern": ("consumer", "Stable"),
    }
    listing = {g.group_id: g.group_type for g in cluster.broker.groups.list_groups()}
    assert listing == {"classic": "classic", "modern": "consumer"}
    # a heartbeat cannot take over a classic group whose members' metadata is no consumer
    # subscription, a JoinGroup not a consumer group with another protocol type (the online
    # migration of groups that can be converted is tested in test_migration.py)
    assert (
        heartbeat(cluster, "m9", 0, topics=[TOPIC], owned=[], group="classic").error_code
        is E.group_id_not_found
    )
    assert join_group(cluster, "modern", protocol_type="connect").error_code is E.inconsistent_group_protocol
    assert describe(cluster, "classic").error_code is E.group_id_not_found
    described = call(
        cluster.dispatcher,
        ApiKey.DESCRIBE_GROUPS,
        5,
        {"groups": ["modern"], "include_authorized_operations": False},
    )
    assert described.groups[0].group_state == "Dead"
    # once empty, the consumer group becomes a classic group on JoinGroup, keeping its offsets
    assert commit_simple(cluster, "modern") is E.unknown_member_id  # it has a member
    heartbeat(cluster, "m1", -1, group="modern")
    assert commit_simple(cluster, "modern") is E.none
    assert join_group(cluster, "modern").error_code is E.none
    assert not cluster.broker.groups.consumer.has_group("modern")
    assert cluster.broker.groups.fetch_offsets("modern", [(TOPIC, 1)])[0][2] is not None
    # and an empty classic group becomes a consumer group on the first heartbeat
    assert commit_simple(cluster, "simple") is E.none
    join(cluster, "m2", group="simple")
    assert list_groups(cluster)["simple"] == ("consumer", "Stable")


def commit_simple(c: Cluster, group: str) -> Any:
    values = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 1,
                        "committed_offset": 3,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    return call(c.dispatcher, ApiKey.OFFSET_COMMIT, 9, values).topics[0].partitions[0].error_code


def snapshot(c: Cluster) -> tuple[Any, ...]:
    group = describe(c)
    return (
        group.group_state,
        group.group_epoch,
        group.assignment_epoch,
        sorted(
            (
                m.member_id,
                m.member_epoch,
                tuple(sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)),
            )
            for m in group.members
        ),
    )


def test_a_restart_restores_the_group_and_members_carry_on(cluster: Cluster) -> None:
    join(cluster, "m1")
    join(cluster, "m2")
    kept = assigned(heartbeat(cluster, "m1", 1, owned=[0, 1, 2, 3]))
    heartbeat(cluster, "m1", 1, owned=kept)
    commit(cluster, "m1", 2, offset=11)
    before = snapshot(cluster)
    cluster.restart()
    assert snapshot(cluster) == before
    # m1 carries on with its epoch; m2 still gets what m1 released
    assert heartbeat(cluster, "m1", 2, owned=kept).error_code is E.none
    got = heartbeat(cluster, "m2", 2, owned=[])
    assert sorted(assigned(got) + kept) == [0, 1, 2, 3]
    assert fetch(cluster, "m1", 2).topics[0].partitions[0].committed_offset == 11


def test_compacted_records_after_churn_still_restore(cluster: Cluster, clock: FakeClock) -> None:
    join(cluster, "stay")
    for i in range(20):  # members come and go; their tombstones pile up
        join(cluster, f"tmp-{i}")
        heartbeat(cluster, f"tmp-{i}", -1)
        heartbeat(cluster, "stay", describe(cluster).members[0].member_epoch, owned=[0, 1, 2, 3])
    before = snapshot(cluster)
    partition = cluster.broker.groups.partition_of("g")
    log = cluster.logs.get_log(OFFSETS_TOPIC, partition)
    records_before = log.log_end_offset
    log.roll()
    cluster.logs.close()
    clock.advance(2 * 86_400_000)  # past delete.retention.ms: tombstones go too
    (result,) = [
        r
        for r in compact_directory(cluster.data_dir, clock=clock)
        if r.partition == partition and r.topic == OFFSETS_TOPIC
    ]
    cluster.open()
    kept = sum(1 for _ in iter_offsets(cluster, partition))
    assert kept < records_before / 4, (kept, records_before, result)
    assert snapshot(cluster) == before
    assert heartbeat(cluster, "stay", before[3][0][1], owned=[0, 1, 2, 3]).error_code is E.none


def iter_offsets(c: Cluster, partition: int) -> Iterator[int]:
    from kompakt.records.batch import iter_batches
    from kompakt.records.record import decode_records

    log = c.logs.get_log(OFFSETS_TOPIC, partition)
    data = log.read(log.log_start_offset, 1 << 22, max_offset=log.log_end_offset).records
    for batch in iter_batches(data):
        for record in decode_records(batch):
            yield record.offset
