"""Time, injected.

Every rule that depends on time (segment rolls, retention, ``min``/``max.compaction.lag.ms``,
tombstone delete horizons, LogAppendTime) takes a :class:`Clock` or a ``now_ms`` argument; nothing
reads the system clock deep inside the logic. Each round of work (a cleaning pass, a retention pass)
reads the clock once at the top and passes ``now_ms`` down, so a round is a pure function of its
inputs and tests move time with :class:`FakeClock` instead of sleeping.

``now_ms`` is wall-clock time (what Kafka's ``time.milliseconds()`` returns) and may be replaced by a
manual clock in testing mode; ``monotonic_ms`` is for timeouts and durations and always follows real
time.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """The source of time for log and cleaner rules."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch, as used by retention, lags and horizons."""
        ...

    def monotonic_ms(self) -> float:
        """Monotonic milliseconds, for durations and timeouts only."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic_ns() / 1_000_000


class FakeClock:
    """A clock that moves only when told to: for tests and for ``kompakt serve --clock manual``.

    It never goes backwards (Kafka's MockTime does not either), so rules that compare "now" with
    earlier readings keep their meaning. Thread-safe: the cleaner threads read it while an admin
    request advances it.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def monotonic_ms(self) -> float:
        with self._lock:
            return float(self._now_ms)

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms`` and return the new time."""
        if ms < 0:
            raise ValueError(f"a FakeClock never goes backwards (asked to advance by {ms} ms)")
        with self._lock:
            self._now_ms += ms
            return self._now_ms

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms``, which must not be earlier than the current time."""
        with self._lock:
            if now_ms < self._now_ms:
                raise ValueError(f"a FakeClock never goes backwards ({now_ms} < {self._now_ms})")
            self._now_ms = now_ms
