"""Topic configs: defaults, synonyms, validation, Kafka's messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import LONG_MAX, java_double_str
from kompakt.errors import ConfigError, InvalidConfigurationError
from kompakt.log.config import LogConfig

GIB = 1024**3


def test_defaults_are_kafkas() -> None:
    config = LogConfig.defaults()
    assert config.cleanup_policy == frozenset({"delete"})
    assert config.delete and not config.compact
    assert config.segment_bytes == GIB
    assert config.segment_ms == 604_800_000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == LONG_MAX
    assert config.delete_retention_ms == 86_400_000
    assert config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.file_delete_delay_ms == 60_000
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"
    assert config.message_timestamp_before_max_ms == LONG_MAX
    assert config.message_timestamp_after_max_ms == 3_600_000  # Kafka 4.0 (KIP-1030): one hour
    assert config.preallocate is False
    assert config.compression_type == "producer"
    assert config.flush_messages == LONG_MAX
    assert config.flush_ms == LONG_MAX
    assert config.min_insync_replicas == 1
    assert LogConfig.from_overrides({}) == config
    assert LogConfig.from_overrides({}, BrokerConfig.from_properties({})) == config


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("compact", {"compact"}),
        ("delete", {"delete"}),
        ("compact,delete", {"compact", "delete"}),
        ("delete,compact", {"compact", "delete"}),
        (" Compact , DELETE ", {"compact", "delete"}),
        ("", set()),
    ],
)
def test_cleanup_policy_accepted_forms(raw: str, expected: set[str]) -> None:
    config = LogConfig.from_overrides({"cleanup.policy": raw})
    assert config.cleanup_policy == frozenset(expected)
    assert config.compact == ("compact" in expected)
    assert config.delete == ("delete" in expected)


@pytest.mark.parametrize("raw", ["true", "foobar", "compact,foobar"])
def test_cleanup_policy_rejected(raw: str) -> None:
    with pytest.raises(
        ConfigError, match="configuration cleanup.policy: String must be one of: compact, delete"
    ):
        LogConfig.from_overrides({"cleanup.policy": raw})


@pytest.mark.parametrize("ratio", ["-0.1", "1.2"])
def test_ratio_out_of_range(ratio: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"Invalid value {ratio} for configuration min.cleanable.dirty.ratio"
    ):
        LogConfig.from_overrides({"min.cleanable.dirty.ratio": ratio})


def test_ratio_messages_are_kafkas() -> None:
    with pytest.raises(ConfigError) as low:
        LogConfig.from_overrides({"min.cleanable.dirty.ratio": "-0.1"})
    assert str(low.value) == (
        "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0"
    )
    with pytest.raises(ConfigError) as high:
        LogConfig.from_overrides({"min.cleanable.dirty.ratio": "1.2"})
    assert str(high.value).endswith("Value must be no more than 1")
    assert LogConfig.from_overrides({"min.cleanable.dirty.ratio": "1"}).min_cleanable_dirty_ratio == 1.0
    assert LogConfig.from_overrides({"min.cleanable.dirty.ratio": "0"}).min_cleanable_dirty_ratio == 0.0


@pytest.mark.parametrize(
    "name",
    [
        "segment.jitter.ms",
        "index.interval.bytes",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "max.message.bytes",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "flush.ms",
    ],
)
def test_minus_one_rejected_for_at_least_zero_configs(name: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"Invalid value -1 for configuration {name}: Value must be at least 0"
    ):
        LogConfig.from_overrides({name: "-1"})


@pytest.mark.parametrize(
    ("name", "value", "minimum"),
    [
        ("segment.bytes", "1048575", "1048576"),
        ("segment.ms", "0", "1"),
        ("segment.index.bytes", "3", "4"),
        ("retention.ms", "-2", "-1"),
        ("flush.messages", "0", "1"),
        ("min.insync.replicas", "0", "1"),
    ],
)
def test_other_lower_bounds(name: str, value: str, minimum: str) -> None:
    with pytest.raises(ConfigError, match=f"Value must be at least {minimum}"):
        LogConfig.from_overrides({name: value})


def test_unlimited_retention_accepted() -> None:
    config = LogConfig.from_overrides({"retention.ms": "-1", "retention.bytes": "-5"})
    assert (config.retention_ms, config.retention_bytes) == (-1, -5)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("segment.bytes", "big", "Not a number of type INT"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.ms", "1.5", "Not a number of type LONG"),
        ("segment.ms", "9223372036854775808", "Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"),
        ("compression.type", "brotli", "String must be one of"),
    ],
)
def test_bad_types(name: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_overrides({name: value})
    assert str(info.value).startswith(f"Invalid value {value} for configuration {name}: {reason}")


def test_values_are_trimmed_and_booleans_case_insensitive() -> None:
    config = LogConfig.from_overrides({"segment.bytes": " 2097152 ", "preallocate": "TRUE"})
    assert config.segment_bytes == 2097152
    assert config.preallocate is True


def test_min_lag_above_max_lag_exact_message() -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        LogConfig.from_overrides({"max.compaction.lag.ms": "100", "min.compaction.lag.ms": "200"})
    assert (
        str(info.value)
        == "conflict topic config setting min.compaction.lag.ms (200) > max.compaction.lag.ms (100)"
    )


def test_max_lag_zero_means_disabled() -> None:
    config = LogConfig.from_overrides({"max.compaction.lag.ms": "0", "min.compaction.lag.ms": "5000"})
    assert config.max_compaction_lag_ms == 0
    assert config.effective_max_compaction_lag_ms == LONG_MAX
    assert LogConfig.defaults().effective_max_compaction_lag_ms == LONG_MAX
    assert LogConfig.from_overrides({"max.compaction.lag.ms": "7"}).effective_max_compaction_lag_ms == 7


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="segment.bytes"):
        LogConfig(segment_bytes=1)
    with pytest.raises(InvalidConfigurationError):
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
    with pytest.raises(ConfigError, match="cleanup.policy"):
        LogConfig(cleanup_policy=frozenset({"forever"}))


def test_unknown_topic_config_with_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_overrides({"segment.byte": "1024"})
    assert str(info.value) == "Unknown topic config name: segment.byte (did you mean segment.bytes?)"
    with pytest.raises(ConfigError, match=r"^Unknown topic config name: zzz$"):
        LogConfig.from_overrides({"zzz": "1"})


@pytest.mark.parametrize(
    ("broker_name", "topic_name"),
    [
        ("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio"),
        ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
        ("log.segment.bytes", "segment.bytes"),
        ("log.cleanup.policy", "cleanup.policy"),
        ("log.retention.ms", "retention.ms"),
        ("log.retention.hours", "retention.ms"),
        ("log.roll.hours", "segment.ms"),
        ("message.max.bytes", "max.message.bytes"),
        ("log.segment.delete.delay.ms", "file.delete.delay.ms"),
        ("log.flush.scheduler.interval.ms", "flush.ms"),
    ],
)
def test_broker_name_at_topic_level_gets_hint(broker_name: str, topic_name: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_overrides({broker_name: "1"})
    assert str(info.value) == (
        f"Unknown topic config name: {broker_name} (did you mean {topic_name}? "
        "that is the topic-level name of this broker config)"
    )


def test_remote_storage_rejected() -> None:
    with pytest.raises(InvalidConfigurationError, match="Tiered Storage"):
        LogConfig.from_overrides({"remote.storage.enable": "true"})


def test_with_overrides_applies_on_top() -> None:
    base = LogConfig.from_overrides({"cleanup.policy": "compact", "internal.segment.bytes": "1024"})
    changed = base.with_overrides({"min.cleanable.dirty.ratio": "0.01", "cleanup.policy": "compact,delete"})
    assert changed.segment_size == 1024
    assert changed.min_cleanable_dirty_ratio == 0.01
    assert changed.cleanup_policy == frozenset({"compact", "delete"})
    assert base.cleanup_policy == frozenset({"compact"})
    with pytest.raises(InvalidConfigurationError):
        base.with_overrides({"max.compaction.lag.ms": "10", "min.compaction.lag.ms": "20"})


def test_to_strings_formats_like_kafka() -> None:
    strings = LogConfig.from_overrides({"cleanup.policy": "delete,compact"}).to_strings()
    assert strings["cleanup.policy"] == "compact,delete"
    assert strings["min.cleanable.dirty.ratio"] == "0.5"
    assert strings["preallocate"] == "false"
    assert strings["max.compaction.lag.ms"] == str(LONG_MAX)
    assert LogConfig.from_overrides(strings) == LogConfig.from_overrides({"cleanup.policy": "compact,delete"})


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.5, "0.5"),
        (1.0, "1.0"),
        (0.0, "0.0"),
        (0.001, "0.001"),
        (1e-4, "1.0E-4"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (-2.5e-5, "-2.5E-5"),
        (float("inf"), "Infinity"),
    ],
)
def test_java_double_formatting(value: float, text: str) -> None:
    assert java_double_str(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_text_round_trips(value: float) -> None:
    assert float(java_double_str(value)) == value


@given(
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=0, max_value=2**40),
)
def test_lag_rule_model(min_lag: int, max_lag: int) -> None:
    overrides = {"min.compaction.lag.ms": str(min_lag), "max.compaction.lag.ms": str(max_lag)}
    if max_lag != 0 and min_lag > max_lag:
        with pytest.raises(InvalidConfigurationError):
            LogConfig.from_overrides(overrides)
    else:
        config = LogConfig.from_overrides(overrides)
        assert config.min_compaction_lag_ms <= config.effective_max_compaction_lag_ms


# ------------------------------------------------------------------ segment.bytes (KIP-1030)


def test_segment_bytes_below_one_mib_is_refused_with_kafkas_message() -> None:
    """Kafka 4.1 refuses segment.bytes below 1 MiB (KIP-1030), so a topic that works on kompakt
    also works in production."""
    with pytest.raises(ConfigError) as info:
        LogConfig.from_overrides({"segment.bytes": "16384"})
    assert str(info.value) == (
        "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
    )
    assert LogConfig.from_overrides({"segment.bytes": "1048576"}).segment_size == 1_048_576


def test_internal_segment_bytes_overrides_segment_bytes_for_tests() -> None:
    """Kafka 4.1's internal.segment.bytes: no floor, and it wins over segment.bytes."""
    config = LogConfig.from_overrides({"internal.segment.bytes": "300", "segment.bytes": "2097152"})
    assert config.segment_size == 300
    assert config.segment_bytes == 2_097_152
    assert LogConfig.defaults().segment_size == 1_073_741_824
    assert "internal.segment.bytes" not in LogConfig.defaults().to_strings()
    assert config.to_strings()["internal.segment.bytes"] == "300"
