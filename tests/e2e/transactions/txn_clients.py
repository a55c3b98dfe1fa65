"""confluent-kafka helpers shared by the transaction end-to-end tests."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=20)


def txn_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra})
    producer.init_transactions(DEADLINE_S)
    return producer


def read_all(
    bootstrap: str, topic: str, isolation: str, partition: int = 0
) -> tuple[list[tuple[int, bytes | None, bytes | None]], int]:
    """Every record of one partition from offset 0 up to the end the consumer sees (EOF), and
    that end (the LSO for read_committed, the high watermark otherwise)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, f"no EOF on {topic} before the deadline; read {out}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    end = msg.offset()
                    return out, end
                raise AssertionError(f"consume error: {error}")
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def values(records: list[tuple[int, bytes | None, bytes | None]]) -> list[bytes | None]:
    return [value for _, _, value in records]


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()
