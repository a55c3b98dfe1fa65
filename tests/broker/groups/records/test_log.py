"""``GroupLog`` and what the coordinator keeps in it: Kafka's layout of ``__consumer_offsets``,
one batch per operation, tombstones, and everything surviving a restart (a real log in tmp_path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig, GroupCoordinator, GroupLog, JoinRequest, OffsetCommitEntry
from kompakt.broker.groups.records.log import OFFSETS_TOPIC, LoadedRecord, TxnMarker
from kompakt.broker.groups.records.placement import partition_for
from kompakt.broker.groups.records.schemas import (
    CommittedOffset,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    encode_key,
    encode_value,
)
from kompakt.broker.groups.result import Producer
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import iter_batches
from kompakt.records.record import Record, decode_records
from tests.support.wire import call


def open_manager(data_dir: Path, clock: FakeClock, partitions: int = 4) -> LogManager:
    config = BrokerConfig.from_properties({"offsets.topic.num.partitions": str(partitions)})
    manager = LogManager(data_dir, config, clock)
    manager.open()
    return manager


def records_of(manager: LogManager, partition: int) -> list[Record]:
    """Every record of one partition, across segments (one read returns one segment at most)."""
    partition_log = manager.get_log(OFFSETS_TOPIC, partition)
    records: list[Record] = []
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        batches = list(iter_batches(partition_log.read(offset, 1 << 20).records))
        assert batches
        records.extend(r for batch in batches for r in decode_records(batch))
        offset = batches[-1].next_offset
    return records


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def start(manager: LogManager, clock: FakeClock, config: GroupConfig | None = None) -> GroupCoordinator:
    coordinator = GroupCoordinator(config or GroupConfig(), clock, GroupLog(manager, clock))
    coordinator.load()
    return coordinator


def commit(
    coordinator: GroupCoordinator,
    group: str,
    topic: str,
    partition: int,
    offset: int,
    metadata: str | None = "",
    leader_epoch: int = 0,
    retention_ms: int | None = None,
) -> None:
    entry = OffsetCommitEntry(topic, partition, offset, leader_epoch, metadata)
    assert coordinator.commit_offsets(group, -1, "", None, [entry], retention_ms) == [E.none]


def committed(coordinator: GroupCoordinator, group: str) -> dict[tuple[str, int], CommittedOffset]:
    return {(t, p): c for t, p, c in coordinator.fetch_offsets(group, None) if c is not None}


def test_commit_survives_restart(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    coordinator = start(manager, clock)
    assert OFFSETS_TOPIC not in manager.topics()  # created on first use only
    commit(coordinator, "g", "t", 0, 10, "meta", 3)
    clock.advance(1)
    commit(coordinator, "g", "t", 0, 12, None, 3)
    second = clock.now_ms()
    clock.advance(1)
    commit(coordinator, "g", "t", 1, 20, "x", -1, retention_ms=99_000)
    commit(coordinator, "h", "u", 0, 5, "", 0)
    meta = manager.topics()[OFFSETS_TOPIC]
    assert meta.partitions == 4
    assert meta.configs == {
        "cleanup.policy": "compact",
        "segment.bytes": "104857600",
        "compression.type": "producer",
    }
    assert manager.topic_config(OFFSETS_TOPIC).compact
    before = {g: committed(coordinator, g) for g in ("g", "h")}
    manager.close()

    manager = open_manager(data_dir, clock, partitions=50)  # the existing topic's count wins
    coordinator = start(manager, clock)
    assert GroupLog(manager, clock).num_partitions == 4
    assert {g: committed(coordinator, g) for g in ("g", "h")} == before
    assert committed(coordinator, "g")[("t", 0)] == CommittedOffset(12, 3, "", second, None)
    assert committed(coordinator, "g")[("t", 1)].expire_timestamp_ms == clock.now_ms() + 99_000
    assert coordinator.offsets.groups() == {"g", "h"}
    assert coordinator.fetch_offsets("g", [("t", 1)]) == [("t", 1, before["g"][("t", 1)])]
    manager.close()


def test_records_are_in_the_group_partition(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    coordinator = start(manager, clock)
    entries = [OffsetCommitEntry("t", p, p, 1, "m") for p in range(3)]
    assert coordinator.commit_offsets("group-a", -1, "", None, entries) == [E.none] * 3
    partition = partition_for("group-a", 4)
    assert coordinator.partition_of("group-a") == partition
    records = records_of(manager, partition)
    assert [r.key for r in records] == [encode_key(OffsetCommitKey("group-a", "t", p)) for p in range(3)]
    assert records[0].value == encode_value(CommittedOffset(0, 1, "m", clock.now_ms()))
    assert all(r.timestamp == clock.now_ms() for r in records)
    # one commit request -> one batch
    data = manager.get_log(OFFSETS_TOPIC, partition).read(0, 1 << 20).records
    assert len(list(iter_batches(data))) == 1
    manager.close()


def test_delete_group_writes_tombstones(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    coordinator = start(manager, clock)
    commit(coordinator, "g", "t", 0, 1)
    commit(coordinator, "g", "t", 1, 2)
    commit(coordinator, "keep", "t", 0, 3)
    assert coordinator.delete_groups(["g"]) == [("g", E.none)]
    assert coordinator.delete_groups(["g"]) == [("g", E.group_id_not_found)]
    assert committed(coordinator, "g") == {}
    tail = records_of(manager, partition_for("g", 4))[-3:]
    assert [(r.key, r.value) for r in tail] == [
        (encode_key(OffsetCommitKey("g", "t", 0)), None),
        (encode_key(OffsetCommitKey("g", "t", 1)), None),
        (encode_key(GroupMetadataKey("g")), None),
    ]
    manager.close()
    manager = open_manager(data_dir, clock)
    assert start(manager, clock).offsets.groups() == {"keep"}
    manager.close()


def test_expire_writes_tombstones(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    config = GroupConfig(offsets_retention_minutes=1, group_initial_rebalance_delay_ms=0)
    coordinator = start(manager, clock, config)
    commit(coordinator, "old", "t", 0, 1)
    commit(coordinator, "explicit", "t", 0, 1, retention_ms=5_000)
    commit(coordinator, "active", "t", 0, 1)
    clock.advance(50_000)
    commit(coordinator, "old", "t", 1, 1)
    join = coordinator.join(
        JoinRequest("active", "", None, 600_000, 1_000, "consumer", (("range", b""),), "c", "h")
    )
    assert join.result().error is E.none  # "active" has a member: it keeps its offsets
    clock.advance(10_000)
    assert coordinator.expire_offsets() == 2
    assert set(committed(coordinator, "old")) == {("t", 1)}
    assert coordinator.offsets.groups() == {"old", "active"}
    last = records_of(manager, partition_for("old", 4))[-1]
    assert (last.key, last.value) == (encode_key(OffsetCommitKey("old", "t", 0)), None)
    explicit = [
        r for r in records_of(manager, partition_for("explicit", 4)) if r.key and b"explicit" in r.key
    ]
    assert explicit[-1].value is None
    manager.close()
    manager = open_manager(data_dir, clock)
    coordinator = start(manager, clock, config)
    assert coordinator.offsets.groups() == {"old", "active"}
    assert set(committed(coordinator, "old")) == {("t", 1)}
    manager.close()


def test_group_metadata_and_topic_deletion(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    coordinator = start(manager, clock, GroupConfig(group_initial_rebalance_delay_ms=0))
    request = JoinRequest("g", "", None, 600_000, 1_000, "consumer", (("range", b""),), "c", "h")
    member = coordinator.join(request).result()
    assert coordinator.leave("g", [(member.member_id, None)]) == (E.none, [(member.member_id, None, E.none)])
    record = GroupLogView(manager, clock).latest(GroupMetadataKey("g"))
    assert isinstance(record, GroupMetadataValue) and record.generation == 2 and record.members == ()
    commit(coordinator, "g", "gone", 0, 1)
    commit(coordinator, "g", "gone", 1, 1)
    commit(coordinator, "g", "kept", 0, 1)
    coordinator.on_topic_deleted("gone", [0, 1])
    assert set(committed(coordinator, "g")) == {("kept", 0)}
    manager.close()
    manager = open_manager(data_dir, clock)
    coordinator = start(manager, clock)
    group = coordinator.group("g")
    assert group is not None and group.persisted == record and group.generation_id == 2
    assert set(committed(coordinator, "g")) == {("kept", 0)}
    assert coordinator.delete_groups(["g"]) == [("g", E.none)]
    assert coordinator.group("g") is None
    assert GroupLogView(manager, clock).latest(GroupMetadataKey("g")) is None
    manager.close()


def test_load_skips_garbage_records(data_dir: Path, clock: FakeClock) -> None:
    from kompakt.records.builder import SimpleRecord, build_batch

    manager = open_manager(data_dir, clock, partitions=1)
    coordinator = start(manager, clock)
    commit(coordinator, "g", "t", 0, 1)
    manager.get_log(OFFSETS_TOPIC, 0).append(
        build_batch(
            [
                SimpleRecord(b"\x00\x01\x00", b"junk"),
                SimpleRecord(encode_key(OffsetCommitKey("g", "t", 1)), b"\x00"),
            ]
        )
    )
    assert set(committed(start(manager, clock), "g")) == {("t", 0)}
    manager.close()


def test_transactional_batches_and_markers_are_read_back(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock, partitions=1)
    group_log = GroupLog(manager, clock)
    key = OffsetCommitKey("g", "t", 0)
    group_log.append([(key, CommittedOffset(5, 0, "", 1))], Producer(7, 2))
    [loaded] = list(group_log.load())
    assert loaded == LoadedRecord(0, key, CommittedOffset(5, 0, "", 1), producer_id=7)
    batch = next(iter_batches(manager.get_log(OFFSETS_TOPIC, 0).read(0, 1 << 20).records))
    assert (batch.is_transactional, batch.producer_id, batch.producer_epoch) == (True, 7, 2)
    manager.close()
    assert TxnMarker(0, 7, True) != TxnMarker(0, 7, False)


class GroupLogView:
    """What the log says of one key now (its latest record)."""

    def __init__(self, manager: LogManager, clock: FakeClock) -> None:
        self.items = [i for i in GroupLog(manager, clock).load() if isinstance(i, LoadedRecord)]

    def latest(self, key: object) -> object:
        values = [i.value for i in self.items if i.key == key]
        return values[-1] if values else None


def test_offsets_through_handlers_survive_restart(data_dir: Path, clock: FakeClock) -> None:
    """OffsetCommit/OffsetFetch through the dispatcher, across a restart."""

    def start_broker() -> tuple[LogManager, Dispatcher]:
        manager = open_manager(data_dir, clock)
        if "t" not in manager.topics():
            manager.create_topic("t", 2)
        broker = Broker.create(
            clock=clock, log_manager=manager, group_config=GroupConfig(group_initial_rebalance_delay_ms=0)
        )
        return manager, Dispatcher(broker)

    manager, dispatcher = start_broker()
    commit = call(
        dispatcher,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": "standalone",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": "a"},
                        {"partition_index": 1, "committed_offset": 6, "committed_metadata": None},
                    ],
                }
            ],
        },
    )
    assert [p.error_code for p in commit.topics[0].partitions] == [E.none, E.none]
    manager.close()

    manager, dispatcher = start_broker()
    fetched = call(
        dispatcher,
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": "standalone", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
    )
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
        (0, 5, "a"),
        (1, 6, ""),
    ]
    manager.close()


def test_group_metadata_and_offset_expiry_through_handlers(data_dir: Path, clock: FakeClock) -> None:
    """A rebalance persists the group, OffsetCommit writes one batch, expiry writes tombstones, and
    a restart restores the Stable group and what did not expire (handlers, FakeClock, real log)."""
    config = GroupConfig(
        group_initial_rebalance_delay_ms=0,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=1_000,
    )

    def start_broker() -> tuple[LogManager, Dispatcher, Broker]:
        manager = open_manager(data_dir, clock)
        if "t" not in manager.topics():
            manager.create_topic("t", 2)
        broker = Broker.create(clock=clock, log_manager=manager, group_config=config)
        return manager, Dispatcher(broker), broker

    def commit(dispatcher: Dispatcher, group: str, generation: int, member: str, offset: int) -> None:
        partitions = [{"partition_index": p, "committed_offset": offset + p} for p in (0, 1)]
        response = call(
            dispatcher,
            ApiKey.OFFSET_COMMIT,
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": generation,
                "member_id": member,
                "topics": [{"name": "t", "partitions": partitions}],
            },
        )
        assert [p.error_code for p in response.topics[0].partitions] == [E.none, E.none]

    def fetch(dispatcher: Dispatcher, group: str) -> list[int]:
        response = call(
            dispatcher,
            ApiKey.OFFSET_FETCH,
            7,
            {"group_id": group, "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        )
        return [p.committed_offset for p in response.topics[0].partitions]

    manager, dispatcher, broker = start_broker()
    join = {
        "group_id": "busy",
        "session_timeout": 600_000,
        "rebalance_timeout": 1_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"sub"}],
    }
    required = call(dispatcher, ApiKey.JOIN_GROUP, 5, join)
    assert required.error_code == E.member_id_required  # KIP-394: come back with this id
    joined = call(dispatcher, ApiKey.JOIN_GROUP, 5, join | {"member_id": required.member_id})
    assert joined.error_code == E.none
    member, generation = joined.member_id, joined.generation_id
    synced = call(
        dispatcher,
        ApiKey.SYNC_GROUP,
        3,
        {
            "group_id": "busy",
            "generation_id": generation,
            "member_id": member,
            "assignments": [{"member_id": member, "assignment": b"both"}],
        },
    )
    assert synced.error_code == E.none
    record = GroupLogView(manager, clock).latest(GroupMetadataKey("busy"))
    assert isinstance(record, GroupMetadataValue)
    assert record is not None and record.generation == generation and record.leader == member
    assert [(m.member_id, m.subscription, m.assignment) for m in record.members] == [
        (member, b"sub", b"both")
    ]

    commit(dispatcher, "busy", generation, member, 10)
    commit(dispatcher, "idle", -1, "", 20)
    idle_partition = partition_for("idle", 4)
    data = manager.get_log(OFFSETS_TOPIC, idle_partition).read(0, 1 << 20).records
    idle_batches = [
        b for b in iter_batches(data) if any(r.key and b"idle" in r.key for r in decode_records(b))
    ]
    assert len(idle_batches) == 1 and idle_batches[0].records_count == 2  # one batch per request

    broker.groups.tick(clock.monotonic_ms())  # arms the periodic check
    clock.advance(59_000)
    broker.groups.tick(clock.monotonic_ms())
    assert fetch(dispatcher, "idle") == [20, 21]  # not yet: retention is one minute
    clock.advance(1_000)
    broker.groups.tick(clock.monotonic_ms())
    assert fetch(dispatcher, "idle") == [-1, -1]
    assert fetch(dispatcher, "busy") == [10, 11]  # a group with members keeps its offsets
    tail = records_of(manager, idle_partition)[-3:]
    assert [(r.key, r.value) for r in tail] == [
        (encode_key(OffsetCommitKey("idle", "t", 0)), None),
        (encode_key(OffsetCommitKey("idle", "t", 1)), None),
        (encode_key(GroupMetadataKey("idle")), None),  # the Empty group forgotten, as Kafka writes it
    ]
    manager.close()

    manager, dispatcher, broker = start_broker()
    assert fetch(dispatcher, "idle") == [-1, -1]
    assert fetch(dispatcher, "busy") == [10, 11]
    described = call(
        dispatcher, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["busy"], "include_authorized_operations": False}
    ).groups[0]
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    assert [(m.member_id, m.member_assignment) for m in described.members] == [(member, b"both")]
    # The restored member carries on in its generation; once it leaves, the Empty group is stored.
    hb = call(
        dispatcher,
        ApiKey.HEARTBEAT,
        3,
        {"group_id": "busy", "generation_id": generation, "member_id": member},
    )
    assert hb.error_code == E.none
    left = call(
        dispatcher,
        ApiKey.LEAVE_GROUP,
        3,
        {"group_id": "busy", "members": [{"member_id": member}]},
    )
    assert left.error_code == E.none
    record = GroupLogView(manager, clock).latest(GroupMetadataKey("busy"))
    assert (
        isinstance(record, GroupMetadataValue)
        and record.generation == generation + 1
        and record.members == ()
    )
    manager.close()
