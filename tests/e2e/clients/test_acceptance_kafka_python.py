"""kafka-python acceptance: admin configs, a two-member group rebalancing, seek into compaction."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.support.serve import BrokerProcess

from .acceptance import (
    DEADLINE_S,
    FIRST_SURVIVOR,
    HEARTBEAT_INTERVAL_MS,
    KEYED,
    SEEK_TO,
    SESSION_TIMEOUT_MS,
    compact_away,
    fast_cleaner_broker,
)

pytestmark = pytest.mark.clients


def describe(admin: KafkaAdminClient, topic: str) -> dict[str, tuple[str, str]]:
    """``name -> (value, source name)`` of every config of ``topic``."""
    result: Any = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs=None)], config_filter="all"
    )
    entries = result["topic"][topic]
    return {name: (entry["value"], entry["config_source"]) for name, entry in entries.items()}


def test_admin_compacted_topic_configs(kompakt_broker: BrokerProcess) -> None:
    bootstrap = kompakt_broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = "acc-kp-configs"
    configs = {"cleanup.policy": "compact", "segment.ms": "60000", "min.cleanable.dirty.ratio": "0.2"}
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
        described = describe(admin, topic)
        for name, value in configs.items():
            assert described[name] == (value, "DYNAMIC_TOPIC_CONFIG")
        assert described["retention.ms"] == ("604800000", "DEFAULT_CONFIG")

        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        try:
            futures = [producer.send(topic, key=k, value=v) for k, v in KEYED]
            assert [f.get(timeout=DEADLINE_S).offset for f in futures] == list(range(len(KEYED)))
        finally:
            producer.close(timeout=DEADLINE_S)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got: list[tuple[bytes | None, bytes | None]] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < len(KEYED):
                assert time.monotonic() < deadline, got
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend((r.key, r.value) for r in records)
            assert got == KEYED
        finally:
            consumer.close()

        # IncrementalAlterConfigs (kafka-python's default against a broker that offers it).
        result = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"min.compaction.lag.ms": "1500"})]
        )
        assert result == {"topic": {topic: "OK"}}, result
        described = describe(admin, topic)
        assert described["min.compaction.lag.ms"] == ("1500", "DYNAMIC_TOPIC_CONFIG")
        assert described["segment.ms"] == ("60000", "DYNAMIC_TOPIC_CONFIG")  # incremental: kept
    finally:
        admin.close()


def group_consumer(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    # Know the topic's partitions before joining: a leader that joins with no metadata for a topic
    # created a moment ago assigns nothing, and kafka-python only notices at its next metadata
    # refresh (metadata.max.age.ms, 5 minutes by default).
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.partitions_for_topic(topic):
        assert time.monotonic() < deadline, f"no metadata for {topic}"
    consumer.subscribe([topic])
    return consumer


def partitions_of(consumer: KafkaConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def settled(consumer: KafkaConsumer) -> bool:
    """No join of this consumer is in flight.

    kafka-python 3.0 finishes a join (re-enables its heartbeats) only inside a ``poll`` that awaits
    it: a JoinGroup/SyncGroup round trip that completes while the test is busy elsewhere (creating
    the second consumer) leaves the member without heartbeats, and the broker rightly expires it
    after ``session.timeout.ms``. So the test keeps polling a consumer until its join is done.
    """
    coordinator: Any = consumer._coordinator  # noqa: SLF001 (the client has no public signal)
    return coordinator._join_task is None and not coordinator.need_rejoin()  # noqa: SLF001


def poll_until(consumers: list[KafkaConsumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, [partitions_of(c) for c in consumers]
        for consumer in consumers:
            consumer.poll(timeout_ms=50)


def test_two_consumers_rebalance_and_commit(kompakt_broker: BrokerProcess) -> None:
    bootstrap = kompakt_broker.bootstrap
    topic, group = "acc-kp-group", "acc-kp-group"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        a = group_consumer(bootstrap, group, topic)
        b: KafkaConsumer | None = None
        try:
            poll_until([a], lambda: partitions_of(a) == {0, 1} and settled(a))
            b = group_consumer(bootstrap, group, topic)
            both = [a, b]
            poll_until(both, lambda: all(len(partitions_of(c)) == 1 and settled(c) for c in both))
            assert partitions_of(a) | partitions_of(b) == {0, 1}
            (pa,), (pb,) = partitions_of(a), partitions_of(b)
            a.commit({TopicPartition(topic, pa): OffsetAndMetadata(3, "", -1)})
            b.commit({TopicPartition(topic, pb): OffsetAndMetadata(4, "", -1)})
            b.close()
            b = None
            poll_until([a], lambda: partitions_of(a) == {0, 1})
            assert a.committed(TopicPartition(topic, pa)) == 3
            assert a.committed(TopicPartition(topic, pb)) == 4
        finally:
            a.close()
            if b is not None:
                b.close()
        fetched: Any = admin.list_group_offsets({group: None})
        assert {tp.partition: meta.offset for tp, meta in fetched[group].items()} == {pa: 3, pb: 4}
    finally:
        admin.close()


@pytest.fixture(scope="module")
def cleaner_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with fast_cleaner_broker(tmp_path_factory.mktemp("acc-kp") / "data") as broker:
        yield broker


def test_seek_to_compacted_offset_lands_on_next_survivor(cleaner_broker: BrokerProcess) -> None:
    topic = "acc-kp-seek"
    compact_away(cleaner_broker.bootstrap, topic)
    consumer = KafkaConsumer(bootstrap_servers=cleaner_broker.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, SEEK_TO)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline
            records = consumer.poll(timeout_ms=200, max_records=1).get(tp)
            if records:
                break
        assert (records[0].offset, records[0].key) == (FIRST_SURVIVOR, f"k{FIRST_SURVIVOR}".encode())
        assert records[0].offset > SEEK_TO
    finally:
        consumer.close()
