"""Fetch answered on the event loop when its data is cached, in a worker thread when it is not.

The server tries a Fetch on the loop with page-cache-only reads (:mod:`kompakt.log.nowait`) and
runs it again in a worker thread when a read would wait. These tests go through the real asyncio
server on 127.0.0.1: a cached fetch takes no worker thread, and a fetch of a segment evicted from
the page cache (``POSIX_FADV_DONTNEED``), on a disk made slow for the test, leaves every other
connection answered at once while it waits.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log import nowait
from kompakt.log.manager import LogManager
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records
from kompakt.server import connection
from kompakt.server.app import KafkaServer
from tests.support.wire import fetch_values, read_frame, request_bytes

DEADLINE_S = 20.0
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
#: How long a read that goes to the (simulated) disk takes.
SLOW_READ_S = 1.0
BATCHES = 8
RECORDS_PER_BATCH = 64
VALUE = b"v" * 4000  # 8 batches of ~256 KB: 2 MB in the segment

needs_nowait = pytest.mark.skipif(not nowait.available(), reason="RWF_NOWAIT reads are not supported here")


def values_of(batch_index: int) -> list[bytes]:
    return [b"%d-%d-" % (batch_index, i) + VALUE for i in range(RECORDS_PER_BATCH)]


def run_with_server(tmp_path: Path, scenario: Callable[[int, LogManager], Awaitable[None]]) -> None:
    """A server over a data directory on disk with topic ``t`` holding :data:`BATCHES` batches."""

    async def main() -> None:
        clock = SystemClock()
        manager = LogManager(tmp_path / "data", BrokerConfig(), clock)
        manager.open()
        manager.create_topic("t", 1)
        partition_log = manager.get_log("t", 0)
        now = int(time.time() * 1000)
        for index in range(BATCHES):
            partition_log.append(build_batch([SimpleRecord(b"k", v, now) for v in values_of(index)]))
        broker = Broker.create(
            clock=clock, log_manager=manager, producer_ids=ProducerIdManager(manager.data_dir)
        )
        server = KafkaServer(broker, "127.0.0.1", 0)
        await server.start()
        try:
            await asyncio.wait_for(scenario(server.port, manager), DEADLINE_S * 2)
        finally:
            await server.close()
            manager.close()

    asyncio.run(main())


async def request(port: int, api_key: int, version: int, values: dict[str, object]) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request_bytes(api_key, version, values))
        return codec.decode_response(await read_frame(reader, DEADLINE_S), api_key, version)[1]
    finally:
        writer.close()


def fetched_values(response: Any) -> list[bytes]:
    part = response.responses[0].partitions[0]
    assert part.error_code == E.none
    return [record.value for batch in iter_batches(part.records) for record in decode_records(batch)]


def segment_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "t-0").glob("*.log"))


def evict(path: Path) -> None:
    """Drop ``path`` from the page cache (written back first: dirty pages cannot be dropped)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        probe = bytearray(4096)
        with pytest.raises(BlockingIOError):  # the premise: a cached-only read now fails
            os.preadv(fd, [probe], 0, nowait.RWF_NOWAIT)
    finally:
        os.close(fd)


@needs_nowait
def test_a_cached_fetch_is_answered_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threaded: list[str] = []
    real_to_thread = asyncio.to_thread

    async def to_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        threaded.append(getattr(func, "__name__", repr(func)))
        return await real_to_thread(func, *args, **kwargs)

    async def scenario(port: int, manager: LogManager) -> None:
        # The first fetches of a segment load its indexes (from disk, so in a worker thread).
        first = await request(port, ApiKey.FETCH, 12, fetch_values([("t", 0, 0)], isolation_level=1))
        assert fetched_values(first)[0] == values_of(0)[0]
        monkeypatch.setattr(connection.asyncio, "to_thread", to_thread)
        response = await request(
            port, ApiKey.FETCH, 12, fetch_values([("t", 0, 0)], partition_max_bytes=1 << 30)
        )
        assert fetched_values(response) == [v for index in range(BATCHES) for v in values_of(index)]
        response = await request(
            port, ApiKey.FETCH, 12, fetch_values([("t", 0, 3 * RECORDS_PER_BATCH + 5)], isolation_level=1)
        )
        assert fetched_values(response)[:2] == values_of(3)[:2]
        assert threaded == []

    run_with_server(tmp_path, scenario)


@needs_nowait
def test_a_fetch_from_disk_does_not_stall_other_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pread, real_preadv = os.pread, os.preadv
    loop_thread = threading.get_ident()
    slow_reads_on_loop: list[int] = []

    def slow(fd: int) -> None:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        if target.endswith(".log") and "/t-0/" in target:
            if threading.get_ident() == loop_thread:
                slow_reads_on_loop.append(fd)
            time.sleep(SLOW_READ_S)

    def pread(fd: int, size: int, offset: int) -> bytes:
        slow(fd)
        return real_pread(fd, size, offset)

    def preadv(fd: int, buffers: list[Any], offset: int, flags: int = 0) -> int:
        if not flags & nowait.RWF_NOWAIT:  # a read that may go to the disk: this disk is slow
            slow(fd)
        return real_preadv(fd, buffers, offset, flags)

    async def scenario(port: int, manager: LogManager) -> None:
        warm = await request(port, ApiKey.FETCH, 12, fetch_values([("t", 0, 0)]))  # indexes loaded
        assert fetched_values(warm)
        for path in segment_files(manager.data_dir):
            evict(path)
        monkeypatch.setattr(os, "pread", pread)
        monkeypatch.setattr(os, "preadv", preadv)
        started = time.monotonic()
        cold = asyncio.create_task(request(port, ApiKey.FETCH, 12, fetch_values([("t", 0, 0)])))
        latencies: list[float] = []
        while not cold.done():  # another client keeps asking while the cold fetch waits
            asking = time.monotonic()
            metadata = await request(port, ApiKey.METADATA, 12, METADATA)
            assert [t.name for t in metadata.topics] == ["t"]
            latencies.append(time.monotonic() - asking)
            await asyncio.sleep(0.01)
        response = await cold
        waited = time.monotonic() - started
        assert fetched_values(response)[: 2 * RECORDS_PER_BATCH] == values_of(0) + values_of(1)
        assert waited >= SLOW_READ_S  # the fetch did go to the slow disk
        assert len(latencies) >= 3
        assert max(latencies) < SLOW_READ_S / 2, latencies
        assert slow_reads_on_loop == []

    run_with_server(tmp_path, scenario)
