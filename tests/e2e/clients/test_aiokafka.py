"""aiokafka 0.14 against ``kompakt serve``.

aiokafka has no class for error 87 (INVALID_RECORD) and surfaces it as ``UnknownError``; the
test checks that the send fails and nothing is stored.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from tests.support.serve import COMPACTED, BrokerProcess

from .helpers import DEADLINE_S, RECORDS, high_watermark

pytestmark = pytest.mark.clients


async def _roundtrip(bootstrap: str) -> list[tuple[bytes | None, bytes | None]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for key, value in RECORDS:
            await producer.send_and_wait("aio-data", key=key, value=value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition("aio-data", 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[tuple[bytes | None, bytes | None]] = []
        while len(got) < len(RECORDS):
            record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
            got.append((record.key, record.value))
        return got
    finally:
        await consumer.stop()


def test_roundtrip_null_vs_empty(kompakt_broker: BrokerProcess) -> None:
    assert asyncio.run(_roundtrip(kompakt_broker.bootstrap)) == RECORDS


async def _unkeyed(bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await asyncio.wait_for(producer.send_and_wait(COMPACTED, key=None, value=b"unkeyed"), DEADLINE_S)
    finally:
        await producer.stop()


def test_null_key_on_compacted_topic_is_rejected(kompakt_broker: BrokerProcess) -> None:
    before = high_watermark(kompakt_broker.bootstrap, COMPACTED)
    with pytest.raises(KafkaError):
        asyncio.run(_unkeyed(kompakt_broker.bootstrap))
    assert high_watermark(kompakt_broker.bootstrap, COMPACTED) == before
