"""``LogSegment.shouldRoll`` (``UnifiedLogTest.testTimeBasedLogRollDuringAppend`` and friends, reference
scenario S74): roll rules (size, time with jitter, index full, offset overflow, compacted max lag)."""

from __future__ import annotations

from pathlib import Path

from .log_helpers import LogHarness, batch, config, kv

HOUR = 3_600_000


def bases(h: LogHarness) -> list[int]:
    return [s.base_offset for s in h.log.segments]


def test_time_based_roll_during_append(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(segment_ms=HOUR))
    now = h.clock.now_ms()
    h.clock.advance(HOUR + 1)
    h.log.append(kv(0, timestamp=h.clock.now_ms()))
    assert bases(h) == [0], "an append to an empty segment never rolls"
    h.log.append(kv(1, timestamp=h.clock.now_ms() + HOUR + 1))
    assert bases(h) == [0, 1], "the next append rolls by batch timestamps"
    # wall clock alone does not roll a segment that has timestamps
    h.clock.advance(10 * HOUR)
    h.log.append(kv(2, timestamp=h.clock.now_ms() - 9 * HOUR))
    assert bases(h) == [0, 1]
    assert now < h.clock.now_ms()


def test_time_based_roll_without_timestamps_uses_wall_clock(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(segment_ms=HOUR))
    h.log.append(kv(0, timestamp=-1))
    h.clock.advance(HOUR)
    h.log.append(kv(1, timestamp=-1))
    assert bases(h) == [0]
    h.clock.advance(1)
    h.log.append(kv(2, timestamp=-1))
    assert bases(h) == [0, 2]


def test_time_based_roll_jitter(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(segment_ms=HOUR, segment_jitter_ms=HOUR // 2), seed=7)
    jitter = h.log.active_segment.roll_jitter_ms
    assert 0 < jitter < HOUR // 2
    h.log.append(kv(0, timestamp=1000))
    h.log.append(kv(1, timestamp=1000 + HOUR - jitter))
    assert bases(h) == [0]
    h.log.append(kv(2, timestamp=1000 + HOUR - jitter + 1))
    assert bases(h) == [0, 2]


def test_size_based_roll(tmp_path: Path) -> None:
    size = len(kv(0))
    h = LogHarness(tmp_path / "t-0", config(internal_segment_bytes=10 * (size - 1)))
    for i in range(11):
        h.log.append(kv(i))
    assert len(h.log.segments) == 2


def test_offset_index_full_rolls(tmp_path: Path) -> None:
    # 36 bytes: 4 offset-index slots, 3 time-index slots (full at 2). Constant timestamps keep
    # the time index at one entry, so the offset index is the one that fills up.
    h = LogHarness(tmp_path / "t-0", config(segment_index_bytes=36, index_interval_bytes=1))
    for i in range(7):
        h.log.append(kv(i, timestamp=1000))
    # entries come from the 2nd..5th appends; the 6th finds the index full and rolls
    assert bases(h) == [0, 5]


def test_time_index_full_rolls(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(segment_index_bytes=24, index_interval_bytes=1))
    for i in range(4):
        h.log.append(kv(i, timestamp=1000 + i))
    # the time index holds 2 slots, one reserved: full after one entry (from the 2nd append)
    assert bases(h) == [0, 2]


def test_relative_offset_overflow_rolls(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append_with_offsets(batch(b"a", base_offset=0))
    h.log.append_with_offsets(batch(b"b", base_offset=2**31 - 1))
    assert bases(h) == [0]
    h.log.append_with_offsets(batch(b"c", base_offset=2**31))
    assert bases(h) == [0, 2**31]


def test_compacted_log_rolls_at_max_compaction_lag(tmp_path: Path) -> None:
    cfg = config(segment_ms=HOUR, max_compaction_lag_ms=100, cleanup_policy=frozenset({"compact"}))
    h = LogHarness(tmp_path / "t-0", cfg)
    h.log.append(kv(0, timestamp=1000))
    h.log.append(kv(1, timestamp=1100))
    assert bases(h) == [0]
    h.log.append(kv(2, timestamp=1101))
    assert bases(h) == [0, 2]
    h2 = LogHarness(tmp_path / "u-0", config(segment_ms=HOUR, max_compaction_lag_ms=100))
    h2.log.append(kv(0, timestamp=1000))
    h2.log.append(kv(1, timestamp=5000))
    assert bases(h2) == [0], "the max lag only lowers segment.ms for compacted logs"
