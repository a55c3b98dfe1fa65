"""The ``__consumer_offsets``-backed offset store: Kafka's byte layouts, persistence, tombstones."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.broker.groups.offsets import CommittedOffset
from kompakt.broker.groups.offsets_topic import (
    OFFSETS_TOPIC,
    GroupKey,
    GroupMemberRecord,
    GroupMetadataRecord,
    OffsetKey,
    TopicOffsetStore,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hashcode,
    partition_for,
)
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import iter_batches
from kompakt.records.record import Record, decode_records
from tests.support.wire import call

# ---------------------------------------------------------------------------------------------- golden bytes


def test_java_hashcode_and_partition() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # the famous MIN_VALUE string
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    # "é" is one UTF-16 unit (0xE9); "😀" is two surrogate units (0xD83D, 0xDE00).
    assert java_string_hashcode("é") == 0xE9
    assert java_string_hashcode("😀") == 0xD83D * 31 + 0xDE00
    assert partition_for("hello", 50) == 99162322 % 50


def test_offset_commit_key_bytes() -> None:
    assert encode_offset_commit_key("g", "tp", 3) == bytes.fromhex("00010001670002747000000003")
    assert decode_key(encode_offset_commit_key("g", "tp", 3)) == OffsetKey("g", "tp", 3)


def test_group_metadata_key_bytes() -> None:
    assert encode_group_metadata_key("grp") == bytes.fromhex("00020003677270")
    assert decode_key(encode_group_metadata_key("grp")) == GroupKey("grp")
    assert decode_key(bytes.fromhex("0003000167")) is None  # a KIP-848 record type: ignored


def test_offset_commit_value_v3_bytes() -> None:
    entry = CommittedOffset(offset=42, leader_epoch=5, metadata="md", commit_timestamp_ms=1000)
    expected = bytes.fromhex(
        "0003"  # version
        "000000000000002a"  # offset
        "00000005"  # leader epoch
        "0002"
        "6d64"  # metadata
        "00000000000003e8"  # commit timestamp
    )
    assert encode_offset_commit_value(entry) == expected
    assert decode_offset_commit_value(expected) == entry


def test_offset_commit_value_v1_with_expiry() -> None:
    entry = CommittedOffset(7, 9, "", 1000, expire_timestamp_ms=2000)
    expected = bytes.fromhex("00010000000000000007000000000000000003e800000000000007d0")
    assert encode_offset_commit_value(entry) == expected
    # v1 has no leader epoch: it reads back as -1, as in Kafka
    assert decode_offset_commit_value(expected) == CommittedOffset(7, -1, "", 1000, 2000)
    # v0: offset, metadata, commit timestamp
    v0 = bytes.fromhex("0000000000000000000700017800000000000003e8")
    assert decode_offset_commit_value(v0) == CommittedOffset(7, -1, "x", 1000, None)


def test_group_metadata_value_v3_bytes() -> None:
    member = GroupMemberRecord("m", None, "c", "h", 300, 100, b"\x01", b"")
    record = GroupMetadataRecord("consumer", 4, "range", "m", 5000, (member,))
    expected = (
        bytes.fromhex("0003")
        + struct.pack(">h", 8)
        + b"consumer"
        + struct.pack(">i", 4)
        + struct.pack(">h", 5)
        + b"range"
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">q", 5000)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">h", -1)
        + struct.pack(">h", 1)
        + b"c"
        + struct.pack(">h", 1)
        + b"h"
        + struct.pack(">i", 300)
        + struct.pack(">i", 100)
        + struct.pack(">i", 1)
        + b"\x01"
        + struct.pack(">i", 0)
    )
    assert encode_group_metadata_value(record) == expected
    assert decode_group_metadata_value(expected) == record
    empty = GroupMetadataRecord("consumer", 0, None, None, -1, ())
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty


# ---------------------------------------------------------------------------------------------- the store


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


def test_commit_survives_restart(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.load()
    assert OFFSETS_TOPIC not in manager.topics()  # created on first use only
    store.commit("g", "t", 0, 10, "meta", 3, 1000)
    store.commit("g", "t", 0, 12, None, 3, 1001)
    store.commit("g", "t", 1, 20, "x", -1, 1002, expire_ts=99_000)
    store.commit("h", "u", 0, 5, "", 0, 1003)
    meta = manager.topics()[OFFSETS_TOPIC]
    assert meta.partitions == 4
    assert meta.configs == {
        "cleanup.policy": "compact",
        "segment.bytes": "104857600",
        "compression.type": "producer",
    }
    assert manager.topic_config(OFFSETS_TOPIC).compact
    before = {g: store.fetch(g) for g in ("g", "h")}
    manager.close()

    manager = open_manager(data_dir, clock, partitions=50)  # the existing topic's count wins
    store = TopicOffsetStore(manager, clock)
    store.load()
    assert store.num_partitions == 4
    assert {g: store.fetch(g) for g in ("g", "h")} == before
    assert store.fetch("g")[("t", 0)] == CommittedOffset(12, 3, "", 1001, None)
    assert store.fetch("g")[("t", 1)].expire_timestamp_ms == 99_000
    assert store.groups() == {"g", "h"}
    assert store.fetch("g", "t", 1) == {("t", 1): before["g"][("t", 1)]}
    manager.close()


def test_records_are_in_the_group_partition(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.commit_batch("group-a", [("t", p, CommittedOffset(p, 1, "m", 500)) for p in range(3)])
    partition = partition_for("group-a", 4)
    assert store.partition_of("group-a") == partition
    records = records_of(manager, partition)
    assert [r.key for r in records] == [encode_offset_commit_key("group-a", "t", p) for p in range(3)]
    assert records[0].value == encode_offset_commit_value(CommittedOffset(0, 1, "m", 500))
    assert all(r.timestamp == 500 for r in records)
    # one commit request -> one batch
    data = manager.get_log(OFFSETS_TOPIC, partition).read(0, 1 << 20).records
    assert len(list(iter_batches(data))) == 1
    manager.close()


def test_delete_group_writes_tombstones(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.commit("g", "t", 0, 1, "", 0, 100)
    store.commit("g", "t", 1, 2, "", 0, 100)
    store.commit("keep", "t", 0, 3, "", 0, 100)
    assert store.delete_group("g") == 2
    assert store.delete_group("g") == 0
    assert store.fetch("g") == {}
    tail = records_of(manager, partition_for("g", 4))[-3:]
    assert [(r.key, r.value) for r in tail] == [
        (encode_offset_commit_key("g", "t", 0), None),
        (encode_offset_commit_key("g", "t", 1), None),
        (encode_group_metadata_key("g"), None),
    ]
    manager.close()
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.load()
    assert store.groups() == {"keep"}
    manager.close()


def test_expire_writes_tombstones(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.commit("old", "t", 0, 1, "", 0, 1_000)
    store.commit("old", "t", 1, 1, "", 0, 50_000)
    store.commit("explicit", "t", 0, 1, "", 0, 1_000, expire_ts=5_000)
    store.commit("active", "t", 0, 1, "", 0, 1_000)
    removed = store.expire(now_ms=20_000, retention_ms=10_000, keep_groups={"active"})
    assert removed == 2
    assert set(store.fetch("old")) == {("t", 1)}
    assert store.groups() == {"old", "active"}
    last = records_of(manager, partition_for("old", 4))[-1]
    assert (last.key, last.value) == (encode_offset_commit_key("old", "t", 0), None)
    explicit = [
        r for r in records_of(manager, partition_for("explicit", 4)) if r.key and b"explicit" in r.key
    ]
    assert explicit[-1].value is None
    manager.close()
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.load()
    assert store.groups() == {"old", "active"}
    assert set(store.fetch("old")) == {("t", 1)}
    manager.close()


def test_group_metadata_and_topic_deletion(data_dir: Path, clock: FakeClock) -> None:
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    record = GroupMetadataRecord("consumer", 2, "range", "m", 10, ())
    store.store_group_metadata("g", record)
    store.commit("g", "gone", 0, 1, "", 0, 1)
    store.commit("g", "gone", 1, 1, "", 0, 1)
    store.commit("g", "kept", 0, 1, "", 0, 1)
    store.on_topic_deleted("gone", [0, 1])
    assert set(store.fetch("g")) == {("kept", 0)}
    manager.close()
    manager = open_manager(data_dir, clock)
    store = TopicOffsetStore(manager, clock)
    store.load()
    assert store.group_metadata("g") == record
    assert set(store.fetch("g")) == {("kept", 0)}
    store.store_group_metadata("g", None)
    assert store.group_metadata("g") is None
    manager.close()


def test_load_skips_garbage_records(data_dir: Path, clock: FakeClock) -> None:
    from kompakt.records.builder import SimpleRecord, build_batch

    manager = open_manager(data_dir, clock, partitions=1)
    store = TopicOffsetStore(manager, clock)
    store.commit("g", "t", 0, 1, "", 0, 1)
    manager.get_log(OFFSETS_TOPIC, 0).append(
        build_batch(
            [
                SimpleRecord(b"\x00\x01\x00", b"junk"),
                SimpleRecord(encode_offset_commit_key("g", "t", 1), b"\x00"),
            ]
        )
    )
    store.load()
    assert set(store.fetch("g")) == {("t", 0)}
    manager.close()


def test_coordinator_over_topic_store(data_dir: Path, clock: FakeClock) -> None:
    """OffsetCommit/OffsetFetch through the dispatcher with the persistent store, across a restart."""

    def start() -> tuple[LogManager, Dispatcher]:
        manager = open_manager(data_dir, clock)
        if "t" not in manager.topics():
            manager.create_topic("t", 2)
        store = TopicOffsetStore(manager, clock)
        store.load()
        broker = Broker.create(
            clock=clock,
            log_manager=manager,
            offsets=store,
            group_config=GroupConfig(group_initial_rebalance_delay_ms=0),
        )
        return manager, Dispatcher(broker)

    manager, dispatcher = start()
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

    manager, dispatcher = start()
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

    def start() -> tuple[LogManager, Dispatcher, Broker]:
        manager = open_manager(data_dir, clock)
        if "t" not in manager.topics():
            manager.create_topic("t", 2)
        store = TopicOffsetStore(manager, clock)
        store.load()
        broker = Broker.create(clock=clock, log_manager=manager, offsets=store, group_config=config)
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

    manager, dispatcher, broker = start()
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
    stored = broker.groups._offsets
    assert isinstance(stored, TopicOffsetStore)
    record = stored.group_metadata("busy")
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
    tail = records_of(manager, idle_partition)[-2:]
    assert [(r.key, r.value) for r in tail] == [
        (encode_offset_commit_key("idle", "t", 0), None),
        (encode_offset_commit_key("idle", "t", 1), None),
    ]
    manager.close()

    manager, dispatcher, broker = start()
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
    record = broker.groups._offsets.group_metadata("busy")  # type: ignore[attr-defined]
    assert record is not None and record.generation == generation + 1 and record.members == ()
    manager.close()
