"""The cleaner service over a real data directory: selection, cleaning, checkpoints, failures,
compacted-log retention, forced rolls of idle segments, and real threads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

COMPACT = {"cleanup.policy": "compact", "internal.segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture
def clock() -> FakeClock:
    # Segments without timestamps (emptied by cleaning) fall back to file mtimes, which are real
    # time; a manual clock starting at real time keeps the two comparable, as `--clock manual` does.
    return FakeClock(time.time_ns() // 1_000_000)


@pytest.fixture
def manager(tmp_path: Path, clock: FakeClock) -> Iterator[LogManager]:
    broker = BrokerConfig.from_properties(
        {"log.cleaner.backoff.ms": "20", "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024)}
    )
    mgr = LogManager(tmp_path / "data", broker, clock)
    mgr.open()
    yield mgr
    mgr.close()


def cleaner_for(manager: LogManager, clock: FakeClock) -> LogCleaner:
    return LogCleaner(manager.broker_config, manager.logs, manager.data_dir, clock)


def write_dups(log: PartitionLog, clock: FakeClock, keys: int, dups: int, start_value: int = 0) -> int:
    value = start_value
    for _ in range(dups):
        for k in range(keys):
            log.append(build_batch([SimpleRecord(str(k).encode(), str(value).encode(), clock.now_ms())]))
            value += 1
    return value


def contents(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for segment in log.segments.values():
        raw = segment.read_bytes(0, segment.size)
        for view in iter_batches(raw):
            view.validate()
            out.extend((r.offset, r.key, r.value) for r in decode_records(view))
    return out


def latest_by_key(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    return {key: value for _, key, value in contents(log)}


def test_run_once_cleans_and_checkpoints(manager: LogManager, clock: FakeClock) -> None:
    manager.create_topic("t", 1, COMPACT)
    log = manager.get_log("t", 0)
    write_dups(log, clock, keys=20, dups=5)
    before = latest_by_key(log)
    size_before = log.size_bytes
    service = cleaner_for(manager, clock)
    assert service.run_once(service.new_cleaner(0)) is True
    assert latest_by_key(log) == before
    assert log.size_bytes < size_before
    checkpoint = OffsetCheckpointFile(manager.data_dir / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    assert checkpoint[("t", 0)] == log.active_segment.base_offset
    # Nothing dirty any more: the next iteration cleans nothing.
    assert service.run_once(service.new_cleaner(0)) is False
    record = service.metrics.per_partition()[("t", 0)]
    assert record.records_read > record.records_written


def test_corrupt_partition_is_marked_uncleanable_and_others_still_clean(
    manager: LogManager, clock: FakeClock
) -> None:
    manager.create_topic("bad", 1, COMPACT)
    manager.create_topic("good", 1, COMPACT)
    bad, good = manager.get_log("bad", 0), manager.get_log("good", 0)
    write_dups(bad, clock, keys=20, dups=6)
    write_dups(good, clock, keys=20, dups=3)
    first = bad.segments.values()[0]
    with open(first.log_path, "r+b") as f:
        f.seek(100)
        f.write(b"jogeajgoea")
    service = cleaner_for(manager, clock)
    cleaner = service.new_cleaner(0)
    for _ in range(3):
        service.run_once(cleaner)
    assert ("bad", 0) in service.manager.uncleanable()
    assert "corrupt" in service.manager.uncleanable()[("bad", 0)].lower()
    assert ("good", 0) not in service.manager.uncleanable()
    assert latest_by_key(good) == {str(k).encode(): str(40 + k).encode() for k in range(20)}
    snapshot = service.metrics.snapshot(clock.now_ms())
    assert snapshot["uncleanable-partitions-count"] == 1
    # The bad log was not rewritten: its corrupt bytes are still where they were.
    assert b"jogeajgoea" in first.read_bytes(0, first.size)
    # Retry clears the mark (beyond Kafka); it fails again and is marked again.
    assert service.retry_uncleanable(("bad", 0)) is True
    service.run_once(cleaner)
    assert ("bad", 0) in service.manager.uncleanable()


def test_idle_active_segment_is_rolled_after_max_compaction_lag(
    manager: LogManager, clock: FakeClock
) -> None:
    manager.create_topic(
        "idle",
        1,
        {"cleanup.policy": "compact", "max.compaction.lag.ms": "60000", "min.cleanable.dirty.ratio": "0.99"},
    )
    log = manager.get_log("idle", 0)
    write_dups(log, clock, keys=3, dups=3)
    assert len(log.segments) == 1
    service = cleaner_for(manager, clock)
    cleaner = service.new_cleaner(0)
    service.run_once(cleaner)
    assert len(log.segments) == 1  # not old enough yet
    clock.advance(60_001)
    service.run_once(cleaner)  # maintenance rolls the idle active segment
    assert len(log.segments) == 2
    assert service.run_once(cleaner) is True  # must-clean by max lag although the ratio is 0.99
    assert [(k, v) for _, k, v in contents(log)] == [(b"0", b"6"), (b"1", b"7"), (b"2", b"8")]


def test_compact_delete_retention_runs_in_the_cleaner_loop(manager: LogManager, clock: FakeClock) -> None:
    manager.create_topic("cd", 1, {**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": "100000"})
    log = manager.get_log("cd", 0)
    write_dups(log, clock, keys=50, dups=2)
    assert len(log.segments) > 1
    clock.advance(200_000)
    service = cleaner_for(manager, clock)
    cleaner = service.new_cleaner(0)
    for _ in range(3):
        service.run_once(cleaner)
    assert log.log_start_offset == log.log_end_offset
    assert len(log.segments) == 1


def test_threads_clean_in_the_background_and_reconfigure(manager: LogManager, clock: FakeClock) -> None:
    manager.create_topic("bg", 1, COMPACT)
    log = manager.get_log("bg", 0)
    write_dups(log, clock, keys=30, dups=4)
    service = cleaner_for(manager, clock)
    service.startup()
    try:
        checkpoint = OffsetCheckpointFile(manager.data_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
        deadline = time.monotonic() + 30
        while checkpoint.read().get(("bg", 0), 0) < log.active_segment.base_offset:
            assert time.monotonic() < deadline, "cleaner thread did not clean in time"
            service.wake()
            time.sleep(0.01)  # polling interval only; the assertion is the deadline
        service.reconfigure(
            BrokerConfig.from_properties({"log.cleaner.threads": "2", "log.cleaner.backoff.ms": "20"})
        )
        assert service.thread_count == 2
        assert service.dead_thread_count == 0
    finally:
        service.shutdown()
    assert service.thread_count == 0


def test_compact_now_ignores_the_ratio_and_removes_expired_tombstones(
    manager: LogManager, clock: FakeClock
) -> None:
    manager.create_topic(
        "now",
        1,
        {"cleanup.policy": "compact", "internal.segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.99"},
    )
    log = manager.get_log("now", 0)
    write_dups(log, clock, keys=10, dups=2)
    log.roll()
    service = cleaner_for(manager, clock)
    assert service.run_once(service.new_cleaner(0)) is True  # never cleaned: ratio 1.0
    write_dups(log, clock, keys=10, dups=1, start_value=20)
    log.append(build_batch([SimpleRecord(b"3", None, clock.now_ms())]))
    log.roll()
    assert service.run_once(service.new_cleaner(0)) is False  # now the 0.99 ratio holds it back
    service.compact_now(log)
    assert [v for _, k, v in contents(log) if k == b"3"] == [None]  # stamped, kept
    clock.advance(86_400_001)
    service.compact_now(log)  # nothing dirty, but the tombstone's horizon has passed
    assert b"3" not in {k for _, k, _ in contents(log)}
    assert latest_by_key(log) == {str(k).encode(): str(20 + k).encode() for k in range(10) if k != 3}
    checkpoint = OffsetCheckpointFile(manager.data_dir / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    assert checkpoint[("now", 0)] == log.active_segment.base_offset
