"""CreateAcls, DescribeAcls and DeleteAcls as Kafka 4.1 answers them, and their durability."""

from __future__ import annotations

import json
from pathlib import Path

from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.dispatch import Dispatcher
from kompakt.clock import FakeClock
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.acl.conftest import ADMIN, ALICE, acl, call_as, grant
from tests.support.wire import call

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
READ, WRITE, DESCRIBE, ALTER, ANY_OP = 3, 4, 8, 7, 1
ALLOW, DENY, ANY_PERM = 3, 2, 1
LITERAL, PREFIXED, ANY_PATTERN, MATCH = 3, 4, 1, 2


def describe_filter(
    resource_type: int = 1,
    name: str | None = None,
    pattern_type: int = ANY_PATTERN,
    principal: str | None = None,
) -> dict[str, object]:
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern_type,
        "principal_filter": principal,
        "host_filter": None,
        "operation": ANY_OP,
        "permission_type": ANY_PERM,
    }


def described(dispatcher: Dispatcher, **selector: object) -> set[tuple[object, ...]]:
    response = call_as(dispatcher, ADMIN, ApiKey.DESCRIBE_ACLS, 3, describe_filter(**selector))  # type: ignore[arg-type]
    assert response.error_code == 0
    return {
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    }


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    # tests/broker's plain broker: no authorizer.class.name.
    from kompakt.broker.producer_ids import ProducerIdManager
    from kompakt.config.broker import BrokerConfig

    clock = FakeClock(0)
    manager = LogManager(tmp_path / "d", BrokerConfig(), clock)
    manager.open()
    try:
        plain = Dispatcher(
            Broker.create(clock=clock, log_manager=manager, producer_ids=ProducerIdManager(tmp_path / "d"))
        )
        created = call(plain, ApiKey.CREATE_ACLS, 3, {"creations": [acl(TOPIC, "t", READ)]})
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (E.security_disabled, "No Authorizer is configured.")
        ]
        listed = call(plain, ApiKey.DESCRIBE_ACLS, 3, describe_filter())
        assert (listed.error_code, listed.error_message) == (
            E.security_disabled,
            "No Authorizer is configured.",
        )
        deleted = call(plain, ApiKey.DELETE_ACLS, 3, {"filters": [describe_filter()]})
        assert [r.error_code for r in deleted.filter_results] == [E.security_disabled]
    finally:
        manager.close()


def test_only_the_cluster_alter_or_describe_may_manage_acls(dispatcher: Dispatcher) -> None:
    created = call_as(dispatcher, ALICE, ApiKey.CREATE_ACLS, 3, {"creations": [acl(TOPIC, "t", READ)]})
    assert [r.error_code for r in created.results] == [E.cluster_authorization_failed]
    assert call_as(dispatcher, ALICE, ApiKey.DESCRIBE_ACLS, 3, describe_filter()).error_code == (
        E.cluster_authorization_failed
    )
    grant(dispatcher, acl(CLUSTER, "kafka-cluster", DESCRIBE))
    assert call_as(dispatcher, ALICE, ApiKey.DESCRIBE_ACLS, 3, describe_filter()).error_code == 0
    deleted = call_as(dispatcher, ALICE, ApiKey.DELETE_ACLS, 3, {"filters": [describe_filter()]})
    assert [r.error_code for r in deleted.filter_results] == [E.cluster_authorization_failed]


def test_create_describe_delete_round_trip(dispatcher: Dispatcher) -> None:
    grant(
        dispatcher,
        acl(TOPIC, "orders", READ),
        acl(TOPIC, "pay", WRITE, pattern_type=PREFIXED, permission=DENY, host="10.0.0.9"),
        acl(GROUP, "*", READ, principal="User:*"),
        acl(TXN, "tx-1", WRITE),
    )
    everything = described(dispatcher)
    assert (TOPIC, "pay", PREFIXED, ALICE, "10.0.0.9", WRITE, DENY) in everything and len(everything) == 4
    # MATCH: every pattern that applies to the resource "payments".
    assert {
        row[1] for row in described(dispatcher, resource_type=TOPIC, name="payments", pattern_type=MATCH)
    } == {"pay"}
    assert described(dispatcher, resource_type=TOPIC, name="pay", pattern_type=LITERAL) == set()
    deleted = call_as(
        dispatcher, ADMIN, ApiKey.DELETE_ACLS, 3, {"filters": [describe_filter(TOPIC, "orders", LITERAL)]}
    )
    assert [(a.resource_name, a.operation) for a in deleted.filter_results[0].matching_acls] == [
        ("orders", READ)
    ]
    assert len(described(dispatcher)) == 3


def test_invalid_creations_get_kafkas_messages(dispatcher: Dispatcher) -> None:
    response = call_as(
        dispatcher,
        ADMIN,
        ApiKey.CREATE_ACLS,
        3,
        {
            "creations": [
                acl(CLUSTER, "c", ALTER),
                acl(TOPIC, "t", ANY_OP),
                acl(TOPIC, "t", READ, principal="bob"),
            ]
        },
    )
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (E.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (E.invalid_request, "Invalid operation ANY"),
        (
            E.invalid_request,
            "Could not parse principal from `bob` (no colon is present separating the principal type "
            "from the principal name)",
        ),
    ]


def test_acls_are_durable_across_a_restart(
    dispatcher: Dispatcher, broker: Broker, clock: FakeClock, log_manager: LogManager, timers: ManualTimers
) -> None:
    grant(dispatcher, acl(TOPIC, "orders", READ), acl(GROUP, "app", READ, pattern_type=PREFIXED))
    stored = json.loads((log_manager.data_dir / "kompakt-acls.json").read_text())
    assert len(stored["acls"]) == 2
    again = Dispatcher(Broker.create(clock=clock, log_manager=log_manager, timers=timers))
    assert {row[1] for row in described(again)} == {"orders", "app"}
