"""A full disk (issue 14, item 4): a failed append leaves no partial batch, the producer gets
KAFKA_STORAGE_ERROR, the log says so once per partition per interval, and the partition stays
cleanable, also after a roll and a restart; a cleaner mark caused by the full disk is lifted once
writes succeed again."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.handlers.produce import produce_partition
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import WRITE_ERROR_LOG_INTERVAL_MS, PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.protocol.codec import ErrorCode
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

from .full_disk import FullDisk

NOW = 1_700_000_000_000
COMPACT = {"cleanup.policy": "compact", "internal.segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture
def disk() -> FullDisk:
    return FullDisk()


@pytest.fixture
def manager(tmp_path: Path, disk: FullDisk) -> Any:
    clock = FakeClock(NOW)
    mgr = LogManager(tmp_path / "data", BrokerConfig.from_properties({}), clock, file_ops=disk)
    mgr.open()
    mgr.create_topic("t", 1, COMPACT)
    yield mgr, clock
    mgr.close()


def keyed(key: int, value_size: int, ts: int) -> bytes:
    return build_batch([SimpleRecord(f"k{key}".encode(), bytes([65 + key % 26]) * value_size, ts)])


def latest(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for segment in log.segments.values():
        for view in iter_batches(segment.read_bytes(0, segment.size)):
            view.validate()
            out.update((r.key, r.value) for r in decode_records(view))
    return out


def assert_no_partial_batch(segment: LogSegment) -> None:
    """The file holds exactly whole, valid batches: nothing past the last one."""
    result = segment.validate()
    assert result.error is None, result.error
    assert segment.log_path.stat().st_size == result.valid_bytes == segment.size


def test_full_disk_leaves_no_partial_batch_and_the_partition_compacts_after_roll_and_restart(
    manager: Any, disk: FullDisk, caplog: pytest.LogCaptureFixture
) -> None:
    mgr, clock = manager
    log = mgr.get_log("t", 0)
    for i in range(12):
        log.append(keyed(i % 4, 200, NOW + i))
    expected = latest(log)
    end = log.log_end_offset
    disk.space = 100  # the next append writes 100 of its ~1 KB, then the disk is full
    caplog.set_level(logging.INFO)
    for i in range(30):
        with pytest.raises(OSError) as raised:
            log.append(keyed(i % 4, 1000, NOW + 100 + i))
        assert raised.value.errno == errno.ENOSPC
    assert disk.failures == 30
    assert log.log_end_offset == end
    assert_no_partial_batch(log.active_segment)
    failures = [
        r for r in caplog.records if r.name == "kompakt.log.partition_log" and r.levelno >= logging.ERROR
    ]
    assert len(failures) == 1 and "disk is full" in failures[0].getMessage()
    assert failures[0].exc_info is None  # an expected condition: no traceback

    disk.space = None  # space is back: appends go on where the good bytes end
    for i in range(8):
        expected.update(latest_of(keyed(i % 4, 150, NOW + 200 + i)))
        log.append(keyed(i % 4, 150, NOW + 200 + i))
    assert [r.getMessage() for r in caplog.records if "succeed again" in r.getMessage()] == [
        "Appends to t-0 succeed again (29 failed appends were not reported)"
    ]
    log.roll()
    for segment in log.segments.values():
        assert_no_partial_batch(segment)

    mgr.close()  # restart
    mgr2 = LogManager(mgr.data_dir, mgr.broker_config, clock)
    mgr2.open()
    try:
        reopened = mgr2.get_log("t", 0)
        for segment in reopened.segments.values():
            assert_no_partial_batch(segment)
        cleaner = Cleaner(0, HashedOffsetMap(1 << 20, 0.9), clock)
        size_before = reopened.size_bytes
        cleaner.clean(reopened, 0, reopened.active_segment.base_offset)
        assert reopened.size_bytes < size_before
        assert latest(reopened) == expected
    finally:
        mgr2.close()


def latest_of(raw: bytes) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for view in iter_batches(raw) for r in decode_records(view)}


def test_producer_gets_storage_error_and_one_log_line_per_partition_per_interval(
    manager: Any, disk: FullDisk, caplog: pytest.LogCaptureFixture
) -> None:
    mgr, clock = manager
    broker = Broker.create(
        clock=clock,
        log_manager=mgr,
        producer_ids=ProducerIdManager(mgr.data_dir),
        timers=ManualTimers(clock),
        cluster_id="c",
        advertised_host="h",
        advertised_port=1,
    )
    assert produce_partition(broker, "t", 0, keyed(1, 50, NOW)).error_code == ErrorCode.none
    disk.space = 0
    caplog.set_level(logging.DEBUG)
    codes = [produce_partition(broker, "t", 0, keyed(1, 50, NOW)).error_code for _ in range(40)]
    assert set(codes) == {ErrorCode.kafka_storage_error}
    clock.advance(WRITE_ERROR_LOG_INTERVAL_MS)
    codes += [produce_partition(broker, "t", 0, keyed(1, 50, NOW)).error_code for _ in range(40)]
    assert set(codes) == {ErrorCode.kafka_storage_error}
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in lines] == [
        "Appends to t-0 fail: the disk is full ([Errno 28] No space left on device)",
        "Appends to t-0 fail: the disk is full ([Errno 28] No space left on device)"
        " (39 more failed appends since the last report)",
    ]
    assert all(r.exc_info is None for r in lines)
    disk.space = None
    response = produce_partition(broker, "t", 0, keyed(1, 50, NOW))
    assert (response.error_code, response.base_offset) == (ErrorCode.none, 1)


def test_cleaner_mark_for_a_full_disk_is_lifted_once_writes_succeed_again(
    manager: Any, disk: FullDisk
) -> None:
    mgr, clock = manager
    log = mgr.get_log("t", 0)
    for i in range(60):
        log.append(keyed(i % 3, 100, NOW + i))
    expected = latest(log)
    service = LogCleaner(mgr.broker_config, mgr.logs, mgr.data_dir, clock)
    worker = service.new_cleaner(0)
    disk.space = 0  # the cleaner cannot write its .cleaned segment
    assert service.run_once(worker) is True
    assert "No space left on device" in service.manager.uncleanable()[("t", 0)]
    assert service.run_once(worker) is False  # still marked: nothing is selected

    disk.space = None
    assert service.run_once(worker) is False  # space is back, but no write has succeeded yet
    log.append(keyed(0, 100, NOW + 100))
    expected.update(latest_of(keyed(0, 100, NOW + 100)))
    assert service.run_once(worker) is True  # the mark is gone and the partition is cleaned
    assert service.manager.uncleanable() == {}
    assert latest(log) == expected


def test_other_cleaner_marks_stay(manager: Any) -> None:
    """Only a mark the full disk caused is lifted by a successful append."""
    mgr, clock = manager
    log = mgr.get_log("t", 0)
    for i in range(10):
        log.append(keyed(i % 3, 100, NOW + i))
    service = LogCleaner(mgr.broker_config, mgr.logs, mgr.data_dir, clock)
    service.manager.mark_uncleanable(("t", 0), "CorruptRecordError: bad batch")
    log.append(keyed(0, 100, NOW + 100))
    assert service.run_once(service.new_cleaner(0)) is False
    assert ("t", 0) in service.manager.uncleanable()
