"""Giving memory back after large requests: when it runs, and that it runs once per interval."""

from __future__ import annotations

import asyncio
import time

from kompakt.server.memory import LARGE_REQUEST_BYTES, MemoryReturn, malloc_trim

DEADLINE_S = 5.0


async def until(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached within {DEADLINE_S} s"
        await asyncio.sleep(0.005)  # the polling interval; the deadline is the check


def test_small_requests_give_nothing_back_and_large_ones_once_per_interval() -> None:
    async def scenario() -> list[int]:
        trims: list[int] = []
        memory = MemoryReturn(interval_s=0.05, trim=lambda: trims.append(1))
        memory.after_request(LARGE_REQUEST_BYTES - 1)
        for _ in range(5):  # a stream of large requests: one run for all of them
            memory.after_request(LARGE_REQUEST_BYTES)
        await until(lambda: memory.runs == 1, "the first run")
        memory.after_request(10 * LARGE_REQUEST_BYTES)  # a later one: a run of its own
        await until(lambda: memory.runs == 2, "the second run")
        assert not memory.pending  # nothing is left scheduled: no third run comes
        return [memory.runs, len(trims)]

    assert asyncio.run(scenario()) == [2, 2]


def test_a_failing_trim_does_not_reach_the_server() -> None:
    def broken() -> object:
        raise OSError("no")

    async def scenario() -> int:
        memory = MemoryReturn(interval_s=0.01, trim=broken)
        memory.after_request(LARGE_REQUEST_BYTES)
        await until(lambda: memory.runs == 1, "the run")
        return memory.runs

    assert asyncio.run(scenario()) == 1


def test_glibc_trim_is_found() -> None:
    trim = malloc_trim()
    assert trim is not None  # the broker runs on glibc here; elsewhere it is None and skipped
    trim()
