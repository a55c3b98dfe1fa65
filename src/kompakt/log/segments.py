"""The ordered map of a partition's segments, and the tiny scheduler used for delayed deletes.

:class:`LogSegments` keeps segments sorted by base offset (a sorted list of base offsets searched
with :mod:`bisect`, plus a dict), answering Kafka's ``floorSegment``/``higherSegment`` questions
in O(log n).

:class:`Scheduler` is what the log asks to run something later (the physical delete of
``.deleted`` files after ``file.delete.delay.ms``, the removal of ``-delete`` directories). The
log never starts threads; :class:`ManualScheduler` runs due tasks only when ``run_due(now_ms)``
is called, which the server's background loop (or a test) does.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from kompakt.clock import Clock
from kompakt.log.files import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from kompakt.log.segment import LogSegment


class LogSegments:
    """Segments of one log by base offset. Not thread-safe: used under the log's lock."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, LogSegment] = {}

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert ``segment``, replacing (and returning) any segment with the same base offset."""
        base = segment.base_offset
        previous = self._by_base.get(base)
        if previous is None:
            bisect.insort(self._bases, base)
        self._by_base[base] = segment
        return previous

    def remove(self, base_offset: int) -> LogSegment | None:
        segment = self._by_base.pop(base_offset, None)
        if segment is not None:
            del self._bases[bisect.bisect_left(self._bases, base_offset)]
        return segment

    def clear(self) -> list[LogSegment]:
        removed = self.values()
        self._bases.clear()
        self._by_base.clear()
        return removed

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    def contains(self, base_offset: int) -> bool:
        return base_offset in self._by_base

    def __len__(self) -> int:
        return len(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def is_empty(self) -> bool:
        return not self._bases

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Segments overlapping [from, to): the floor segment of ``from`` up to bases below ``to``."""
        lo = 0
        if from_offset is not None:
            lo = max(bisect.bisect_right(self._bases, from_offset) - 1, 0)
        hi = len(self._bases) if to_offset is None else bisect.bisect_left(self._bases, to_offset)
        return [self._by_base[b] for b in self._bases[lo:hi]]

    def base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def first(self) -> LogSegment | None:
        return self._by_base[self._bases[0]] if self._bases else None

    @property
    def last(self) -> LogSegment | None:
        return self._by_base[self._bases[-1]] if self._bases else None

    @property
    def active(self) -> LogSegment:
        if not self._bases:
            raise LookupError("the log has no segments")
        return self._by_base[self._bases[-1]]

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset <= ``offset``."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._by_base[self._bases[i]] if i >= 0 else None

    def higher(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def lower(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset < ``offset``."""
        i = bisect.bisect_left(self._bases, offset) - 1
        return self._by_base[self._bases[i]] if i >= 0 else None

    def size_bytes(self) -> int:
        return sum(s.size for s in self._by_base.values())


class Scheduler(Protocol):
    """Runs ``fn`` once, ``delay_ms`` after now. Implementations must never run it synchronously."""

    def schedule(self, delay_ms: int, fn: Callable[[], None], name: str = "") -> None: ...


class ManualScheduler:
    """A scheduler driven from outside: ``run_due(now_ms)`` runs every task that is due.

    Time comes from the injected clock when a task is scheduled. Thread-safe: tasks may be
    scheduled by any thread holding a log lock; ``run_due`` runs tasks outside the scheduler lock.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, str, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def schedule(self, delay_ms: int, fn: Callable[[], None], name: str = "") -> None:
        due = self._clock.now_ms() + max(delay_ms, 0)
        with self._lock:
            heapq.heappush(self._heap, (due, next(self._seq), name, fn))

    def pending(self) -> int:
        with self._lock:
            return len(self._heap)

    def next_due_ms(self) -> int | None:
        with self._lock:
            return self._heap[0][0] if self._heap else None

    def run_due(self, now_ms: int | None = None) -> int:
        """Run every task due at ``now_ms`` (default: the clock's now); return how many ran."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        ran = 0
        while True:
            with self._lock:
                if not self._heap or self._heap[0][0] > now:
                    return ran
                _due, _seq, _name, fn = heapq.heappop(self._heap)
            fn()
            ran += 1

    def clear(self) -> None:
        """Drop every pending task (tests that simulate a crash before async deletes)."""
        with self._lock:
            self._heap.clear()


def delete_later(doomed: Sequence[LogSegment], scheduler: Scheduler, delay_ms: int, name: str) -> None:
    """Rename each segment's files to ``.deleted`` now and remove them after ``delay_ms``.

    Readers still holding a segment keep reading it through the renamed files until then.
    """
    for segment in doomed:
        segment.close_handlers()
        segment.change_file_suffixes(segment.suffix, DELETED_FILE_SUFFIX)
    if not doomed:
        return
    victims = list(doomed)

    def delete_files() -> None:
        for segment in victims:
            segment.delete_files()

    scheduler.schedule(delay_ms, delete_files, f"delete-file {name}")


def swap_in(
    segments: LogSegments,
    new_segments: Sequence[LogSegment],
    old_segments: Sequence[LogSegment],
    rename_and_delete: Callable[[Sequence[LogSegment]], None],
) -> None:
    """Kafka's ``replaceSegments`` order; a crash between any two renames is recoverable.

    1. new segments ``.cleaned`` -> ``.swap`` in descending base-offset order, each put in the
       map (replacing a segment with the same base offset);
    2. old segments still in the map, ascending: dropped from the map unless the first new
       segment took their base offset, then renamed ``.deleted`` for a delayed delete;
    3. new segments ``.swap`` -> final names (the caller then fsyncs the directory).
    """
    new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
    old_sorted = sorted(old_segments, key=lambda s: s.base_offset)
    existing_old = [s for s in old_sorted if segments.get(s.base_offset) is s]
    for segment in reversed(new_sorted):
        if segment.suffix == CLEANED_FILE_SUFFIX:
            segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        segments.add(segment)
    first_new_base = new_sorted[0].base_offset if new_sorted else None
    for segment in existing_old:
        if segment.base_offset != first_new_base and segments.get(segment.base_offset) is segment:
            segments.remove(segment.base_offset)
    rename_and_delete(existing_old)
    for segment in new_sorted:
        if segment.suffix == SWAP_FILE_SUFFIX:
            segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
