"""Compaction observed end to end through a real client (confluent-kafka).

A broker with a short cleaner backoff; a topic created over the protocol with a small
``segment.ms`` and ``delete.retention.ms``; keyed updates and a tombstone. A consumer reading from
offset 0 then sees only the latest value per key (offset gaps where older values were), the
tombstone as a null value, and later no tombstone at all once ``delete.retention.ms`` has passed.

The broker runs ``--clock manual``: the time of segment rolls, lag and delete horizons moves only
when the test advances it over the admin endpoint, and every record carries a timestamp of that
clock, so "segment.ms has passed" is a step of the test, not a real-time wait. Only the broker's
cleaner thread and the client work in real time, and those are polled with a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kompakt.admin.client import AdminClient as KompaktAdmin
from tests.support.serve import BrokerProcess, start_broker

pytestmark = pytest.mark.clients
TOPIC = "e2e-compacted"
DEADLINE_S = 45.0
SEGMENT_MS = 100
DELETE_RETENTION_MS = 1000
IDLE_MAX_LAG_MS = 300
IDLE_DELETE_RETENTION_MS = 500


@pytest.fixture(scope="module")
def fast_cleaner_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("e2e") / "data"
    broker = start_broker(data_dir, "--override", "log.cleaner.backoff.ms=50", "--clock", "manual")
    yield broker
    assert broker.stop() == 0, broker.stderr_path.read_text()


def broker_clock(broker: BrokerProcess) -> KompaktAdmin:
    """The admin endpoint that reads and moves the broker's manual clock."""
    return KompaktAdmin(broker.admin_url, timeout_s=30)


def now_ms(clock: KompaktAdmin) -> int:
    now: int = clock.clock()["now_ms"]
    return now


def read_all(bootstrap: str, topic: str = TOPIC) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 from offset 0 to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,  # reach the end quickly: each read is one step of a poll
        }
    )
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"consume error: {error}")
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError("did not reach the end of the partition")
    finally:
        consumer.close()


def test_a_consumer_sees_only_latest_values_then_tombstones_go(fast_cleaner_broker: BrokerProcess) -> None:
    bootstrap = fast_cleaner_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    }
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(10)
    clock = broker_clock(fast_cleaner_broker)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    start = now_ms(clock)
    for round_no in range(5):
        for k in range(10):
            producer.produce(TOPIC, key=f"k{k}".encode(), value=f"v{round_no}".encode(), timestamp=start)
    producer.produce(TOPIC, key=b"k3", value=None, timestamp=start)  # tombstone
    producer.produce(TOPIC, key=b"k4", value=b"", timestamp=start)  # empty value: an ordinary value
    assert producer.flush(10) == 0

    def tick(step_ms: int) -> None:
        """``step_ms`` (more than segment.ms) of broker time, then new dirty data: what makes Kafka roll
        and clean."""
        moved_to = clock.advance_clock(step_ms)["now_ms"]
        producer.produce(TOPIC, key=b"tick", value=str(moved_to).encode(), timestamp=moved_to)
        producer.flush(5)

    expected = {f"k{k}".encode(): b"v4" for k in range(10)}
    expected[b"k3"] = None
    expected[b"k4"] = b""

    deadline = time.monotonic() + DEADLINE_S
    while True:
        tick(SEGMENT_MS + 50)
        records = read_all(bootstrap)
        data = [(o, k, v) for o, k, v in records if k != b"tick"]
        if len(data) == 10:
            break
        assert time.monotonic() < deadline, f"never compacted to one record per key: {data}"
    assert {k: v for _, k, v in data} == expected
    offsets = [o for o, _, _ in data]
    assert offsets == sorted(offsets) and offsets[-1] - offsets[0] >= 10  # gaps where old values were

    while True:
        tick(DELETE_RETENTION_MS // 2)  # each step still rolls (> segment.ms)
        data = [(o, k, v) for o, k, v in read_all(bootstrap) if k != b"tick"]
        if all(k != b"k3" for _, k, _ in data):
            break
        assert time.monotonic() < deadline, f"the tombstone was never removed: {data}"
    del expected[b"k3"]
    assert {k: v for _, k, v in data} == expected


def test_a_tombstone_expires_with_no_new_produce(fast_cleaner_broker: BrokerProcess) -> None:
    """Issue 7: nothing is produced after the delete; the idle active segment is rolled by the
    cleaner (max.compaction.lag.ms), the tombstone is stamped, and once delete.retention.ms has
    passed a tombstone-driven clean removes it. Kafka would keep it forever."""
    bootstrap = fast_cleaner_broker.bootstrap
    topic = "e2e-idle-tombstone"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {
        "cleanup.policy": "compact",
        "max.compaction.lag.ms": str(IDLE_MAX_LAG_MS),
        "min.cleanable.dirty.ratio": "0.5",
        "delete.retention.ms": str(IDLE_DELETE_RETENTION_MS),
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
    clock = broker_clock(fast_cleaner_broker)
    produced_at = now_ms(clock)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic, key=b"a", value=b"1", timestamp=produced_at)
    producer.produce(topic, key=b"gone", value=b"x", timestamp=produced_at)
    producer.produce(topic, key=b"gone", value=None, timestamp=produced_at)
    assert producer.flush(10) == 0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        records = read_all(bootstrap, topic)
        if [(k, v) for _, k, v in records] == [(b"a", b"1")]:
            break
        assert time.monotonic() < deadline, f"the tombstone never expired: {records}"
        # The next step of the broker's time (it wakes the cleaner): past max.compaction.lag.ms
        # the idle segment is rolled and cleaned, past delete.retention.ms the tombstone goes.
        clock.advance_clock(max(IDLE_MAX_LAG_MS, IDLE_DELETE_RETENTION_MS))
