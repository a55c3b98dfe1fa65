"""Every API checks the operation Kafka's ``KafkaApis`` checks, and answers Kafka's code.

Each test makes the same request as ``User:alice`` before and after the ACL that allows it (or
with a DENY added), so what changes is the authorization alone.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kompakt.broker.authorized_operations import (
    CLUSTER_AUTHORIZED_OPERATIONS,
    GROUP_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZED_OPERATIONS,
)
from kompakt.broker.dispatch import Dispatcher
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.builder import SimpleRecord, build_batch
from tests.broker.acl.conftest import ADMIN, ALICE, acl, call_as, grant
from tests.support.wire import fetch_values, produce_values

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
DENY, PREFIXED = 2, 4
ZERO = uuid.UUID(int=0)


@pytest.fixture
def topics(log_manager: LogManager) -> None:
    for name in ("orders", "secret"):
        log_manager.create_topic(name, 1)


def as_alice(
    dispatcher: Dispatcher, api: int, version: int, values: dict[str, Any], host: str = "127.0.0.1"
) -> Any:
    return call_as(dispatcher, ALICE, api, version, values, host)


def produce_code(dispatcher: Dispatcher, topic: str, transactional_id: str | None = None) -> int:
    values = produce_values(topic, 0, build_batch([SimpleRecord(b"k", b"v")]))
    values["transactional_id"] = transactional_id
    response = as_alice(dispatcher, ApiKey.PRODUCE, 9, values)
    return int(response.responses[0].partition_responses[0].error_code)


@pytest.mark.usefixtures("topics")
def test_produce_needs_write_on_the_topic(dispatcher: Dispatcher) -> None:
    assert produce_code(dispatcher, "orders") == E.topic_authorization_failed
    grant(dispatcher, acl(TOPIC, "ord", WRITE, pattern_type=PREFIXED))
    assert produce_code(dispatcher, "orders") == 0
    assert produce_code(dispatcher, "secret") == E.topic_authorization_failed
    # A transactional produce needs WRITE on its transactional id first.
    assert produce_code(dispatcher, "orders", "tx") == E.transactional_id_authorization_failed
    assert (
        call_as(
            dispatcher,
            ADMIN,
            ApiKey.PRODUCE,
            9,
            produce_values("secret", 0, build_batch([SimpleRecord(b"k", b"v")])),
        )
        .responses[0]
        .partition_responses[0]
        .error_code
        == 0
    )


@pytest.mark.usefixtures("topics")
def test_fetch_list_offsets_and_epochs_need_read_or_describe(dispatcher: Dispatcher) -> None:
    def codes() -> tuple[int, int, int]:
        fetched = as_alice(dispatcher, ApiKey.FETCH, 12, fetch_values([("orders", 0, 0)]))
        listed = as_alice(
            dispatcher,
            ApiKey.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        epochs = as_alice(
            dispatcher,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            4,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "orders",
                        "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                    }
                ],
            },
        )
        return (
            fetched.responses[0].partitions[0].error_code,
            listed.topics[0].partitions[0].error_code,
            epochs.topics[0].partitions[0].error_code,
        )

    denied = E.topic_authorization_failed
    assert codes() == (denied, denied, denied)
    grant(dispatcher, acl(TOPIC, "orders", DESCRIBE))
    assert codes() == (denied, 0, 0)
    grant(dispatcher, acl(TOPIC, "orders", READ))
    assert codes() == (0, 0, 0)


def metadata(dispatcher: Dispatcher, names: list[str] | None, auto_create: bool = False) -> Any:
    topics = None if names is None else [{"name": n, "topic_id": ZERO} for n in names]
    return as_alice(
        dispatcher,
        ApiKey.METADATA,
        12,
        {
            "topics": topics,
            "allow_auto_topic_creation": auto_create,
            "include_topic_authorized_operations": True,
        },
    )


@pytest.mark.usefixtures("topics")
def test_metadata_hides_topics_the_caller_may_not_describe(
    dispatcher: Dispatcher, log_manager: LogManager
) -> None:
    grant(dispatcher, acl(TOPIC, "orders", READ))
    assert [t.name for t in metadata(dispatcher, None).topics] == ["orders"]
    named = {t.name: t.error_code for t in metadata(dispatcher, ["orders", "secret", "missing"]).topics}
    # "missing" does not exist, "secret" does: both answer the same, nothing is disclosed.
    assert named == {
        "orders": 0,
        "secret": E.topic_authorization_failed,
        "missing": E.topic_authorization_failed,
    }
    # READ implies DESCRIBE; the operations reported are alice's (READ and DESCRIBE).
    (orders,) = metadata(dispatcher, ["orders"]).topics
    assert orders.topic_authorized_operations == (1 << READ) | (1 << DESCRIBE)
    # Auto-creation needs CREATE on the cluster or the topic, besides DESCRIBE.
    grant(dispatcher, acl(TOPIC, "new-", DESCRIBE, pattern_type=PREFIXED))
    (refused,) = metadata(dispatcher, ["new-1"], auto_create=True).topics
    assert refused.error_code == E.topic_authorization_failed and "new-1" not in log_manager.topics()
    grant(dispatcher, acl(TOPIC, "new-", CREATE, pattern_type=PREFIXED))
    (created,) = metadata(dispatcher, ["new-1"], auto_create=True).topics
    assert created.error_code == 0 and "new-1" in log_manager.topics()


def test_authorized_operations_without_acls_and_for_the_super_user(dispatcher: Dispatcher) -> None:
    response = call_as(
        dispatcher, ADMIN, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True}
    )
    assert response.cluster_authorized_operations == CLUSTER_AUTHORIZED_OPERATIONS
    alice = as_alice(dispatcher, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True})
    assert alice.cluster_authorized_operations == 0
    grant(dispatcher, acl(CLUSTER, "kafka-cluster", ALTER_CONFIGS))
    alice = as_alice(dispatcher, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True})
    assert alice.cluster_authorized_operations == (1 << ALTER_CONFIGS) | (1 << DESCRIBE_CONFIGS)
    assert TOPIC_AUTHORIZED_OPERATIONS and GROUP_AUTHORIZED_OPERATIONS  # the no-authorizer answers stay


def join(dispatcher: Dispatcher, group: str) -> int:
    response = as_alice(
        dispatcher,
        ApiKey.JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    return int(response.error_code)


@pytest.mark.usefixtures("topics")
def test_group_apis_need_read_or_describe_on_the_group(dispatcher: Dispatcher) -> None:
    def find(key: str, key_type: int = 0) -> int:
        response = as_alice(
            dispatcher, ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}
        )
        return int(response.coordinators[0].error_code)

    def commit(group: str, topic: str) -> int:
        response = as_alice(
            dispatcher,
            ApiKey.OFFSET_COMMIT,
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 1,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )
        return int(response.topics[0].partitions[0].error_code)

    def offsets(group: str) -> Any:
        return as_alice(
            dispatcher,
            ApiKey.OFFSET_FETCH,
            8,
            {
                "groups": [{"group_id": group, "topics": None}],
                "require_stable": False,
            },
        ).groups[0]

    assert find("app") == E.group_authorization_failed
    assert join(dispatcher, "app") == E.group_authorization_failed
    assert commit("app", "orders") == E.group_authorization_failed
    assert offsets("app").error_code == E.group_authorization_failed
    grant(dispatcher, acl(GROUP, "app", READ))
    assert find("app") == 0
    assert join(dispatcher, "app") == E.member_id_required  # past the check: the join proceeds
    assert commit("app", "orders") == E.topic_authorization_failed  # the topic needs READ too
    grant(dispatcher, acl(TOPIC, "orders", READ))
    assert commit("app", "orders") == 0
    call_as(
        dispatcher,
        ADMIN,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": "app",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "secret",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    # OffsetFetch of all topics leaves out the one alice may not DESCRIBE.
    fetched = offsets("app")
    assert fetched.error_code == 0 and [t.name for t in fetched.topics] == ["orders"]
    # Deleting the group needs DELETE; listing shows only the groups alice may DESCRIBE.
    deleted = as_alice(dispatcher, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["app"]})
    assert deleted.results[0].error_code == E.group_authorization_failed
    call_as(
        dispatcher,
        ADMIN,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": "other",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    listed = as_alice(dispatcher, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [g.group_id for g in listed.groups] == ["app"]
    described = as_alice(
        dispatcher,
        ApiKey.DESCRIBE_GROUPS,
        5,
        {"groups": ["app", "other"], "include_authorized_operations": True},
    )
    assert [g.error_code for g in described.groups] == [0, E.group_authorization_failed]
    assert described.groups[0].authorized_operations == (1 << READ) | (1 << DESCRIBE)


@pytest.mark.usefixtures("topics")
def test_transactional_and_idempotent_producers(dispatcher: Dispatcher) -> None:
    def init(transactional_id: str | None) -> int:
        response = as_alice(
            dispatcher,
            ApiKey.INIT_PRODUCER_ID,
            5,
            {
                "transactional_id": transactional_id,
                "transaction_timeout": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        return int(response.error_code)

    def end(transactional_id: str) -> int:
        response = as_alice(
            dispatcher,
            ApiKey.END_TXN,
            4,
            {"transactional_id": transactional_id, "producer_id": 1, "producer_epoch": 0, "committed": True},
        )
        return int(response.error_code)

    assert init(None) == E.cluster_authorization_failed
    assert init("tx") == E.transactional_id_authorization_failed
    assert end("tx") == E.transactional_id_authorization_failed
    assert (
        as_alice(dispatcher, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
        .coordinators[0]
        .error_code
        == E.transactional_id_authorization_failed
    )
    # KIP-679: WRITE on any topic allows an idempotent producer.
    grant(dispatcher, acl(TOPIC, "orders", WRITE))
    assert init(None) == 0
    grant(dispatcher, acl(TXN, "tx", WRITE))
    assert init("tx") != E.transactional_id_authorization_failed
    assert end("tx") != E.transactional_id_authorization_failed


@pytest.mark.usefixtures("topics")
def test_topic_admin_apis(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    def create(name: str) -> Any:
        return as_alice(
            dispatcher,
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 1000,
                "validate_only": False,
            },
        ).topics[0]

    def delete(name: str) -> int:
        response = as_alice(
            dispatcher,
            ApiKey.DELETE_TOPICS,
            6,
            {"topics": [{"name": name, "topic_id": ZERO}], "timeout": 1000},
        )
        return int(response.responses[0].error_code)

    def configs(name: str, resource_type: int = TOPIC) -> Any:
        return as_alice(
            dispatcher,
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [
                    {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        ).results[0]

    def alter(name: str) -> int:
        response = as_alice(
            dispatcher,
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": TOPIC,
                        "resource_name": name,
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
                    }
                ],
                "validate_only": False,
            },
        )
        return int(response.responses[0].error_code)

    refused = create("fresh")
    assert (refused.error_code, refused.error_message) == (
        E.topic_authorization_failed,
        "Authorization failed.",
    )
    grant(dispatcher, acl(TOPIC, "fresh", CREATE))
    created = create("fresh")
    # Created, but alice may not DESCRIBE_CONFIGS it: no configs, and the config error says why.
    assert (created.error_code, created.topic_config_error_code) == (0, E.topic_authorization_failed)
    assert (created.num_partitions, list(created.configs)) == (-1, [])
    grant(dispatcher, acl(TOPIC, "fresh2", CREATE), acl(TOPIC, "fresh2", DESCRIBE_CONFIGS))
    described = create("fresh2")
    assert (described.topic_config_error_code, described.num_partitions) == (0, 1) and described.configs
    assert delete("orders") == E.topic_authorization_failed and "orders" in log_manager.topics()
    grant(dispatcher, acl(TOPIC, "orders", DELETE))
    assert delete("orders") == 0 and "orders" not in log_manager.topics()
    denied = configs("secret")
    assert (denied.error_code, denied.error_message) == (
        E.topic_authorization_failed,
        "Topic authorization failed.",
    )
    assert configs("0", resource_type=4).error_code == E.cluster_authorization_failed
    assert alter("secret") == E.topic_authorization_failed
    grant(dispatcher, acl(TOPIC, "secret", ALTER_CONFIGS))
    assert configs("secret").error_code == 0  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert alter("secret") == 0
    # DENY wins even for an operation implied elsewhere.
    grant(dispatcher, acl(TOPIC, "secret", DESCRIBE_CONFIGS, permission=DENY))
    assert configs("secret").error_code == E.topic_authorization_failed


@pytest.mark.usefixtures("topics")
def test_host_restricted_acl(dispatcher: Dispatcher) -> None:
    grant(dispatcher, acl(TOPIC, "orders", WRITE, host="10.1.1.1"))
    values = produce_values("orders", 0, build_batch([SimpleRecord(b"k", b"v")]))
    from_there = as_alice(dispatcher, ApiKey.PRODUCE, 9, values, host="10.1.1.1")
    from_here = as_alice(dispatcher, ApiKey.PRODUCE, 9, values, host="10.1.1.2")
    assert from_there.responses[0].partition_responses[0].error_code == 0
    assert from_here.responses[0].partition_responses[0].error_code == E.topic_authorization_failed


def test_scram_credential_apis_need_cluster_describe_or_alter(dispatcher: Dispatcher) -> None:
    described = as_alice(dispatcher, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert described.error_code == E.cluster_authorization_failed
    assert (
        call_as(dispatcher, ADMIN, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}).error_code == 0
    )
    altered = as_alice(
        dispatcher,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {"deletions": [{"name": "bob", "mechanism": 1}], "upsertions": []},
    )
    assert [(r.user, r.error_code) for r in altered.results] == [("bob", E.cluster_authorization_failed)]
    grant(dispatcher, acl(CLUSTER, "kafka-cluster", ALTER))
    altered = as_alice(
        dispatcher,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {"deletions": [{"name": "bob", "mechanism": 1}], "upsertions": []},
    )
    assert [(r.user, r.error_code) for r in altered.results] == [("bob", E.resource_not_found)]
    # ALTER on the cluster implies DESCRIBE.
    assert as_alice(dispatcher, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}).error_code == 0


@pytest.mark.usefixtures("topics")
def test_consumer_group_heartbeat_needs_group_read_and_topic_describe(dispatcher: Dispatcher) -> None:
    def heartbeat(topics: list[str]) -> Any:
        return as_alice(
            dispatcher,
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            0,
            {
                "group_id": "kip848",
                "member_id": str(uuid.uuid4()),
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout": 30_000,
                "subscribed_topic_names": topics,
                "server_assignor": None,
                "topic_partitions": [],
            },
        )

    assert heartbeat(["orders"]).error_code == E.group_authorization_failed
    grant(dispatcher, acl(GROUP, "kip848", READ))
    refused = heartbeat(["orders", "secret"])
    assert (refused.error_code, refused.error_message) == (E.topic_authorization_failed, None)
    grant(dispatcher, acl(TOPIC, "orders", DESCRIBE))
    assert heartbeat(["orders"]).error_code == 0
