"""DeleteRecords and DescribeLogDirs through real wire bytes, on a real LogManager."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.dispatch import Dispatcher
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.clock import FakeClock
from kompakt.log.checkpoint import OffsetCheckpointFile
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records
from tests.support.wire import call, decode, request_frame


def fill(log_manager: LogManager, topic: str, count: int, configs: dict[str, str] | None = None) -> None:
    log_manager.create_topic(topic, 1, configs or {})
    partition_log = log_manager.get_log(topic, 0)
    for i in range(count):
        partition_log.append(build_batch([SimpleRecord(f"k{i % 3}".encode(), f"v{i}".encode(), 1000 + i)]))


def delete_records(dispatcher: Dispatcher, targets: list[tuple[str, int, int]], version: int = 2) -> Any:
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition, offset in targets:
        topics.setdefault(topic, []).append({"partition_index": partition, "offset": offset})
    values = {"topics": [{"name": t, "partitions": p} for t, p in topics.items()], "timeout": 1000}
    response = call(dispatcher, ApiKey.DELETE_RECORDS, version, values)
    return [(p.partition_index, p.low_watermark, p.error_code) for t in response.topics for p in t.partitions]


def earliest(dispatcher: Dispatcher, topic: str) -> int:
    values = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}],
    }
    return int(call(dispatcher, ApiKey.LIST_OFFSETS, 7, values).topics[0].partitions[0].offset)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_raises_the_log_start_offset_and_checkpoints_it(
    dispatcher: Dispatcher, log_manager: LogManager, version: int
) -> None:
    fill(log_manager, "t", 10)
    assert delete_records(dispatcher, [("t", 0, 4)], version) == [(0, 4, E.none)]
    assert earliest(dispatcher, "t") == 4
    assert log_manager.get_log("t", 0).log_start_offset == 4
    # Written before the answer: a crash now keeps the deleted records deleted.
    checkpoint = OffsetCheckpointFile(Path(log_manager.data_dir) / "log-start-offset-checkpoint").read()
    assert checkpoint[("t", 0)] == 4
    assert delete_records(dispatcher, [("t", 0, 2)], version) == [(0, 4, E.none)]  # never goes back
    assert delete_records(dispatcher, [("t", 0, -1)], version) == [(0, 10, E.none)]  # -1: the HW


def test_delete_records_errors(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    fill(log_manager, "t", 5)
    fill(log_manager, "compacted", 5, {"cleanup.policy": "compact"})
    fill(log_manager, "both", 5, {"cleanup.policy": "compact,delete"})
    assert delete_records(
        dispatcher,
        [("t", 0, 6), ("t", 0, -2), ("t", 7, 1), ("nope", 0, 1), ("compacted", 0, 2), ("both", 0, 2)],
    ) == [
        (0, -1, E.offset_out_of_range),  # above the high watermark
        (0, -1, E.offset_out_of_range),
        (7, -1, E.unknown_topic_or_partition),
        (0, -1, E.unknown_topic_or_partition),
        (0, 2, E.none),  # unlike Kafka (POLICY_VIOLATION): a compact-only topic can be trimmed
        (0, 2, E.none),  # a compacted topic that also deletes can be trimmed
    ]
    assert earliest(dispatcher, "compacted") == 2


def test_delete_records_refuses_internal_topics(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    assert delete_records(dispatcher, [("__consumer_offsets", 0, 0)]) == [(0, -1, E.invalid_topic_exception)]


def test_fetch_below_the_new_start_is_out_of_range(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    fill(log_manager, "t", 10)
    delete_records(dispatcher, [("t", 0, 6)])
    values = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 3,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    fetched = call(dispatcher, ApiKey.FETCH, 11, values).responses[0].partitions[0]
    assert (fetched.error_code, fetched.log_start_offset) == (E.offset_out_of_range, 6)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    fill(log_manager, "a", 3)
    log_manager.create_topic("b", 2)
    everything = call(dispatcher, ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
    (result,) = everything.results
    assert result.error_code == E.none
    assert result.log_dir == str(Path(log_manager.data_dir).resolve())
    sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
    assert sizes == {
        ("a", 0): log_manager.get_log("a", 0).size_bytes,
        ("b", 0): 0,
        ("b", 1): 0,
    }
    assert sizes[("a", 0)] > 0
    assert all(p.offset_lag == 0 and not p.is_future_key for t in result.topics for p in t.partitions)
    if version >= 4:
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    some = call(
        dispatcher,
        ApiKey.DESCRIBE_LOG_DIRS,
        version,
        {"topics": [{"topic": "b", "partitions": [1, 5]}, {"topic": "zz", "partitions": [0]}]},
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in some.results[0].topics] == [
        ("b", [1])
    ]


def test_describe_log_dirs_work_is_bounded_by_the_hosted_partitions(
    dispatcher: Dispatcher, log_manager: LogManager
) -> None:
    """A request naming 200,000 partitions of a topic that is not here allocates nothing for them
    (it made a set of every requested pair: 200,000 tuples for an answer of one partition)."""
    log_manager.create_topic("b", 2)
    values = {
        "topics": [
            {"topic": "nowhere", "partitions": list(range(200_000))},
            {"topic": "b", "partitions": [1, 1, 9]},
        ]
    }
    request = dispatcher.decode(request_frame(ApiKey.DESCRIBE_LOG_DIRS, 4, values))
    context = dispatcher.context(request, "127.0.0.1")
    tracemalloc.start()
    try:
        response = dispatcher.call(context, request.body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (result,) = decode(response, ApiKey.DESCRIBE_LOG_DIRS, 4).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("b", [1])]
    assert peak < 256 * 1024, f"{peak} bytes allocated to answer with one partition"


def test_delete_records_trims_a_compact_only_topic_and_compaction_carries_on(
    dispatcher: Dispatcher, log_manager: LogManager, clock: FakeClock
) -> None:
    """Issue 16: DeleteRecords works on compacted topics (Kafka answers POLICY_VIOLATION)."""
    fill(log_manager, "changelog", 30, {"cleanup.policy": "compact", "internal.segment.bytes": "200"})
    partition_log = log_manager.get_log("changelog", 0)
    assert len(partition_log.segments) > 3
    assert delete_records(dispatcher, [("changelog", 0, 20)]) == [(0, 20, E.none)]
    assert earliest(dispatcher, "changelog") == 20
    # The log-start-offset pass of retention runs for compacted topics: the segments wholly below
    # offset 20 go; the one holding offset 20 stays.
    partition_log.delete_old_segments(clock.now_ms(), include_retention=False)
    assert partition_log.segments.first is not None
    assert partition_log.segments.first.base_offset <= 20
    assert all(s.base_offset > 0 for s in partition_log.segments.values())
    LogCleaner(log_manager.broker_config, log_manager.logs, log_manager.data_dir, clock).compact_now(
        partition_log
    )
    survivors = [
        (r.offset, r.key, r.value)
        for segment in partition_log.segments.values()
        for view in iter_batches(segment.read_bytes(0, segment.size))
        for r in decode_records(view)
    ]
    # Below the log start nothing comes back; above it each key keeps its latest value.
    assert {key: value for offset, key, value in survivors if offset >= 20} == {
        b"k0": b"v27",
        b"k1": b"v28",
        b"k2": b"v29",
    }
    assert earliest(dispatcher, "changelog") == 20
