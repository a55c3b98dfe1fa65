"""Metadata, InitProducerId, DescribeCluster, OffsetForLeaderEpoch, advertised versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import OFFSETS_TOPIC, Broker
from kompakt.broker.dispatch import HANDLERS, Dispatcher
from kompakt.broker.producer_ids import PRODUCER_IDS_FILE, ProducerIdManager
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.builder import SimpleRecord, build_batch
from tests.support.wire import call


def test_advertised_versions() -> None:
    expected = {
        ApiKey.METADATA: (0, 12),
        ApiKey.PRODUCE: (3, 12),  # v10-11 for KIP-951 tags and TRANSACTION_ABORTABLE, v12 for KIP-890 part 2
        ApiKey.FETCH: (4, 12),
        ApiKey.LIST_OFFSETS: (1, 7),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    }
    for key, (low, high) in expected.items():
        assert (HANDLERS[key].min_version, HANDLERS[key].max_version) == (low, high)


def metadata(dispatcher: Dispatcher, topics: list[str] | None, version: int = 12, allow: bool = True) -> Any:
    values: dict[str, object] = {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": allow,
        "include_topic_authorized_operations": False,
    }
    return call(dispatcher, ApiKey.METADATA, version, values)


def test_empty_topic_list_returns_brokers_only(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("t", 1)
    response = metadata(dispatcher, [])
    assert response.topics == ()
    (node,) = response.brokers
    assert (node.node_id, node.host, node.port) == (0, "broker.example", 19092)
    assert (response.cluster_id, response.controller_id) == ("test-cluster", 0)


def test_null_topics_means_all(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    a = log_manager.create_topic("a", 2)
    log_manager.create_topic(OFFSETS_TOPIC, 1)
    response = metadata(dispatcher, None)
    assert [(t.name, t.is_internal, t.error_code) for t in response.topics] == [
        (OFFSETS_TOPIC, True, E.none),
        ("a", False, E.none),
    ]
    topic = response.topics[1]
    assert topic.topic_id == a.topic_id
    assert [
        (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
        for p in topic.partitions
    ] == [
        (0, 0, 0, (0,), (0,)),
        (1, 0, 0, (0,), (0,)),
    ]


def test_v0_empty_list_means_all(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("a", 1)
    response = call(dispatcher, ApiKey.METADATA, 0, {"topics": []})
    assert [t.name for t in response.topics] == ["a"]


def test_auto_create(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    response = metadata(dispatcher, ["new"])
    (topic,) = response.topics
    assert (topic.name, topic.error_code, len(topic.partitions)) == ("new", E.none, 2)
    assert "new" in log_manager.topics()


def test_no_auto_create_when_not_allowed(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    (topic,) = metadata(dispatcher, ["new"], allow=False).topics
    assert topic.error_code == E.unknown_topic_or_partition
    assert "new" not in log_manager.topics()


def test_internal_topic_is_never_auto_created(dispatcher: Dispatcher) -> None:
    (topic,) = metadata(dispatcher, [OFFSETS_TOPIC]).topics
    assert topic.error_code == E.unknown_topic_or_partition


def test_invalid_topic_name(dispatcher: Dispatcher) -> None:
    (topic,) = metadata(dispatcher, ["bad name!"]).topics
    assert topic.error_code == E.invalid_topic_exception


@pytest.mark.parametrize("version", [1, 4, 9])
def test_old_versions(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    log_manager.create_topic("a", 1)
    values: dict[str, object] = {
        "topics": [{"name": "a"}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    response = call(dispatcher, ApiKey.METADATA, version, values)
    assert [t.name for t in response.topics] == ["a"]


# ---- InitProducerId --------------------------------------------------------------------------


def init_pid(dispatcher: Dispatcher, version: int = 4, **values: object) -> Any:
    body: dict[str, object] = {"transactional_id": None, "transaction_timeout": 60000} | values
    return call(dispatcher, ApiKey.INIT_PRODUCER_ID, version, body)


def test_init_producer_ids_are_unique_and_persisted(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    first, second = init_pid(dispatcher), init_pid(dispatcher, version=0)
    assert (first.error_code, first.producer_epoch) == (E.none, 0)
    assert second.producer_id == first.producer_id + 1
    reopened = ProducerIdManager(log_manager.data_dir)
    assert reopened.next_id() > second.producer_id
    assert (log_manager.data_dir / PRODUCER_IDS_FILE).exists()


def test_init_producer_bumps_epoch(dispatcher: Dispatcher) -> None:
    first = init_pid(dispatcher)
    bumped = init_pid(dispatcher, producer_id=first.producer_id, producer_epoch=0)
    assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
    unknown = init_pid(dispatcher, producer_id=999_999, producer_epoch=3)
    assert unknown.producer_epoch == 0 and unknown.producer_id != 999_999


def test_transactional_init_without_a_coordinator_is_retriable(dispatcher: Dispatcher) -> None:
    # This fixture broker has no transaction coordinator (tests/broker/test_txn_handlers.py has one).
    response = init_pid(dispatcher, transactional_id="tx")
    assert (response.error_code, response.producer_id) == (E.coordinator_not_available, -1)


def test_producer_ids_never_repeat_across_blocks(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, block_size=3)
    issued = [manager.next_id() for _ in range(5)]
    again = ProducerIdManager(tmp_path, block_size=3)
    assert again.next_id() == 6  # the rest of the reserved block is skipped
    assert issued == [0, 1, 2, 3, 4]


# ---- DescribeCluster / OffsetForLeaderEpoch --------------------------------------------------


def test_describe_cluster(dispatcher: Dispatcher) -> None:
    response = call(dispatcher, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False})
    assert (response.error_code, response.cluster_id, response.controller_id) == (E.none, "test-cluster", 0)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, "broker.example", 19092)]
    controllers = call(
        dispatcher,
        ApiKey.DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": False, "endpoint_type": 2},
    )
    # Kafka 4.1 (AuthHelper.computeDescribeClusterResponse): a broker asked for controllers.
    assert controllers.error_code == E.mismatched_endpoint_type


@pytest.mark.parametrize(
    ("current", "requested", "expected"),
    [
        (-1, 0, (E.none, 0, 3)),
        (0, 0, (E.none, 0, 3)),
        (-1, 5, (E.none, -1, -1)),
        (1, 0, (E.unknown_leader_epoch, -1, -1)),
    ],
)
def test_offset_for_leader_epoch(
    dispatcher: Dispatcher,
    log_manager: LogManager,
    current: int,
    requested: int,
    expected: tuple[int, int, int],
) -> None:
    log_manager.create_topic("t", 1)
    log_manager.get_log("t", 0).append(build_batch([SimpleRecord(b"k", b"v", 1)] * 3))
    values = {
        "replica_id": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": requested}],
            }
        ],
    }
    for version in (2, 4):
        part = call(dispatcher, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, values).topics[0].partitions[0]
        assert (part.error_code, part.leader_epoch, part.end_offset) == expected


def test_offset_commit_checks_partitions(
    dispatcher: Dispatcher, broker: Broker, log_manager: LogManager
) -> None:
    log_manager.create_topic("t", 1)
    assert broker.partition_exists("t", 0) and not broker.partition_exists("t", 1)


def test_config_listeners(broker: Broker) -> None:
    seen: list[BrokerConfig] = []
    broker.config_listeners.append(seen.append)

    def broken(_config: BrokerConfig) -> None:
        raise RuntimeError("listener bug")

    broker.config_listeners.append(broken)  # logged, does not stop the others
    new = broker.broker_config.with_dynamic({"log.cleaner.threads": "2"})
    broker.update_broker_config(new)
    assert seen == [new] and broker.broker_config is new


def test_storage_less_broker_allows_every_partition(clock: FakeClock) -> None:
    assert Broker.create(clock=clock).partition_exists("any", 5)
