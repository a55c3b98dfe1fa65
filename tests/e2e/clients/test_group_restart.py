"""Consumer groups survive a restart of ``kompakt serve`` (own broker, own data, fixed port).

Two groups: one a live confluent-kafka member keeps across the restart (the coordinator restores
its Stable generation from ``__consumer_offsets``, so the member carries on without a rebalance),
one that kafka-python committed to and left (Empty). After the restart both groups' committed
offsets are fetched back through kafka-python's admin client, and the live group is described
with its member through confluent-kafka's.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from tests.support.serve import BrokerProcess, start_broker

pytestmark = pytest.mark.clients
DEADLINE_S = 30.0
TOPIC = "durable-groups"
LIVE, LEFT = "live-group", "left-group"
#: Above a restart's worst case: the broker's stop (20 s) and start (30 s) deadlines.
SESSION_TIMEOUT_MS = 60_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def poll_until(consumer: Consumer, done: Callable[[], bool], seen: list[Any]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, (consumer.assignment(), seen)
        msg = consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            seen.append((msg.partition(), msg.offset()))


def test_groups_and_offsets_survive_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    broker: BrokerProcess = start_broker(data_dir, "--port", str(port), "--admin-port", "-1")
    bootstrap = broker.bootstrap
    cf_admin = AdminClient({"bootstrap.servers": bootstrap})
    cf_admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(6):
        producer.produce(TOPIC, partition=i % 2, value=b"%d" % i)
    assert producer.flush(10) == 0

    revoked: list[object] = []
    live = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": LIVE,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # Longer than any restart: librdkafka itself revokes and rejoins when no heartbeat
            # answer came for a session (Apache Kafka's clients do too), and a restart of the
            # broker took over 10 s on a loaded machine.
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 200,
            "reconnect.backoff.max.ms": 200,
        }
    )
    try:
        live.subscribe([TOPIC], on_revoke=lambda _c, parts: revoked.append(parts))
        seen: list[tuple[int, int]] = []
        poll_until(live, lambda: len(seen) == 6, seen)
        live.commit(asynchronous=False)
        member_id = live.memberid()

        left = KafkaConsumer(bootstrap_servers=bootstrap, group_id=LEFT, enable_auto_commit=False)
        left.assign([KpTopicPartition(TOPIC, 0)])
        left.commit({KpTopicPartition(TOPIC, 0): OffsetAndMetadata(2, "kept", -1)})
        left.close()

        assert broker.stop() == 0, broker.stderr_path.read_text()
        broker = start_broker(data_dir, "--port", str(port), "--admin-port", "-1")

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            fetched: Any = admin.list_group_offsets({LIVE: None, LEFT: None})
        finally:
            admin.close()
        assert {tp.partition: m.offset for tp, m in fetched[LIVE].items()} == {0: 3, 1: 3}
        assert {(tp.partition, m.offset, m.metadata) for tp, m in fetched[LEFT].items()} == {(0, 2, "kept")}

        cf_admin = AdminClient({"bootstrap.servers": bootstrap})
        described = cf_admin.describe_consumer_groups([LIVE])[LIVE].result(10)
        assert described.state == ConsumerGroupState.STABLE
        assert [m.member_id for m in described.members] == [member_id]

        # The member carries on in its generation: new records arrive, commits succeed, no revoke.
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        producer.produce(TOPIC, partition=0, value=b"after")
        assert producer.flush(10) == 0
        poll_until(live, lambda: (0, 3) in seen, seen)
        live.commit(asynchronous=False)
        committed = live.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)
        assert [tp.offset for tp in committed] == [4, 3]
        assert revoked == []
    finally:
        live.close()
        assert broker.stop() == 0, broker.stderr_path.read_text()
