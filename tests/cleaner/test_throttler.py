"""The shared I/O throttler (Kafka's ``Throttler.maybeThrottle``) with a fake clock and recorded sleeps."""

from __future__ import annotations

import pytest

from kompakt.cleaner.throttler import UNLIMITED_RATE, Throttler
from kompakt.clock import FakeClock


def _throttler(rate: float) -> tuple[Throttler, FakeClock, list[float]]:
    clock = FakeClock(0)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(round(seconds * 1000))

    return Throttler(rate, clock, sleep), clock, sleeps


def test_no_check_before_the_interval_has_passed() -> None:
    throttler, clock, sleeps = _throttler(1000)
    assert throttler.maybe_throttle(10_000) == 0
    clock.advance(300)  # "more than 300 ms" is strict
    assert throttler.maybe_throttle(10_000) == 0
    assert sleeps == []


def test_sleeps_until_the_period_meets_the_target_rate() -> None:
    throttler, clock, sleeps = _throttler(1000)
    throttler.maybe_throttle(100)
    clock.advance(301)
    # 1000 bytes in 301 ms is 3322 B/s; at 1000 B/s they take 1000 ms: sleep 699 ms.
    assert throttler.maybe_throttle(900) == 699
    assert sleeps == [0.699]
    assert clock.now_ms() == 1000
    # The new period began before the sleep (at 301), so it already spans 699 ms.
    assert throttler.maybe_throttle(100) == 0
    assert sleeps == [0.699]
    assert throttler.total_bytes == 1100
    assert throttler.total_sleep_ms == 699


def test_nothing_observed_means_no_check() -> None:
    throttler, clock, sleeps = _throttler(1)
    clock.advance(1000)
    assert throttler.maybe_throttle(0) == 0
    assert sleeps == []


def test_sleep_rounds_half_up() -> None:
    throttler, clock, sleeps = _throttler(4000)
    clock.advance(301)
    # 3998 bytes at 4 B/ms take 999.5 ms, minus 301 elapsed = 698.5 -> 699 (Math.round).
    assert throttler.maybe_throttle(3998) == 699
    assert sleeps == [0.699]


def test_below_target_rate_never_sleeps() -> None:
    throttler, clock, sleeps = _throttler(1_000_000)
    for _ in range(10):
        clock.advance(400)
        throttler.maybe_throttle(1000)
    assert sleeps == []
    assert throttler.total_bytes == 10_000


def test_unlimited_rate_never_sleeps() -> None:
    throttler, clock, sleeps = _throttler(UNLIMITED_RATE)
    clock.advance(301)
    throttler.maybe_throttle(10**15)
    assert sleeps == []


def test_update_rate_is_applied_in_place() -> None:
    throttler, clock, sleeps = _throttler(10e6)
    throttler.update_rate(20e6)
    assert throttler.rate_bytes_per_s == 20e6
    clock.advance(301)
    # 10 MB at 20 MB/s take 500 ms; 301 elapsed -> 199 ms.
    assert throttler.maybe_throttle(10_000_000) == 199
    with pytest.raises(ValueError):
        throttler.update_rate(0)
