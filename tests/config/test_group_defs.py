"""The group coordinator's configs: the broker-level rules (checked when the broker config is
built, with Kafka's wording) and the configs of one group (Kafka 4.1's ``GroupConfig``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kompakt.broker.groups.config import ConsumerGroupConfig, GroupConfig
from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigSource, ConfigType
from kompakt.config.describe import describe_group_config
from kompakt.config.dynamic import DYNAMIC_BROKER_CONFIG_FILE, load_dynamic_configs, save_dynamic_configs
from kompakt.config.group_defs import validate_group_config
from kompakt.config.groups import GroupConfigs, GroupResourceConfig
from kompakt.errors import ConfigError, InvalidConfigurationError
from kompakt.log.files import atomic_write_bytes


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"group.min.session.timeout.ms": "10000", "group.max.session.timeout.ms": "5000"},
            "group.min.session.timeout.ms must be within 0..group.max.session.timeout.ms",
        ),
        ({"group.initial.rebalance.delay.ms": "-1"}, "group.initial.rebalance.delay.ms must not be negative"),
        (
            {"group.consumer.heartbeat.interval.ms": "20000"},
            "group.consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": "30000"},
            "group.consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            {"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "4000"},
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
        ),
        (
            {"group.consumer.max.session.timeout.ms": "40000"},
            "group.consumer.max.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        ({"group.consumer.assignors": ""}, "group.consumer.assignors must name at least one assignor"),
        (
            {"group.share.heartbeat.interval.ms": "16000"},
            "group.share.heartbeat.interval.ms must be less than or equal to "
            "group.share.max.heartbeat.interval.ms",
        ),
        (
            {"group.streams.num.standby.replicas": "3"},
            "group.streams.num.standby.replicas must be less than or equal to "
            "group.streams.max.standby.replicas",
        ),
    ],
)
def test_a_bad_group_setting_is_refused_when_the_broker_config_is_built(
    props: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties(props)
    assert str(raised.value) == message


def test_typed_settings_keep_the_same_rules_with_the_same_error() -> None:
    with pytest.raises(ConfigError, match="group.min.session.timeout.ms must be within"):
        GroupConfig(group_min_session_timeout_ms=10, group_max_session_timeout_ms=5)
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms must be less than group"):
        ConsumerGroupConfig(min_session_timeout_ms=1, session_timeout_ms=5_000, heartbeat_interval_ms=5_000)


def test_migration_policy_is_case_insensitive_as_kafka_parses_it() -> None:
    config = BrokerConfig.from_properties({"group.consumer.migration.policy": "UPGRADE"})
    assert ConsumerGroupConfig.from_broker(config).migration_policy == "upgrade"


BROKER = BrokerConfig()


GE, LE = "must be greater than or equal to", "must be less than or equal to"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"consumer.session.timeout.ms": "x"},
            "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT",
        ),
        ({"no.such": "1"}, "Unknown group config name: no.such"),
        (
            {"consumer.session.timeout.ms": "44999"},
            f"consumer.session.timeout.ms {GE} group.consumer.min.session.timeout.ms",
        ),
        (
            {"consumer.heartbeat.interval.ms": "4999"},
            f"consumer.heartbeat.interval.ms {GE} group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"share.record.lock.duration.ms": "60001"},
            f"share.record.lock.duration.ms {LE} group.share.max.record.lock.duration.ms",
        ),
        (
            {"share.isolation.level": "READ_COMMITTED"},
            "Invalid value READ_COMMITTED for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
        (
            {"streams.num.standby.replicas": "-1"},
            "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0",
        ),
    ],
)
def test_group_config_validation_is_kafkas(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        validate_group_config(overrides, BROKER)
    assert str(raised.value) == message


def test_session_must_exceed_heartbeat_within_the_broker_bounds() -> None:
    broker = BrokerConfig.from_properties(
        {"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "6000"}
    )
    with pytest.raises(
        InvalidConfigurationError, match=r"^consumer.session.timeout.ms must be greater than "
    ):
        validate_group_config({"consumer.session.timeout.ms": "5000"}, broker)
    validate_group_config({"consumer.session.timeout.ms": "5001"}, broker)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("earliest", True),
        ("latest", True),
        ("by_duration:PT1H", True),
        ("by_duration:P1DT2H3M4.5S", True),
        ("by_duration:pt0s", True),
        ("by_duration:PT-1S", False),
        ("by_duration:-PT1H", False),
        ("by_duration:P", False),
        ("by_duration:PT", False),
        ("by_duration:", False),
        ("by_duration", False),
        ("none", False),
        ("Earliest", False),
    ],
)
def test_share_auto_offset_reset_reads_java_durations(value: str, valid: bool) -> None:
    overrides = {"share.auto.offset.reset": value}
    if valid:
        validate_group_config(overrides, BROKER)
    else:
        with pytest.raises(
            ConfigError, match="The value must be either 'earliest', 'latest' or of the format"
        ):
            validate_group_config(overrides, BROKER)


def test_describe_shows_the_groups_own_values_and_otherwise_the_brokers() -> None:
    broker = BrokerConfig.from_properties({"group.consumer.session.timeout.ms": "50000"})
    entries = {e.name: e for e in describe_group_config({"consumer.heartbeat.interval.ms": "6000"}, broker)}
    assert sorted(entries) == [
        "consumer.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
        "share.auto.offset.reset",
        "share.heartbeat.interval.ms",
        "share.isolation.level",
        "share.record.lock.duration.ms",
        "share.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas",
        "streams.session.timeout.ms",
    ]
    own, default = entries["consumer.heartbeat.interval.ms"], entries["consumer.session.timeout.ms"]
    assert (own.value, own.source, own.is_default, own.type) == (
        "6000",
        ConfigSource.GROUP_CONFIG,
        False,
        ConfigType.INT,
    )
    # The broker's value, described as the default (Kafka's DEFAULT_CONFIG, not STATIC_BROKER_CONFIG).
    assert (default.value, default.source, default.is_default) == ("50000", ConfigSource.DEFAULT_CONFIG, True)
    assert [(s.name, s.value, s.source) for s in default.synonyms] == [
        ("consumer.session.timeout.ms", "50000", ConfigSource.DEFAULT_CONFIG)
    ]
    assert entries["share.isolation.level"].value == "read_uncommitted"


def test_group_configs_are_immutable_and_dropped_when_emptied() -> None:
    empty = GroupConfigs()
    one = empty.with_group("g", {"consumer.session.timeout.ms": "50000"}, BROKER)
    assert empty.config_of("g") is None and dict(empty.overrides) == {}
    assert one.config_of("g") == GroupResourceConfig(
        consumer_session_timeout_ms=50_000, consumer_heartbeat_interval_ms=5_000
    )
    assert one.config_of("other") is None
    assert dict(one.with_group("g", {}, BROKER).overrides) == {}


def test_dynamic_document_keeps_broker_layers_and_groups_together(tmp_path: Path) -> None:
    broker = BrokerConfig().with_dynamic({"log.cleaner.backoff.ms": "500"})
    groups = GroupConfigs().with_group("g", {"consumer.heartbeat.interval.ms": "6000"}, broker)
    save_dynamic_configs(tmp_path, broker, groups, write=atomic_write_bytes)
    document = json.loads((tmp_path / DYNAMIC_BROKER_CONFIG_FILE).read_text())
    assert document["broker"] == {"log.cleaner.backoff.ms": "500"}
    assert document["groups"] == {"g": {"consumer.heartbeat.interval.ms": "6000"}}
    loaded_broker, loaded_groups = load_dynamic_configs(tmp_path, BrokerConfig())
    assert loaded_broker.log_cleaner_backoff_ms == 500
    assert loaded_groups.overrides_of("g") == {"consumer.heartbeat.interval.ms": "6000"}


def test_a_group_config_no_longer_valid_is_skipped_at_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / DYNAMIC_BROKER_CONFIG_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "groups": {
                    "ok": {"consumer.session.timeout.ms": "60000"},
                    "too-short": {"consumer.session.timeout.ms": "50000"},
                    "not-strings": {"consumer.session.timeout.ms": 60000},
                },
            }
        )
    )
    # Restarted with a higher minimum, "too-short" is below it: logged and skipped, not fatal.
    static = BrokerConfig.from_properties(
        {"group.consumer.min.session.timeout.ms": "55000", "group.consumer.session.timeout.ms": "55000"}
    )
    with caplog.at_level(logging.WARNING):
        _, groups = load_dynamic_configs(tmp_path, static)
    assert dict(groups.overrides) == {"ok": {"consumer.session.timeout.ms": "60000"}}
    skipped = [r.getMessage() for r in caplog.records if "Ignoring the configs of group" in r.getMessage()]
    assert len(skipped) == 2
    assert any("too-short" in m and "must be greater than or equal to" in m for m in skipped)
