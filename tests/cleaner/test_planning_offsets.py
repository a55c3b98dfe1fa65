"""Cleanable range and byte accounting (``LogCleanerManager.cleanableOffsets`` and
``calculateCleanableBytes``)."""

from __future__ import annotations

import pytest

from kompakt.cleaner.planning import (
    SegmentInfo,
    cleanable_offsets,
    log_to_clean,
    non_active_segments_from,
    segments_in_range,
)

from ._fakes import FakeConfig, FakeLog, build_segments, filthy_log, segment

T0 = 1_700_000_000_000
HOUR_MS = 3_600_000


# ------------------------------------------------------------------------------ LogToClean


def _six_single_record_segments() -> FakeLog:
    # internal.segment.bytes=100 with 94-byte batches: one record per segment, the sixth is active.
    segments = [segment(i, [-1], record_size=94) for i in range(6)]
    return FakeLog("t", 0, FakeConfig(), segments)


def test_log_to_clean_empty_dirty_range_counts_all_non_active_bytes() -> None:
    """Kafka's ``LogCleanerTest.testLogToClean`` (reference scenario S13)."""
    log = _six_single_record_segments()
    active_base = log.segments[-1].base_offset
    ltc = log_to_clean(log, active_base, active_base, T0)
    assert ltc.total_bytes == 5 * 94
    assert ltc.cleanable_bytes == 0
    assert ltc.first_uncleanable_offset == active_base


def test_log_to_clean_with_uncleanable_section() -> None:
    """Kafka's ``LogCleanerTest.testLogToCleanWithUncleanableSection`` (reference scenario S13)."""
    log = _six_single_record_segments()
    seg = log.segments
    ltc = log_to_clean(log, seg[2].base_offset, seg[4].base_offset, T0)
    assert ltc.clean_bytes == seg[0].size_bytes + seg[1].size_bytes
    assert ltc.cleanable_bytes == seg[2].size_bytes + seg[3].size_bytes
    assert ltc.cleanable_ratio == 0.5
    assert ltc.first_uncleanable_offset == seg[4].base_offset


def test_segment_holding_first_dirty_counts_as_clean_and_cleanable() -> None:
    # Segments [0,5) [5,10) [10,15) and an empty active segment at 15; first dirty 7.
    log = FakeLog("t", 0, FakeConfig(), build_segments(15, lambda o: o % 5 == 4))
    ltc = log_to_clean(log, 7, 15, T0)
    assert ltc.clean_bytes == 1000  # segments 0 and 5
    assert ltc.cleanable_bytes == 1000  # segments 5 and 10
    assert ltc.total_bytes == 2000
    assert ltc.cleanable_ratio == 0.5


def test_uncleanable_bound_rounds_down_to_its_segment_base() -> None:
    log = FakeLog("t", 0, FakeConfig(), build_segments(15, lambda o: o % 5 == 4))
    ltc = log_to_clean(log, 0, 12, T0)
    assert ltc.first_uncleanable_offset == 10
    assert ltc.cleanable_bytes == 1000


def test_first_dirty_in_active_segment_has_nothing_cleanable() -> None:
    log = FakeLog("t", 0, FakeConfig(), build_segments(6, lambda _o: False, final_roll=False))
    ltc = log_to_clean(log, 3, 3, T0)
    assert ltc.first_uncleanable_offset == 0
    assert ltc.cleanable_bytes == 0
    assert ltc.clean_bytes == 600
    assert not ltc.eligible


def test_segment_range_helpers() -> None:
    segs = build_segments(15, lambda o: o % 5 == 4)
    assert [s.base_offset for s in segments_in_range(segs, 7, 15)] == [5, 10]
    assert segments_in_range(segs, 5, 5) == []
    assert [s.base_offset for s in segments_in_range(segs, -1, 5)] == [0]
    assert [s.base_offset for s in non_active_segments_from(segs, 6)] == [5, 10]
    assert non_active_segments_from(segs, 16) == []


# --------------------------------------------------------------- checkpoint reset in cleanableOffsets


def test_checkpoint_inside_log_is_used_without_forced_update() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsNeedsCheckpointReset`` (reference scenario S47)."""
    log = filthy_log(0, 20)
    log.log_start_offset = 10
    offsets = cleanable_offsets(log, 15, T0)
    assert offsets.first_dirty_offset == 15
    assert not offsets.force_update_checkpoint


def test_checkpoint_below_log_start_is_reset() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsNeedsCheckpointReset`` (reference scenario S47)."""
    log = filthy_log(0, 20)
    log.log_start_offset = 20
    offsets = cleanable_offsets(log, 15, T0)
    assert offsets.first_dirty_offset == 20
    assert offsets.force_update_checkpoint


def test_checkpoint_beyond_log_end_is_reset() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsNeedsCheckpointReset`` (reference scenario S47)."""
    log = filthy_log(0, 20)
    log.log_start_offset = 10
    offsets = cleanable_offsets(log, 25, T0)
    assert offsets.first_dirty_offset == 10
    assert offsets.force_update_checkpoint


def test_missing_checkpoint_starts_at_log_start_without_forced_update() -> None:
    log = filthy_log(0, 20)
    log.log_start_offset = 3
    offsets = cleanable_offsets(log, None, T0)
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (3, False)


def test_checkpoint_equal_to_log_end_is_valid() -> None:
    log = filthy_log(0, 20)
    offsets = cleanable_offsets(log, 20, T0)
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (20, False)


# --------------------------------------------------------------------------- cleanableOffsets


def _eight_segments(timestamp_at: int, records_per_segment: int = 10) -> list[SegmentInfo]:
    # Append until the 8th segment exists: 7 full segments and one record in the active one.
    n = 7 * records_per_segment + 1
    return build_segments(
        n,
        lambda o: o % records_per_segment == records_per_segment - 1,
        timestamp=lambda _o: timestamp_at,
        final_roll=False,
    )


def test_cleanable_offsets_for_none_bounded_by_high_watermark() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsForNone`` (reference scenario S46)."""
    log = FakeLog("t", 0, FakeConfig(), _eight_segments(T0), high_watermark=50)
    offsets = cleanable_offsets(log, 0, T0)
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 50)


def test_cleanable_offsets_for_active_segment() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsActiveSegment`` (reference scenario S46)."""
    log = FakeLog("t", 0, FakeConfig(), _eight_segments(T0))
    assert log.last_stable_offset == log.log_end_offset == 71
    offsets = cleanable_offsets(log, 0, T0)
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 70)


def test_cleanable_offsets_for_time() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsForTime`` (reference scenario S46)."""
    lag = HOUR_MS
    t1 = T0 + lag + 1
    # Records at t0 until 4 segments exist (the 4th holds one), then at t1 until 8 exist.
    segments = build_segments(
        71, lambda o: o % 10 == 9, timestamp=lambda o: T0 if o <= 30 else t1, final_roll=False
    )
    assert segments[3].base_offset == 30
    assert segments[3].first_batch_timestamp_ms == T0
    assert segments[3].largest_timestamp_ms == t1
    log = FakeLog("t", 0, FakeConfig(min_compaction_lag_ms=lag), segments)
    offsets = cleanable_offsets(log, 0, t1)
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 30)


def test_cleanable_offsets_for_short_time() -> None:
    """Kafka's ``LogCleanerManagerTest.testCleanableOffsetsForShortTime`` (reference scenario S46)."""
    lag = HOUR_MS
    log = FakeLog("t", 0, FakeConfig(min_compaction_lag_ms=lag), _eight_segments(T0))
    offsets = cleanable_offsets(log, 0, T0 + lag + 1)
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 70)


def test_min_lag_boundary_is_inclusive_for_old_segments() -> None:
    # Cleanable iff largestTimestamp <= now - lag.
    lag = 1000
    log = FakeLog("t", 0, FakeConfig(min_compaction_lag_ms=lag), _eight_segments(T0))
    assert cleanable_offsets(log, 0, T0 + lag).first_uncleanable_dirty_offset == 70
    assert cleanable_offsets(log, 0, T0 + lag - 1).first_uncleanable_dirty_offset == 0


def test_min_lag_uses_mtime_when_segment_has_no_timestamps() -> None:
    lag = 1000
    segs = [segment(0, [-1] * 5, mtime_ms=T0), segment(5, [-1] * 5, mtime_ms=T0 + 500), segment(10, [])]
    log = FakeLog("t", 0, FakeConfig(min_compaction_lag_ms=lag), segs)
    assert cleanable_offsets(log, 0, T0 + 1000).first_uncleanable_dirty_offset == 5


def test_min_lag_search_starts_at_first_dirty_segment() -> None:
    lag = 1000
    segs = [segment(0, [T0 + 5000] * 5), segment(5, [T0] * 5), segment(10, [])]
    log = FakeLog("t", 0, FakeConfig(min_compaction_lag_ms=lag), segs)
    assert cleanable_offsets(log, 5, T0 + 1000).first_uncleanable_dirty_offset == 10
    assert cleanable_offsets(log, 0, T0 + 1000).first_uncleanable_dirty_offset == 0


def test_uncleanable_never_below_first_dirty() -> None:
    log = FakeLog("t", 0, FakeConfig(), _eight_segments(T0), high_watermark=20)
    assert cleanable_offsets(log, 40, T0).first_uncleanable_dirty_offset == 40


@pytest.mark.parametrize("hw", [0, 35, 70, 71])
def test_uncleanable_is_min_of_lso_and_active_base(hw: int) -> None:
    log = FakeLog("t", 0, FakeConfig(), _eight_segments(T0), high_watermark=hw)
    assert cleanable_offsets(log, 0, T0).first_uncleanable_dirty_offset == min(hw, 70)
