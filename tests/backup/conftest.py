"""A running kompakt broker whose cleaner wakes every 50 ms, and topics shaped for backup tests.

The compacted source topic rolls segments after 100 ms and cleans at any dirty ratio, so after a
first burst of updates, tombstones and empty values, producing a "tick" until the consumer sees
holes in the offsets gives a topic that has really been compacted (no sleeps: each tick is a
produce and a read, bounded by a deadline).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kompakt.backup.config import parse_backup_config, parse_restore_config
from kompakt.backup.kafka import KAFKA_ADMIN
from tests.support.serve import BrokerProcess, start_broker

DEADLINE_S = 30.0
COMPACT_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "86400000",
}


@dataclass(frozen=True)
class Rec:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("backup") / "data", "--override", "log.cleaner.backoff.ms=50"
    )
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


def admin(broker: BrokerProcess) -> Any:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(
    broker: BrokerProcess, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    client = admin(broker)  # keep the handle alive until the futures resolve
    futures = client.create_topics([KAFKA_ADMIN.NewTopic(name, partitions, 1, config=configs or {})])
    for future in futures.values():
        future.result(timeout=10)


def produce(broker: BrokerProcess, topic: str, records: list[tuple[Any, ...]], partition: int = 0) -> None:
    """``(key, value)`` or ``(key, value, timestamp)`` or ``(key, value, timestamp, headers)``."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for item in records:
        kwargs: dict[str, Any] = {"key": item[0], "value": item[1], "partition": partition}
        if len(item) > 2 and item[2] is not None:
            kwargs["timestamp"] = item[2]
        if len(item) > 3:
            kwargs["headers"] = item[3]
        producer.produce(topic, **kwargs)
    assert producer.flush(15) == 0


def consume_all(broker: BrokerProcess | str, topic: str, partition: int = 0) -> list[Rec]:
    """Every record of one partition, read from the start up to the end (EOF)."""
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "backup-tests-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[Rec] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            msg: Any = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:
                    return out
                raise AssertionError(str(msg.error()))
            out.append(
                Rec(msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), tuple(msg.headers() or ()))
            )
    finally:
        consumer.close()
    raise AssertionError("did not reach the end of the partition")


def latest_by_key(records: list[Rec]) -> dict[bytes | None, bytes | None]:
    latest: dict[bytes | None, bytes | None] = {}
    for rec in records:
        latest[rec.key] = rec.value
    return latest


def make_compacted_topic(broker: BrokerProcess, name: str) -> list[Rec]:
    """Updates, tombstones and empty values, compacted until the offsets show gaps."""
    create_topic(broker, name, 1, COMPACT_CONFIGS)
    first: list[tuple[Any, ...]] = []
    for round_ in range(4):
        for k in range(12):
            first.append(
                (f"k{k}".encode(), f"v{k}-{round_}".encode(), None, [("round", str(round_).encode())])
            )
    first += [(b"k3", None), (b"k4", b""), (b"k5", None), (b"k6", b""), (b"hdr", b"x", None, [("n", None)])]
    produce(broker, name, first)
    deadline = time.monotonic() + DEADLINE_S
    tick = 0
    while True:
        produce(broker, name, [(b"tick", str(tick).encode())])
        tick += 1
        records = consume_all(broker, name)
        offsets = [r.offset for r in records]
        compacted = sum(1 for r in records if r.key == b"k0") == 1
        if compacted and offsets[-1] + 1 - offsets[0] > len(offsets):
            return records
        assert time.monotonic() < deadline, "the topic was not compacted in time"


@dataclass
class CompactedSource:
    """A broker holding compacted topics whose records no longer change (its cleaner is off)."""

    broker: BrokerProcess
    records: dict[str, list[Rec]]


COMPACTED_TOPICS = ("rt-src", "off-src")


@pytest.fixture(scope="session")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CompactedSource]:
    """Compact with a fast cleaner, then restart with the cleaner off: a source that cannot change
    between the test's reading it and the backup's (a clean in between would remove records)."""
    data_dir = tmp_path_factory.mktemp("backup-compacted") / "data"
    first = start_broker(data_dir, "--override", "log.cleaner.backoff.ms=50")
    try:
        for topic in COMPACTED_TOPICS:
            make_compacted_topic(first, topic)
    finally:
        assert first.stop() == 0, first.stderr_path.read_text()
    process = start_broker(data_dir, "--override", "log.cleaner.enable=false")
    try:
        yield CompactedSource(process, {t: consume_all(process, t) for t in COMPACTED_TOPICS})
    finally:
        assert process.stop() == 0, process.stderr_path.read_text()


def backup_config(broker: BrokerProcess | str, root: Path, backup_id: str, **extra: Any) -> Any:
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    raw: dict[str, Any] = {
        "backup_id": backup_id,
        "source": {"bootstrap_servers": bootstrap, "topics": {"include": extra.pop("topics", ["*"])}},
        "storage": extra.pop("storage", {"backend": "filesystem", "path": str(root)}),
        "backup": extra.pop("backup", {}),
    }
    if "timeout_s" in extra:
        raw["source"]["timeout_s"] = extra.pop("timeout_s")
    assert not extra
    return parse_backup_config(raw)


def restore_config(broker: BrokerProcess | None, root: Path, backup_id: str, **extra: Any) -> Any:
    target: dict[str, Any] = {}
    if "data_dir" in extra:
        target["data_dir"] = str(extra.pop("data_dir"))
    else:
        assert broker is not None
        target["bootstrap_servers"] = broker.bootstrap
    raw = {
        "backup_id": backup_id,
        "target": target,
        "storage": extra.pop("storage", {"backend": "filesystem", "path": str(root)}),
        "restore": extra.pop("restore", {}),
    }
    assert not extra
    return parse_restore_config(raw, root)
