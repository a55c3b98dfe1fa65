"""Kafka broker configs kompakt does not act on, and ``message.format.version``, through the admin APIs."""

from __future__ import annotations

from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.config.kafka import NOT_ACTED_ON
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call

TOPIC, BROKER = 2, 4
SET = 0
DYNAMIC_BROKER, DEFAULT, TOPIC_CONFIG = 2, 5, 1


def incremental(dispatcher: Dispatcher, resource_type: int, name: str, configs: dict[str, str]) -> Any:
    values = {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": SET, "value": v} for k, v in configs.items()],
            }
        ],
        "validate_only": False,
    }
    return call(dispatcher, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, values).responses[0]


def legacy(dispatcher: Dispatcher, resource_type: int, name: str, configs: dict[str, str]) -> Any:
    values = {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "validate_only": False,
    }
    return call(dispatcher, ApiKey.ALTER_CONFIGS, 1, values).responses[0]


def described(dispatcher: Dispatcher, resource_type: int, name: str, key: str, version: int = 4) -> Any:
    values = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": True,
        "include_documentation": True,
    }
    (result,) = call(dispatcher, ApiKey.DESCRIBE_CONFIGS, version, values).results
    assert result.error_code == E.none
    (entry,) = result.configs
    return entry


@pytest.mark.parametrize("alter", [incremental, legacy])
def test_broker_alter_of_a_kafka_config_kompakt_does_not_act_on(
    dispatcher: Dispatcher, broker: Broker, alter: Any
) -> None:
    name = "sasl.kerberos.min.time.before.relogin"
    before = described(dispatcher, BROKER, "0", name)
    assert (before.value, before.config_source, before.read_only) == ("60000", DEFAULT, False)
    assert before.documentation.startswith(NOT_ACTED_ON)
    assert alter(dispatcher, BROKER, "0", {name: "58000"}).error_code == E.none
    after = described(dispatcher, BROKER, "0", name)
    assert (after.value, after.config_source) == ("58000", DYNAMIC_BROKER)
    assert broker.broker_config.dynamic[name] == "58000"
    bad = alter(dispatcher, BROKER, "0", {name: "soon"})
    assert bad.error_code == E.invalid_request and "Not a number of type LONG" in bad.error_message


def test_static_only_kafka_configs_stay_static(dispatcher: Dispatcher) -> None:
    refused = incremental(dispatcher, BROKER, "0", {"node.id": "3"})
    assert refused.error_code == E.invalid_request
    assert refused.error_message == "Cannot update these configs dynamically: node.id"


def test_message_format_version_on_create_and_alter(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    values = {
        "topics": [
            {
                "name": "old-client",
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "message.format.version", "value": "0.10.0"}],
            }
        ],
        "timeout": 1000,
        "validate_only": False,
    }
    created = call(dispatcher, ApiKey.CREATE_TOPICS, 4, values).topics[0]
    assert created.error_code == E.none
    entry = described(dispatcher, TOPIC, "old-client", "message.format.version")
    assert (entry.value, entry.config_source) == ("0.10.0", TOPIC_CONFIG)
    assert (
        incremental(dispatcher, TOPIC, "old-client", {"message.format.version": "2.8"}).error_code == E.none
    )
    assert legacy(dispatcher, TOPIC, "old-client", {"message.format.version": "3.0"}).error_code == E.none
    assert log_manager.topics()["old-client"].configs == {"message.format.version": "3.0"}
    bogus = incremental(dispatcher, TOPIC, "old-client", {"message.format.version": "bogus"})
    assert bogus.error_code == E.invalid_config and "is not a valid version" in bogus.error_message
