"""Shared pieces of the per-client acceptance tests (admin configs, groups, seek into compaction).

The seek scenario: a compacted topic with a tiny ``segment.ms`` and dirty ratio on a broker whose
cleaner wakes every 50 ms; keys ``k0..k9`` (offsets 0-9) then ``k0..k4`` again (offsets 10-14), so
a clean removes offsets 0-4 and keeps ``k5`` at offset 5. :func:`compact_away` writes that and
waits, producing a tick record each round so the active segment rolls, until offset 0-4 are gone.
A consumer that seeks to :data:`SEEK_TO` must then first see :data:`FIRST_SURVIVOR`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.serve import BrokerProcess, start_broker

DEADLINE_S = 60.0
#: Topic configs that make a compacted topic clean almost at once.
FAST_COMPACTION = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
SEEK_TO = 2
FIRST_SURVIVOR = 5
#: Records of the acceptance produce step: keyed values, a tombstone and an empty value.
KEYED: list[tuple[bytes, bytes | None]] = [
    (b"a", b"1"),
    (b"b", b"2"),
    (b"a", None),
    (b"c", b""),
    (b"b", b"3"),
]
#: Kafka's ConfigSource codes in DescribeConfigs.
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5
#: Consumer-group timings. The rebalances these tests make come from joins and LeaveGroup, never
#: from an expired session, so the session is long: on a loaded machine kafka-python's event loop
#: stalls for seconds at a time, and a 6 s session then expired members mid-join (one CI run).
SESSION_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_MS = 100


@contextmanager
def fast_cleaner_broker(data_dir: Path) -> Iterator[BrokerProcess]:
    """A dedicated ``kompakt serve`` whose cleaner wakes every 50 ms."""
    broker = start_broker(data_dir, "--override", "log.cleaner.backoff.ms=50")
    try:
        yield broker
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()


def offsets_from_beginning(bootstrap: str, topic: str) -> list[tuple[int, bytes | None]]:
    """``(offset, key)`` of every record of partition 0, read up to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scan-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: list[tuple[int, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"consume error: {error}")
            offset = msg.offset()
            assert offset is not None
            out.append((offset, msg.key()))
        raise AssertionError(f"never reached the end of {topic}")
    finally:
        consumer.close()


def compact_away(bootstrap: str, topic: str) -> None:
    """Create ``topic``, write duplicates, and wait until offsets 0-4 were compacted away."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=FAST_COMPACTION)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key in [f"k{i}" for i in range(10)] + [f"k{i}" for i in range(5)]:
        producer.produce(topic, key=key.encode(), value=b"v")
    assert producer.flush(10) == 0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        producer.produce(topic, key=b"tick", value=str(time.monotonic_ns()).encode())  # rolls segments
        assert producer.flush(10) == 0
        records = offsets_from_beginning(bootstrap, topic)
        if records and records[0][0] >= FIRST_SURVIVOR:
            assert records[0] == (FIRST_SURVIVOR, f"k{FIRST_SURVIVOR}".encode())
            return
        assert time.monotonic() < deadline, f"offsets 0-4 never compacted away: {records[:8]}"
