"""One clean's counters and timings (Kafka's ``CleanerStats``).

:class:`CleanerStats` counts one clean: the rewrite phase's messages and bytes read and written,
the map phase's messages and bytes, unkeyed ("invalid") records, tombstones removed, the offset
map's utilization, and start / map-done / end times from the clock's monotonic reading. The
one-pass algorithm (:mod:`kompakt.cleaner.cleaner`, ``dedupe``, ``rewrite``) fills it; the
service renders and aggregates it (:mod:`kompakt.cleaner.metrics`). It lives apart from the
gauges so that the algorithm depends on nothing of the service.

Every count means what a plain reader of the files sees (``kompakt log dump``, the records
package's decoder), whichever path of the rewrite handled a batch: records and bytes read are
those of the segments the clean rewrote, as they were; written, as they are after it; a record
removed is one that was there before and is not after. A *tombstone* is a keyed record with a null
value (:attr:`kompakt.records.record.Record.is_tombstone`), removed for whatever reason: superseded
by a later record of its key, past its delete horizon, or part of an aborted transaction. Kafka's
``CleanerStats`` has no tombstone, marker or aborted counts; kompakt reports them so that an
operator can tell what a clean removed, and ``kompakt log compact`` and compact-now, which may run
several passes, report the passes combined (:func:`combine_passes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kompakt.clock import Clock

BYTES_PER_MB = 1024 * 1024


class CleanerStats:
    """Counters and timings of one clean. Used by a single cleaner thread at a time.

    Times are monotonic milliseconds: ``start_ms`` is taken at construction, ``map_complete_ms``
    by :meth:`index_done` and ``end_ms`` by :meth:`all_done`.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.start_ms = clock.monotonic_ms()
        self.map_complete_ms: float | None = None
        self.end_ms: float | None = None
        self.messages_read = 0
        self.bytes_read = 0
        self.messages_written = 0
        self.bytes_written = 0
        self.map_messages_read = 0
        self.map_bytes_read = 0
        self.invalid_messages_read = 0
        self.tombstones_removed = 0
        #: Transaction markers (control records) removed: past their horizon, their transaction empty.
        self.markers_removed = 0
        #: Records of aborted transactions removed (their batches go whole, before any record is
        #: looked at, so none of them counts as invalid; their tombstones count as tombstones too).
        self.aborted_records_removed = 0
        self.buffer_utilization = 0.0

    @property
    def clock(self) -> Clock:
        """The clock this clean is timed by."""
        return self._clock

    def read_messages(self, messages: int, size_bytes: int) -> None:
        """Count a batch read during the rewrite (kept or discarded)."""
        self.messages_read += messages
        self.bytes_read += size_bytes

    def invalid_message(self) -> None:
        self.invalid_messages_read += 1

    def recopy_messages(self, messages: int, size_bytes: int) -> None:
        """Count records written into the cleaned segment."""
        self.messages_written += messages
        self.bytes_written += size_bytes

    def index_messages_read(self, messages: int) -> None:
        self.map_messages_read += messages

    def index_bytes_read(self, size_bytes: int) -> None:
        self.map_bytes_read += size_bytes

    def tombstone_removed(self, count: int = 1) -> None:
        self.tombstones_removed += count

    def markers_dropped(self, count: int) -> None:
        self.markers_removed += count

    def aborted_dropped(self, records: int, tombstones: int) -> None:
        """Count the records of aborted batches dropped whole, ``tombstones`` of them keyed nulls."""
        self.aborted_records_removed += records
        self.tombstones_removed += tombstones

    def add_counts(self, other: CleanerStats) -> None:
        """Add the counters of ``other`` (the part of this clean a worker thread counted)."""
        self.messages_read += other.messages_read
        self.bytes_read += other.bytes_read
        self.messages_written += other.messages_written
        self.bytes_written += other.bytes_written
        self.map_messages_read += other.map_messages_read
        self.map_bytes_read += other.map_bytes_read
        self.invalid_messages_read += other.invalid_messages_read
        self.tombstones_removed += other.tombstones_removed
        self.markers_removed += other.markers_removed
        self.aborted_records_removed += other.aborted_records_removed

    def index_done(self) -> None:
        self.map_complete_ms = self._clock.monotonic_ms()

    def all_done(self) -> None:
        self.end_ms = self._clock.monotonic_ms()

    @property
    def elapsed_secs(self) -> float:
        """Whole clean, map building included; 0 until :meth:`all_done`."""
        return 0.0 if self.end_ms is None else (self.end_ms - self.start_ms) / 1000.0

    @property
    def elapsed_index_secs(self) -> float:
        return 0.0 if self.map_complete_ms is None else (self.map_complete_ms - self.start_ms) / 1000.0

    @property
    def mb_per_sec(self) -> float:
        """Rewrite bytes over the *total* time, as Kafka's headline does."""
        return java_div(self.bytes_read / BYTES_PER_MB, self.elapsed_secs)


def combine_passes(passes: Sequence[CleanerStats]) -> CleanerStats:
    """The statistics of consecutive passes of one compaction as if they were one clean.

    Each pass rewrites every segment from the log start up to its end offset, so pass ``i`` reads
    again what pass ``i - 1`` wrote, plus the segments up to its own end offset. Summing the passes
    would count those records and bytes once per pass (a two-pass compaction of a partition of N
    records would report up to 2N read); instead, read is what the first pass read plus what each
    later pass read beyond the previous pass's output, and written is what the last pass wrote, so
    the combined numbers describe the log before the first pass and after the last. Removals happen
    once, so they add up; so do the map's work and the time. ``passes`` must be in order and
    nothing else may have rewritten the log between them (as in ``compact_log``).
    """
    if not passes:
        raise ValueError("combine_passes needs at least one pass")
    first, last = passes[0], passes[-1]
    combined = CleanerStats(first.clock)
    combined.start_ms = first.start_ms
    combined.end_ms = last.end_ms
    index_ms = sum((p.map_complete_ms or p.start_ms) - p.start_ms for p in passes)
    combined.map_complete_ms = first.start_ms + index_ms
    combined.messages_read = first.messages_read
    combined.bytes_read = first.bytes_read
    for previous, current in zip(passes, passes[1:], strict=False):
        combined.messages_read += current.messages_read - previous.messages_written
        combined.bytes_read += current.bytes_read - previous.bytes_written
    combined.messages_written = last.messages_written
    combined.bytes_written = last.bytes_written
    for p in passes:
        combined.map_messages_read += p.map_messages_read
        combined.map_bytes_read += p.map_bytes_read
        combined.invalid_messages_read += p.invalid_messages_read
        combined.tombstones_removed += p.tombstones_removed
        combined.markers_removed += p.markers_removed
        combined.aborted_records_removed += p.aborted_records_removed
    combined.buffer_utilization = max(p.buffer_utilization for p in passes)
    return combined


def java_div(a: float, b: float) -> float:
    """IEEE division as Java does it: ``x/0`` is ±Infinity and ``0/0`` is NaN, never an error."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b
