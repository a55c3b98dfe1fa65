"""Transactions end to end with confluent-kafka (librdkafka): what a transactional application
sees. Each scenario was also run against Apache Kafka 4.1.2; the differences are listed in
issue 15's closing note.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .conftest import External, Kompakt, poll_until, restart, start
from .txn_clients import create_topic, read_all, txn_producer, unique, values, watermarks

pytestmark = pytest.mark.xdist_group("e2e-txn")


def test_commit_and_abort_read_committed_and_uncommitted(kompakt: Kompakt | External) -> None:
    bs, topic = kompakt.bootstrap, unique("t")
    create_topic(bs, topic)
    producer = txn_producer(bs, unique("txn"))
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=b"c%d" % i, value=b"committed-%d" % i)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=b"a%d" % i, value=b"aborted-%d" % i)
    producer.flush(30)  # librdkafka purges unsent records on abort: make sure they reach the log
    producer.abort_transaction(30)

    committed, lso = read_all(bs, topic, "read_committed")
    uncommitted, hwm = read_all(bs, topic, "read_uncommitted")
    # Markers take offsets 5 (COMMIT) and 9 (ABORT); read_committed drops the aborted records.
    assert [(o, v) for o, _, v in committed] == [(i, b"committed-%d" % i) for i in range(5)]
    assert [o for o, _, _ in uncommitted] == [0, 1, 2, 3, 4, 6, 7, 8]
    assert values(uncommitted)[5:] == [b"aborted-0", b"aborted-1", b"aborted-2"]
    assert lso == hwm == 10
    assert watermarks(bs, topic) == (0, 10)


def test_open_transaction_pins_the_last_stable_offset(kompakt: Kompakt | External) -> None:
    bs, topic = kompakt.bootstrap, unique("t")
    create_topic(bs, topic)
    producer = txn_producer(bs, unique("txn"))
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"open")
    producer.flush(30)
    committed, lso = read_all(bs, topic, "read_committed")
    uncommitted, hwm = read_all(bs, topic, "read_uncommitted")
    assert (committed, lso) == ([], 0)
    assert values(uncommitted) == [b"open"] and hwm == 1
    producer.commit_transaction(30)
    committed, lso = read_all(bs, topic, "read_committed")
    assert values(committed) == [b"open"] and lso == 2


def test_send_offsets_to_transaction_commits_offsets_only_with_the_transaction(
    kompakt: Kompakt | External,
) -> None:
    bs = kompakt.bootstrap
    source, sink, group = unique("src"), unique("sink"), unique("group")
    create_topic(bs, source)
    create_topic(bs, sink)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(6):
        plain.produce(source, key=b"k%d" % i, value=b"v%d" % i)
    plain.flush(30)

    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    producer = txn_producer(bs, unique("txn"))

    def process(count: int) -> list[int]:
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while len(seen) < count:
            assert time.monotonic() < deadline, f"consumed only {seen}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            producer.produce(sink, key=msg.key(), value=b"out-" + (msg.value() or b""))
            seen.append(msg.offset())
        return seen

    def committed_offset(isolation: str = "read_committed", timeout_s: float = 10) -> int:
        # librdkafka asks for stable offsets (require_stable) when it reads committed data.
        checker = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": isolation})
        try:
            (tp,) = checker.committed([TopicPartition(source, 0)], timeout=timeout_s)
            return int(tp.offset)
        finally:
            checker.close()

    try:
        producer.begin_transaction()
        assert process(3) == [0, 1, 2]
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 3)], consumer.consumer_group_metadata(), 30
        )
        # Pending: invisible to a plain OffsetFetch, and UNSTABLE_OFFSET_COMMIT (retried until
        # the caller's timeout) for one that asks for stable offsets.
        assert committed_offset("read_uncommitted") < 0
        with pytest.raises(KafkaException, match="Timed out"):
            committed_offset("read_committed", timeout_s=2)
        producer.commit_transaction(30)
        assert committed_offset() == 3

        producer.begin_transaction()
        assert process(3) == [3, 4, 5]
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 6)], consumer.consumer_group_metadata(), 30
        )
        producer.flush(30)
        producer.abort_transaction(30)
        assert committed_offset() == 3  # the aborted transaction's offsets are dropped
    finally:
        consumer.close()
    out, _ = read_all(bs, sink, "read_committed")
    assert values(out) == [b"out-v0", b"out-v1", b"out-v2"]


def test_zombie_producer_is_fenced(kompakt: Kompakt | External) -> None:
    bs, topic, txn_id = kompakt.bootstrap, unique("t"), unique("txn")
    create_topic(bs, topic)
    zombie = txn_producer(bs, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, key=b"k", value=b"zombie")
    zombie.flush(30)

    successor = txn_producer(bs, txn_id)  # same id: bumps the epoch, aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic, key=b"k", value=b"successor")
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, key=b"k", value=b"late")
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
    committed, _ = read_all(bs, topic, "read_committed")
    assert values(committed) == [b"successor"]


def test_broker_aborts_a_transaction_past_its_timeout(kompakt: Kompakt | External) -> None:
    bs, topic = kompakt.bootstrap, unique("t")
    create_topic(bs, topic)
    # Long enough that the first read below (a new consumer) comes before the broker aborts.
    producer = txn_producer(bs, unique("txn"), **{"transaction.timeout.ms": 5000})
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"forgotten")
    producer.flush(30)
    assert read_all(bs, topic, "read_committed")[1] == 0

    # The abort check runs every 100 ms: the ABORT marker (offset 1) releases the LSO.
    poll_until(lambda: read_all(bs, topic, "read_committed")[1] == 2, what="the broker-side abort")
    committed, _ = read_all(bs, topic, "read_committed")
    assert committed == []
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)


def test_broker_restart_in_the_middle_of_a_transaction(tmp_path_factory: pytest.TempPathFactory) -> None:
    broker = start(tmp_path_factory.mktemp("restart") / "data")
    try:
        bs, topic = broker.bootstrap, unique("t")
        create_topic(bs, topic)
        producer = txn_producer(bs, unique("txn"))
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, key=b"k%d" % i, value=b"before-%d" % i)
        producer.flush(30)
        assert broker.stop() == 0
        broker = restart(broker)
        # The open transaction survived: its data is still past the LSO.
        assert read_all(bs, topic, "read_committed") == ([], 0)
        producer.produce(topic, key=b"k3", value=b"after")
        producer.commit_transaction(30)
        committed, lso = read_all(bs, topic, "read_committed")
        assert values(committed) == [b"before-0", b"before-1", b"before-2", b"after"]
        assert lso == 5
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()
