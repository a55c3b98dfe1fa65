"""confluent-kafka with ``group.protocol=consumer`` (KIP-848) against ``kompakt serve``.

One broker of its own (fixed port, so clients reconnect after the restart): two then three members
share a topic, a subscription change moves a member to a second topic, a member leaves, the broker
restarts mid-group (the group comes back from ``__consumer_offsets``) and committed offsets are read
back; a classic group runs beside the consumer group; after churn the offsets topic is compacted
offline and the group still restores.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kompakt.broker.groups.records.log import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from kompakt.broker.groups.records.placement import partition_for
from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from tests.support.serve import BrokerProcess, start_broker

pytestmark = pytest.mark.clients
DEADLINE_S = 30.0
#: One admin request's bound; a slower answer is asked again from a new client until DEADLINE_S.
ATTEMPT_S = 10.0
A, B = "kip848-a", "kip848-b"
GROUP = "kip848-group"
#: librdkafka made the consumer group protocol generally available in 2.6.
LIBRDKAFKA_KIP848 = (2, 6)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(data_dir: Path, port: int) -> BrokerProcess:
    return start_broker(
        data_dir,
        "--port", str(port),
        "--admin-port", "-1",
        "--override", "group.consumer.heartbeat.interval.ms=300",
        "--override", "group.consumer.min.heartbeat.interval.ms=100",
        "--override", "group.consumer.session.timeout.ms=10000",
        "--override", "group.consumer.min.session.timeout.ms=1000",
    )  # fmt: skip


def consumer(bootstrap: str, group: str = GROUP, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "reconnect.backoff.max.ms": 200,
            **extra,
        }
    )


def after_restart(bootstrap: str, consumers: list[Consumer], ask: Callable[[AdminClient], Any]) -> Any:
    """``ask(admin)`` with a new admin client each attempt, until it answers or the deadline passes.

    An admin client connected before a broker restart can sit in its reconnect backoff for longer
    than a request's timeout on a loaded machine (librdkafka's old admin client waits out a real
    Kafka restart the same way), so no client from before the restart is asked again; the members
    keep polling meanwhile so their sessions stay alive.
    """
    deadline = time.monotonic() + DEADLINE_S
    while True:
        admin = AdminClient({"bootstrap.servers": bootstrap, "reconnect.backoff.max.ms": 200})
        try:
            return ask(admin)
        except (TimeoutError, confluent_kafka.KafkaException) as error:
            assert time.monotonic() < deadline, f"no answer from the restarted broker: {error}"
            for c in consumers:
                c.poll(0.05)


def describe_group(bootstrap: str, consumers: list[Consumer]) -> Any:
    """DescribeConsumerGroups of GROUP after a broker restart (see :func:`after_restart`)."""
    return after_restart(
        bootstrap, consumers, lambda admin: admin.describe_consumer_groups([GROUP])[GROUP].result(ATTEMPT_S)
    )


def committed_offsets(bootstrap: str, consumers: list[Consumer]) -> Any:
    """ListConsumerGroupOffsets of GROUP after a broker restart (see :func:`after_restart`)."""
    request = [confluent_kafka.ConsumerGroupTopicPartitions(GROUP)]
    return after_restart(
        bootstrap,
        consumers,
        lambda admin: admin.list_consumer_group_offsets(request)[GROUP].result(ATTEMPT_S),
    )


def until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, [c.assignment() for c in consumers]
        for c in consumers:
            c.poll(0.05)


def owned(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def partitions(topic: str, count: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(count)}


def small_segment_offsets_topic(data_dir: Path) -> None:
    """Pre-create ``__consumer_offsets`` with small segments, so churn fills closed (cleanable) segments."""
    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        manager.create_topic(OFFSETS_TOPIC, 50, {**OFFSETS_TOPIC_CONFIGS, "internal.segment.bytes": "2048"})
    finally:
        manager.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, Path, int]]:
    data_dir, port = tmp_path / "data", free_port()
    small_segment_offsets_topic(data_dir)
    process = serve(data_dir, port)
    yield process, data_dir, port
    process.stop()


def test_librdkafka_speaks_the_consumer_protocol() -> None:
    version = tuple(int(x) for x in confluent_kafka.libversion()[0].split(".")[:2])
    assert version >= LIBRDKAFKA_KIP848


def test_consumer_group_lifecycle_and_restart(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    broker = serve(data_dir, port)
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, count in ((A, 6), (B, 2)):
        admin.create_topics([NewTopic(name, count, 1)])[name].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(12):
        producer.produce(A, partition=i % 6, value=b"%d" % i)
    assert producer.flush(10) == 0
    members: list[Consumer] = []
    try:
        first = consumer(bootstrap)
        first.subscribe([A])
        members.append(first)
        until(members, lambda: owned(first) == partitions(A, 6))
        second, third = consumer(bootstrap), consumer(bootstrap)
        second.subscribe([A])
        third.subscribe([A])
        members += [second, third]
        # three members, two partitions each, no partition owned twice
        until(members, lambda: all(len(owned(c)) == 2 for c in members))
        assert set().union(*(owned(c) for c in members)) == partitions(A, 6)
        described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert described.type == confluent_kafka.ConsumerGroupType.CONSUMER
        assert described.state == confluent_kafka.ConsumerGroupState.STABLE
        assert len(described.members) == 3

        # a subscription change: the third member moves to topic B alone
        third.subscribe([B])
        until(members, lambda: owned(third) == partitions(B, 2) and len(owned(first) | owned(second)) == 6)

        # the second member leaves; the first takes over all of A
        second.close()
        members.remove(second)
        until(members, lambda: owned(first) == partitions(A, 6))

        # commit (with the member epoch), then restart the broker under the live group
        first.commit(offsets=[TopicPartition(A, p, 2) for p in range(6)], asynchronous=False)
        epoch_before = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert broker.stop() == 0
        broker = serve(data_dir, port)
        # the members carry on with their assignments; nothing is rebalanced away
        until(members, lambda: owned(first) == partitions(A, 6) and owned(third) == partitions(B, 2))
        after = describe_group(bootstrap, members)
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in epoch_before.members)
        committed = first.committed([TopicPartition(A, p) for p in range(6)], timeout=10)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(p, 2) for p in range(6)]
        # a new admin client: the one from before the restart may still be in its reconnect backoff
        fetched = committed_offsets(bootstrap, members)
        assert sorted((tp.topic, tp.partition, tp.offset) for tp in fetched.topic_partitions) == [
            (A, p, 2) for p in range(6)
        ]
    finally:
        for c in members:
            c.close()
        broker.stop()


def test_classic_and_consumer_groups_side_by_side(broker: tuple[BrokerProcess, Path, int]) -> None:
    process, _, _ = broker
    bootstrap = process.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(A, 4, 1)])[A].result(10)
    modern = consumer(bootstrap, "side-modern")
    classic = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "side-classic", "auto.offset.reset": "earliest",
         "heartbeat.interval.ms": 200, "session.timeout.ms": 6000}
    )  # fmt: skip
    try:
        modern.subscribe([A])
        classic.subscribe([A])
        until(
            [modern, classic],
            lambda: owned(modern) == partitions(A, 4) and owned(classic) == partitions(A, 4),
        )
        groups = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert {"side-modern", "side-classic"} <= groups.keys()
        described = admin.describe_consumer_groups(["side-modern", "side-classic"])
        assert described["side-modern"].result(10).type == confluent_kafka.ConsumerGroupType.CONSUMER
        assert described["side-classic"].result(10).type == confluent_kafka.ConsumerGroupType.CLASSIC
    finally:
        modern.close()
        classic.close()


def test_compacted_offsets_topic_after_churn_restores(broker: tuple[BrokerProcess, Path, int]) -> None:
    process, data_dir, port = broker
    bootstrap = process.bootstrap
    setup = AdminClient({"bootstrap.servers": bootstrap})
    setup.create_topics([NewTopic(A, 4, 1)])[A].result(10)
    stay = consumer(bootstrap, "churn")
    stay.subscribe([A])
    until([stay], lambda: owned(stay) == partitions(A, 4))
    for _ in range(4):  # members come and go
        extra = consumer(bootstrap, "churn")
        extra.subscribe([A])
        until([stay, extra], lambda extra=extra: len(owned(stay)) == 2 and len(owned(extra)) == 2)
        extra.close()
        until([stay], lambda: owned(stay) == partitions(A, 4))
    stay.commit(offsets=[TopicPartition(A, p, 1) for p in range(4)], asynchronous=False)
    stay.close()
    assert process.stop() == 0
    partition_dir = data_dir / f"{OFFSETS_TOPIC}-{partition_for('churn', 50)}"
    size_before = sum(f.stat().st_size for f in partition_dir.glob("*.log"))
    result = subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", "log", "compact", str(partition_dir), "-o", "json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    size_after = sum(f.stat().st_size for f in partition_dir.glob("*.log"))
    assert size_after < size_before / 2, (size_before, size_after, result.stdout)
    restarted = serve(data_dir, port)
    try:
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        described = admin.describe_consumer_groups(["churn"])["churn"].result(10)
        assert (described.type, described.state) == (
            confluent_kafka.ConsumerGroupType.CONSUMER,
            confluent_kafka.ConsumerGroupState.EMPTY,
        )
        back = consumer(restarted.bootstrap, "churn")
        back.subscribe([A])
        until([back], lambda: owned(back) == partitions(A, 4))
        committed = back.committed([TopicPartition(A, p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [1, 1, 1, 1]
        back.close()
    finally:
        restarted.stop()


def test_exactly_once_with_a_consumer_protocol_member(broker: tuple[BrokerProcess, Path, int]) -> None:
    """send_offsets_to_transaction with KIP-848 consumer group metadata (the member epoch as its
    generation): the TxnOffsetCommit is checked against the consumer group, as Kafka's
    ``ConsumerGroup.validateOffsetCommit`` does, and the offsets appear on commit."""
    process, _, _ = broker
    bootstrap = process.bootstrap
    source, group = "eos-848-in", "eos-848-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(source, 1, 1)])[source].result(10)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        plain.produce(source, value=b"%d" % i)
    assert plain.flush(10) == 0
    member = consumer(bootstrap, group)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-848"})
    try:
        member.subscribe([source])
        until([member], lambda: owned(member) == partitions(source, 1))
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 5)], member.consumer_group_metadata(), 10
        )
        producer.commit_transaction(10)
        committed = member.committed([TopicPartition(source, 0)], timeout=10)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 5)]
    finally:
        member.close()
