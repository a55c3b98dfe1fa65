"""Keyed one-shot timers for the group coordinator, fired by the caller's clock.

Kafka's coordinator runs its group logic off keyed timer tasks (``CoordinatorTimer``): one key per
group for the join phase, one for the sync phase, one per member for its heartbeat. Scheduling a
key again replaces its task, cancelling removes it, and a fired task may schedule others. This is
that, without a thread: the coordinator calls :meth:`KeyedTimer.run_due` with the monotonic time
after every request and on every ``tick``, so a task due "now" (a zero initial rebalance delay)
runs before the request that scheduled it returns.

Due tasks run in deadline order (ties in scheduling order). Not thread-safe; the coordinator
serialises access.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class KeyedTimer:
    """One pending task per key; see the module docstring."""

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        #: key -> (sequence number of its live entry, deadline, task).
        self._live: dict[str, tuple[int, float, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def schedule(self, key: str, deadline_ms: float, task: Callable[[], None]) -> None:
        """Run ``task`` once ``run_due`` sees ``deadline_ms``; replaces the key's earlier task."""
        seq = next(self._seq)
        self._live[key] = (seq, deadline_ms, task)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def deadline(self, key: str) -> float | None:
        """When the key's task is due, or ``None`` when nothing is scheduled under it."""
        entry = self._live.get(key)
        return None if entry is None else entry[1]

    def run_due(self, now_ms: float) -> int:
        """Run every task due at ``now_ms`` (including ones scheduled by tasks); return how many ran."""
        ran = 0
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, seq, key = heapq.heappop(heap)
            entry = self._live.get(key)
            if entry is None or entry[0] != seq:
                continue  # replaced or cancelled
            del self._live[key]
            entry[2]()
            ran += 1
        if len(heap) > 64 and len(heap) > 4 * len(self._live):
            self._heap = [(d, s, k) for d, s, k in heap if self._live.get(k, (None,))[0] == s]
            heapq.heapify(self._heap)
        return ran

    def __len__(self) -> int:
        return len(self._live)
