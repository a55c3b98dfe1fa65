"""``UnifiedLogTest`` retention-policy rows, ``LogLoaderTest.testOpenDeletesObsoleteFiles``, and the common
rules of ``UnifiedLog.deleteOldSegments`` on pure inputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kompakt.log import retention

from .log_helpers import LogHarness, config, kv


def filled(tmp_path: Path, n: int = 15, timestamp: int = 10, **overrides: object) -> LogHarness:
    size = len(kv(0, timestamp=timestamp))
    h = LogHarness(tmp_path / "t-0", config(internal_segment_bytes=5 * size, **overrides))
    for i in range(n):
        h.log.append(kv(i, timestamp=timestamp))
    return h


def test_compact_policy_does_not_delete(tmp_path: Path) -> None:
    h = filled(tmp_path, retention_ms=10_000, cleanup_policy=frozenset({"compact"}))
    assert len(h.log.segments) == 3
    assert h.log.delete_old_segments(h.clock.now_ms()) == 0
    assert len(h.log.segments) == 3


def test_compact_delete_policy_leaves_one_segment(tmp_path: Path) -> None:
    h = filled(tmp_path, retention_ms=10_000, cleanup_policy=frozenset({"compact", "delete"}))
    assert h.log.delete_old_segments(h.clock.now_ms()) == 3
    assert len(h.log.segments) == 1
    assert h.log.active_segment.base_offset == 15 and h.log.log_start_offset == 15


def test_start_offset_breach_with_compact_policy(tmp_path: Path) -> None:
    h = filled(tmp_path, retention_ms=10_000, cleanup_policy=frozenset({"compact"}))
    h.log.increment_log_start_offset(5)
    assert h.log.delete_old_segments(h.clock.now_ms()) == 1
    assert [s.base_offset for s in h.log.segments] == [5, 10]


def test_empty_policy_runs_only_start_offset_pass(tmp_path: Path) -> None:
    h = filled(tmp_path, retention_ms=10_000, cleanup_policy=frozenset())
    assert h.log.delete_old_segments(h.clock.now_ms()) == 0
    h.log.increment_log_start_offset(11)
    assert h.log.delete_old_segments(h.clock.now_ms()) == 2


def test_size_based_retention(tmp_path: Path) -> None:
    size = len(kv(0))
    h = filled(tmp_path, timestamp=1_000, retention_ms=-1, retention_bytes=10 * size)
    assert h.log.delete_old_segments(h.clock.now_ms()) == 1
    assert len(h.log.segments) == 2
    h2 = filled(tmp_path / "b", timestamp=1_000, retention_ms=-1, retention_bytes=15 * size)
    assert h2.log.delete_old_segments(h2.clock.now_ms()) == 0
    assert len(h2.log.segments) == 3


def test_include_retention_false_runs_only_start_offset_pass(tmp_path: Path) -> None:
    h = filled(tmp_path, retention_ms=10_000)
    assert h.log.delete_old_segments(h.clock.now_ms(), include_retention=False) == 0
    assert h.log.delete_old_segments(h.clock.now_ms(), include_retention=True) == 3


def test_deleted_files_are_renamed_then_removed_after_delay(tmp_path: Path) -> None:
    h = filled(tmp_path, retention_ms=10_000, file_delete_delay_ms=50)
    h.log.delete_old_segments(h.clock.now_ms())
    names = sorted(p.name for p in h.directory.iterdir())
    assert "00000000000000000000.log.deleted" in names
    h.scheduler.run_due()
    assert "00000000000000000000.log.deleted" in {p.name for p in h.directory.iterdir()}
    h.clock.advance(50)
    h.scheduler.run_due()
    assert not any(p.name.endswith(".deleted") for p in h.directory.iterdir())


def test_open_deletes_obsolete_files(tmp_path: Path) -> None:
    """``LogLoaderTest.testOpenDeletesObsoleteFiles`` (reference scenario S41)."""
    h = LogHarness(tmp_path / "t-0", config(retention_ms=999))
    size = len(kv(0))
    h.log.update_config(config(retention_ms=999, internal_segment_bytes=5 * size))
    ts = h.clock.now_ms() - 1000
    for i in range(100):
        h.log.append(kv(i, timestamp=ts))
    h.log.delete_old_segments(h.clock.now_ms())
    h.scheduler.clear()  # crash before the async deletes
    h.reopen(clean=False)
    assert len(h.log.segments) == 1
    assert not any(p.name.endswith(".deleted") for p in h.directory.iterdir())


@dataclass
class Fake:
    base_offset: int
    size: int
    largest_timestamp: int


def test_common_rules_on_pure_inputs() -> None:
    segs = [Fake(0, 10, 1), Fake(10, 10, 1), Fake(20, 10, 1), Fake(30, 0, 1)]
    # never above the high watermark
    assert (
        retention.retention_time_breached(
            segs, retention_ms=5, now_ms=100, log_end_offset=30, high_watermark=15
        )
        == 1
    )
    # never the last empty segment
    assert (
        retention.retention_time_breached(
            segs, retention_ms=5, now_ms=100, log_end_offset=30, high_watermark=30
        )
        == 3
    )
    # stop at the first segment that may not go
    mixed = [Fake(0, 10, 1), Fake(10, 10, 99), Fake(20, 10, 1), Fake(30, 10, 1)]
    assert (
        retention.retention_time_breached(
            mixed, retention_ms=5, now_ms=100, log_end_offset=40, high_watermark=40
        )
        == 1
    )
    assert (
        retention.retention_size_breached(segs, retention_bytes=31, log_end_offset=30, high_watermark=30) == 0
    )
    assert (
        retention.retention_size_breached(segs, retention_bytes=15, log_end_offset=30, high_watermark=30) == 1
    )
    assert (
        retention.log_start_offset_breached(segs, log_start_offset=20, log_end_offset=30, high_watermark=30)
        == 2
    )
