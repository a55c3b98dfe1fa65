"""A broker with Kafka's StandardAuthorizer on (``User:admin`` a super user) and calls made as a
given principal from a given host, as the server's Session carries them after SASL."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.session import KafkaPrincipal, Session
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from tests.support.wire import decode, request_frame

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN = "User:admin"
ALICE = "User:alice"


@pytest.fixture
def broker_config() -> BrokerConfig:
    return BrokerConfig.from_properties(
        {"num.partitions": "1", "authorizer.class.name": STANDARD, "super.users": f"{ADMIN};User:ops"}
    )


@pytest.fixture
def log_manager(tmp_path: Path, clock: FakeClock, broker_config: BrokerConfig) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data", broker_config, clock)
    manager.open()
    yield manager
    manager.close()


@pytest.fixture
def broker(clock: FakeClock, log_manager: LogManager, timers: ManualTimers) -> Broker:
    return Broker.create(
        clock=clock,
        log_manager=log_manager,
        producer_ids=ProducerIdManager(log_manager.data_dir),
        timers=timers,
        cluster_id="test-cluster",
    )


def call_as(
    dispatcher: Dispatcher,
    principal: str,
    api_key: int,
    version: int,
    values: Mapping[str, object],
    host: str = "127.0.0.1",
) -> Any:
    """The decoded response to a request made by ``principal`` from ``host``."""
    request = dispatcher.decode(request_frame(api_key, version, values))
    session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", KafkaPrincipal.parse(principal), True)
    result = dispatcher.call(dispatcher.context(request, host, session), request.body)
    if isinstance(result, Deferred):
        result = result.result()
    assert result is not None
    return decode(result, api_key, version)


def acl(
    resource_type: int,
    name: str,
    operation: int,
    *,
    principal: str = ALICE,
    permission: int = 3,
    pattern_type: int = 3,
    host: str = "*",
) -> dict[str, object]:
    """One CreateAcls creation (codes as on the wire: ALLOW=3, DENY=2, LITERAL=3, PREFIXED=4)."""
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern_type,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": permission,
    }


def grant(dispatcher: Dispatcher, *creations: dict[str, object]) -> None:
    """Create ACLs as the super user; every one must be accepted."""
    response = call_as(dispatcher, ADMIN, ApiKey.CREATE_ACLS, 3, {"creations": list(creations)})
    assert [r.error_code for r in response.results] == [0] * len(creations)
