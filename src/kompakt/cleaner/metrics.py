"""Cleaner statistics: one clean's INFO log line, and the cleaner's gauges.

:func:`format_clean_log_line` renders one clean's :class:`~kompakt.cleaner.stats.CleanerStats` as
Kafka's per-clean INFO message, byte for byte (``LogCleaner.CleanerThread.recordStats``), including
Java's number formatting: ``%,.1f`` groups thousands with commas and rounds half-up on the shortest
decimal form of the double; a division by zero prints ``NaN`` or ``Infinity`` as Java's doubles
do.

:class:`CleanerMetrics` turns the threads' last cleans and the manager's last selection into
Kafka's ``LogCleaner`` gauges, read with :meth:`CleanerMetrics.snapshot`, plus a record of the last
clean of each partition. Thread-safe (one lock); cleaner threads push, readers pull.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from kompakt.cleaner.manager import CleanerManager
from kompakt.cleaner.planning import CleanableLog, TopicPartition
from kompakt.cleaner.stats import BYTES_PER_MB, CleanerStats, java_div
from kompakt.cleaner.throttler import Throttler

# ------------------------------------------------------------------------------- log line


def java_fixed(value: float, grouping: bool = False) -> str:
    """Java's ``%.1f`` (``%,.1f`` with ``grouping``) for a double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    rounded = Decimal(repr(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return f"{rounded:,.1f}" if grouping else f"{rounded:.1f}"


def _mb(size_bytes: float) -> float:
    return size_bytes / BYTES_PER_MB


def format_clean_log_line(
    thread_id: int, log_name: str, first_dirty_offset: int, end_offset: int, stats: CleanerStats
) -> str:
    """Kafka's INFO message after a successful clean (leading and trailing newline included)."""
    elapsed = stats.elapsed_secs
    index = stats.elapsed_index_secs
    clean = elapsed - index
    read_mb = _mb(stats.bytes_read)
    map_mb = _mb(stats.map_bytes_read)

    def f(x: float) -> str:
        return java_fixed(x, grouping=True)

    def p(x: float) -> str:
        return java_fixed(x)

    lines = [
        "",
        f"\tLog cleaner thread {thread_id} cleaned log {log_name} "
        f"(dirty section = [{first_dirty_offset}, {end_offset}])",
        f"\t{f(read_mb)} MB of log processed in {f(elapsed)} seconds "
        f"({f(_mb(java_div(stats.bytes_read, elapsed)))} MB/sec).",
        f"\tIndexed {f(map_mb)} MB in {p(index)} seconds ({f(java_div(map_mb, index))} Mb/sec, "
        f"{p(java_div(100 * index, elapsed))}% of total time)",
        f"\tBuffer utilization: {p(100 * stats.buffer_utilization)}%",
        f"\tCleaned {f(read_mb)} MB in {p(clean)} seconds ({f(java_div(read_mb, clean))} Mb/sec, "
        f"{p(java_div(100 * clean, elapsed))}% of total time)",
        f"\tStart size: {f(read_mb)} MB ({stats.messages_read:,d} messages)",
        f"\tEnd size: {f(_mb(stats.bytes_written))} MB ({stats.messages_written:,d} messages)",
        f"\t{p(100.0 * (1.0 - java_div(stats.bytes_written, stats.bytes_read)))}% size reduction "
        f"({p(100.0 * (1.0 - java_div(stats.messages_written, stats.messages_read)))}% fewer messages)",
        "",
    ]
    return "\n".join(lines)


def format_delayed_partitions_line(cleanable_count: int, delayed_count: int, max_delay_ms: int) -> str:
    """The extra INFO line when the selection saw logs past ``max.compaction.lag.ms``."""
    return (
        f"\tCleanable partitions: {cleanable_count}, Delayed partitions: {delayed_count}, "
        f"max delay: {max_delay_ms}"
    )


def format_invalid_messages_line(invalid_messages: int) -> str:
    """The WARN line when unkeyed records were dropped."""
    return f"\tFound {invalid_messages} invalid messages during compaction."


# ------------------------------------------------------------------------------- gauges


@dataclass(frozen=True, slots=True)
class PartitionCleanRecord:
    """The last clean of one partition, for per-partition reporting."""

    thread_id: int
    first_dirty_offset: int
    end_offset: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_written: int
    records_removed: int
    tombstones_removed: int
    invalid_records: int
    markers_removed: int
    aborted_records_removed: int
    duration_s: float
    mb_per_s: float
    cleaned_at_ms: int


@dataclass(slots=True)
class _ThreadRecord:
    last_stats: CleanerStats | None = None
    max_compaction_delay_ms: int = 0
    dead: bool = False


def _to_int(x: float) -> float:
    """Java's ``(int) x`` for a gauge: truncation toward zero, NaN as 0."""
    return 0.0 if math.isnan(x) else float(math.trunc(x))


class CleanerMetrics:
    """Kafka's cleaner and cleaner-manager gauges, computed on demand.

    The cleaner threads report with :meth:`record_selection`, :meth:`record_clean` and
    :meth:`mark_thread_dead`; :meth:`set_threads` is called whenever the thread set is
    (re)started, which resets the per-thread values as Kafka's new threads do. ``logs``, when
    given, lists the partition logs for the ``uncleanable-bytes`` gauge.
    """

    def __init__(
        self,
        manager: CleanerManager | None = None,
        *,
        logs: Callable[[], Iterable[CleanableLog]] | None = None,
        throttler: Throttler | None = None,
    ) -> None:
        self._manager = manager
        self._logs = logs
        self._throttler = throttler
        self._lock = threading.Lock()
        self._threads: dict[int, _ThreadRecord] = {}
        self._partitions: dict[TopicPartition, PartitionCleanRecord] = {}

    def set_threads(self, thread_ids: Iterable[int]) -> None:
        with self._lock:
            self._threads = {i: _ThreadRecord() for i in thread_ids}

    def record_selection(self, thread_id: int, max_compaction_delay_ms: int) -> None:
        with self._lock:
            self._threads.setdefault(
                thread_id, _ThreadRecord()
            ).max_compaction_delay_ms = max_compaction_delay_ms

    def record_clean(
        self,
        thread_id: int,
        tp: TopicPartition,
        first_dirty_offset: int,
        end_offset: int,
        stats: CleanerStats,
        now_ms: int,
    ) -> None:
        record = PartitionCleanRecord(
            thread_id=thread_id,
            first_dirty_offset=first_dirty_offset,
            end_offset=end_offset,
            bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written,
            records_read=stats.messages_read,
            records_written=stats.messages_written,
            records_removed=stats.messages_read - stats.messages_written,
            tombstones_removed=stats.tombstones_removed,
            invalid_records=stats.invalid_messages_read,
            markers_removed=stats.markers_removed,
            aborted_records_removed=stats.aborted_records_removed,
            duration_s=stats.elapsed_secs,
            mb_per_s=stats.mb_per_sec,
            cleaned_at_ms=now_ms,
        )
        with self._lock:
            self._threads.setdefault(thread_id, _ThreadRecord()).last_stats = stats
            self._partitions[tp] = record

    def mark_thread_dead(self, thread_id: int) -> None:
        with self._lock:
            self._threads.setdefault(thread_id, _ThreadRecord()).dead = True

    def remove_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._partitions.pop(tp, None)

    def per_partition(self) -> dict[TopicPartition, PartitionCleanRecord]:
        with self._lock:
            return dict(self._partitions)

    def snapshot(self, now_ms: int) -> dict[str, float]:
        """Every gauge by Kafka's name; all 0 with no threads and no manager."""
        with self._lock:
            threads = list(self._threads.values())
        stats = [t.last_stats for t in threads if t.last_stats is not None]
        read = sum(s.bytes_read for s in stats)
        written = sum(s.bytes_written for s in stats)
        values: dict[str, float] = {
            "max-buffer-utilization-percent": _to_int(
                100 * max((s.buffer_utilization for s in stats), default=0.0)
            ),
            "cleaner-recopy-percent": _to_int(100 * written / max(read, 1)),
            "max-clean-time-secs": _to_int(max([0.0, *(s.elapsed_secs for s in stats)])),
            "max-compaction-delay-secs": _to_int(
                max([0.0, *(float(t.max_compaction_delay_ms) for t in threads)]) / 1000
            ),
            "DeadThreadCount": float(sum(1 for t in threads if t.dead)),
            "max-dirty-percent": 0.0,
            "time-since-last-run-ms": 0.0,
            "uncleanable-partitions-count": 0.0,
            "uncleanable-bytes": 0.0,
        }
        if self._manager is not None:
            values["max-dirty-percent"] = _to_int(self._manager.max_dirty_percent)
            values["time-since-last-run-ms"] = float(self._manager.time_since_last_run_ms(now_ms))
            values["uncleanable-partitions-count"] = float(len(self._manager.uncleanable()))
            if self._logs is not None:
                values["uncleanable-bytes"] = float(self._manager.uncleanable_bytes(self._logs(), now_ms))
        if self._throttler is not None:
            values["cleaner-io-total-bytes"] = float(self._throttler.total_bytes)
        return values
