"""One clean's counters and timings (Kafka's ``CleanerStats``).

:class:`CleanerStats` counts one clean: the rewrite phase's messages and bytes read and written,
the map phase's messages and bytes, unkeyed ("invalid") records, tombstones removed, the offset
map's utilization, and start / map-done / end times from the clock's monotonic reading. The
one-pass algorithm (:mod:`kompakt.cleaner.cleaner`, ``dedupe``, ``rewrite``) fills it; the
service renders and aggregates it (:mod:`kompakt.cleaner.metrics`). It lives apart from the
gauges so that the algorithm depends on nothing of the service.
"""

from __future__ import annotations

import math

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
        self.buffer_utilization = 0.0

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


def java_div(a: float, b: float) -> float:
    """IEEE division as Java does it: ``x/0`` is ±Infinity and ``0/0`` is NaN, never an error."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b
