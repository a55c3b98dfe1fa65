"""kafka-python 3.0 (idempotent producer by default → InitProducerId) against ``kompakt serve``."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError

from tests.support.serve import COMPACTED, BrokerProcess

from .helpers import DEADLINE_S, RECORDS, consume_all, high_watermark

pytestmark = pytest.mark.clients


def test_default_idempotent_producer_roundtrip(kompakt_broker: BrokerProcess) -> None:
    producer = KafkaProducer(bootstrap_servers=kompakt_broker.bootstrap)
    try:
        futures = [producer.send("kp-data", key=k, value=v) for k, v in RECORDS]
        offsets = [f.get(timeout=DEADLINE_S).offset for f in futures]
    finally:
        producer.close(timeout=DEADLINE_S)
    assert offsets == list(range(len(RECORDS)))
    assert consume_all(kompakt_broker.bootstrap, "kp-data", len(RECORDS)) == RECORDS


def test_consumer_reads_null_and_empty(kompakt_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=kompakt_broker.bootstrap)
    try:
        for k, v in RECORDS:
            producer.send("kp-read", key=k, value=v).get(timeout=DEADLINE_S)
    finally:
        producer.close(timeout=DEADLINE_S)
    consumer = KafkaConsumer(bootstrap_servers=kompakt_broker.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition("kp-read", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[bytes | None, bytes | None]] = []
        for _ in range(40):
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.key, r.value) for r in records)
            if len(got) >= len(RECORDS):
                break
    finally:
        consumer.close()
    assert got == RECORDS


def test_null_key_on_compacted_topic_is_rejected(kompakt_broker: BrokerProcess) -> None:
    before = high_watermark(kompakt_broker.bootstrap, COMPACTED)
    producer = KafkaProducer(bootstrap_servers=kompakt_broker.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send(COMPACTED, key=None, value=b"unkeyed").get(timeout=DEADLINE_S)
    finally:
        producer.close(timeout=DEADLINE_S)
    assert high_watermark(kompakt_broker.bootstrap, COMPACTED) == before
