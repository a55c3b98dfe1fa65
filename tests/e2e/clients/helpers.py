"""Shared client-side helpers (confluent-kafka based) for the end-to-end tests."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

#: Keyed values, a tombstone (null value) and an empty value: null and empty must stay distinct.
RECORDS: list[tuple[bytes, bytes | None]] = [(b"k1", b"v1"), (b"k2", None), (b"k3", b""), (b"k1", b"v1b")]
DEADLINE_S = 20.0


def consume_all(
    bootstrap: str, topic: str, count: int, partition: int = 0
) -> list[tuple[bytes | None, bytes | None]]:
    """Read ``count`` records of one partition from the beginning (assign, no group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count:
            assert time.monotonic() < deadline, f"only {out} from {topic} before the deadline"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consume error: {error}")
            out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        assert low == 0
        return int(high)
    finally:
        consumer.close()
