"""OffsetDelete (KIP-496), ListGroups v5 types, DescribeGroups v6 and KIP-430 authorized operations."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kompakt.broker.authorized_operations import (
    CLUSTER_AUTHORIZED_OPERATIONS,
    GROUP_AUTHORIZED_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_AUTHORIZED_OPERATIONS,
)
from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.clock import FakeClock
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call


@pytest.fixture
def broker(clock: FakeClock, log_manager: LogManager, timers: ManualTimers) -> Broker:
    return Broker.create(
        clock=clock,
        log_manager=log_manager,
        producer_ids=ProducerIdManager(log_manager.data_dir),
        timers=timers,
        group_config=GroupConfig(group_initial_rebalance_delay_ms=0),
        cluster_id="test-cluster",
        advertised_host="broker.example",
        advertised_port=19092,
    )


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, empty user data."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)


def stable_member(
    dispatcher: Dispatcher, group: str, metadata: bytes, protocol_type: str = "consumer"
) -> str:
    join = {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "protocol_type": protocol_type,
        "protocols": [{"name": "range", "metadata": metadata}],
    }
    required = call(dispatcher, ApiKey.JOIN_GROUP, 5, join)
    joined = call(dispatcher, ApiKey.JOIN_GROUP, 5, join | {"member_id": required.member_id})
    member = joined.member_id
    sync = {"group_id": group, "generation_id": joined.generation_id, "member_id": member, "assignments": []}
    assert call(dispatcher, ApiKey.SYNC_GROUP, 3, sync).error_code == E.none
    return str(member)


def commit(dispatcher: Dispatcher, group: str, topic: str, partitions: list[int]) -> None:
    values = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": 5, "committed_metadata": ""}
                    for p in partitions
                ],
            }
        ],
    }
    response = call(dispatcher, ApiKey.OFFSET_COMMIT, 8, values)
    assert all(p.error_code == E.none for t in response.topics for p in t.partitions)


def committed(dispatcher: Dispatcher, group: str) -> set[tuple[str, int]]:
    response = call(dispatcher, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None})
    return {
        (t.name, p.partition_index) for t in response.topics for p in t.partitions if p.committed_offset >= 0
    }


def offset_delete(dispatcher: Dispatcher, group: str, topics: dict[str, list[int]]) -> Any:
    values = {
        "group_id": group,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()
        ],
    }
    response = call(dispatcher, ApiKey.OFFSET_DELETE, 0, values)
    return response.error_code, {
        t.name: [(p.partition_index, p.error_code) for p in t.partitions] for t in response.topics
    }


def test_offset_delete_of_an_empty_group(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("a", 2)
    log_manager.create_topic("b", 1)
    commit(dispatcher, "g", "a", [0, 1])
    commit(dispatcher, "g", "b", [0])
    error, topics = offset_delete(dispatcher, "g", {"a": [0, 7], "nope": [0]})
    assert error == E.none
    assert topics == {
        "a": [(7, E.unknown_topic_or_partition), (0, E.none)],
        "nope": [(0, E.unknown_topic_or_partition)],
    }
    assert committed(dispatcher, "g") == {("a", 1), ("b", 0)}


def test_offset_delete_of_a_subscribed_topic_is_refused(
    dispatcher: Dispatcher, log_manager: LogManager
) -> None:
    log_manager.create_topic("a", 1)
    log_manager.create_topic("b", 1)
    commit(dispatcher, "g", "a", [0])
    commit(dispatcher, "g", "b", [0])
    stable_member(dispatcher, "g", subscription("a"))
    error, topics = offset_delete(dispatcher, "g", {"a": [0], "b": [0]})
    assert (error, topics) == (E.none, {"a": [(0, E.group_subscribed_to_topic)], "b": [(0, E.none)]})
    assert committed(dispatcher, "g") == {("a", 0)}


def test_offset_delete_group_level_errors(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("a", 1)
    assert offset_delete(dispatcher, "missing", {"a": [0]}) == (E.group_id_not_found, {})
    commit(dispatcher, "connect", "a", [0])
    stable_member(dispatcher, "connect", b"anything", protocol_type="connect")
    assert offset_delete(dispatcher, "connect", {"a": [0]}) == (E.non_empty_group, {})
    # A consumer group whose subscription cannot be read keeps all its offsets (Kafka's rule).
    commit(dispatcher, "opaque", "a", [0])
    stable_member(dispatcher, "opaque", b"\x00")
    assert offset_delete(dispatcher, "opaque", {"a": [0]}) == (
        E.none,
        {"a": [(0, E.group_subscribed_to_topic)]},
    )


def listed(
    dispatcher: Dispatcher, version: int, states: list[str], types: list[str]
) -> list[tuple[str, ...]]:
    response = call(dispatcher, ApiKey.LIST_GROUPS, version, {"states_filter": states, "types_filter": types})
    return [(g.group_id, g.group_state, getattr(g, "group_type", "-")) for g in response.groups]


def test_list_groups_v5_types_and_states(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("a", 1)
    stable_member(dispatcher, "live", subscription("a"))
    commit(dispatcher, "simple", "a", [0])
    everything = [("live", "Stable", "classic"), ("simple", "Empty", "classic")]
    assert listed(dispatcher, 5, [], []) == everything
    assert listed(dispatcher, 5, [], ["Classic"]) == everything  # case-insensitive
    assert listed(dispatcher, 5, [], ["consumer"]) == []
    assert listed(dispatcher, 5, ["empty"], ["classic", "share"]) == [("simple", "Empty", "classic")]
    assert listed(dispatcher, 4, ["stable"], []) == [("live", "Stable", "-")]


def test_describe_groups_v6_and_authorized_operations(
    dispatcher: Dispatcher, log_manager: LogManager
) -> None:
    log_manager.create_topic("a", 1)
    stable_member(dispatcher, "g", subscription("a"))
    for version in (3, 5, 6):
        response = call(
            dispatcher,
            ApiKey.DESCRIBE_GROUPS,
            version,
            {"groups": ["g", "nope"], "include_authorized_operations": True},
        )
        g, nope = response.groups
        assert (g.error_code, g.group_state, g.authorized_operations) == (
            E.none,
            "Stable",
            GROUP_AUTHORIZED_OPERATIONS,
        )
        if version >= 6:
            assert (nope.error_code, nope.group_state, nope.error_message) == (
                E.group_id_not_found,
                "Dead",
                "Group nope not found.",
            )
            assert nope.authorized_operations == NOT_REQUESTED
        else:
            assert (nope.error_code, nope.group_state, nope.authorized_operations) == (
                E.none,
                "Dead",
                GROUP_AUTHORIZED_OPERATIONS,
            )
    quiet = call(
        dispatcher, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False}
    )
    assert quiet.groups[0].authorized_operations == NOT_REQUESTED


def test_authorized_operations_bit_fields_are_kafkas() -> None:
    # AclEntry.supportedOperations through Utils.to32BitField, as a Kafka 4.1 broker without an
    # authorizer reports them (checked against one).
    assert (TOPIC_AUTHORIZED_OPERATIONS, GROUP_AUTHORIZED_OPERATIONS, CLUSTER_AUTHORIZED_OPERATIONS) == (
        3576,
        3400,
        8096,
    )


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_authorized_operations(
    dispatcher: Dispatcher, log_manager: LogManager, version: int
) -> None:
    log_manager.create_topic("a", 1)
    values = {
        "topics": [{"name": "a", "topic_id": None}, {"name": "missing", "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    response = call(dispatcher, ApiKey.METADATA, version, values)
    assert [t.topic_authorized_operations for t in response.topics] == [TOPIC_AUTHORIZED_OPERATIONS] * 2
    if version <= 10:
        assert response.cluster_authorized_operations == CLUSTER_AUTHORIZED_OPERATIONS
    quiet = call(
        dispatcher, ApiKey.METADATA, version, values | {"include_topic_authorized_operations": False}
    )
    assert quiet.topics[0].topic_authorized_operations == NOT_REQUESTED


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_authorized_operations(dispatcher: Dispatcher, version: int) -> None:
    values = {"include_cluster_authorized_operations": True, "include_fenced_brokers": True}
    response = call(dispatcher, ApiKey.DESCRIBE_CLUSTER, version, values)
    assert (response.error_code, response.cluster_authorized_operations) == (
        E.none,
        CLUSTER_AUTHORIZED_OPERATIONS,
    )
    if version >= 2:
        assert [b.is_fenced for b in response.brokers] == [False]
    if version >= 1:
        odd = call(dispatcher, ApiKey.DESCRIBE_CLUSTER, version, values | {"endpoint_type": 7})
        assert odd.error_code == E.unsupported_endpoint_type
