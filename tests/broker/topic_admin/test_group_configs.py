"""GROUP config resources (Kafka 4's ``consumer.session.timeout.ms`` and friends) through
DescribeConfigs, IncrementalAlterConfigs and AlterConfigs, with Kafka 4.1's error codes and
messages (the same confluent-kafka script gave the same answers from Kafka 4.1.2 and kompakt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.config.broker import BrokerConfig
from kompakt.config.dynamic import DYNAMIC_BROKER_CONFIG_FILE, load_dynamic_configs
from kompakt.log.manager import LogManager
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.topic_admin.test_configs import configs_of, describe, incremental, legacy_alter

GROUP, BROKER = 32, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DEFAULT, GROUP_CONFIG = 5, 8
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@pytest.fixture
def static_props() -> dict[str, str]:
    return {"group.consumer.session.timeout.ms": "50000"}


def values(dispatcher: Dispatcher, group: str, version: int = 4) -> dict[str, tuple[str, int]]:
    [result] = describe(dispatcher, [(GROUP, group, [SESSION, HEARTBEAT])], version=version)
    assert result.error_code == E.none, result
    return {name: (c.value, c.config_source) for name, c in configs_of(result).items()}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_a_group_without_configs_of_its_own(dispatcher: Dispatcher, version: int) -> None:
    [result] = describe(dispatcher, [(GROUP, "no-such-group", None)], version=version)
    assert result.error_code == E.none
    configs = configs_of(result)
    assert len(configs) == 10 and all(not c.read_only for c in configs.values())
    # The broker's group.consumer.session.timeout.ms, shown as the default, as Kafka shows it.
    assert (configs[SESSION].value, configs[SESSION].config_source) == ("50000", DEFAULT)
    assert [(s.name, s.value, s.source) for s in configs[SESSION].synonyms] == [(SESSION, "50000", DEFAULT)]
    assert configs["share.auto.offset.reset"].value == "latest"


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_set_then_describe_then_delete(
    dispatcher: Dispatcher, broker: Broker, log_manager: LogManager, version: int
) -> None:
    result = incremental(dispatcher, GROUP, "g", [(SESSION, SET, "55000"), (HEARTBEAT, SET, "6000")], version)
    assert (result.error_code, result.error_message) == (E.none, None)
    assert values(dispatcher, "g") == {SESSION: ("55000", GROUP_CONFIG), HEARTBEAT: ("6000", GROUP_CONFIG)}
    assert values(dispatcher, "other") == {SESSION: ("50000", DEFAULT), HEARTBEAT: ("5000", DEFAULT)}
    document = json.loads((Path(log_manager.data_dir) / DYNAMIC_BROKER_CONFIG_FILE).read_text())
    assert document["groups"] == {"g": {SESSION: "55000", HEARTBEAT: "6000"}}

    assert incremental(dispatcher, GROUP, "g", [(SESSION, DELETE, None)], version).error_code == E.none
    assert values(dispatcher, "g") == {SESSION: ("50000", DEFAULT), HEARTBEAT: ("6000", GROUP_CONFIG)}
    assert incremental(dispatcher, GROUP, "g", [(HEARTBEAT, DELETE, None)], version).error_code == E.none
    assert dict(broker.group_configs.overrides) == {}
    assert json.loads((Path(log_manager.data_dir) / DYNAMIC_BROKER_CONFIG_FILE).read_text())["groups"] == {}


def test_group_configs_survive_a_restart_and_broker_changes(
    dispatcher: Dispatcher, log_manager: LogManager
) -> None:
    assert incremental(dispatcher, GROUP, "g", [(SESSION, SET, "55000")]).error_code == E.none
    # A broker change rewrites the document: the group's configs stay in it, and the other way round.
    assert incremental(dispatcher, BROKER, "0", [("log.cleaner.backoff.ms", SET, "500")]).error_code == E.none
    assert incremental(dispatcher, GROUP, "h", [(HEARTBEAT, SET, "7000")]).error_code == E.none
    static = BrokerConfig.from_properties({"group.consumer.session.timeout.ms": "50000"})
    config, groups = load_dynamic_configs(log_manager.data_dir, static)
    assert config.log_cleaner_backoff_ms == 500
    assert {g: dict(v) for g, v in groups.overrides.items()} == {
        "g": {SESSION: "55000"},
        "h": {HEARTBEAT: "7000"},
    }
    restarted = Dispatcher(Broker.create(log_manager=log_manager, broker_config=config, group_configs=groups))
    assert values(restarted, "g")[SESSION] == ("55000", GROUP_CONFIG)


@pytest.mark.parametrize(
    ("name", "ops", "code", "message"),
    [
        ("g", [("no.such.config", SET, "1")], E.invalid_config, "Unknown group config name: no.such.config"),
        (
            "g",
            [(SESSION, SET, "1000")],
            E.invalid_config,
            f"{SESSION} must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            "g",
            [(SESSION, SET, "70000")],
            E.invalid_config,
            f"{SESSION} must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            "g",
            [(HEARTBEAT, SET, "20000")],
            E.invalid_config,
            f"{HEARTBEAT} must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        ),
        (
            "g",
            [(SESSION, SET, "abc")],
            E.invalid_config,
            f"Invalid value abc for configuration {SESSION}: Not a number of type INT",
        ),
        ("g", [(SESSION, SET, "0")], E.invalid_config,
         f"Invalid value 0 for configuration {SESSION}: Value must be at least 1"),
        ("g", [(SESSION, APPEND, "1")], E.invalid_config,
         f"Can't APPEND to key {SESSION} because its type is not LIST."),
        ("g", [(SESSION, SUBTRACT, "1")], E.invalid_config,
         f"Can't SUBTRACT to key {SESSION} because its type is not LIST."),
        ("", [(SESSION, SET, "55000")], E.invalid_request, "Default group resources are not allowed."),
        ("g", [(SESSION, SET, None)], E.invalid_request, f"Null value not supported for : {SESSION}"),
        ("g", [(SESSION, SET, "55000"), (SESSION, DELETE, None)], E.invalid_request,
         "Error due to duplicate config keys"),
        ("g", [(SESSION, 7, "55000")], E.invalid_request, "Unknown alter config operation type 7"),
    ],
)  # fmt: skip
def test_incremental_errors_are_kafkas(
    dispatcher: Dispatcher,
    broker: Broker,
    name: str,
    ops: list[tuple[str, int, str | None]],
    code: E,
    message: str,
) -> None:
    result = incremental(dispatcher, GROUP, name, ops)
    assert (result.error_code, result.error_message) == (code, message)
    assert dict(broker.group_configs.overrides) == {}


def test_validate_only_changes_nothing(
    dispatcher: Dispatcher, broker: Broker, log_manager: LogManager
) -> None:
    assert (
        incremental(dispatcher, GROUP, "g", [(SESSION, SET, "55000")], validate_only=True).error_code
        == E.none
    )
    assert values(dispatcher, "g")[SESSION] == ("50000", DEFAULT)
    assert not (Path(log_manager.data_dir) / DYNAMIC_BROKER_CONFIG_FILE).exists()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_replaces_the_whole_set(dispatcher: Dispatcher, broker: Broker, version: int) -> None:
    assert (
        legacy_alter(dispatcher, GROUP, "g", [(SESSION, "55000"), (HEARTBEAT, "6000")], version).error_code
        == E.none
    )
    assert legacy_alter(dispatcher, GROUP, "g", [(HEARTBEAT, "7000")], version).error_code == E.none
    assert values(dispatcher, "g") == {SESSION: ("50000", DEFAULT), HEARTBEAT: ("7000", GROUP_CONFIG)}
    unknown = legacy_alter(dispatcher, GROUP, "g", [("x.y", "1")], version)
    assert (unknown.error_code, unknown.error_message) == (E.invalid_config, "Unknown group config name: x.y")
    null = legacy_alter(dispatcher, GROUP, "g", [(SESSION, None)], version)
    assert (null.error_code, null.error_message) == (
        E.invalid_request,
        f"Null value not supported for : {SESSION}",
    )
    assert legacy_alter(dispatcher, GROUP, "g", [], version).error_code == E.none
    assert dict(broker.group_configs.overrides) == {}


def test_describe_an_empty_group_name_is_invalid(dispatcher: Dispatcher) -> None:
    [result] = describe(dispatcher, [(GROUP, "", None)])
    assert (result.error_code, result.error_message, list(result.configs)) == (
        E.invalid_request,
        "Group name must not be empty",
        [],
    )
