"""The long-poll registry: fetches waiting for data, woken by appends or by their deadline.

A Fetch that would return fewer than ``min_bytes`` parks a :class:`FetchWaiter` here, keyed by
every partition it asked for. A Produce that appends to one of those partitions calls
:meth:`FetchWaiters.notify`, and the fetch's timer (``Broker.timers``) fires at ``max_wait_ms``;
whichever comes first completes the fetch, exactly once. Nothing polls and no thread waits per
fetch, so thousands of idle consumers cost a dictionary entry each.

Completion runs on the thread that triggers it (a produce worker thread or the timer's thread),
outside the registry lock, so a slow completion never blocks other registrations.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class FetchWaiter:
    """One parked fetch: ``on_wake`` runs once, on the first :meth:`fire`."""

    __slots__ = ("_fired", "_lock", "_on_wake", "partitions")

    def __init__(self, partitions: Iterable[TopicPartition], on_wake: Callable[[], None]) -> None:
        self.partitions = frozenset(partitions)
        self._on_wake = on_wake
        self._lock = threading.Lock()
        self._fired = False

    @property
    def fired(self) -> bool:
        return self._fired

    def fire(self) -> bool:
        """Run ``on_wake`` unless it already ran; True when this call ran it."""
        with self._lock:
            if self._fired:
                return False
            self._fired = True
        try:
            self._on_wake()
        except Exception:
            log.exception("completing a parked fetch failed")
        return True


class FetchWaiters:
    """Parked fetches by partition. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_partition: dict[TopicPartition, set[FetchWaiter]] = {}
        #: Set by :meth:`wake_all`: a woken fetch answers with what it has instead of parking
        #: again for more bytes.
        self.closing = False

    def register(self, waiter: FetchWaiter) -> None:
        with self._lock:
            for tp in waiter.partitions:
                self._by_partition.setdefault(tp, set()).add(waiter)

    def unregister(self, waiter: FetchWaiter) -> None:
        with self._lock:
            for tp in waiter.partitions:
                waiters = self._by_partition.get(tp)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._by_partition[tp]

    def notify(self, topic: str, partition: int) -> int:
        """Wake every fetch waiting on ``topic``-``partition``; return how many were woken."""
        with self._lock:
            waiters = self._by_partition.pop((topic, partition), None)
        if not waiters:
            return 0
        woken = 0
        for waiter in waiters:
            self.unregister(waiter)
            if waiter.fire():
                woken += 1
        return woken

    def wake_all(self) -> int:
        """Complete every parked fetch now (shutdown: answer them rather than drop them)."""
        self.closing = True
        with self._lock:
            waiters = {w for ws in self._by_partition.values() for w in ws}
            self._by_partition.clear()
        return sum(1 for w in waiters if w.fire())

    def pending(self) -> int:
        with self._lock:
            return len({w for ws in self._by_partition.values() for w in ws})
