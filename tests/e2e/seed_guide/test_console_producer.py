"""Issue 8 item 5: the guide's console-producer spelling, read back by a real client.

``kompakt produce`` accepts ``--property parse.key=true --property key.separator=: --property
null.marker=TOMBS`` (the CLI's own output is covered in ``tests/cli``). Here a
confluent-kafka consumer reads what the guide's lines produced: ``user_id_99:TOMBS`` is a
tombstone (a null value, not the text ``TOMBS``, not an empty value), and a compaction removes the
key's earlier value, keeping the tombstone for ``delete.retention.ms``.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kompakt.testing.broker import InProcessBroker
from tests.support.cli import run

from .conftest import DEADLINE_S, key_values

pytestmark = pytest.mark.clients

GUIDE_PROPERTIES = (
    *("--property", "parse.key=true"),
    *("--property", "key.separator=:"),
    *("--property", "null.marker=TOMBS"),
)


def consume(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"guide-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count:
            assert time.monotonic() < deadline, f"only {out} before the deadline"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def test_guide_tombstone_line_is_a_null_value(kompakt_broker: InProcessBroker) -> None:
    bootstrap = kompakt_broker.bootstrap_servers
    created = run(bootstrap, "topic", "create", "guide-users", "--config", "cleanup.policy=compact")
    assert created.code == 0, created.stderr
    produced = run(
        bootstrap, "produce", "guide-users", *GUIDE_PROPERTIES,
        stdin="user_id_99:Jane\nuser_id_98:\nuser_id_99:TOMBS\nuser_id_97:a:b\n",
    )  # fmt: skip
    assert produced.code == 0, produced.stderr

    assert consume(bootstrap, "guide-users", 4) == [
        (b"user_id_99", b"Jane"),
        (b"user_id_98", b""),  # an empty value is an ordinary value
        (b"user_id_99", None),  # the null marker: a tombstone
        (b"user_id_97", b"a:b"),  # split at the first separator only
    ]

    kompakt_broker.roll("guide-users")
    kompakt_broker.compact_now("guide-users")
    assert key_values(kompakt_broker, "guide-users") == [
        (b"user_id_98", b""),
        (b"user_id_99", None),
        (b"user_id_97", b"a:b"),
    ]
