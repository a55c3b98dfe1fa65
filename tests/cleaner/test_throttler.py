"""The shared I/O throttler (Kafka's ``Throttler.maybeThrottle``) with a fake clock and recorded sleeps.

Beyond Kafka (issue 17): idle time is not credit, and a period that is far ahead of the target is
checked before the check interval has passed, so the limit binds on a short clean after an idle
spell (Kafka's lets such a clean through at full speed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.cleaner.throttler import UNLIMITED_RATE, Throttler
from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch

MIB = 1024 * 1024
GUIDE_RATE = 15_728_640  # log.cleaner.io.max.bytes.per.second=15728640, the guide's 15 MB/s


def _throttler(rate: float, start_ms: int = 0) -> tuple[Throttler, FakeClock, list[float]]:
    clock = FakeClock(start_ms)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(round(seconds * 1000))

    return Throttler(rate, clock, sleep), clock, sleeps


def _clean(throttler: Throttler, clock: FakeClock, total: int, chunk: int, natural_rate: float) -> float:
    """Report ``total`` bytes in chunks, each taking the time the natural rate gives it; returns
    the seconds the whole run took on the clock (I/O plus throttle sleeps)."""
    started = clock.monotonic_ms()
    done = 0
    while done < total:
        size = min(chunk, total - done)
        clock.advance(round(size * 1000 / natural_rate))
        throttler.maybe_throttle(size)
        done += size
    return (clock.monotonic_ms() - started) / 1000


def test_on_schedule_within_the_interval_is_not_checked() -> None:
    throttler, clock, sleeps = _throttler(1000)
    assert throttler.maybe_throttle(100) == 0  # 100 ms worth: ahead by less than the interval
    clock.advance(300)  # "more than 300 ms" is strict
    assert throttler.maybe_throttle(100) == 0
    assert sleeps == []


def test_sleeps_until_the_period_meets_the_target_rate() -> None:
    throttler, clock, sleeps = _throttler(1000)
    throttler.maybe_throttle(100)
    clock.advance(200)
    throttler.maybe_throttle(100)
    clock.advance(101)
    # 1000 bytes in 301 ms is 3322 B/s; at 1000 B/s they take 1000 ms: sleep 699 ms.
    assert throttler.maybe_throttle(800) == 699
    assert sleeps == [0.699]
    assert clock.now_ms() == 1000
    # The next period starts when the sleep ends, as in Kafka 4.1.
    assert throttler.maybe_throttle(100) == 0
    assert throttler.total_bytes == 1100
    assert throttler.total_sleep_ms == 699


def test_far_ahead_of_the_rate_sleeps_before_the_interval_has_passed() -> None:
    throttler, clock, sleeps = _throttler(1000)
    # 10,000 bytes at 1000 B/s take 10 s; reported all at once, they sleep now (Kafka: never,
    # until 300 ms have passed).
    assert throttler.maybe_throttle(10_000) == 10_000
    assert sleeps == [10.0]


def test_idle_time_is_not_credit_for_the_next_burst() -> None:
    throttler, clock, sleeps = _throttler(1000)
    clock.advance(3_600_000)  # an hour without I/O
    # Kafka divides these bytes by the idle hour and lets them through. Here the idle time counts
    # for one check interval only: 2000 bytes take 2000 ms, 300 of them are credited.
    assert throttler.maybe_throttle(2000) == 1700


def test_a_short_clean_after_an_idle_broker_is_held_to_the_rate() -> None:
    """The guide's 15 MB/s: 100 MiB of cleaner I/O at a natural 514 MB/s, right after an idle
    hour. Without the throttle it takes 0.2 s; at 15 MiB/s it must take at least 6 s (100 MiB /
    15 MiB/s is 6.67 s, less at most one check interval at each end)."""
    throttler, clock, _sleeps = _throttler(GUIDE_RATE)
    clock.advance(3_600_000)
    seconds = _clean(throttler, clock, 100 * MIB, 1 * MIB, 514e6)
    assert seconds >= 6.0, seconds
    assert seconds <= 100 * MIB / GUIDE_RATE + 0.1


def test_short_cleans_back_to_back_share_the_budget() -> None:
    """Many small cleans, each smaller than one interval's worth, in quick succession: the bytes
    left unslept at the end of one carry over to the next, so the average stays at the target."""
    throttler, clock, _sleeps = _throttler(GUIDE_RATE)
    clock.advance(60_000)
    seconds = sum(_clean(throttler, clock, 2 * MIB, 256 * 1024, 514e6) for _ in range(50))
    assert seconds >= 100 * MIB / GUIDE_RATE - 0.6  # one interval credited, one left unslept


def test_a_long_clean_averages_the_target_rate() -> None:
    throttler, clock, _sleeps = _throttler(GUIDE_RATE)
    seconds = _clean(throttler, clock, 300 * MIB, 16 * MIB, 2e9)
    assert 300 * MIB / GUIDE_RATE - 0.6 <= seconds <= 300 * MIB / GUIDE_RATE + 0.1


def test_below_target_rate_never_sleeps() -> None:
    throttler, clock, sleeps = _throttler(1_000_000)
    for _ in range(10):
        clock.advance(400)
        throttler.maybe_throttle(1000)
    assert sleeps == []
    assert throttler.total_bytes == 10_000


def test_nothing_observed_means_no_check() -> None:
    throttler, clock, sleeps = _throttler(1)
    clock.advance(1000)
    assert throttler.maybe_throttle(0) == 0
    assert sleeps == []


def test_sleep_rounds_half_up() -> None:
    throttler, clock, sleeps = _throttler(4000)
    throttler.maybe_throttle(0)
    clock.advance(200)
    throttler.maybe_throttle(0)
    clock.advance(101)
    # 3998 bytes at 4 B/ms take 999.5 ms, minus 301 elapsed = 698.5 -> 699 (Math.round).
    assert throttler.maybe_throttle(3998) == 699
    assert sleeps == [0.699]


def test_unlimited_rate_never_sleeps() -> None:
    throttler, clock, sleeps = _throttler(UNLIMITED_RATE)
    clock.advance(301)
    throttler.maybe_throttle(10**15)
    assert sleeps == []


def test_update_rate_is_applied_in_place() -> None:
    throttler, clock, sleeps = _throttler(10e6)
    throttler.update_rate(20e6)
    assert throttler.rate_bytes_per_s == 20e6
    clock.advance(1000)
    # 20 MB at 20 MB/s take 1000 ms; one idle interval (300 ms) is credited -> 700 ms.
    assert throttler.maybe_throttle(20_000_000) == 700
    with pytest.raises(ValueError):
        throttler.update_rate(0)


def test_a_real_short_clean_sleeps_for_its_io(tmp_path: Path) -> None:
    """A whole clean through the cleaner's own I/O (map pass reads, copy pass reads and writes)
    on a freshly idle throttler: the clean is held to the rate from its first chunk."""
    clock = FakeClock()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(round(seconds * 1000))

    directory = tmp_path / "t-0"
    directory.mkdir()
    config = LogConfig.from_overrides(
        {"cleanup.policy": "compact", "internal.segment.bytes": str(256 * 1024)}
    )
    log = PartitionLog(directory, "t", 0, config, clock)
    value = b"v" * 1000
    for i in range(1000):
        log.append(build_batch([SimpleRecord(str(i % 50).encode(), value, clock.now_ms())]))
    throttler = Throttler(1 * MIB, clock, sleep)
    clock.advance(3_600_000)
    cleaner = Cleaner(0, HashedOffsetMap(1 << 20, 0.9), clock, throttler=throttler)
    cleaner.clean(log, 0, log.active_segment.base_offset)
    log.close()
    assert throttler.total_bytes > 1 * MIB
    # Kafka's Throttler sleeps 0 ms here: the clean's I/O takes no clock time and the period
    # began an hour ago.
    assert sum(slept) >= throttler.total_bytes / MIB - 0.6
