"""Helpers for issue 8's seed-document details, driven through real clients and the CLI.

Most tests use the in-process ``kompakt_broker`` fixture of kompakt's pytest plugin (manual clock,
in-process admin operations); the CLI commands run in-process too (``tests.support.cli.run``)
against that broker's bootstrap address. Waiting is by polling with a deadline, never sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, but not re-exported to mypy
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from kompakt.testing.broker import InProcessBroker

__all__ = [
    "DEADLINE_S",
    "AdminClient",
    "AlterConfigOpType",
    "ConfigEntry",
    "ConfigResource",
    "describe_topic",
    "key_values",
    "log_start",
    "produce",
    "source_name",
    "wait_for_log_start",
    "wait_until",
]

DEADLINE_S = 20.0


@pytest.fixture
def admin(kompakt_broker: InProcessBroker) -> Iterator[AdminClient]:
    """A confluent-kafka AdminClient on the fixture broker."""
    client = AdminClient({"bootstrap.servers": kompakt_broker.bootstrap_servers})
    yield client
    del client  # destroyed before the broker stops, so librdkafka logs no reconnect errors


def describe_topic(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    """Every config of ``topic`` as DescribeConfigs returns it, by name."""
    resource = ConfigResource("topic", topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(DEADLINE_S)
    return entries


def source_name(entry: ConfigEntry) -> str:
    """``DYNAMIC_TOPIC_CONFIG``, ... (confluent-kafka gives the source as a plain int)."""
    name: str = ConfigSource(entry.source).name
    return name


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes | None]]) -> None:
    """Produce keyed records and wait until every one is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    errors: list[str] = []

    def on_delivery(error: object, _msg: object) -> None:
        if error is not None:
            errors.append(str(error))

    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
    assert producer.flush(DEADLINE_S) == 0, "records left unacknowledged"
    assert not errors, errors


def wait_until(predicate: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``predicate`` until it holds; fail with ``what`` after the deadline."""
    deadline = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not reached within {deadline_s} s"
        time.sleep(0.02)  # polling interval only; the deadline is the check


def key_values(broker: InProcessBroker, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every stored record of partition 0, tombstones and duplicates included."""
    return [(r.key, r.value) for r in broker.records(topic)]


def log_start(broker: InProcessBroker, topic: str) -> int:
    start: int = broker.partitions(topic)[0]["log_start_offset"]
    return start


def wait_for_log_start(broker: InProcessBroker, topic: str, offset: int, what: str) -> None:
    """Wait until retention has moved ``topic``'s log start to ``offset``."""
    wait_until(lambda: log_start(broker, topic) == offset, what)
