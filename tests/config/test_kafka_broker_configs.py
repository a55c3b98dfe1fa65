"""Every Kafka 4.1 broker config is known: parsed by its Kafka type and validator, described with
its Kafka default, and flagged as one kompakt does not act on (``kompakt.config.kafka``)."""

from __future__ import annotations

import pytest

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigSource, ConfigType
from kompakt.config.describe import describe_broker_config, describe_topic_config
from kompakt.config.kafka import NOT_ACTED_ON, kafka_broker_configs, validator_from
from kompakt.config.server_defs import ADMIN_BROKER_DEFS
from kompakt.config.tables import (
    BROKER_CONFIGS,
    INERT_BROKER_CONFIGS,
    INTERNAL_BROKER_NAMES,
    KOMPAKT_BROKER_CONFIGS,
)
from kompakt.errors import ConfigError
from kompakt.log.config import LogConfig


def test_every_kafka_broker_config_is_known() -> None:
    kafka = kafka_broker_configs()
    assert len(kafka) == 336  # AbstractKafkaConfig.CONFIG_DEF of Kafka 4.1.2
    assert set(kafka) <= set(BROKER_CONFIGS)
    assert set(BROKER_CONFIGS) == set(kafka) | {
        "log.message.format.version",  # kept from Kafka 3.9
        "kompakt.tombstone.retain.for.groups",  # kompakt's own (the reader hold)
        "kompakt.tombstone.max.hold.ms",
        *(definition.name for definition in ADMIN_BROKER_DEFS),  # kompakt's admin endpoint
        "super.users",  # StandardAuthorizer's own configs, read from the broker's properties
        "allow.everyone.if.no.acl.found",
        # Kafka's feature (set with kafka-storage format --feature, changed with UpdateFeatures);
        # a broker config here, as kompakt has no metadata quorum to keep it in
        "transaction.version",
    }
    for name in (
        "sasl.kerberos.min.time.before.relogin",
        "num.io.threads",
        "process.roles",
        "ssl.engine.factory.class",
    ):
        assert name in INERT_BROKER_CONFIGS and BROKER_CONFIGS[name].doc.startswith(NOT_ACTED_ON)
    assert (
        "log.cleaner.threads" in KOMPAKT_BROKER_CONFIGS
        and NOT_ACTED_ON not in BROKER_CONFIGS["log.cleaner.threads"].doc
    )


def test_group_configs_the_coordinator_reads_are_not_inert() -> None:
    for name in ("group.max.size", "offset.metadata.max.bytes"):  # the group coordinator reads them
        assert name in KOMPAKT_BROKER_CONFIGS and name not in INERT_BROKER_CONFIGS


def test_kafka_types_defaults_and_validators() -> None:
    relogin = BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.type, relogin.default, relogin.dynamic) == (ConfigType.LONG, 60_000, True)
    assert BROKER_CONFIGS["num.io.threads"].default == 8
    assert BROKER_CONFIGS["process.roles"].type is ConfigType.LIST
    config = BrokerConfig.from_properties({"num.io.threads": "16", "process.roles": "broker,controller"})
    assert config.get("num.io.threads") == 16 and config.get("process.roles") == ("broker", "controller")
    with pytest.raises(
        ConfigError, match="Invalid value 0 for configuration num.io.threads: Value must be at least 1"
    ):
        BrokerConfig.from_properties({"num.io.threads": "0"})
    with pytest.raises(ConfigError, match="Not a number of type LONG"):
        BrokerConfig.from_properties({"sasl.kerberos.min.time.before.relogin": "soon"})
    with pytest.raises(ConfigError, match="String must be one of: broker, controller"):
        BrokerConfig.from_properties({"process.roles": "broker,gateway"})
    with pytest.raises(ConfigError, match=r"one of \(case insensitive\): ES256, RS256"):
        BrokerConfig.from_properties({"sasl.oauthbearer.assertion.algorithm": "HS999"})
    algorithm = BrokerConfig.from_properties({"sasl.oauthbearer.assertion.algorithm": "es256"})
    assert algorithm.get("sasl.oauthbearer.assertion.algorithm") == "es256"


def test_every_validator_form_in_the_dump_is_understood() -> None:
    for name, entry in kafka_broker_configs().items():
        if name in INERT_BROKER_CONFIGS:
            validator_from(entry.validator, entry.type)  # raises on a form it does not know


def test_dynamic_rules_for_kafka_configs() -> None:
    config = BrokerConfig()
    updated = config.with_dynamic({"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "4"})
    assert updated.lookup("sasl.kerberos.min.time.before.relogin") == (
        58_000,
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: node.id"):
        config.with_dynamic({"node.id": "5"})
    with pytest.raises(
        ConfigError, match="only per-listener using the listener prefix: ssl.keystore.location"
    ):
        config.with_dynamic({"ssl.keystore.location": "/x"})


def test_describe_lists_kafka_configs_with_their_source_and_leaves_internal_ones_out() -> None:
    config = BrokerConfig.from_properties({"num.io.threads": "16", "unstable.api.versions.enable": "true"})
    entries = {e.name: e for e in describe_broker_config(config)}
    assert entries["num.io.threads"].value == "16"
    assert entries["num.io.threads"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["sasl.kerberos.min.time.before.relogin"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["sasl.kerberos.min.time.before.relogin"].documentation.startswith(NOT_ACTED_ON)
    assert not entries["sasl.kerberos.min.time.before.relogin"].read_only
    assert entries["process.roles"].read_only
    assert entries["ssl.keystore.password"].sensitive and entries["ssl.keystore.password"].value is None
    # Kafka lists its internal configs only when they are set (ConfigHelper.allConfigs).
    assert "unstable.api.versions.enable" in entries
    assert not INTERNAL_BROKER_NAMES.isdisjoint({"unstable.feature.versions.enable"})
    assert "unstable.feature.versions.enable" not in entries


def test_serve_warning_names_every_inert_config_once() -> None:
    config = BrokerConfig.from_properties(
        {"num.io.threads": "16", "log.cleaner.threads": "2", "process.roles": "broker"}
    )
    assert config.inert_configs() == ["num.io.threads", "process.roles"]
    warning = config.inert_config_warning()
    assert warning is not None and "\n" not in warning and "num.io.threads, process.roles" in warning
    assert BrokerConfig.from_properties({"log.cleaner.threads": "2"}).inert_config_warning() is None


@pytest.mark.parametrize("value", ["3.0", "3.0-IV1", "2.8", "0.10.0", "0.10.0-IV1", "0.8.2", "3.9"])
def test_message_format_version_is_accepted_and_ignored(value: str) -> None:
    assert LogConfig.from_overrides({"message.format.version": value}).message_format_version == value
    described = {e.name: e for e in describe_topic_config({"message.format.version": value})}
    assert (described["message.format.version"].value, described["message.format.version"].source) == (
        value,
        ConfigSource.TOPIC_CONFIG,
    )


def test_message_format_version_is_validated_as_kafka_3_9_does() -> None:
    with pytest.raises(ConfigError, match="Version bogus is not a valid version"):
        LogConfig.from_overrides({"message.format.version": "bogus"})
    default = {e.name: e for e in describe_topic_config({})}["message.format.version"]
    assert (default.value, default.source) == ("3.0-IV1", ConfigSource.DEFAULT_CONFIG)
    broker = BrokerConfig.from_properties({"log.message.format.version": "2.8"})
    assert LogConfig.from_overrides({}, broker).message_format_version == "2.8"
