"""CleanerStats, the per-clean log line (``LogCleaner.CleanerThread.recordStats``) and the
``LogCleaner`` gauges (``LogCleanerTest.testMaxCleanTimeSecs``, reference scenario S61)."""

from __future__ import annotations

import pytest

from kompakt.cleaner.manager import CleanerManager
from kompakt.cleaner.metrics import (
    CleanerMetrics,
    format_clean_log_line,
    format_delayed_partitions_line,
    format_invalid_messages_line,
    java_fixed,
)
from kompakt.cleaner.stats import CleanerStats
from kompakt.cleaner.throttler import Throttler
from kompakt.clock import FakeClock

from ._fakes import MemoryCheckpoints, filthy_log

T0 = 1_700_000_000_000


def _stats(clock: FakeClock, *, index_ms: int, total_ms: int) -> CleanerStats:
    stats = CleanerStats(clock)
    clock.advance(index_ms)
    stats.index_done()
    clock.advance(total_ms - index_ms)
    stats.all_done()
    return stats


def test_clean_log_line_matches_kafka() -> None:
    clock = FakeClock(T0)
    stats = CleanerStats(clock)
    stats.index_bytes_read(104_857_599)
    stats.index_messages_read(907_866)
    clock.advance(610)
    stats.index_done()
    stats.read_messages(907_866, 104_857_599)
    stats.recopy_messages(8, 693)
    clock.advance(538)
    stats.all_done()
    line = format_clean_log_line(0, "__consumer_offsets-7", 309_313_806, 310_221_664, stats)
    assert line == (
        "\n"
        "\tLog cleaner thread 0 cleaned log __consumer_offsets-7 (dirty section = [309313806, 310221664])\n"
        "\t100.0 MB of log processed in 1.1 seconds (87.1 MB/sec).\n"
        "\tIndexed 100.0 MB in 0.6 seconds (163.9 Mb/sec, 53.1% of total time)\n"
        "\tBuffer utilization: 0.0%\n"
        "\tCleaned 100.0 MB in 0.5 seconds (185.9 Mb/sec, 46.9% of total time)\n"
        "\tStart size: 100.0 MB (907,866 messages)\n"
        "\tEnd size: 0.0 MB (8 messages)\n"
        "\t100.0% size reduction (100.0% fewer messages)\n"
    )


def test_clean_log_line_groups_thousands() -> None:
    clock = FakeClock(T0)
    stats = _stats(clock, index_ms=900, total_ms=2700)
    stats.read_messages(41_881, int(3999.0 * 1048576))
    stats.recopy_messages(1, 100_000)
    stats.buffer_utilization = 0.123
    line = format_clean_log_line(3, "my-topic-0", 39786, 81666, stats)
    assert "\t3,999.0 MB of log processed in 2.7 seconds (1,481.1 MB/sec).\n" in line
    assert "\tBuffer utilization: 12.3%\n" in line
    assert "\tStart size: 3,999.0 MB (41,881 messages)\n" in line


def test_clean_log_line_with_zero_time_prints_java_nan_and_infinity() -> None:
    stats = _stats(FakeClock(T0), index_ms=0, total_ms=0)
    stats.read_messages(2, 200)
    line = format_clean_log_line(0, "t-0", 0, 2, stats)
    assert "\t0.0 MB of log processed in 0.0 seconds (Infinity MB/sec).\n" in line
    assert "(NaN Mb/sec, NaN% of total time)" in line
    empty = format_clean_log_line(0, "t-0", 0, 0, _stats(FakeClock(T0), index_ms=0, total_ms=0))
    assert "\tNaN% size reduction (NaN% fewer messages)\n" in empty


def test_extra_lines() -> None:
    assert format_delayed_partitions_line(1, 1, 61693) == (
        "\tCleanable partitions: 1, Delayed partitions: 1, max delay: 61693"
    )
    assert format_invalid_messages_line(3) == "\tFound 3 invalid messages during compaction."


@pytest.mark.parametrize(
    ("value", "grouping", "text"),
    [
        (0.25, False, "0.3"),
        (0.15, False, "0.2"),
        (1234567.25, True, "1,234,567.3"),
        (-0.04, False, "-0.0"),
        (float("inf"), True, "Infinity"),
        (float("nan"), False, "NaN"),
        (99.99, False, "100.0"),
    ],
)
def test_java_fixed(value: float, grouping: bool, text: str) -> None:
    assert java_fixed(value, grouping) == text


def test_stats_derived_values() -> None:
    stats = _stats(FakeClock(T0), index_ms=250, total_ms=2000)
    stats.read_messages(10, 2 * 1048576)
    assert stats.elapsed_secs == 2.0
    assert stats.elapsed_index_secs == 0.25
    assert stats.mb_per_sec == 1.0
    fresh = CleanerStats(FakeClock(T0))
    assert fresh.elapsed_secs == 0.0


# ----------------------------------------------------------------------------- gauges


def test_gauges_read_zero_with_no_threads() -> None:
    """Kafka's ``LogCleanerTest.testMaxCleanTimeSecs`` (reference scenario S61)."""
    snap = CleanerMetrics().snapshot(T0)
    for name in (
        "max-buffer-utilization-percent",
        "max-clean-time-secs",
        "max-compaction-delay-secs",
        "cleaner-recopy-percent",
        "DeadThreadCount",
    ):
        assert snap[name] == 0.0


def test_thread_gauges() -> None:
    clock = FakeClock(T0)
    metrics = CleanerMetrics()
    metrics.set_threads([0, 1])
    a = _stats(clock, index_ms=1000, total_ms=2900)
    a.read_messages(100, 1000)
    a.recopy_messages(50, 300)
    a.buffer_utilization = 0.256
    a.tombstone_removed(4)
    b = _stats(clock, index_ms=10, total_ms=4100)
    b.read_messages(10, 1000)
    b.recopy_messages(10, 1000)
    metrics.record_clean(0, ("t", 0), 0, 100, a, T0 + 1)
    metrics.record_clean(1, ("t", 1), 5, 15, b, T0 + 2)
    metrics.record_selection(0, 2_500)
    metrics.record_selection(1, 1_999)
    metrics.mark_thread_dead(1)
    snap = metrics.snapshot(T0)
    assert snap["max-buffer-utilization-percent"] == 25.0
    assert snap["cleaner-recopy-percent"] == 65.0  # 1300 / 2000
    assert snap["max-clean-time-secs"] == 4.0
    assert snap["max-compaction-delay-secs"] == 2.0
    assert snap["DeadThreadCount"] == 1.0
    record = metrics.per_partition()[("t", 0)]
    assert (record.records_read, record.records_written, record.records_removed) == (100, 50, 50)
    assert (record.bytes_read, record.bytes_written, record.tombstones_removed) == (1000, 300, 4)
    assert record.duration_s == 2.9
    assert record.cleaned_at_ms == T0 + 1
    metrics.set_threads([0])  # a restart revives dead threads and resets their stats
    assert metrics.snapshot(T0)["DeadThreadCount"] == 0.0
    assert metrics.snapshot(T0)["max-clean-time-secs"] == 0.0


def test_manager_gauges() -> None:
    store = MemoryCheckpoints({("t", i): 20 for i in range(3)})
    mgr = CleanerManager(store, start_ms=T0)
    logs = [filthy_log(0, 20), filthy_log(1, 25), filthy_log(2, 30)]
    clock = FakeClock(0)
    throttler = Throttler(1e9, clock, lambda _s: None)
    throttler.maybe_throttle(123)
    metrics = CleanerMetrics(mgr, logs=lambda: logs, throttler=throttler)
    assert metrics.snapshot(T0)["time-since-last-run-ms"] == 0.0
    mgr.grab_filthiest_compacted_log(logs, T0 + 1000)
    mgr.mark_uncleanable(("t", 1), "boom")
    snap = metrics.snapshot(T0 + 1500)
    assert snap["max-dirty-percent"] == 40.0
    assert snap["time-since-last-run-ms"] == 500.0
    assert snap["uncleanable-partitions-count"] == 1.0
    assert snap["uncleanable-bytes"] == 900.0
    assert snap["cleaner-io-total-bytes"] == 123.0
