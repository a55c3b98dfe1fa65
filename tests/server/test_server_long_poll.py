"""Long polls through the real asyncio server and its timer hook (no sleeps: deadlines only)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kompakt.broker.context import Broker
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.server.app import KafkaServer
from tests.support.wire import fetch_values, produce_values, read_frame, request_bytes

DEADLINE_S = 10.0


async def roundtrip(port: int, api_key: int, version: int, values: dict[str, object]) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request_bytes(api_key, version, values))
        return codec.decode_response(await read_frame(reader, DEADLINE_S), api_key, version)[1]
    finally:
        writer.close()


def run_with_server(tmp_path: Path, scenario: Any) -> None:
    async def main() -> None:
        clock = SystemClock()
        manager = LogManager(tmp_path / "data", BrokerConfig(), clock)
        manager.open()
        manager.create_topic("t", 1)
        broker = Broker.create(
            clock=clock, log_manager=manager, producer_ids=ProducerIdManager(manager.data_dir)
        )
        server = KafkaServer(broker, "127.0.0.1", 0)
        await server.start()
        try:
            await scenario(server.port, broker)
        finally:
            await server.close()
            manager.close()

    asyncio.run(main())


def test_long_poll_times_out_on_the_server_timer(tmp_path: Path) -> None:
    async def scenario(port: int, broker: Broker) -> None:
        started = time.monotonic()
        response = await roundtrip(port, ApiKey.FETCH, 12, fetch_values([("t", 0, 0)], max_wait_ms=300))
        elapsed = time.monotonic() - started
        part = response.responses[0].partitions[0]
        assert (part.error_code, part.records) == (E.none, b"")
        assert 0.25 <= elapsed < DEADLINE_S
        assert broker.fetch_waiters.pending() == 0

    run_with_server(tmp_path, scenario)


def test_long_poll_woken_by_produce_on_another_connection(tmp_path: Path) -> None:
    async def scenario(port: int, broker: Broker) -> None:
        started = time.monotonic()
        fetch = asyncio.create_task(
            roundtrip(port, ApiKey.FETCH, 12, fetch_values([("t", 0, 0)], max_wait_ms=30_000))
        )
        deadline = time.monotonic() + DEADLINE_S
        while broker.fetch_waiters.pending() == 0:  # wait until the fetch is parked
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        batch = build_batch([SimpleRecord(b"k", b"v", int(time.time() * 1000))])
        produced = await roundtrip(port, ApiKey.PRODUCE, 9, produce_values("t", 0, batch))
        assert produced.responses[0].partition_responses[0].error_code == E.none
        response = await asyncio.wait_for(fetch, DEADLINE_S)
        part = response.responses[0].partitions[0]
        assert [v.base_offset for v in iter_batches(part.records)] == [0]
        assert time.monotonic() - started < 29

    run_with_server(tmp_path, scenario)
