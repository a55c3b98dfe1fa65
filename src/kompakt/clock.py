"""Time, injected.

Every rule that depends on time (segment rolls, retention, ``min``/``max.compaction.lag.ms``,
tombstone delete horizons, LogAppendTime) takes a :class:`Clock` or a ``now_ms`` argument; nothing
reads the system clock deep inside the logic. Each round of work (a cleaning pass, a retention pass)
reads the clock once at the top and passes ``now_ms`` down, so a round is a pure function of its
inputs and tests move time with :class:`FakeClock` instead of sleeping.

``now_ms`` is wall-clock time (what Kafka's ``time.milliseconds()`` returns) and may be replaced by a
manual clock in testing mode; ``monotonic_ms`` is for timeouts and durations and always follows real
time. :func:`parse_time_ms` is the one reading of a point in time a user writes (a CLI option, an
admin endpoint parameter, a restore window).
"""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime
from typing import Protocol

_EPOCH_MS = re.compile(r"[+-]?[0-9]+")


def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch, from epoch milliseconds or an ISO-8601 date-time.

    A date-time without an offset is taken as UTC rather than local time, so that a script gives
    the same answer on every machine; ``Z`` or ``+02:00`` make it explicit. Raises
    :class:`ValueError` saying what was expected; each caller puts that in its own error (a usage
    error naming the option, a bad request, a backup config error naming the key).
    """
    stripped = text.strip()
    if _EPOCH_MS.fullmatch(stripped):
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        raise ValueError(
            f"expected milliseconds since the epoch or an ISO-8601 date-time, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


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
