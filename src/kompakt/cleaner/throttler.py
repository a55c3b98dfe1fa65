"""The I/O throttler shared by every cleaner thread (``log.cleaner.io.max.bytes.per.second``).

The cleaner reports each chunk it reads (building the map, rewriting) and writes. Bytes are
summed over a period; once more than ``check_interval_ms`` has passed with something observed,
the period's rate is compared with the target and, when above it, the reporting thread sleeps
long enough for the period's bytes to have taken ``observed / target`` seconds
(Kafka's ``Throttler.maybeThrottle``). The period then restarts at the reading taken *before* the sleep,
as Kafka does, so the next period's elapsed time includes the sleep.

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
            self._observed += observed_bytes
            now = self._clock.monotonic_ms()
            elapsed_ms = now - self._period_start_ms
            if elapsed_ms <= self._check_interval_ms or self._observed <= 0:
                return 0
            slept = 0
            rate = self._observed * 1000.0 / elapsed_ms
            if rate > self._rate:
                sleep_ms = _java_round(self._observed / (self._rate / 1000.0) - elapsed_ms)
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
            self._period_start_ms = now
            self._observed = 0.0
            return slept
