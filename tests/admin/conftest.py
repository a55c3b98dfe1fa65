"""In-process brokers for the admin endpoint tests (manual clock by default), with helpers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kompakt.testing import InProcessBroker

COMPACTED = "compacted"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A manual-clock broker whose cleaner threads are off, so only explicit compactions clean."""
    with InProcessBroker(tmp_path / "data", overrides={"log.cleaner.enable": "false"}) as b:
        b.create_topic(COMPACTED, 2, cleanup_policy="compact", delete_retention_ms=1000)
        yield b


@pytest.fixture
def real_clock_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path / "data-real", manual_clock=False) as b:
        yield b


def produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]], partition: int = 0) -> None:
    """Produce keyed records (None values are tombstones) and wait for every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in items:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(10) == 0
