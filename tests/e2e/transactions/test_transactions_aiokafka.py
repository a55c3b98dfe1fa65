"""aiokafka's transactional producer against kompakt: commit, abort, offsets in the transaction."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from .conftest import External, Kompakt
from .txn_clients import create_topic, read_all, unique, values

pytestmark = pytest.mark.xdist_group("e2e-txn")


def test_aiokafka_transactional_producer(kompakt: Kompakt | External) -> None:
    bs, topic, source, group = kompakt.bootstrap, unique("t"), unique("src"), unique("group")
    create_topic(bs, topic)
    create_topic(bs, source)

    async def scenario() -> int | None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=unique("aio"))
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait(topic, key=b"k%d" % i, value=b"committed-%d" % i)
                await producer.send_offsets_to_transaction({TopicPartition(source, 0): 7}, group)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, key=b"x", value=b"aborted")
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            return await consumer.committed(TopicPartition(source, 0))
        finally:
            await consumer.stop()

    committed_offset = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert committed_offset == 7
    committed, lso = read_all(bs, topic, "read_committed")
    uncommitted, _ = read_all(bs, topic, "read_uncommitted")
    assert values(committed) == [b"committed-0", b"committed-1", b"committed-2"]
    assert values(uncommitted) == [b"committed-0", b"committed-1", b"committed-2", b"aborted"]
    assert lso == 6  # three records, COMMIT at 3, the aborted record at 4, ABORT at 5
