"""The manual clock of ``kompakt serve --clock manual`` and the duration syntax used to move it.

In manual mode the *wall-clock* time that log and cleaner rules read (segment rolls, retention,
``min``/``max.compaction.lag.ms``, delete horizons, LogAppendTime) moves only when an operator or a
test says so, which makes "what happens 25 hours later" testable in milliseconds. Protocol
timeouts must not freeze with it: a consumer group whose session timeout never expires, or a long
poll that never returns, would make the broker unusable. :class:`ManualClock` therefore keeps
``monotonic_ms`` on real time, which is what the group coordinator, the server's tick loop, the
fetch long-poll timers, the cleaner's throttler and its clean-duration statistics read (see
:mod:`kompakt.clock`: ``monotonic_ms`` is for timeouts and durations).
"""

from __future__ import annotations

import re
import time

from kompakt.clock import FakeClock

_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
}
_PART = re.compile(r"(\d+)(ms|min|s|m|h|d|w)")


class ManualClock(FakeClock):
    """A :class:`FakeClock` for a running broker: manual wall clock, real monotonic clock.

    It starts at the real current time (so timestamps produced by clients are neither far in the
    future nor in the past of the broker's "now") and then moves only through :meth:`advance` or
    :meth:`set`, never backwards.
    """

    def __init__(self, start_ms: int | None = None) -> None:
        super().__init__(time.time_ns() // 1_000_000 if start_ms is None else start_ms)

    def monotonic_ms(self) -> float:
        return time.monotonic_ns() / 1_000_000


def parse_duration_ms(text: str) -> int:
    """Milliseconds from ``"1500"`` (plain milliseconds), ``"90s"``, ``"25h"``, ``"1h30m"``, ``"2d"``.

    Units: ``ms``, ``s``, ``m``/``min``, ``h``, ``d``, ``w``. Raises ``ValueError`` with a message
    fit for an HTTP 400 or a CLI usage error; negative durations are refused because the clock
    never goes backwards.
    """
    value = text.strip().lower().replace(" ", "")
    if not value:
        raise ValueError("empty duration")
    if value.startswith("-"):
        raise ValueError(f"the clock never goes backwards: {text!r} is negative")
    if value.isdigit():
        return int(value)
    total = 0
    pos = 0
    for match in _PART.finditer(value):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(value) or pos == 0:
        raise ValueError(
            f"cannot parse duration {text!r} (expected milliseconds or e.g. 90s, 25h, 1h30m, 2d)"
        )
    return total
