"""confluent-kafka (librdkafka 2.16) against a ``kompakt serve`` subprocess."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

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
