"""Worked example (a): kompakt's own coordinators survive every legal compaction of their topics.

A broker runs classic and KIP-848 consumer groups, deletes a group, commits offsets in a committed
and in an aborted transaction; its ``__consumer_offsets`` and ``__transaction_state`` partitions
are then the sources of a compaction check, and each variant's data directory is loaded by the
coordinators' own start-up replay (``GroupCoordinator.load`` over ``GroupLog``,
``TransactionStateManager.load``). Their state (groups, members, assignments, committed offsets;
transactional ids) must be the same as after loading the log as written.

The same check runs on ``__consumer_offsets`` written by Apache Kafka 4.1 (the captured fixture).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kompakt.broker.groups.config import GroupConfig
from kompakt.broker.groups.coordinator import GroupCoordinator
from kompakt.broker.groups.records.log import GroupLog
from kompakt.broker.txn.state_manager import TransactionStateManager, TxnConfig
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.testing import InProcessBroker
from kompakt.testing.compaction_log import SourceLog
from kompakt.testing.replay_check import assert_compaction_safe, latest_values

FIXTURE = Path(__file__).resolve().parents[1] / "log" / "fixtures" / "kafka41_cluster" / "logs"
TOPIC = "orders"
DEADLINE_S = 30.0


def _loaded(data_dir: Path) -> Iterator[LogManager]:
    manager = LogManager(data_dir, BrokerConfig.from_properties({}), FakeClock())
    manager.open()
    try:
        yield manager
    finally:
        manager.close_without_flush()


def consumer_offsets_state(data_dir: Path) -> dict[str, Any]:
    """What ``GroupCoordinator.load`` rebuilds from the ``__consumer_offsets`` partitions of
    ``data_dir``: every group's listing, description and committed offsets."""
    for manager in _loaded(data_dir):
        clock = FakeClock()
        coordinator = GroupCoordinator(GroupConfig(), clock, GroupLog(manager, clock))
        coordinator.load()
        state: dict[str, Any] = {}
        for listing in coordinator.list_groups():
            group = listing.group_id
            entry: dict[str, Any] = {"listing": asdict(listing)}
            if listing.group_type == "consumer":
                entry["consumer"] = asdict(coordinator.consumer_group_describe(group))
            else:
                entry["classic"] = asdict(coordinator.describe(group))
            entry["offsets"] = [
                (topic, partition, None if committed is None else committed.offset)
                for topic, partition, committed in coordinator.fetch_offsets(group, None)
            ]
            state[group] = entry
        return state
    raise AssertionError("unreachable")


def transaction_state(data_dir: Path) -> dict[str, Any]:
    """What ``TransactionStateManager.load`` rebuilds from ``__transaction_state``."""
    for manager in _loaded(data_dir):
        states = TransactionStateManager(manager, FakeClock(), TxnConfig())
        states.load()
        return {
            m.transactional_id: (m.producer_id, m.producer_epoch, m.state.name, sorted(m.partitions))
            for m in states.all()
        }
    raise AssertionError("unreachable")


def _until(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached before the deadline"
        time.sleep(0.05)


def _consume(bootstrap: str, group: str, count: int, **extra: Any) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + DEADLINE_S
    while seen < count:
        assert time.monotonic() < deadline, f"{group} read {seen} of {count} records"
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        seen += 1
        if seen % 3 == 0:
            consumer.commit(message=message, asynchronous=False)
    return consumer


@pytest.fixture(scope="module")
def coordinator_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A broker's data directory after classic, KIP-848 and transactional group traffic."""
    data = tmp_path_factory.mktemp("coordinators") / "data"
    overrides = {
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "group.consumer.heartbeat.interval.ms": "300",
        "group.consumer.min.heartbeat.interval.ms": "100",
    }
    with InProcessBroker(data, overrides=overrides) as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic(TOPIC, 2, cleanup_policy="compact")
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(24):
            producer.produce(TOPIC, key=f"k{i % 6}".encode(), value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(10) == 0

        classic = _consume(bootstrap, "classic-group", 24)
        classic.close()
        doomed = _consume(bootstrap, "doomed-group", 9)
        doomed.close()
        modern = _consume(bootstrap, "kip848-group", 24, **{"group.protocol": "consumer"})
        modern.close()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_consumer_groups(["doomed-group"], request_timeout=10).values():
            future.result()

        txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-app", "linger.ms": 0})
        txn.init_transactions(10)
        group_meta = _GroupMeta("txn-group")
        for committed, offset in ((True, 5), (False, 9), (True, 11)):
            txn.begin_transaction()
            txn.produce(TOPIC, key=b"t", value=str(offset).encode(), partition=0)
            txn.send_offsets_to_transaction([TopicPartition(TOPIC, 0, offset)], group_meta.metadata(), 10)
            if committed:
                txn.commit_transaction(10)
            else:
                txn.abort_transaction(10)
        _until(lambda: broker.records("__consumer_offsets"), "offset records")
    return {
        "offsets": data / "__consumer_offsets-0",
        "transactions": data / "__transaction_state-0",
    }


class _GroupMeta:
    """``send_offsets_to_transaction`` takes a consumer's group metadata; a consumer that never
    subscribes gives it without joining."""

    def __init__(self, group: str) -> None:
        self._consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": group})

    def metadata(self) -> Any:
        return self._consumer.consumer_group_metadata()


def test_consumer_offsets_replay_survives_compaction(coordinator_dirs: dict[str, Path]) -> None:
    source = SourceLog.from_directory(coordinator_dirs["offsets"])
    expected = consumer_offsets_state(coordinator_dirs["offsets"].parent)
    assert {"classic-group", "kip848-group", "txn-group"} <= set(expected)
    assert "doomed-group" not in expected
    assert expected["kip848-group"]["listing"]["group_type"] == "consumer"
    assert expected["txn-group"]["offsets"] == [(TOPIC, 0, 11)]  # the aborted commit (9) is not applied
    report = assert_compaction_safe(
        source, consumer_offsets_state, view="log", replay_on="directory", max_variants=40, exhaustive=False
    )
    assert report.checked >= 10


def test_transaction_state_replay_survives_compaction(coordinator_dirs: dict[str, Path]) -> None:
    source = SourceLog.from_directory(coordinator_dirs["transactions"])
    expected = transaction_state(coordinator_dirs["transactions"].parent)
    assert list(expected) == ["txn-app"]
    report = assert_compaction_safe(
        source, transaction_state, view="log", replay_on="directory", max_variants=40
    )
    assert report.checked >= 2


def test_a_kafka_written_compacted_topic_replays_the_same() -> None:
    """A captured Apache Kafka 4.1 log (``orders-0``, already compacted by Kafka's cleaner, with
    tombstones) as the source: the latest value per key is the same on every further compaction."""
    report = assert_compaction_safe(FIXTURE / "orders-0", latest_values, exhaustive=True)
    assert report.mode == "exhaustive" and report.checked >= 3 and report.records == 40
