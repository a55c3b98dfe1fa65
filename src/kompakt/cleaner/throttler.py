"""The I/O throttler shared by every cleaner thread (``log.cleaner.io.max.bytes.per.second``).

The cleaner reports each chunk it reads (building the map, rewriting) and writes. As in Kafka's
``Throttler.maybeThrottle``, bytes are summed over a period; once more than ``check_interval_ms``
has passed with something observed, the period's rate is compared with the target and, when above
it, the reporting thread sleeps long enough for the period's bytes to have taken
``observed / target`` seconds; the next period starts when the sleep ends.

Two differences make the limit bind on short cleans, which Kafka's does not:

* **Idle time is not credit.** Kafka measures a period from the end of the previous one, so the
  first check after an idle spell (a broker that cleaned nothing for minutes) divides the new
  burst by the whole idle time and lets it through; a clean shorter than that never sleeps at
  all (514 MB/s was seen with 15 MB/s configured). Here a period whose bytes are paid for and
  that saw no I/O for ``check_interval_ms`` restarts at the next reported chunk, keeping one
  check interval of the idle time (the time the reported chunk may have taken to read).
* **A period that is far ahead is checked early.** Kafka checks only after ``check_interval_ms``
  of wall time, so a clean that does all its I/O within that interval is never throttled. Here a
  period is also checked as soon as its bytes are more than ``check_interval_ms`` ahead of the
  target rate, so the sleep starts from the first chunk; at most ``check_interval_ms`` worth of
  bytes is ever left unslept (and carries over to the next clean if it starts soon).

Thread safety: one lock; the sleep happens while holding it, which is what makes the limit
shared: other threads reporting I/O queue behind the sleeper. Time comes from the injected
clock's monotonic reading, and sleeping goes through ``sleep_fn`` so tests never sleep.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

from kompakt.clock import Clock

logger = logging.getLogger(__name__)

DEFAULT_CHECK_INTERVAL_MS = 300
UNLIMITED_RATE = 1.7976931348623157e308  # Java's Double.MAX, the default of the broker config


def _java_round(x: float) -> int:
    """``Math.round``: halves go up (Python's ``round`` goes to even)."""
    return math.floor(x + 0.5)


class Throttler:
    """Keeps the summed byte rate of all callers at or below ``rate_bytes_per_s``.

    ``sleep_fn`` takes seconds (``time.sleep``, or a shutdown event's ``wait``).
    """

    def __init__(
        self,
        rate_bytes_per_s: float,
        clock: Clock,
        sleep_fn: Callable[[float], object],
        check_interval_ms: float = DEFAULT_CHECK_INTERVAL_MS,
    ) -> None:
        if rate_bytes_per_s <= 0:
            raise ValueError(f"throttle rate must be positive, got {rate_bytes_per_s}")
        self._rate = float(rate_bytes_per_s)
        self._clock = clock
        self._sleep_fn = sleep_fn
        self._check_interval_ms = check_interval_ms
        self._lock = threading.Lock()
        self._period_start_ms = clock.monotonic_ms()
        self._last_report_ms = self._period_start_ms
        self._observed = 0.0
        self._total_bytes = 0
        self._total_sleep_ms = 0

    @property
    def rate_bytes_per_s(self) -> float:
        with self._lock:
            return self._rate

    @property
    def total_bytes(self) -> int:
        """Everything ever reported: the ``cleaner-io`` meter's count."""
        with self._lock:
            return self._total_bytes

    @property
    def total_sleep_ms(self) -> int:
        with self._lock:
            return self._total_sleep_ms

    def update_rate(self, rate_bytes_per_s: float) -> None:
        """Apply a dynamic change of ``log.cleaner.io.max.bytes.per.second`` in place."""
        if rate_bytes_per_s <= 0:
            raise ValueError(f"throttle rate must be positive, got {rate_bytes_per_s}")
        with self._lock:
            self._rate = float(rate_bytes_per_s)

    def maybe_throttle(self, observed_bytes: int) -> int:
        """Report ``observed_bytes`` of I/O; returns the milliseconds slept (0 mostly)."""
        with self._lock:
            self._total_bytes += observed_bytes
            now = self._clock.monotonic_ms()
            if (
                now - self._last_report_ms > self._check_interval_ms
                and self._observed * 1000.0 / self._rate <= now - self._period_start_ms
            ):
                # Idle, with everything observed paid for: a new burst starts here. One check
                # interval of the idle time is kept, for the reading of the chunk just reported.
                self._period_start_ms = now - self._check_interval_ms
                self._observed = 0.0
            self._last_report_ms = now
            self._observed += observed_bytes
            if self._observed <= 0:
                return 0
            elapsed_ms = now - self._period_start_ms
            needed_ms = self._observed * 1000.0 / self._rate
            if elapsed_ms <= self._check_interval_ms and needed_ms - elapsed_ms <= self._check_interval_ms:
                return 0
            slept = 0
            rate = self._observed * 1000.0 / elapsed_ms if elapsed_ms > 0 else math.inf
            if rate > self._rate:
                sleep_ms = _java_round(needed_ms - elapsed_ms)
                if sleep_ms > 0:
                    logger.debug(
                        "Natural rate is %f per second but desired rate is %f, "
                        "sleeping for %d ms to compensate.",
                        rate,
                        self._rate,
                        sleep_ms,
                    )
                    self._sleep_fn(sleep_ms / 1000.0)
                    self._total_sleep_ms += sleep_ms
                    slept = sleep_ms
            self._period_start_ms = self._clock.monotonic_ms()
            self._last_report_ms = self._period_start_ms
            self._observed = 0.0
            return slept
