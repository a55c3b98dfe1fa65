"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs through the dispatcher, per version."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.config import dynamic
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# ConfigSource ids
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def describe(
    dispatcher: Dispatcher,
    resources: Sequence[tuple[int, str, Sequence[str] | None]],
    version: int = 4,
    synonyms: bool = True,
    documentation: bool = False,
) -> list[Any]:
    response = call(
        dispatcher,
        ApiKey.DESCRIBE_CONFIGS,
        version,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": k} for t, n, k in resources
            ],
            "include_synonyms": synonyms,
            "include_documentation": documentation,
        },
    )
    return list(response.results)


def configs_of(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def incremental(
    dispatcher: Dispatcher,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    version: int = 1,
    validate_only: bool = False,
) -> Any:
    response = call(
        dispatcher,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
    )
    [result] = response.responses
    return result


def legacy_alter(
    dispatcher: Dispatcher,
    resource_type: int,
    name: str,
    configs: Sequence[tuple[str, str | None]],
    version: int = 2,
    validate_only: bool = False,
) -> Any:
    response = call(
        dispatcher,
        ApiKey.ALTER_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs],
                }
            ],
            "validate_only": validate_only,
        },
    )
    [result] = response.responses
    return result


# ---------------------------------------------------------------------------------------------- describe


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_topic_every_version(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    log_manager.create_topic("t", 1, {"cleanup.policy": "compact", "retention.ms": "1000"})
    [result] = describe(dispatcher, [(TOPIC, "t", None)], version, documentation=True)
    assert (result.error_code, result.resource_type, result.resource_name) == (E.none, TOPIC, "t")
    configs = configs_of(result)
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only) == ("compact", TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", DEFAULT),
    ]
    retention = configs["retention.ms"]
    assert retention.synonyms[0].source == TOPIC_CONFIG
    # the broker synonyms start at log.retention.ms, which has no value: Kafka lists none
    assert [s.name for s in retention.synonyms][1:] == []
    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", DEFAULT)
    if version >= 3:
        assert policy.config_type == 7  # LIST
        assert segment.config_type == 3  # INT
        assert policy.documentation
    assert not any(c.is_sensitive for c in result.configs)


def test_describe_filters_and_flags(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("t", 1)
    [result] = describe(
        dispatcher, [(TOPIC, "t", ["segment.ms", "nope"])], synonyms=False, documentation=False
    )
    [entry] = result.configs
    assert entry.name == "segment.ms" and entry.synonyms == () and entry.documentation is None
    [everything] = describe(dispatcher, [(TOPIC, "t", [])])
    assert len(everything.configs) > 20


def test_describe_errors(dispatcher: Dispatcher) -> None:
    results = describe(
        dispatcher,
        [
            (TOPIC, "missing", None),
            (TOPIC, "bad name!", None),
            (BROKER, "7", None),
            (BROKER, "x", None),
            (BROKER_LOGGER, "0", None),
            (BROKER_LOGGER, "3", None),
            (99, "z", None),
        ],
    )
    assert [r.error_code for r in results] == [
        E.unknown_topic_or_partition,
        E.invalid_topic_exception,
        E.invalid_request,
        E.invalid_request,
        E.none,
        E.invalid_request,
        E.invalid_request,
    ]
    assert results[4].configs == ()


class TestStaticBroker:
    @pytest.fixture
    def static_props(self) -> dict[str, str]:
        return {"log.retention.hours": "24", "num.partitions": "3", "log.cleaner.threads": "2"}

    def test_describe_broker_sources(self, dispatcher: Dispatcher, log_manager: LogManager) -> None:
        [result] = describe(dispatcher, [(BROKER, "0", None)])
        configs = configs_of(result)
        threads = configs["log.cleaner.threads"]
        assert (threads.value, threads.config_source, threads.read_only) == ("2", STATIC, False)
        partitions = configs["num.partitions"]
        assert (partitions.value, partitions.config_source, partitions.read_only) == ("3", STATIC, True)
        assert configs["log.cleaner.backoff.ms"].config_source == DEFAULT
        # a topic without overrides inherits the static broker value; Kafka 4.1.2 (checked against
        # a real broker with log.retention.hours=24) then answers retention.ms=86400000 with no
        # synonyms and source DEFAULT_CONFIG: ConfigHelper drops the synonyms before the first
        # log.retention.ms entry, and log.retention.ms is unset
        log_manager.create_topic("t", 1)
        [topic] = describe(dispatcher, [(TOPIC, "t", ["retention.ms"])])
        [retention] = topic.configs
        assert (retention.value, retention.config_source) == (str(24 * 3_600_000), DEFAULT)
        assert list(retention.synonyms) == []
        [broker] = describe(dispatcher, [(BROKER, "0", ["log.retention.hours"])])
        [hours] = broker.configs
        assert [(s.name, s.value, s.source) for s in hours.synonyms] == [
            ("log.retention.hours", "24", STATIC),
            ("log.retention.hours", "168", DEFAULT),
        ]

    def test_num_partitions_default_applies(self, dispatcher: Dispatcher, log_manager: LogManager) -> None:
        call(
            dispatcher,
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": "d",
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 1,
            },
        )
        assert log_manager.topics()["d"].partitions == 3

    def test_threads_rule(self, dispatcher: Dispatcher, broker: Broker) -> None:
        too_many = incremental(dispatcher, BROKER, "0", [("log.cleaner.threads", SET, "5")])
        assert too_many.error_code == E.invalid_request  # Kafka 4.1's controller answers these so
        assert "more than double" in too_many.error_message
        zero = incremental(dispatcher, BROKER, "0", [("log.cleaner.threads", SET, "0")])
        assert zero.error_code == E.invalid_request
        ok = incremental(dispatcher, BROKER, "0", [("log.cleaner.threads", SET, "4")])
        assert ok.error_code == E.none
        assert broker.broker_config.log_cleaner_threads == 4
        too_few = incremental(dispatcher, BROKER, "0", [("log.cleaner.threads", SET, "1")])
        assert too_few.error_code == E.invalid_request and "half" in too_few.error_message
        assert incremental(dispatcher, BROKER, "0", [("log.cleaner.threads", SET, "2")]).error_code == E.none


# ---------------------------------------------------------------------------------------------- topic alters


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_topic_round_trip(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    log_manager.create_topic("t", 1, {"retention.ms": "1000"})
    result = incremental(
        dispatcher,
        TOPIC,
        "t",
        [("cleanup.policy", SET, "compact"), ("retention.ms", DELETE, None), ("segment.ms", SET, "60000")],
        version,
    )
    assert (result.error_code, result.resource_type, result.resource_name) == (E.none, TOPIC, "t")
    assert log_manager.topics()["t"].configs == {"cleanup.policy": "compact", "segment.ms": "60000"}
    assert log_manager.topic_config("t").compact
    [described] = describe(dispatcher, [(TOPIC, "t", ["cleanup.policy", "retention.ms", "segment.ms"])])
    configs = configs_of(described)
    assert configs["cleanup.policy"].config_source == TOPIC_CONFIG
    assert configs["retention.ms"].config_source == DEFAULT
    assert (configs["segment.ms"].value, configs["segment.ms"].config_source) == ("60000", TOPIC_CONFIG)


def test_append_subtract_cleanup_policy(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("t", 1, {"cleanup.policy": "compact"})
    assert incremental(dispatcher, TOPIC, "t", [("cleanup.policy", APPEND, "delete")]).error_code == E.none
    assert log_manager.topics()["t"].configs["cleanup.policy"] == "compact,delete"
    assert incremental(dispatcher, TOPIC, "t", [("cleanup.policy", APPEND, "compact")]).error_code == E.none
    assert log_manager.topics()["t"].configs["cleanup.policy"] == "compact,delete"
    assert incremental(dispatcher, TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")]).error_code == E.none
    assert log_manager.topics()["t"].configs["cleanup.policy"] == "delete"
    cfg = log_manager.topic_config("t")
    assert cfg.delete and not cfg.compact
    # Without an override APPEND starts from the built-in default ("delete"), as Kafka does.
    log_manager.create_topic("u", 1)
    assert incremental(dispatcher, TOPIC, "u", [("cleanup.policy", APPEND, "compact")]).error_code == E.none
    assert log_manager.topics()["u"].configs["cleanup.policy"] == "delete,compact"
    not_list = incremental(dispatcher, TOPIC, "u", [("retention.ms", APPEND, "5")])
    assert not_list.error_code == E.invalid_config
    assert not_list.error_message == "Config value append is not allowed for config key: retention.ms"
    not_list = incremental(dispatcher, TOPIC, "u", [("retention.ms", SUBTRACT, "5")])
    assert not_list.error_message == "Config value subtract is not allowed for config key: retention.ms"


def test_incremental_errors(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("t", 1)
    assert incremental(dispatcher, TOPIC, "missing", [("retention.ms", SET, "1")]).error_code == (
        E.unknown_topic_or_partition
    )
    bad_value = incremental(dispatcher, TOPIC, "t", [("retention.ms", SET, "soon")])
    assert bad_value.error_code == E.invalid_config and "retention.ms" in bad_value.error_message
    unknown = incremental(dispatcher, TOPIC, "t", [("log.retention.ms", SET, "1")])
    assert unknown.error_code == E.invalid_config and "did you mean retention.ms" in unknown.error_message
    dup = incremental(dispatcher, TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)])
    assert dup.error_code == E.invalid_request
    assert incremental(dispatcher, TOPIC, "t", [("retention.ms", 9, "1")]).error_code == E.invalid_request
    lags = incremental(
        dispatcher, TOPIC, "t", [("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")]
    )
    assert lags.error_code == E.invalid_config
    assert (
        incremental(dispatcher, BROKER_LOGGER, "0", [("root", SET, "DEBUG")]).error_code == E.invalid_request
    )
    assert log_manager.topics()["t"].configs == {}


def test_incremental_validate_only(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("t", 1)
    ok = incremental(dispatcher, TOPIC, "t", [("retention.ms", SET, "5")], validate_only=True)
    assert ok.error_code == E.none
    assert log_manager.topics()["t"].configs == {}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_replaces(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    log_manager.create_topic("t", 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    result = legacy_alter(dispatcher, TOPIC, "t", [("segment.ms", "60000")], version)
    assert result.error_code == E.none
    assert log_manager.topics()["t"].configs == {"segment.ms": "60000"}
    assert legacy_alter(dispatcher, TOPIC, "t", [("segment.ms", "0")], version).error_code == E.invalid_config
    assert (
        legacy_alter(dispatcher, TOPIC, "t", [("segment.ms", None)], version).error_code == E.invalid_config
    )
    assert legacy_alter(dispatcher, TOPIC, "t", [], version, validate_only=True).error_code == E.none
    assert log_manager.topics()["t"].configs == {"segment.ms": "60000"}
    assert legacy_alter(dispatcher, TOPIC, "t", [], version).error_code == E.none
    assert log_manager.topics()["t"].configs == {}


def test_duplicate_resources(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("t", 1)
    resource = {"resource_type": TOPIC, "resource_name": "t", "configs": []}
    response = call(
        dispatcher, ApiKey.ALTER_CONFIGS, 2, {"resources": [resource, resource], "validate_only": False}
    )
    assert [r.error_code for r in response.responses] == [E.invalid_request, E.invalid_request]


# ---------------------------------------------------------------------------------------------- broker alters


def test_broker_dynamic_config_persisted_and_reloaded(
    dispatcher: Dispatcher, broker: Broker, log_manager: LogManager
) -> None:
    heard: list[BrokerConfig] = []
    broker.config_listeners.append(heard.append)
    result = incremental(
        dispatcher,
        BROKER,
        "0",
        [("log.cleaner.backoff.ms", SET, "500"), ("log.cleaner.io.max.bytes.per.second", SET, "1000000")],
    )
    assert result.error_code == E.none
    default = incremental(dispatcher, BROKER, "", [("log.retention.ms", SET, "7200000")])
    assert default.error_code == E.none
    assert broker.broker_config.log_cleaner_backoff_ms == 500
    assert log_manager.broker_config is broker.broker_config
    assert [c.log_cleaner_backoff_ms for c in heard] == [500, 500]

    path = Path(log_manager.data_dir) / dynamic.DYNAMIC_BROKER_CONFIG_FILE
    document = json.loads(path.read_text())
    assert document["broker"] == {
        "log.cleaner.backoff.ms": "500",
        "log.cleaner.io.max.bytes.per.second": "1000000",
    }
    assert document["cluster_default"] == {"log.retention.ms": "7200000"}

    reloaded = dynamic.load_dynamic_broker_config(log_manager.data_dir, BrokerConfig.from_properties({}))
    assert reloaded.log_cleaner_backoff_ms == 500
    assert reloaded.lookup("log.retention.ms")[1] == DYNAMIC_DEFAULT
    assert reloaded.dynamic == broker.broker_config.dynamic

    [described] = describe(dispatcher, [(BROKER, "0", ["log.cleaner.backoff.ms", "log.retention.ms"])])
    configs = configs_of(described)
    assert (configs["log.cleaner.backoff.ms"].value, configs["log.cleaner.backoff.ms"].config_source) == (
        "500",
        DYNAMIC_BROKER,
    )
    assert configs["log.retention.ms"].config_source == DYNAMIC_DEFAULT
    [cluster] = describe(dispatcher, [(BROKER, "", None)])
    assert [(c.name, c.value, c.config_source) for c in cluster.configs] == [
        ("log.retention.ms", "7200000", DYNAMIC_DEFAULT)
    ]
    # Topics without an override see the new cluster default through the synonym chain.
    log_manager.create_topic("t", 1)
    [topic] = describe(dispatcher, [(TOPIC, "t", ["retention.ms"])])
    assert (topic.configs[0].value, topic.configs[0].config_source) == ("7200000", DYNAMIC_DEFAULT)

    # DELETE removes the key from the layer and from the file.
    assert (
        incremental(dispatcher, BROKER, "0", [("log.cleaner.backoff.ms", DELETE, None)]).error_code == E.none
    )
    assert "log.cleaner.backoff.ms" not in json.loads(path.read_text())["broker"]
    assert broker.broker_config.log_cleaner_backoff_ms == 15_000


def test_broker_static_only_keys_refused(
    dispatcher: Dispatcher, broker: Broker, log_manager: LogManager
) -> None:
    result = incremental(
        dispatcher, BROKER, "0", [("num.partitions", SET, "4"), ("log.cleaner.enable", SET, "false")]
    )
    assert result.error_code == E.invalid_request
    assert result.error_message.startswith("Cannot update these configs dynamically: ")
    assert "num.partitions" in result.error_message and "log.cleaner.enable" in result.error_message
    unknown = incremental(dispatcher, BROKER, "0", [("no.such.key", SET, "1")])
    assert unknown.error_code == E.invalid_request
    other = incremental(dispatcher, BROKER, "3", [("log.cleaner.backoff.ms", SET, "1")])
    assert other.error_code == E.invalid_request
    assert broker.broker_config.dynamic == {}
    assert not (Path(log_manager.data_dir) / dynamic.DYNAMIC_BROKER_CONFIG_FILE).exists()


def test_broker_validate_only_and_legacy(dispatcher: Dispatcher, broker: Broker) -> None:
    ok = incremental(dispatcher, BROKER, "0", [("message.max.bytes", SET, "2000000")], validate_only=True)
    assert ok.error_code == E.none and broker.broker_config.dynamic == {}
    assert legacy_alter(dispatcher, BROKER, "0", [("message.max.bytes", "2000000")]).error_code == E.none
    assert broker.broker_config.message_max_bytes == 2_000_000
    assert legacy_alter(dispatcher, BROKER, "0", [("log.cleaner.backoff.ms", "10")]).error_code == E.none
    assert dict(broker.broker_config.dynamic) == {"log.cleaner.backoff.ms": "10"}


def test_broker_list_append(dispatcher: Dispatcher, broker: Broker) -> None:
    assert (
        incremental(dispatcher, BROKER, "", [("log.cleanup.policy", APPEND, "compact")]).error_code == E.none
    )
    assert broker.broker_config.dynamic_default["log.cleanup.policy"] == "delete,compact"
    bad = incremental(dispatcher, BROKER, "", [("log.cleaner.threads", APPEND, "1")])
    assert bad.error_code == E.invalid_config


def test_load_dynamic_skips_invalid_entries(tmp_path: Path) -> None:
    static = BrokerConfig.from_properties({"log.cleaner.threads": "2"})
    assert dynamic.load_dynamic_broker_config(tmp_path, static) is static
    (tmp_path / dynamic.DYNAMIC_BROKER_CONFIG_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "cluster_default": {"num.partitions": "5", "log.retention.ms": "1"},
                "broker": {"log.cleaner.threads": "8", "log.cleaner.backoff.ms": "bad"},
            }
        )
    )
    loaded = dynamic.load_dynamic_broker_config(tmp_path, static)
    assert dict(loaded.dynamic_default) == {"log.retention.ms": "1"}
    # At startup there is no running value, so the threads rule does not apply.
    assert dict(loaded.dynamic) == {"log.cleaner.threads": "8"}
    assert loaded.log_cleaner_threads == 8
    (tmp_path / dynamic.DYNAMIC_BROKER_CONFIG_FILE).write_text("{not json")
    assert dynamic.load_dynamic_broker_config(tmp_path, static) is static
