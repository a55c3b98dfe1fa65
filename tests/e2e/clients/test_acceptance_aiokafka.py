"""aiokafka acceptance: admin configs, a two-member group rebalancing, seek into compaction.

aiokafka's admin client only has the legacy (whole-set) AlterConfigs, so the alter step checks
Kafka's semantics of that API: the request replaces every dynamic config of the topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.support.serve import BrokerProcess

from .acceptance import (
    DEADLINE_S,
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    FIRST_SURVIVOR,
    HEARTBEAT_INTERVAL_MS,
    KEYED,
    SEEK_TO,
    SESSION_TIMEOUT_MS,
    compact_away,
    fast_cleaner_broker,
)

pytestmark = pytest.mark.clients


async def describe(admin: AIOKafkaAdminClient, topic: str) -> dict[str, tuple[str, int]]:
    """``name -> (value, source code)`` of every config of ``topic``."""
    responses: Any = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    (resource,) = responses[0].to_object()["resources"]
    assert resource["error_code"] == 0, resource
    return {e["config_names"]: (e["config_value"], e["config_source"]) for e in resource["config_entries"]}


async def _admin_configs(bootstrap: str) -> None:
    topic = "acc-aio-configs"
    configs = {"cleanup.policy": "compact", "segment.ms": "60000", "min.cleanable.dirty.ratio": "0.2"}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        created: Any = await admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
        assert [e[1] for e in created.topic_errors] == [0]
        described = await describe(admin, topic)
        for name, value in configs.items():
            assert described[name] == (value, DYNAMIC_TOPIC_CONFIG)

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=k, value=v) for k, v in KEYED]
            offsets = [(await f).offset for f in futures]
        finally:
            await producer.stop()
        assert offsets == list(range(len(KEYED)))
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[tuple[bytes | None, bytes | None]] = []
            while len(got) < len(KEYED):
                record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
                got.append((record.key, record.value))
        finally:
            await consumer.stop()
        assert got == KEYED

        altered: Any = await admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    topic,
                    configs={"cleanup.policy": "compact", "min.compaction.lag.ms": "1500"},
                )
            ]
        )
        assert [r[0] for r in altered[0].resources] == [0]
        described = await describe(admin, topic)
        assert described["min.compaction.lag.ms"] == ("1500", DYNAMIC_TOPIC_CONFIG)
        assert described["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
        # Legacy AlterConfigs replaces the whole set: what was not sent is back to its default.
        assert described["segment.ms"] == ("604800000", DEFAULT_CONFIG)
        assert described["min.cleanable.dirty.ratio"] == ("0.5", DEFAULT_CONFIG)
    finally:
        await admin.close()


def test_admin_compacted_topic_configs(kompakt_broker: BrokerProcess) -> None:
    asyncio.run(_admin_configs(kompakt_broker.bootstrap))


def partitions_of(consumer: AIOKafkaConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


async def wait_for(done: Callable[[], bool], consumers: list[AIOKafkaConsumer]) -> None:
    """Yield to aiokafka's background coordinator tasks until ``done()`` (deadline-bounded)."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, [partitions_of(c) for c in consumers]
        for consumer in consumers:
            await consumer.getmany(timeout_ms=20)


async def _group(bootstrap: str) -> None:
    topic, group = "acc-aio-group", "acc-aio-group"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()

    def member() -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )
        return consumer

    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
        a = member()
        await a.start()
        b: AIOKafkaConsumer | None = None
        try:
            await wait_for(lambda: partitions_of(a) == {0, 1}, [a])
            b = member()
            await b.start()
            both = [a, b]
            await wait_for(lambda: all(len(partitions_of(c)) == 1 for c in both), both)
            assert partitions_of(a) | partitions_of(b) == {0, 1}
            (pa,), (pb,) = partitions_of(a), partitions_of(b)
            await a.commit({TopicPartition(topic, pa): 3})
            await b.commit({TopicPartition(topic, pb): 4})
            await b.stop()
            b = None
            await wait_for(lambda: partitions_of(a) == {0, 1}, [a])
            assert await a.committed(TopicPartition(topic, pa)) == 3
            assert await a.committed(TopicPartition(topic, pb)) == 4
        finally:
            await a.stop()
            if b is not None:
                await b.stop()
        fetched = await admin.list_consumer_group_offsets(group)
        assert {tp.partition: meta.offset for tp, meta in fetched.items()} == {pa: 3, pb: 4}
    finally:
        await admin.close()


def test_two_consumers_rebalance_and_commit(kompakt_broker: BrokerProcess) -> None:
    asyncio.run(_group(kompakt_broker.bootstrap))


@pytest.fixture(scope="module")
def cleaner_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with fast_cleaner_broker(tmp_path_factory.mktemp("acc-aio") / "data") as broker:
        yield broker


async def _seek(bootstrap: str, topic: str) -> tuple[int, bytes | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, SEEK_TO)
        record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
        return record.offset, record.key
    finally:
        await consumer.stop()


def test_seek_to_compacted_offset_lands_on_next_survivor(cleaner_broker: BrokerProcess) -> None:
    topic = "acc-aio-seek"
    compact_away(cleaner_broker.bootstrap, topic)
    offset, key = asyncio.run(_seek(cleaner_broker.bootstrap, topic))
    assert (offset, key) == (FIRST_SURVIVOR, f"k{FIRST_SURVIVOR}".encode())
    assert offset > SEEK_TO
