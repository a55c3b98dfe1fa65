"""Topic configs as the storage reads them (:class:`LogConfig`, Kafka's storage ``LogConfig``).

The definitions (names, defaults, validators, broker synonyms) live in
:mod:`kompakt.config.log_defs`, and the per-key resolution (topic override, then broker synonyms,
then the default) in :mod:`kompakt.config.topic`; this module is the typed, immutable view the
log, the cleaner and the broker's produce path run with.

Deliberate differences from Kafka: ``max.compaction.lag.ms=0`` means "no maximum" (KIP-354's
public interface); ``cleanup.policy`` may be the empty list (no cleanup of any kind);
``cleanup.policy`` elements are case-insensitive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import (
    LONG_MAX,
    ConfigValue,
    bool_value,
    float_value,
    format_any,
    int_value,
    list_value,
    str_value,
)
from kompakt.config.log_defs import TOPIC_CONFIG_DEFS, topic_default, validate_compaction_lags
from kompakt.config.topic import parse_topic_overrides, resolve_topic_value
from kompakt.errors import InvalidConfigurationError

__all__ = ["LogConfig", "field_name"]


def _int(name: str) -> int:
    return int_value(name, topic_default(name))


def _optional_int(name: str) -> int | None:
    default = topic_default(name)
    return None if default is None else int_value(name, default)


def _float(name: str) -> float:
    return float_value(name, topic_default(name))


def _bool(name: str) -> bool:
    return bool_value(name, topic_default(name))


def _str(name: str) -> str:
    return str_value(name, topic_default(name))


def _list(name: str) -> tuple[str, ...]:
    return list_value(name, topic_default(name))


def field_name(config_name: str) -> str:
    """The snake_case :class:`LogConfig` field of a Kafka topic config name."""
    return config_name.replace(".", "_")


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """The effective config of one topic; immutable, so a reconfiguration swaps the object.

    Thread-safe (immutable). Fields are Kafka's topic config names in snake_case, defaulting to
    the table's defaults (:mod:`kompakt.config.log_defs`, the one place they are written); values
    are validated on construction with Kafka's error wording.
    """

    cleanup_policy: frozenset[str] = frozenset(_list("cleanup.policy"))
    compression_type: str = _str("compression.type")
    compression_gzip_level: int = _int("compression.gzip.level")
    compression_lz4_level: int = _int("compression.lz4.level")
    compression_zstd_level: int = _int("compression.zstd.level")
    delete_retention_ms: int = _int("delete.retention.ms")
    file_delete_delay_ms: int = _int("file.delete.delay.ms")
    flush_messages: int = _int("flush.messages")
    flush_ms: int = _int("flush.ms")
    follower_replication_throttled_replicas: tuple[str, ...] = _list(
        "follower.replication.throttled.replicas"
    )
    index_interval_bytes: int = _int("index.interval.bytes")
    leader_replication_throttled_replicas: tuple[str, ...] = _list("leader.replication.throttled.replicas")
    local_retention_bytes: int = _int("local.retention.bytes")
    local_retention_ms: int = _int("local.retention.ms")
    max_compaction_lag_ms: int = _int("max.compaction.lag.ms")
    max_message_bytes: int = _int("max.message.bytes")
    #: Accepted and ignored, as Kafka 3.9 ignores it (kompakt writes record batches v2).
    message_format_version: str = _str("message.format.version")
    message_timestamp_after_max_ms: int = _int("message.timestamp.after.max.ms")
    message_timestamp_before_max_ms: int = _int("message.timestamp.before.max.ms")
    message_timestamp_type: str = _str("message.timestamp.type")
    min_cleanable_dirty_ratio: float = _float("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _int("min.compaction.lag.ms")
    min_insync_replicas: int = _int("min.insync.replicas")
    preallocate: bool = _bool("preallocate")
    remote_storage_enable: bool = _bool("remote.storage.enable")
    retention_bytes: int = _int("retention.bytes")
    retention_ms: int = _int("retention.ms")
    #: The configured segment.bytes (at least 1 MiB); the log rolls at :attr:`segment_size`.
    segment_bytes: int = _int("segment.bytes")
    segment_index_bytes: int = _int("segment.index.bytes")
    segment_jitter_ms: int = _int("segment.jitter.ms")
    segment_ms: int = _int("segment.ms")
    unclean_leader_election_enable: bool = _bool("unclean.leader.election.enable")
    #: Kafka 4.1's ``internal.segment.bytes``: set by tests for segments below segment.bytes' floor.
    internal_segment_bytes: int | None = _optional_int("internal.segment.bytes")
    #: kompakt's own: groups whose committed offsets hold tombstone removal (kompakt.cleaner.readers).
    kompakt_tombstone_retain_for_groups: tuple[str, ...] = _list("kompakt.tombstone.retain.for.groups")
    #: kompakt's own: the longest hold past a delete horizon, in ms.
    kompakt_tombstone_max_hold_ms: int = _int("kompakt.tombstone.max.hold.ms")

    def __post_init__(self) -> None:
        for tdef in TOPIC_CONFIG_DEFS:
            value: Any = getattr(self, field_name(tdef.name))
            if isinstance(value, frozenset):
                value = tuple(sorted(value))
            if tdef.definition.validator is not None:
                tdef.definition.validator.ensure_valid(tdef.name, value)
        validate_compaction_lags(self.min_compaction_lag_ms, self.max_compaction_lag_ms, "topic")
        if self.remote_storage_enable:
            raise InvalidConfigurationError(
                "Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage."
            )

    @property
    def segment_size(self) -> int:
        """The size at which the active segment rolls: ``internal.segment.bytes`` when set, else
        ``segment.bytes`` (Kafka 4.1's ``LogConfig.segmentSize()``). Everything that sizes a
        segment reads this, never :attr:`segment_bytes`, so tests can use small segments while
        ``segment.bytes`` keeps Kafka's 1 MiB minimum."""
        return self.segment_bytes if self.internal_segment_bytes is None else self.internal_segment_bytes

    @property
    def compact(self) -> bool:
        """Whether the cleaner compacts this log."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether time/size retention deletes old segments of this log."""
        return "delete" in self.cleanup_policy

    @property
    def effective_max_compaction_lag_ms(self) -> int:
        """``max.compaction.lag.ms`` with 0 ("disabled") read as no limit at all."""
        return LONG_MAX if self.max_compaction_lag_ms == 0 else self.max_compaction_lag_ms

    @classmethod
    def defaults(cls) -> LogConfig:
        """Kafka's built-in topic defaults (no broker overrides)."""
        return cls()

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str], broker: BrokerConfig | None = None) -> LogConfig:
        """Resolve every key: topic override, then broker synonyms, then the default."""
        parsed = parse_topic_overrides(overrides)
        values = {tdef.name: resolve_topic_value(tdef, parsed, broker)[0] for tdef in TOPIC_CONFIG_DEFS}
        return cls._from_values(values)

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """This config with some keys replaced (an incremental AlterConfigs)."""
        parsed = parse_topic_overrides(overrides)
        return dataclasses.replace(self, **_to_fields(parsed))

    def to_strings(self) -> dict[str, str]:
        """Every topic config as Kafka would print it, keyed by Kafka name."""
        result: dict[str, str] = {}
        for tdef in TOPIC_CONFIG_DEFS:
            value = getattr(self, field_name(tdef.name))
            if isinstance(value, frozenset):
                value = tuple(sorted(value))
            if value is None:
                continue  # an internal config that is not set (internal.segment.bytes)
            result[tdef.name] = format_any(value)
        return result

    @classmethod
    def _from_values(cls, values: Mapping[str, ConfigValue]) -> LogConfig:
        return cls(**_to_fields(values))


def _to_fields(values: Mapping[str, ConfigValue]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in values.items():
        if name == "cleanup.policy" and isinstance(value, tuple):
            fields[field_name(name)] = frozenset(v.lower() for v in value)
        else:
            fields[field_name(name)] = value
    return fields
