"""confluent-kafka acceptance: admin configs, a two-member group rebalancing, seek into compaction."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

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


def describe(admin: AdminClient, topic: str) -> dict[str, tuple[str | None, int]]:
    """``name -> (value, source code)`` of every config of ``topic``."""
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    return {name: (entry.value, int(entry.source)) for name, entry in entries.items()}


def read(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count:
            assert time.monotonic() < deadline, out
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append((msg.offset() or 0, msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def test_admin_compacted_topic_configs(kompakt_broker: BrokerProcess) -> None:
    bootstrap = kompakt_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "acc-cf-configs"
    configs = {"cleanup.policy": "compact", "segment.ms": "60000", "min.cleanable.dirty.ratio": "0.2"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
    described = describe(admin, topic)
    for name, value in configs.items():
        assert described[name] == (value, DYNAMIC_TOPIC_CONFIG)
    assert described["delete.retention.ms"] == ("86400000", DEFAULT_CONFIG)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[object] = []
    for k, v in KEYED:
        producer.produce(topic, key=k, value=v, on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(DEADLINE_S) == 0 and errors == [None] * len(KEYED)
    assert [(k, v) for _, k, v in read(bootstrap, topic, len(KEYED))] == KEYED

    # Incremental: SET one config, DELETE another; the rest is untouched.
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "1500", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(10)
    described = describe(admin, topic)
    assert described["min.compaction.lag.ms"] == ("1500", DYNAMIC_TOPIC_CONFIG)
    assert described["segment.ms"] == ("604800000", DEFAULT_CONFIG)
    assert described["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert described["min.cleanable.dirty.ratio"] == ("0.2", DYNAMIC_TOPIC_CONFIG)


def group_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        }
    )
    consumer.subscribe([topic])
    return consumer


def partitions_of(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, [partitions_of(c) for c in consumers]
        for consumer in consumers:
            consumer.poll(0.05)


def test_two_consumers_rebalance_and_commit(kompakt_broker: BrokerProcess) -> None:
    bootstrap = kompakt_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic, group = "acc-cf-group", "acc-cf-group"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    a = group_consumer(bootstrap, group, topic)
    b: Consumer | None = None
    try:
        poll_until([a], lambda: partitions_of(a) == {0, 1})
        b = group_consumer(bootstrap, group, topic)
        both = [a, b]
        poll_until(both, lambda: all(len(partitions_of(c)) == 1 for c in both))
        assert partitions_of(a) | partitions_of(b) == {0, 1}
        (pa,), (pb,) = partitions_of(a), partitions_of(b)
        a.commit(offsets=[TopicPartition(topic, pa, 3)], asynchronous=False)
        b.commit(offsets=[TopicPartition(topic, pb, 4)], asynchronous=False)
        b.close()
        b = None
        poll_until([a], lambda: partitions_of(a) == {0, 1})
        committed = a.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == {pa: 3, pb: 4}
    finally:
        a.close()
        if b is not None:
            b.close()
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    fetched = admin.list_consumer_group_offsets([request])[group].result(10)
    assert {tp.partition: tp.offset for tp in fetched.topic_partitions} == {pa: 3, pb: 4}


@pytest.fixture(scope="module")
def cleaner_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with fast_cleaner_broker(tmp_path_factory.mktemp("acc-cf") / "data") as broker:
        yield broker


def test_seek_to_compacted_offset_lands_on_next_survivor(cleaner_broker: BrokerProcess) -> None:
    topic = "acc-cf-seek"
    compact_away(cleaner_broker.bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": cleaner_broker.bootstrap, "group.id": "acc-cf-seek"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + DEADLINE_S
        first = None
        while first is None:  # fetching has started once one record arrived
            assert time.monotonic() < deadline
            first = consumer.poll(0.2)
        consumer.seek(TopicPartition(topic, 0, SEEK_TO))
        while True:
            assert time.monotonic() < deadline
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            assert error is None or error.code() == KafkaError._PARTITION_EOF, error
            if error is None:
                break
        assert (msg.offset(), msg.key()) == (FIRST_SURVIVOR, f"k{FIRST_SURVIVOR}".encode())
        assert (msg.offset() or 0) > SEEK_TO
    finally:
        consumer.close()
