"""Segment grouping (``Cleaner.groupSegmentsBySize``): ports of ``LogCleanerTest.testSegmentGrouping*``
(reference scenarios S35-S38)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.cleaner.grouping import GroupingInput, group_segments_by_size
from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.records.builder import SimpleRecord, build_batch

from ._harness import append_at, clean, lct_log, roll_at

INT_MAX = 2**31 - 1


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _inputs(segments: list[LogSegment]) -> list[GroupingInput[LogSegment]]:
    return [
        GroupingInput(s, s.base_offset, s.size, s.offset_index.entries * 8, s.time_index.entries * 12)
        for s in segments
    ]


def grouping(log: PartitionLog, max_size: int, max_index: int, bound: int) -> list[list[LogSegment]]:
    return group_segments_by_size(_inputs(log.segments.values()), max_size, max_index, bound)


def hello(log: PartitionLog) -> int:
    return log.append(build_batch([SimpleRecord(b"hello", b"hello", -1)])).first_offset


def hello_at(log: PartitionLog, offset: int) -> None:
    log.append_with_offsets(build_batch([SimpleRecord(b"hello", b"hello", -1)], base_offset=offset))


def _check_spans(log: PartitionLog, groups: list[list[LogSegment]]) -> None:
    for group in groups:
        last = group[-1]
        assert last.read_next_offset() - 1 - group[0].base_offset <= INT_MAX
    bases = [s.base_offset for g in groups for s in g]
    assert bases == sorted(bases) == [s.base_offset for s in log.segments.values()]


def test_segment_grouping_by_size_and_index_size(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testSegmentGrouping`` (reference scenario S35)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=300, index_interval_bytes=1)
    while len(log.segments) < 10:
        hello(log)
    leo = log.log_end_offset
    assert [len(g) for g in grouping(log, INT_MAX, INT_MAX, leo)] == [10]
    assert [len(g) for g in grouping(log, 1, INT_MAX, leo)] == [1] * 10
    assert [len(g) for g in grouping(log, INT_MAX, 1, leo)] == [1] * 10
    segs = log.segments.values()
    by_size = grouping(log, sum(s.size for s in segs[:3]) + 1, INT_MAX, leo)
    assert all(len(g) == 3 for g in by_size[:-1])
    by_index = grouping(log, INT_MAX, sum(s.offset_index.entries * 8 for s in segs[:3]) + 1, leo)
    assert all(len(g) == 3 for g in by_index[:-1])
    for groups in (by_size, by_index):
        _check_spans(log, groups)


def test_segment_grouping_with_sparse_offsets(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testSegmentGroupingWithSparseOffsets`` (reference scenario S36)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=400, index_interval_bytes=1)
    while len(log.segments) < 2:
        hello(log)
    hello_at(log, INT_MAX - 1)
    assert hello(log) == INT_MAX
    assert log.segments.active.offset_index.last_offset == INT_MAX
    assert len(grouping(log, INT_MAX, INT_MAX, log.log_end_offset)) == 1
    hello(log)
    assert len(grouping(log, INT_MAX, INT_MAX, log.log_end_offset)) == 2
    while len(log.segments) < 4:
        hello(log)
    groups = grouping(log, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 3
    _check_spans(log, groups)


def test_segment_grouping_following_load_of_zero_index(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testSegmentGroupingFollowingLoadOfZeroIndex`` (reference scenario S37)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=400, index_interval_bytes=400)
    hello_at(log, 0)
    hello_at(log, 1)
    roll_at(log, 2**30 - 1)
    hello_at(log, 2**30 - 1)
    hello_at(log, 2**31)
    assert log.segments.active.offset_index.entries == 0
    groups = grouping(log, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 2
    _check_spans(log, groups)


def test_segment_grouping_with_sparse_offsets_and_empty_segments(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testSegmentGroupingWithSparseOffsetsAndEmptySegments`` (reference scenario
    S38)."""
    log = lct_log(tmp_path, clock)
    for i in range(3):
        log.append(build_batch([SimpleRecord(b"key", b"val", -1)]))
        append_at(log, (i + 1) * 2**31 - 1, "key", "val")
        assert len(log.segments) == i + 1
    log.append(build_batch([SimpleRecord(b"key", b"val", -1)]))
    assert len(log.segments) == 4
    u = log.log_end_offset - 1
    cfg = log.config
    assert len(grouping(log, cfg.segment_size, cfg.segment_index_bytes, u)) == 3
    clean(log, 0, uncleanable=u)
    assert len(log.segments) == 4
    assert log.segments.values()[0].size == 0
    assert len(grouping(log, cfg.segment_size, cfg.segment_index_bytes, u)) == 2
    clean(log, 0, uncleanable=u)
    assert len(log.segments) == 3
