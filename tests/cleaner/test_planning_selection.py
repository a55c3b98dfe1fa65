"""Choosing the filthiest log (``LogCleanerManager.grabFilthiestCompactedLog``, ports of
``LogCleanerManagerTest``: reference scenarios S43-S45, S48, S49, S53) and kompakt's KIP-354 ranking."""

from __future__ import annotations

import pytest

from kompakt.cleaner.planning import (
    REASON_TOMBSTONES,
    SelectionError,
    deletable_logs,
    estimated_earliest_timestamps,
    grab_filthiest,
    max_compaction_delay,
    needs_forced_roll,
    segments_to_force_roll,
)
from kompakt.config.defs import LONG_MAX
from kompakt.errors import UncleanablePartitionError

from ._fakes import DAY_MS, FakeConfig, FakeLog, build_segments, filthy_log, segment

T0 = 1_700_000_000_000
HOUR_MS = 3_600_000
NONE: frozenset[tuple[str, int]] = frozenset()


def _filthy() -> list[FakeLog]:
    return [filthy_log(0, 20), filthy_log(1, 25), filthy_log(2, 30)]


def _with_cp(logs: list[FakeLog], cp: int | None = 20) -> list[tuple[FakeLog, int | None]]:
    return [(log, cp) for log in logs]


# ------------------------------------------------------------------- grabFilthiestCompactedLog


def test_dirtiest_ratio_wins() -> None:
    """Kafka's ``LogCleanerManagerTest.testGrabFilthiestCompactedLogReturnsLogWithDirtiestRatio`` (reference
    scenario S43)."""
    logs = _filthy()
    sel = grab_filthiest(_with_cp(logs), T0, NONE, NONE)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 2)
    assert [c.topic_partition for c in sel.eligible] == [("t", 2), ("t", 1)]
    assert sel.chosen.cleanable_ratio == pytest.approx(14 / 35)
    assert sel.max_dirty_percent == pytest.approx(100 * 14 / 35)
    assert sel.cleanable_count == 2
    assert sel.chosen.reason == "dirty ratio 0.40 > min.cleanable.dirty.ratio 0.05"


def test_selection_ignores_uncleanable_partitions() -> None:
    """Kafka's ``LogCleanerManagerTest.testGrabFilthiestCompactedLogIgnoresUncleanablePartitions`` (reference
    scenario S43)."""
    sel = grab_filthiest(_with_cp(_filthy()), T0, NONE, {("t", 2)})
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 1)


def test_selection_ignores_in_progress_partitions() -> None:
    """Kafka's ``LogCleanerManagerTest.testGrabFilthiestCompactedLogIgnoresInProgressPartitions`` (reference
    scenario S43)."""
    sel = grab_filthiest(_with_cp(_filthy()), T0, {("t", 2)}, NONE)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 1)


def test_selection_ignores_in_progress_and_uncleanable_partitions() -> None:
    """Kafka's
    ``LogCleanerManagerTest.testGrabFilthiestCompactedLogIgnoresBothInProgressPartitionsAndUncleanablePartitions``
    (reference scenario S43)."""
    sel = grab_filthiest(_with_cp(_filthy()), T0, {("t", 2)}, {("t", 1)})
    assert sel.chosen is None
    assert sel.max_dirty_percent == 0.0  # tp0 has nothing dirty


def test_non_compacted_logs_are_not_candidates() -> None:
    log = filthy_log(0, 30)
    log.config.cleanup_policy = frozenset({"delete"})
    assert grab_filthiest([(log, 0)], T0, NONE, NONE).chosen is None


def test_ratio_test_is_strict() -> None:
    log = filthy_log(0, 30)  # checkpoint 0: everything dirty, ratio 1.0
    log.config.min_cleanable_dirty_ratio = 1.0
    assert grab_filthiest([(log, 0)], T0, NONE, NONE).chosen is None
    log.config.min_cleanable_dirty_ratio = 0.99
    assert grab_filthiest([(log, 0)], T0, NONE, NONE).chosen is not None


# ------------------------------------------------------------ invalid dirty offsets, log start


def test_checkpoint_past_log_end_resets_to_log_start() -> None:
    """Kafka's ``LogCleanerManagerTest.testDirtyOffsetResetIfLargerThanEndOffset`` (reference scenario
    S44)."""
    sel = grab_filthiest([(filthy_log(0, 20), 200)], T0, NONE, NONE)
    assert sel.chosen is not None and sel.chosen.first_dirty_offset == 0
    assert sel.checkpoint_resets == {("t", 0): 0}


def test_checkpoint_below_log_start_resets_to_log_start() -> None:
    """Kafka's ``LogCleanerManagerTest.testDirtyOffsetResetIfSmallerThanStartOffset`` (reference scenario
    S44)."""
    log = filthy_log(0, 20)
    log.log_start_offset = 10
    sel = grab_filthiest([(log, 0)], T0, NONE, NONE)
    assert sel.chosen is not None and sel.chosen.first_dirty_offset == 10
    assert sel.checkpoint_resets == {("t", 0): 10}


def test_log_start_beyond_active_base_selects_nothing() -> None:
    """Kafka's ``LogCleanerManagerTest.testLogStartOffsetLargerThanActiveSegmentBaseOffset`` (reference
    scenario S45)."""
    log = FakeLog(
        "t",
        0,
        FakeConfig(min_cleanable_dirty_ratio=0.05),
        build_segments(9, lambda _o: False, final_roll=False),
    )
    log.log_start_offset = 2
    sel = grab_filthiest([(log, 0)], T0, NONE, NONE)
    assert sel.chosen is None
    assert sel.checkpoint_resets == {("t", 0): 2}


def test_dirty_offset_beyond_active_base_selects_nothing() -> None:
    """Kafka's ``LogCleanerManagerTest.testDirtyOffsetLargerThanActiveSegmentBaseOffset`` (reference scenario
    S45)."""
    log = FakeLog(
        "t",
        0,
        FakeConfig(min_cleanable_dirty_ratio=0.05),
        build_segments(6, lambda _o: False, final_roll=False),
    )
    sel = grab_filthiest([(log, 3)], T0, NONE, NONE)
    assert sel.chosen is None
    assert sel.checkpoint_resets == {}


def test_empty_logs_are_skipped() -> None:
    log = FakeLog("t", 0, FakeConfig(min_cleanable_dirty_ratio=0.0), [segment(0, [])])
    sel = grab_filthiest([(log, None)], T0, NONE, NONE)
    assert sel.chosen is None and sel.eligible == ()


# ------------------------------------------------------------ checkpoint updated for invalid offset


def test_invalid_checkpoint_is_reset_even_when_nothing_is_cleaned() -> None:
    """Kafka's ``LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNoCleaning`` (reference scenario
    S48)."""
    log = filthy_log(0, 20)
    log.log_start_offset = 20
    sel = grab_filthiest([(log, 15)], T0, NONE, NONE)
    assert sel.chosen is None
    assert sel.checkpoint_resets == {("t", 0): 20}


def test_invalid_checkpoint_is_reset_when_another_log_is_selected() -> None:
    """Kafka's ``LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNotSelected`` (reference scenario
    S48)."""
    tp0, tp1 = filthy_log(0, 20), filthy_log(1, 20)
    tp0.log_start_offset = 15
    sel = grab_filthiest([(tp0, 10), (tp1, 5)], T0, NONE, NONE)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 1)
    assert sel.checkpoint_resets == {("t", 0): 15}


# --------------------------------------------------------------------------- evaluation errors


def test_evaluation_error_names_the_log_and_chains_the_cause() -> None:
    """Kafka's ``LogCleanerManagerTest.testGrabFilthiestCompactedLogThrowsException`` (reference scenario
    S53)."""
    ok = filthy_log(0, 30)
    ok.log_start_offset = 5
    broken = filthy_log(1, 30)
    cause = RuntimeError("cannot read first batch timestamp")
    broken.fail_with = cause
    with pytest.raises(UncleanablePartitionError) as info:
        grab_filthiest([(ok, 0), (broken, 0)], T0, NONE, NONE)
    err = info.value
    assert isinstance(err, SelectionError)
    assert err.topic_partition == ("t", 1)
    assert "t-1" in str(err)
    assert err.__cause__ is cause
    assert err.checkpoint_resets == {("t", 0): 5}


# ------------------------------------------------------------------------------- deletableLogs


def test_deletable_logs_by_cleanup_policy() -> None:
    """Kafka's ``LogCleanerManagerTest.testLogsWithSegmentsToDelete*`` (reference scenario S49)."""
    log = filthy_log(0, 20)
    log.config.cleanup_policy = frozenset({"delete"})
    assert deletable_logs([log], NONE, NONE) == []
    log.config.cleanup_policy = frozenset({"compact", "delete"})
    assert deletable_logs([log], NONE, NONE) == [log]
    log.config.cleanup_policy = frozenset({"compact"})
    assert deletable_logs([log], NONE, NONE) == [log]
    assert deletable_logs([log], NONE, {("t", 0)}) == []
    assert deletable_logs([log], {("t", 0)}, NONE) == []


# ----------------------------------------------------------------------------- KIP-354


def _lagged_log(partition: int, first_ts: list[int], *, max_lag: int, min_ratio: float = 0.5) -> FakeLog:
    """Segments of 5 records; segment i's records all carry ``first_ts[i]``; empty active last."""
    segs = [segment(5 * i, [ts] * 5) for i, ts in enumerate(first_ts)]
    segs.append(segment(5 * len(first_ts), []))
    config = FakeConfig(max_compaction_lag_ms=max_lag, min_cleanable_dirty_ratio=min_ratio)
    return FakeLog("t", partition, config, segs)


def test_max_compaction_delay_from_first_batch_timestamps() -> None:
    log = _lagged_log(0, [T0, T0 + 10, T0 + 20], max_lag=HOUR_MS)
    now = T0 + HOUR_MS + 500
    assert max_compaction_delay(log, 0, now) == 500
    assert max_compaction_delay(log, 5, now) == 490  # starts at the first dirty segment
    assert max_compaction_delay(log, 0, T0 + HOUR_MS) == 0


def test_max_compaction_disabled_by_zero() -> None:
    log = _lagged_log(0, [T0], max_lag=0)
    assert log.config.effective_max_compaction_lag_ms == LONG_MAX
    assert max_compaction_delay(log, 0, T0 + 365 * DAY_MS) == 0


def test_kip354_estimate_without_timestamps() -> None:
    # First segment: largest - max segment ms; later ones: previous segment's largest.
    segs = [
        segment(0, [-1] * 5, mtime_ms=T0 + 100),
        segment(5, [-1] * 5, mtime_ms=T0 + 200),
        segment(10, [T0 + 150] * 5),
        segment(15, []),
    ]
    assert estimated_earliest_timestamps(segs, 50) == [T0 + 50, T0 + 100, T0 + 150, None]
    config = FakeConfig(max_compaction_lag_ms=1000, segment_ms=7 * DAY_MS)
    log = FakeLog("t", 0, config, segs)
    # max segment ms = min(segment.ms, max lag) = 1000 -> first estimate T0 - 900.
    assert max_compaction_delay(log, 0, T0 + 1000) == 900
    # From the second segment on, the estimate is the first segment's largest (T0 + 100).
    assert max_compaction_delay(log, 5, T0 + 2000) == 900


def test_must_clean_log_ranks_above_dirtier_log() -> None:
    now = T0 + 2 * HOUR_MS
    # 0.99-dirty log without a breach: 99 dirty segments after 1 clean one, all recent.
    dirty = _lagged_log(0, [now - 10] * 100, max_lag=HOUR_MS)
    # Must-clean log: 2 clean segments then 1 overdue dirty one (ratio 1/3).
    lagged = _lagged_log(1, [T0, T0, T0], max_lag=HOUR_MS, min_ratio=1.0)
    sel = grab_filthiest([(dirty, 5), (lagged, 10)], now, NONE, NONE)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 1)
    assert sel.chosen.must_clean_bytes == 500
    assert sel.chosen.must_clean_ratio == pytest.approx(1 / 3)
    assert sel.chosen.reason == f"max.compaction.lag.ms exceeded by {HOUR_MS} ms"
    assert [c.topic_partition for c in sel.eligible] == [("t", 1), ("t", 0)]
    assert sel.eligible[1].cleanable_ratio == pytest.approx(0.99)
    assert sel.delayed_count == 1
    assert sel.max_compaction_delay_ms == HOUR_MS


@pytest.mark.parametrize("min_ratio", [0.99, 1.0])
def test_breached_max_lag_makes_log_eligible_whatever_the_ratio(min_ratio: float) -> None:
    log = _lagged_log(0, [T0, T0 + 1], max_lag=HOUR_MS, min_ratio=min_ratio)
    sel = grab_filthiest([(log, 5)], T0 + HOUR_MS + 100, NONE, NONE)
    assert sel.chosen is not None
    assert sel.chosen.needs_compaction_now
    assert sel.chosen.max_compaction_delay_ms == 99
    assert sel.chosen.reason == "max.compaction.lag.ms exceeded by 99 ms"


def test_must_clean_ratio_orders_must_clean_logs_before_dirty_ratio() -> None:
    now = T0 + 2 * HOUR_MS
    # A: all 4 segments dirty (ratio 1.0), 1 overdue (must-clean 0.25).
    a = _lagged_log(0, [T0, now, now, now], max_lag=HOUR_MS)
    # B: 3 of 4 dirty (ratio 0.75), 2 of them overdue (must-clean 0.5).
    b = _lagged_log(1, [T0, T0, T0, now], max_lag=HOUR_MS)
    sel = grab_filthiest([(a, 0), (b, 5)], now, NONE, NONE)
    assert [c.topic_partition for c in sel.eligible] == [("t", 1), ("t", 0)]
    assert sel.eligible[0].must_clean_ratio == pytest.approx(0.5)
    assert sel.eligible[0].cleanable_ratio == pytest.approx(0.75)
    assert sel.eligible[1].must_clean_ratio == pytest.approx(0.25)
    assert sel.eligible[1].cleanable_ratio == pytest.approx(1.0)


def test_overdue_log_with_nothing_cleanable_is_not_eligible() -> None:
    log = _lagged_log(0, [T0, T0], max_lag=HOUR_MS, min_ratio=1.0)
    log.high_watermark = 0  # LSO bounds the cleanable range to nothing
    sel = grab_filthiest([(log, 0)], T0 + 2 * HOUR_MS, NONE, NONE)
    assert sel.chosen is None
    assert sel.delayed_count == 1


# ----------------------------------------------------------------------------- tombstones


def test_expired_tombstones_make_a_clean_log_eligible_after_the_others() -> None:
    clean = filthy_log(0, 20)  # checkpoint 20: nothing dirty
    dirty = filthy_log(1, 25)
    horizons = {("t", 0): T0 - 1}
    sel = grab_filthiest([(clean, 20), (dirty, 20)], T0, NONE, NONE, delete_horizons=horizons)
    assert [c.topic_partition for c in sel.eligible] == [("t", 1), ("t", 0)]
    assert sel.eligible[1].reason == REASON_TOMBSTONES
    assert sel.eligible[1].earliest_expired_horizon_ms == T0 - 1

    alone = grab_filthiest([(clean, 20)], T0, NONE, NONE, delete_horizons=horizons)
    assert alone.chosen is not None and alone.chosen.topic_partition == ("t", 0)


def test_horizon_counts_once_reached() -> None:
    clean = filthy_log(0, 20)
    assert grab_filthiest([(clean, 20)], T0, NONE, NONE, delete_horizons={("t", 0): T0}).chosen is not None
    later = grab_filthiest([(clean, 20)], T0, NONE, NONE, delete_horizons={("t", 0): T0 + 1})
    assert later.chosen is None
    assert grab_filthiest([(clean, 20)], T0, NONE, NONE, delete_horizons={("t", 0): None}).chosen is None


def test_older_horizon_first_among_tombstone_candidates() -> None:
    a, b = filthy_log(0, 20), filthy_log(1, 20)
    sel = grab_filthiest(
        [(a, 20), (b, 20)], T0, NONE, NONE, delete_horizons={("t", 0): T0 - 5, ("t", 1): T0 - 50}
    )
    assert [c.topic_partition for c in sel.eligible] == [("t", 1), ("t", 0)]


# ----------------------------------------------------------------------------- forced roll


def _active_log(first_ts: int, *, created_ms: int = 0, max_lag: int = HOUR_MS, records: int = 3) -> FakeLog:
    active = segment(10, [first_ts] * records, created_ms=created_ms)
    return FakeLog("t", 0, FakeConfig(max_compaction_lag_ms=max_lag), [segment(0, [T0] * 10), active])


def test_forced_roll_when_active_first_batch_is_older_than_max_lag() -> None:
    log = _active_log(T0)
    assert not needs_forced_roll(log, log.config, T0 + HOUR_MS)
    assert needs_forced_roll(log, log.config, T0 + HOUR_MS + 1)
    assert segments_to_force_roll(T0 + HOUR_MS + 1, [log]) == [log]


def test_forced_roll_uses_creation_time_without_timestamps() -> None:
    log = _active_log(-1, created_ms=T0 + 1000)
    assert not needs_forced_roll(log, log.config, T0 + HOUR_MS + 1000)
    assert needs_forced_roll(log, log.config, T0 + HOUR_MS + 1001)


def test_no_forced_roll_for_empty_active_disabled_lag_or_non_compacted() -> None:
    now = T0 + 10 * HOUR_MS
    empty = _active_log(T0, records=0)
    assert not needs_forced_roll(empty, empty.config, now)
    disabled = _active_log(T0, max_lag=0)
    assert not needs_forced_roll(disabled, disabled.config, now)
    deleting = _active_log(T0)
    deleting.config.cleanup_policy = frozenset({"delete"})
    assert not needs_forced_roll(deleting, deleting.config, now)
    assert segments_to_force_roll(now, [empty, disabled, deleting]) == []


def test_overdue_segment_beyond_min_lag_bound_is_not_must_clean_bytes() -> None:
    now = T0 + 2 * HOUR_MS
    # Segment 0 is overdue (first batch T0) but also holds a record newer than min lag.
    segs = [segment(0, [T0, now]), segment(2, [now] * 2), segment(4, [])]
    config = FakeConfig(max_compaction_lag_ms=HOUR_MS, min_compaction_lag_ms=1000)
    log = FakeLog("t", 0, config, segs)
    sel = grab_filthiest([(log, 0)], now, NONE, NONE)
    assert sel.chosen is None  # nothing cleanable yet: min lag wins
    assert sel.delayed_count == 1 and sel.max_compaction_delay_ms == HOUR_MS


def test_segment_infos_read_once_per_candidate() -> None:
    calls = 0
    log = filthy_log(0, 30)
    real = log.segment_infos

    def counting() -> list[object]:
        nonlocal calls
        calls += 1
        return list(real())

    log.segment_infos = counting  # type: ignore[method-assign,assignment]
    grab_filthiest([(log, 20)], T0, NONE, NONE)
    assert calls == 1
