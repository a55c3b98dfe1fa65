"""Kafka's ``MemoryRecordsTest`` filter rows (reference scenarios S62, S65, S67-S69) observed through a full
cleaning pass.

With unique keys and an unbounded map, the cleaner's record filter is "keep records that have a
key" (unkeyed records are dropped as invalid), which is the filter the ``MemoryRecordsTest`` rows
use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression, TimestampType
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch

from ._harness import batches, clean_result, lct_log, roll


def _rec(key: str | None, value: str | None, ts: int, delta: int | None = None) -> SimpleRecord:
    k = None if key is None else key.encode()
    v = None if value is None else value.encode()
    return SimpleRecord(k, v, ts, offset_delta=delta)


def _log(tmp_path: Path, *raws: bytes, **overrides: Any) -> PartitionLog:
    log = lct_log(tmp_path, FakeClock(), segment_bytes=1 << 20, **overrides)
    for raw in raws:
        log.append_with_offsets(raw)
    roll(log)
    return log


def test_filter_keeps_keyed_records_in_their_batches(tmp_path: Path) -> None:
    """Kafka's ``MemoryRecordsTest.testFilterTo`` (reference scenario S62)."""
    log = _log(
        tmp_path,
        build_batch([_rec(None, "a", 10)], base_offset=0),
        build_batch([_rec("1", "b", 11), _rec(None, "c", 12)], base_offset=1),
        build_batch([_rec(None, "d", 13), _rec("4", "e", 20), _rec("5", "f", 15)], base_offset=3),
        build_batch([_rec("6", "g", 16)], base_offset=6),
    )
    stats = clean_result(log, 0).stats
    got = [(v.base_offset, v.last_offset, v.max_timestamp) for v, _r in batches(log)]
    assert got == [(1, 2, 11), (3, 5, 20), (6, 6, 16)]
    assert [r.offset for _v, recs in batches(log) for r in recs] == [1, 4, 5, 6]
    assert (stats.messages_read, stats.messages_written, stats.invalid_messages_read) == (7, 4, 3)
    time_index = log.segments.values()[0].time_index
    assert time_index.last_entry() == (20, 5)


def test_base_timestamp_to_delete_horizon_conversion(tmp_path: Path) -> None:
    """Kafka's ``MemoryRecordsTest.testBaseTimestampToDeleteHorizonConversion`` (reference scenario S65)."""
    log = _log(
        tmp_path,
        build_batch([_rec("0", "0", 5), _rec("1", None, 10), _rec("2", "2", 15)]),
        delete_retention_ms=1,
    )
    clean_result(log, 0, now=2**30 - 2)
    ((view, recs),) = list(batches(log))
    assert view.has_delete_horizon
    assert view.delete_horizon_ms == 2**30 - 1
    assert [r.timestamp for r in recs] == [5, 10, 15]
    assert view.max_timestamp == 15


def test_filter_of_an_already_compacted_log(tmp_path: Path) -> None:
    """Kafka's ``MemoryRecordsTest.testFilterToAlreadyCompactedLog`` (reference scenario S67)."""
    batch = build_batch(
        [_rec(None, "a", 10, 5), _rec("1", "b", 11, 8), _rec(None, "c", 12, 10)], base_offset=0
    )
    log = _log(tmp_path, batch)
    clean_result(log, 0)
    ((view, recs),) = list(batches(log))
    assert (view.base_offset, view.last_offset) == (0, 10)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in recs] == [(8, 11, b"1", b"b")]


def test_filter_preserves_producer_info(tmp_path: Path) -> None:
    """Kafka's ``MemoryRecordsTest.testFilterToPreservesProducerInfo`` (reference scenario S68)."""
    plain = build_batch([_rec(None, "a", 1), _rec("1", "b", 2), _rec(None, "c", 3)], base_offset=0)
    idem = build_batch(
        [_rec(None, "d", 4), _rec("4", "e", 5), _rec("5", "f", 6)],
        base_offset=3,
        producer_id=23,
        producer_epoch=5,
        base_sequence=10,
    )
    txn = build_batch(
        [_rec("6", "g", 7), _rec("7", "h", 8), _rec(None, "i", 9)],
        base_offset=6,
        producer_id=99384,
        producer_epoch=234,
        base_sequence=15,
        is_transactional=True,
    )
    marker = build_control_batch(ControlType.COMMIT, producer_id=99384, producer_epoch=234, base_offset=9)
    log = _log(tmp_path, plain, idem, txn, marker)
    clean_result(log, 0)
    got = [
        (v.records_count, v.base_offset, v.last_offset, v.producer_id, v.producer_epoch, v.base_sequence)
        + (v.last_sequence, v.is_transactional)
        for v, _r in batches(log)
        if not v.is_control
    ]
    assert got == [
        (1, 0, 2, -1, -1, -1, -1, False),
        (2, 3, 5, 23, 5, 10, 12, False),
        (2, 6, 8, 99384, 234, 15, 17, True),
    ]


def test_filter_preserves_log_append_time(tmp_path: Path) -> None:
    """Kafka's ``MemoryRecordsTest.testFilterToPreservesLogAppendTime`` (reference scenario S69)."""
    raws = [
        build_batch(
            [_rec(None, "a", 1), _rec(str(base), "b", 2)],
            base_offset=base,
            compression=codec,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            max_timestamp=1234,
        )
        for base, codec in ((0, Compression.NONE), (2, Compression.GZIP))
    ]
    log = _log(tmp_path, *raws)
    clean_result(log, 0)
    views = [v for v, _r in batches(log)]
    assert len(views) == 2
    for view, codec in zip(views, (Compression.NONE, Compression.GZIP), strict=True):
        assert view.timestamp_type == TimestampType.LOG_APPEND_TIME
        assert view.max_timestamp == 1234
        assert view.compression == codec
        assert view.records_count == 1
