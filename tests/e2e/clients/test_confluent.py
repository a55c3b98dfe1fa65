"""confluent-kafka (librdkafka 2.16) against a ``kompakt serve`` subprocess."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.support.serve import COMPACTED, BrokerProcess

from .helpers import DEADLINE_S, RECORDS, consume_all, high_watermark

pytestmark = pytest.mark.clients


def produce(
    bootstrap: str, topic: str, records: Sequence[tuple[bytes | None, bytes | None]], **conf: object
) -> list[object]:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(DEADLINE_S) == 0
    return errors


def test_produce_and_consume_null_vs_empty(kompakt_broker: BrokerProcess) -> None:
    errors = produce(kompakt_broker.bootstrap, "cf-data", RECORDS, **{"enable.idempotence": True})
    assert errors == [None] * len(RECORDS)
    assert consume_all(kompakt_broker.bootstrap, "cf-data", len(RECORDS)) == RECORDS


def test_null_key_on_compacted_topic_is_rejected(kompakt_broker: BrokerProcess) -> None:
    before = high_watermark(kompakt_broker.bootstrap, COMPACTED)
    errors = produce(kompakt_broker.bootstrap, COMPACTED, [(None, b"unkeyed")], retries=0)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD  # type: ignore[attr-defined]
    assert high_watermark(kompakt_broker.bootstrap, COMPACTED) == before
    assert produce(kompakt_broker.bootstrap, COMPACTED, [(b"key", None)]) == [None]  # tombstones are fine


def test_group_consumer_commits(kompakt_broker: BrokerProcess) -> None:
    topic = "cf-group"
    assert produce(kompakt_broker.bootstrap, topic, [(b"a", b"1"), (b"b", b"2")]) == [None, None]
    consumer = Consumer(
        {
            "bootstrap.servers": kompakt_broker.bootstrap,
            "group.id": "cf-group-1",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen: list[bytes | None] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < 2:
            assert time.monotonic() < deadline
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
        assert [tp.offset for tp in committed] == [2]
    finally:
        consumer.close()
    assert seen == [b"1", b"2"]


def test_reads_after_a_seek_do_not_wait_for_fetch_wait_max_ms(kompakt_broker: BrokerProcess) -> None:
    """librdkafka's 0059 (issue 33 item 4): seek back and read one record, ten times.

    Each read after a seek must come from a fetch answered at once (the data is there), never one
    held for ``fetch.wait.max.ms``. The consumer here waits up to 10 s per fetch, so a broker that
    parked a fetch below the high watermark would show as a 10 s read. ``fetch.queue.backoff.ms``
    is 0 because librdkafka's own default (1 s) backs off the fetch after a seek whenever its
    queue still held the old position's records: that client wait is what 0059 measures on both
    kompakt and Kafka 4.1.2 (docs/librdkafka-suite.md), and it would hide the broker's share here.
    """
    topic = "cf-seek-reads"
    count = 1000
    records = [(b"k%d" % i, b"v%d" % i) for i in range(count)]
    assert produce(kompakt_broker.bootstrap, topic, records) == [None] * count
    consumer = Consumer(
        {
            "bootstrap.servers": kompakt_broker.bootstrap,
            "group.id": "cf-seek-reads",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10_000,
            "fetch.queue.backoff.ms": 0,
            "queued.min.messages": 1,
        }
    )
    # Offsets below the last record only: a read of the last one would start a fetch at the high
    # watermark, which every broker rightly parks, and the client sends no other fetch meanwhile.
    targets = [500, 249, 374, 311, 342, 358, 350, 354, 356, 357]
    slowest = 0.0
    try:
        consumer.assign([TopicPartition(topic, 0, targets[0])])
        for i, offset in enumerate(targets):
            if i:
                consumer.seek(TopicPartition(topic, 0, offset))
            started = time.monotonic()
            msg = consumer.poll(DEADLINE_S)
            slowest = max(slowest, time.monotonic() - started)
            assert msg is not None and msg.error() is None, msg and msg.error()
            assert (msg.offset(), msg.key(), msg.value()) == (offset, b"k%d" % offset, b"v%d" % offset)
    finally:
        consumer.close()
    assert slowest < 5.0, f"a read after a seek took {slowest:.1f} s: a fetch waited for fetch.wait.max.ms"
