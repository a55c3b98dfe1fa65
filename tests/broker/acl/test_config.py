"""``authorizer.class.name``, ``super.users`` and ``allow.everyone.if.no.acl.found`` as a
``server.properties`` written for Kafka sets them."""

from __future__ import annotations

import pytest

from kompakt.broker.context import Broker
from kompakt.clock import FakeClock
from kompakt.config.authorizer_defs import parse_super_users
from kompakt.config.broker import BrokerConfig
from kompakt.errors import ConfigError
from tests.broker.acl.conftest import STANDARD


def test_only_kafkas_standard_authorizer_is_accepted() -> None:
    with pytest.raises(ConfigError, match="kompakt implements only org.apache.kafka.metadata.authorizer"):
        BrokerConfig.from_properties({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert Broker.create(clock=FakeClock(0), broker_config=BrokerConfig()).authorizer is None
    blank = BrokerConfig.from_properties({"authorizer.class.name": ""})
    assert Broker.create(clock=FakeClock(0), broker_config=blank).authorizer is None


def test_super_users_and_the_default_reach_the_authorizer() -> None:
    config = BrokerConfig.from_properties(
        {
            "authorizer.class.name": STANDARD,
            "super.users": " User:admin ; User:CN=ops,O=example ;",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    authorizer = Broker.create(clock=FakeClock(0), broker_config=config).authorizer
    assert authorizer is not None
    assert authorizer.super_users == {"User:admin", "User:CN=ops,O=example"}
    assert authorizer.allow_if_no_acl
    assert parse_super_users(None) == frozenset()
