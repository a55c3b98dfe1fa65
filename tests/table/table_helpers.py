"""Shared names of the table tests (imported by the tests and by ``conftest``)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from tests.support.log_dirs import CliResult

__all__ = ["FIXTURE", "TOPIC", "CliResult", "produce"]

FIXTURE = Path(__file__).parent.parent / "log" / "fixtures" / "kafka41_compacted"
TOPIC = "tbl"


def produce(
    bootstrap: str,
    topic: str,
    items: list[tuple[bytes, bytes | None]],
    *,
    partition: int | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: int | None = None,
) -> None:
    """Keyed records partitioned as Kafka's Java client does (murmur2); None values are tombstones."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "partitioner": "murmur2_random"})
    for key, value in items:
        kwargs: dict[str, object] = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, **kwargs)
    assert producer.flush(10) == 0
