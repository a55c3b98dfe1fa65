"""Broker configs: synonym resolution into topic configs, validation, dynamic updates, describe."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigSource, ConfigType, parse_properties_text
from kompakt.config.describe import ConfigSynonym, describe_broker_config, describe_topic_config
from kompakt.errors import ConfigError, InvalidConfigurationError
from kompakt.log.config import LogConfig

HOUR_MS = 3_600_000


def resolved(props: dict[str, str], overrides: dict[str, str] | None = None) -> LogConfig:
    return LogConfig.from_overrides(overrides or {}, BrokerConfig.from_properties(props))


@pytest.mark.parametrize(
    ("props", "field", "expected"),
    [
        ({"log.roll.hours": "2"}, "segment_ms", 2 * HOUR_MS),
        ({"log.roll.ms": "1000", "log.roll.hours": "2"}, "segment_ms", 1000),
        ({"log.roll.jitter.hours": "1"}, "segment_jitter_ms", HOUR_MS),
        ({"log.roll.jitter.ms": "5", "log.roll.jitter.hours": "1"}, "segment_jitter_ms", 5),
        ({"log.retention.hours": "1"}, "retention_ms", HOUR_MS),
        ({"log.retention.minutes": "3", "log.retention.hours": "1"}, "retention_ms", 180_000),
        (
            {"log.retention.ms": "7", "log.retention.minutes": "3", "log.retention.hours": "1"},
            "retention_ms",
            7,
        ),
        ({"log.retention.ms": "-1"}, "retention_ms", -1),
        ({"log.retention.hours": "-1"}, "retention_ms", -1),
        ({"log.retention.minutes": "-5"}, "retention_ms", -1),
        ({"log.cleanup.policy": "compact"}, "cleanup_policy", frozenset({"compact"})),
        ({"log.segment.bytes": "2097152"}, "segment_bytes", 2_097_152),
        ({"log.index.size.max.bytes": "4096"}, "segment_index_bytes", 4096),
        ({"log.index.interval.bytes": "10"}, "index_interval_bytes", 10),
        ({"log.cleaner.min.cleanable.ratio": "0.1"}, "min_cleanable_dirty_ratio", 0.1),
        ({"log.cleaner.min.compaction.lag.ms": "9"}, "min_compaction_lag_ms", 9),
        ({"log.cleaner.max.compaction.lag.ms": "99"}, "max_compaction_lag_ms", 99),
        ({"log.cleaner.delete.retention.ms": "11"}, "delete_retention_ms", 11),
        ({"log.retention.bytes": "12"}, "retention_bytes", 12),
        ({"log.segment.delete.delay.ms": "13"}, "file_delete_delay_ms", 13),
        ({"message.max.bytes": "14"}, "max_message_bytes", 14),
        ({"log.message.timestamp.type": "LogAppendTime"}, "message_timestamp_type", "LogAppendTime"),
        ({"log.message.timestamp.before.max.ms": "15"}, "message_timestamp_before_max_ms", 15),
        ({"log.message.timestamp.after.max.ms": "16"}, "message_timestamp_after_max_ms", 16),
        ({"log.preallocate": "true"}, "preallocate", True),
        ({"compression.type": "zstd"}, "compression_type", "zstd"),
        ({"log.flush.interval.messages": "17"}, "flush_messages", 17),
        ({"log.flush.scheduler.interval.ms": "18"}, "flush_ms", 18),
        ({"log.flush.interval.ms": "19", "log.flush.scheduler.interval.ms": "18"}, "flush_ms", 19),
        ({"min.insync.replicas": "2"}, "min_insync_replicas", 2),
    ],
)
def test_broker_synonyms_supply_topic_defaults(props: dict[str, str], field: str, expected: object) -> None:
    assert getattr(resolved(props), field) == expected


def test_topic_override_beats_broker_synonym() -> None:
    config = resolved({"log.roll.ms": "1000", "log.cleanup.policy": "compact"}, {"segment.ms": "5"})
    assert config.segment_ms == 5
    assert config.cleanup_policy == frozenset({"compact"})


def test_dynamic_layers_win_over_static() -> None:
    broker = BrokerConfig(
        static={"log.segment.bytes": "1100000"},
        dynamic_default={"log.segment.bytes": "2200000"},
        dynamic={"log.segment.bytes": "3300000"},
    )
    assert broker.lookup("log.segment.bytes") == (3_300_000, ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert LogConfig.from_overrides({}, broker).segment_bytes == 3_300_000
    without_broker_layer = broker.with_dynamic({"log.segment.bytes": None})
    assert LogConfig.from_overrides({}, without_broker_layer).segment_bytes == 2_200_000
    assert (
        LogConfig.from_overrides({}, BrokerConfig(static={"log.segment.bytes": "1100000"})).segment_bytes
        == 1_100_000
    )


def test_synonym_order_beats_layer_order() -> None:
    broker = BrokerConfig(static={"log.roll.ms": "1000"}, dynamic={"log.roll.hours": "5"})
    assert LogConfig.from_overrides({}, broker).segment_ms == 1000


def test_unknown_broker_name_with_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"log.cleaner.thread": "2"})
    assert (
        str(info.value)
        == "Unknown broker config name: log.cleaner.thread (did you mean log.cleaner.threads?)"
    )


def test_broker_values_validated_with_names() -> None:
    with pytest.raises(ConfigError, match="configuration log.cleaner.min.cleanable.ratio"):
        BrokerConfig.from_properties({"log.cleaner.min.cleanable.ratio": "1.5"})
    with pytest.raises(ConfigError, match="configuration log.cleaner.threads"):
        BrokerConfig.from_properties({"log.cleaner.threads": "-1"})
    with pytest.raises(ConfigError, match="configuration log.cleanup.policy"):
        BrokerConfig.from_properties({"log.cleanup.policy": "foobar"})
    with pytest.raises(ConfigError, match="Not a number of type INT"):
        BrokerConfig.from_properties({"num.partitions": "many"})


def test_broker_lag_conflict() -> None:
    with pytest.raises(
        InvalidConfigurationError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"
    ):
        BrokerConfig.from_properties(
            {"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"}
        )


def test_dedupe_buffer_per_thread() -> None:
    message = "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties({"log.cleaner.dedupe.buffer.size": str(1024 * 1024)})
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(
            {"log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024), "log.cleaner.threads": "4"}
        )
    ok = BrokerConfig.from_properties({"log.cleaner.dedupe.buffer.size": str(1024 * 1024 + 1)})
    assert ok.log_cleaner_dedupe_buffer_size == 1024 * 1024 + 1
    BrokerConfig.from_properties({"log.cleaner.threads": "0"})  # no threads, nothing to divide


@pytest.mark.parametrize("factor", ["0", "-0.5", "1.01"])
def test_load_factor_range(factor: str) -> None:
    with pytest.raises(ConfigError, match="log.cleaner.io.buffer.load.factor"):
        BrokerConfig.from_properties({"log.cleaner.io.buffer.load.factor": factor})


def test_broker_defaults_and_typed_accessors() -> None:
    broker = BrokerConfig.from_properties({})
    assert broker.log_cleaner_enable is True
    assert broker.log_cleaner_threads == 1
    assert broker.log_cleaner_dedupe_buffer_size == 134_217_728
    assert broker.log_cleaner_io_buffer_load_factor == 0.9
    assert broker.log_cleaner_io_buffer_size == 524_288
    assert broker.log_cleaner_io_max_bytes_per_second == 1.7976931348623157e308
    assert broker.log_cleaner_backoff_ms == 15_000
    assert broker.message_max_bytes == 1_048_588
    assert broker.log_retention_check_interval_ms == 300_000
    assert broker.producer_id_expiration_ms == 86_400_000
    assert broker.node_id == 0
    assert broker.num_partitions == 1
    assert broker.default_replication_factor == 1
    assert broker.auto_create_topics_enable is True
    assert broker.delete_topic_enable is True
    assert broker.offsets_topic_num_partitions == 50
    assert broker.get_int("socket.request.max.bytes") == 104_857_600
    assert broker.get_int("offsets.retention.minutes") == 10_080
    assert broker.get_int("offsets.retention.check.interval.ms") == 600_000
    assert broker.get_int("group.initial.rebalance.delay.ms") == 3000
    assert broker.get_int("group.min.session.timeout.ms") == 6000
    assert broker.get_int("group.max.session.timeout.ms") == 1_800_000
    assert broker.get_int("log.flush.offset.checkpoint.interval.ms") == 60_000
    assert broker.get_int("log.flush.start.offset.checkpoint.interval.ms") == 60_000
    assert broker.get_int("replica.high.watermark.checkpoint.interval.ms") == 5000
    assert broker.get_str("advertised.listeners") is None
    assert broker.get_list("log.cleanup.policy") == ("delete",)
    with pytest.raises(ConfigError):
        broker.get_bool("num.partitions")


def test_node_id_and_broker_id() -> None:
    assert BrokerConfig.from_properties({"broker.id": "3"}).node_id == 3
    assert BrokerConfig.from_properties({"node.id": "4"}).node_id == 4
    with pytest.raises(ConfigError, match="broker.id"):
        BrokerConfig.from_properties({"node.id": "4", "broker.id": "5"})


def test_log_cleaner_enable_is_deprecated() -> None:
    assert BrokerConfig.from_properties({}).deprecation_warnings() == []
    warnings = BrokerConfig.from_properties({"log.cleaner.enable": "false"}).deprecation_warnings()
    assert len(warnings) == 1
    assert warnings[0].startswith("log.cleaner.enable is deprecated (Kafka 4.4)")


def test_log_cleaner_enable_true_does_not_warn() -> None:
    """A seed's server.properties line ``log.cleaner.enable=true`` is the default: no warning."""
    assert BrokerConfig.from_properties({"log.cleaner.enable": "true"}).deprecation_warnings() == []


def test_dynamic_updates() -> None:
    assert BrokerConfig.dynamic_cleaner_keys == frozenset(
        {
            "log.cleaner.threads",
            "log.cleaner.dedupe.buffer.size",
            "log.cleaner.io.buffer.load.factor",
            "log.cleaner.io.buffer.size",
            "message.max.bytes",
            "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.backoff.ms",
        }
    )
    two = BrokerConfig.from_properties({"log.cleaner.threads": "2"})
    assert two.with_dynamic({"log.cleaner.threads": "4"}).log_cleaner_threads == 4
    assert two.with_dynamic({"log.cleaner.threads": "1"}).log_cleaner_threads == 1
    with pytest.raises(ConfigError, match="more than double the current value 2"):
        two.with_dynamic({"log.cleaner.threads": "5"})
    four = BrokerConfig.from_properties({"log.cleaner.threads": "4"})
    with pytest.raises(ConfigError, match="less than half the current value 4"):
        four.with_dynamic({"log.cleaner.threads": "1"})
    with pytest.raises(ConfigError, match="at least 1"):
        BrokerConfig.validate_dynamic_update(four, BrokerConfig.from_properties({"log.cleaner.threads": "0"}))
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: log.dirs"):
        two.with_dynamic({"log.dirs": "/elsewhere"})
    rate = two.with_dynamic({"log.cleaner.io.max.bytes.per.second": "20000000"}, cluster_default=True)
    assert rate.log_cleaner_io_max_bytes_per_second == 20_000_000.0
    assert rate.lookup("log.cleaner.io.max.bytes.per.second")[1] is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def test_properties_text_and_file(tmp_path: Path) -> None:
    text = (
        "# comment\n! another\n\n"
        "log.cleaner.threads=2\n"
        "log.dirs : /var/lib/kafka\n"
        "listeners PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\n"
        "process.roles=broker,controller\n"
        "key\\=with\\:escapes=v\\u0041\n"
    )
    props = parse_properties_text(text)
    assert props["log.cleaner.threads"] == "2"
    assert props["log.dirs"] == "/var/lib/kafka"
    assert props["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093"
    assert props["key=with:escapes"] == "vA"
    del props["key=with:escapes"]
    path = tmp_path / "server.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in props.items()))
    broker = BrokerConfig.from_properties_file(path)
    assert broker.log_cleaner_threads == 2
    assert broker.get_str("log.dirs") == "/var/lib/kafka"


def test_describe_topic_sources_and_synonyms() -> None:
    broker = BrokerConfig(static={"log.roll.hours": "2"}, dynamic={"log.cleaner.min.cleanable.ratio": "0.25"})
    entries = {e.name: e for e in describe_topic_config({"cleanup.policy": "delete,compact"}, broker)}
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source, policy.is_default) == (
        "delete,compact",
        ConfigSource.TOPIC_CONFIG,
        False,
    )
    assert policy.type is ConfigType.LIST
    assert policy.synonyms == (
        ConfigSynonym("cleanup.policy", "delete,compact", ConfigSource.TOPIC_CONFIG),
        ConfigSynonym("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    )
    segment_ms = entries["segment.ms"]
    assert segment_ms.value == str(2 * HOUR_MS)
    # Kafka's ConfigHelper.configSynonyms drops every synonym before the first of the primary
    # name (log.roll.ms), which is unset here: no synonyms, source DEFAULT_CONFIG, as Kafka 4.1
    # answers (the value is still the effective 2 h)
    assert segment_ms.source is ConfigSource.DEFAULT_CONFIG
    assert segment_ms.synonyms == ()
    rolled = {
        e.name: e
        for e in describe_topic_config(
            {}, BrokerConfig(static={"log.roll.ms": "1000", "log.roll.hours": "2"})
        )
    }["segment.ms"]
    assert rolled.synonyms == (
        ConfigSynonym("log.roll.ms", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.roll.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    ratio = entries["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.source, ratio.type) == (
        "0.25",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigType.DOUBLE,
    )
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == (
        "604800000",
        ConfigSource.DEFAULT_CONFIG,
        True,
    )
    assert not any(e.read_only or e.sensitive for e in entries.values())
    assert all(e.documentation for e in entries.values())
    assert entries["max.compaction.lag.ms"].value == "9223372036854775807"
    with pytest.raises(ConfigError, match="Unknown topic config name"):
        describe_topic_config({"nope": "1"}, broker)


def test_describe_broker() -> None:
    broker = BrokerConfig(static={"log.cleaner.threads": "2"}).with_dynamic({"log.cleaner.backoff.ms": "100"})
    entries = {e.name: e for e in describe_broker_config(broker)}
    threads = entries["log.cleaner.threads"]
    assert (threads.value, threads.source, threads.read_only) == (
        "2",
        ConfigSource.STATIC_BROKER_CONFIG,
        False,
    )
    assert threads.synonyms[-1] == ConfigSynonym("log.cleaner.threads", "1", ConfigSource.DEFAULT_CONFIG)
    assert entries["log.cleaner.backoff.ms"].source is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert entries["log.cleaner.enable"].read_only
    assert entries["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    assert entries["log.cleaner.io.buffer.load.factor"].value == "0.9"
    # log.retention.ms has no value of its own: Kafka lists no synonym for it (ConfigHelper drops
    # those before the first of the described name), log.retention.hours lists its default
    assert [s.name for s in entries["log.retention.ms"].synonyms] == []
    assert [s.name for s in entries["log.retention.hours"].synonyms] == ["log.retention.hours"]
    assert entries["num.partitions"].is_default
