"""Topic configs (:class:`LogConfig`) and broker configs (:class:`BrokerConfig`).

A topic's effective config is resolved per key, in Kafka's order: the topic override, then the
broker synonyms in priority order (``log.roll.ms`` before ``log.roll.hours``), each looked up in
the broker's layers (dynamic per-broker, dynamic cluster default, static ``server.properties``),
then the built-in default. The tables live in :mod:`kompakt.log.config_tables`; parsing,
validators and value formatting in :mod:`kompakt.log.config_defs`; DescribeConfigs views in
:mod:`kompakt.log.config_describe`.

Deliberate differences from Kafka: ``max.compaction.lag.ms=0`` means "no maximum" (KIP-354's
public interface); ``cleanup.policy`` may be the empty list (no cleanup of any kind);
``cleanup.policy`` elements are case-insensitive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Self

from kompakt.errors import ConfigError, InvalidConfigurationError
from kompakt.log.config_defs import (
    LONG_MAX,
    ConfigDef,
    ConfigSource,
    ConfigValue,
    closest,
    format_any,
    parse_properties_file,
    parse_properties_text,
)
from kompakt.log.config_tables import (
    BROKER_CONFIGS,
    DYNAMIC_CLEANER_KEYS,
    INERT_BROKER_CONFIGS,
    LISTENER_ONLY_BROKER_NAMES,
    TOPIC_CONFIG_DEFS,
    TOPIC_CONFIGS,
    TOPIC_NAME_OF_BROKER_SYNONYM,
    TopicConfigDef,
)

ONE_MIB = 1024 * 1024

__all__ = [
    "BrokerConfig",
    "LogConfig",
    "field_name",
    "parse_properties_file",
    "parse_properties_text",
    "parse_topic_overrides",
    "resolve_topic_value",
    "validate_compaction_lags",
    "validate_dynamic_update",
]


def field_name(config_name: str) -> str:
    """The snake_case :class:`LogConfig` field of a Kafka topic config name."""
    return config_name.replace(".", "_")


def _unknown_topic_config(name: str) -> ConfigError:
    topic_name = TOPIC_NAME_OF_BROKER_SYNONYM.get(name)
    if topic_name is not None:
        hint = f" (did you mean {topic_name}? that is the topic-level name of this broker config)"
    else:
        suggestion = closest(name, list(TOPIC_CONFIGS))
        hint = f" (did you mean {suggestion}?)" if suggestion else ""
    return ConfigError(f"Unknown topic config name: {name}{hint}")


def parse_topic_overrides(overrides: Mapping[str, str]) -> dict[str, ConfigValue]:
    """Parse and validate topic overrides one by one; unknown names are rejected with a hint."""
    parsed: dict[str, ConfigValue] = {}
    for name, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise _unknown_topic_config(name)
        parsed[name] = definition.definition.parse(raw)
    return parsed


def resolve_topic_value(
    tdef: TopicConfigDef, parsed_overrides: Mapping[str, ConfigValue], broker: BrokerConfig | None
) -> tuple[ConfigValue, ConfigSource]:
    """One topic config's effective value and where it came from."""
    if tdef.name in parsed_overrides:
        return parsed_overrides[tdef.name], ConfigSource.TOPIC_CONFIG
    if broker is not None:
        for synonym in tdef.synonyms:
            found = broker.lookup_set(synonym.name)
            if found is None:
                continue
            value, source = found
            if isinstance(value, int) and not isinstance(value, bool):
                value *= synonym.scale
                if tdef.name == "retention.ms" and value < 0:
                    value = -1  # Kafka folds every negative broker retention into "unlimited"
            return value, source
    return tdef.definition.default, ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """The effective config of one topic; immutable, so a reconfiguration swaps the object.

    Thread-safe (immutable). Fields are Kafka's topic config names in snake_case; values are
    validated on construction with Kafka's error wording.
    """

    cleanup_policy: frozenset[str] = frozenset({"delete"})
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    #: Accepted and ignored, as Kafka 3.9 ignores it (kompakt writes record batches v2).
    message_format_version: str = "3.0-IV1"
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False
    #: kompakt's own: groups whose committed offsets hold tombstone removal (kompakt.cleaner.readers).
    kompakt_tombstone_retain_for_groups: tuple[str, ...] = ()
    #: kompakt's own: the longest hold past a delete horizon, in ms.
    kompakt_tombstone_max_hold_ms: int = 604_800_000

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


def validate_compaction_lags(min_lag_ms: int, max_lag_ms: int, kind: str = "topic") -> None:
    """Kafka's cross-field rule; a 0 maximum means "disabled" and so never conflicts."""
    if max_lag_ms != 0 and min_lag_ms > max_lag_ms:
        raise InvalidConfigurationError(
            f"conflict {kind} config setting min.compaction.lag.ms ({min_lag_ms}) > "
            f"max.compaction.lag.ms ({max_lag_ms})"
        )


def _unknown_broker_config(name: str) -> ConfigError:
    suggestion = closest(name, list(BROKER_CONFIGS))
    hint = f" (did you mean {suggestion}?)" if suggestion else ""
    return ConfigError(f"Unknown broker config name: {name}{hint}")


def _parse_layer(layer: Mapping[str, str], dynamic: bool) -> dict[str, ConfigValue]:
    """Parse one layer; a dynamic layer takes only what Kafka lets AlterConfigs change
    (``DynamicBrokerConfig.validateConfigs``: dynamic configs, SSL ones only per listener)."""
    parsed: dict[str, ConfigValue] = {}
    not_dynamic = []
    listener_only = []
    for name, raw in layer.items():
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise _unknown_broker_config(name)
        if dynamic and name in LISTENER_ONLY_BROKER_NAMES:
            listener_only.append(name)
        elif dynamic and not definition.dynamic:
            not_dynamic.append(name)
        parsed[name] = definition.parse(raw)
    if not_dynamic:
        raise ConfigError(f"Cannot update these configs dynamically: {', '.join(sorted(not_dynamic))}")
    if listener_only:
        raise ConfigError(
            "These security configs can be dynamically updated only per-listener using the listener "
            f"prefix: {', '.join(sorted(listener_only))}"
        )
    return parsed


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """Broker configs by Kafka name, in three layers, with typed accessors.

    ``static`` is ``server.properties``; ``dynamic_default`` and ``dynamic`` hold AlterConfigs
    updates (cluster default and this broker), which win in that order. Only dynamic keys may
    appear in the dynamic layers. Immutable: a dynamic update builds a new object
    (:meth:`with_dynamic`), so readers never see a half-applied change.
    """

    static: Mapping[str, str] = field(default_factory=dict)
    dynamic_default: Mapping[str, str] = field(default_factory=dict)
    dynamic: Mapping[str, str] = field(default_factory=dict)
    _layers: tuple[tuple[ConfigSource, dict[str, ConfigValue]], ...] = field(
        init=False, repr=False, compare=False
    )

    dynamic_cleaner_keys: ClassVar[frozenset[str]] = DYNAMIC_CLEANER_KEYS

    def __post_init__(self) -> None:
        for name in ("static", "dynamic_default", "dynamic"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        layers = (
            (ConfigSource.DYNAMIC_BROKER_CONFIG, _parse_layer(self.dynamic, dynamic=True)),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, _parse_layer(self.dynamic_default, dynamic=True)),
            (ConfigSource.STATIC_BROKER_CONFIG, _parse_layer(self.static, dynamic=False)),
        )
        object.__setattr__(self, "_layers", layers)
        self._validate()

    def _validate(self) -> None:
        threads = self.log_cleaner_threads
        if (
            self.log_cleaner_enable
            and threads > 0
            and self.log_cleaner_dedupe_buffer_size // threads <= ONE_MIB
        ):
            raise ConfigError("log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
        load_factor = self.log_cleaner_io_buffer_load_factor
        if not 0.0 < load_factor <= 1.0:
            raise ConfigError(
                f"Invalid value {format_any(load_factor)} for configuration "
                "log.cleaner.io.buffer.load.factor: Value must be in (0, 1]"
            )
        validate_compaction_lags(
            self.get_int("log.cleaner.min.compaction.lag.ms"),
            self.get_int("log.cleaner.max.compaction.lag.ms"),
            "broker",
        )
        node_id, broker_id = self.lookup_set("node.id"), self.lookup_set("broker.id")
        if node_id is not None and broker_id is not None and node_id[0] != broker_id[0]:
            raise ConfigError(f"If node.id ({node_id[0]}) is set, broker.id ({broker_id[0]}) must match it")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """A config from ``server.properties``-style names and string values."""
        return cls(static=props)

    @classmethod
    def from_properties_file(cls, path: str | Path) -> BrokerConfig:
        return cls(static=parse_properties_file(path))

    def with_dynamic(self, updates: Mapping[str, str | None], *, cluster_default: bool = False) -> Self:
        """A copy with dynamic updates applied (``None`` removes a key); validated as a whole."""
        layer = dict(self.dynamic_default if cluster_default else self.dynamic)
        for name, value in updates.items():
            if value is None:
                layer.pop(name, None)
            else:
                layer[name] = value
        if cluster_default:
            new = dataclasses.replace(self, dynamic_default=layer)
        else:
            new = dataclasses.replace(self, dynamic=layer)
        validate_dynamic_update(self, new)
        return new

    @staticmethod
    def validate_dynamic_update(current: BrokerConfig, new: BrokerConfig) -> None:
        validate_dynamic_update(current, new)

    # ---- lookups -------------------------------------------------------------------------

    def lookup_set(self, name: str) -> tuple[ConfigValue, ConfigSource] | None:
        """The value of ``name`` from the highest layer that sets it, or None if none does."""
        for source, values in self._layers:
            if name in values:
                return values[name], source
        return None

    def layer_values(self, name: str) -> list[tuple[ConfigValue, ConfigSource]]:
        """Every layer that sets ``name``, highest first, then the default if there is one."""
        found = [(values[name], source) for source, values in self._layers if name in values]
        definition = BROKER_CONFIGS[name]
        if definition.default is not None:
            found.append((definition.default, ConfigSource.DEFAULT_CONFIG))
        return found

    def lookup(self, name: str) -> tuple[ConfigValue, ConfigSource]:
        """Effective value and source of a broker config (the default when nothing sets it)."""
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise _unknown_broker_config(name)
        found = self.lookup_set(name)
        return found if found is not None else (definition.default, ConfigSource.DEFAULT_CONFIG)

    def definition(self, name: str) -> ConfigDef:
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise _unknown_broker_config(name)
        return definition

    def get(self, name: str) -> ConfigValue:
        return self.lookup(name)[0]

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"Configuration {name} has no integer value ({value!r})")
        return value

    def get_float(self, name: str) -> float:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"Configuration {name} has no numeric value ({value!r})")
        return float(value)

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        if not isinstance(value, bool):
            raise ConfigError(f"Configuration {name} has no boolean value ({value!r})")
        return value

    def get_str(self, name: str) -> str | None:
        value = self.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"Configuration {name} has no string value ({value!r})")
        return value

    def get_list(self, name: str) -> tuple[str, ...]:
        value = self.get(name)
        if not isinstance(value, tuple):
            raise ConfigError(f"Configuration {name} has no list value ({value!r})")
        return value

    def deprecation_warnings(self) -> list[str]:
        """Human-readable warnings for configs that are set but deprecated."""
        warnings = []
        if self.lookup_set("log.cleaner.enable") is not None:
            warnings.append(
                "log.cleaner.enable is deprecated (Kafka 4.4) and will be removed; compacted topics "
                "need the cleaner, and with it disabled they are never compacted or retained."
            )
        return warnings

    def inert_configs(self) -> list[str]:
        """The Kafka broker configs set in ``server.properties`` that kompakt does not act on."""
        return sorted(name for name in self.static if name in INERT_BROKER_CONFIGS)

    def inert_config_warning(self) -> str | None:
        """``kompakt serve``'s one warning line about them, or None when there are none."""
        names = self.inert_configs()
        if not names:
            return None
        return (
            f"kompakt accepts but does not act on these Kafka broker configs: {', '.join(names)} "
            "(DescribeConfigs documents each one)"
        )

    def log_config(self) -> LogConfig:
        """The topic config a topic without overrides gets on this broker."""
        return LogConfig.from_overrides({}, self)

    # ---- typed accessors for the configs the broker and cleaner read ---------------------

    @property
    def log_cleaner_enable(self) -> bool:
        return self.get_bool("log.cleaner.enable")

    @property
    def log_cleaner_threads(self) -> int:
        return self.get_int("log.cleaner.threads")

    @property
    def log_cleaner_dedupe_buffer_size(self) -> int:
        return self.get_int("log.cleaner.dedupe.buffer.size")

    @property
    def log_cleaner_io_buffer_load_factor(self) -> float:
        return self.get_float("log.cleaner.io.buffer.load.factor")

    @property
    def log_cleaner_io_buffer_size(self) -> int:
        return self.get_int("log.cleaner.io.buffer.size")

    @property
    def log_cleaner_io_max_bytes_per_second(self) -> float:
        return self.get_float("log.cleaner.io.max.bytes.per.second")

    @property
    def log_cleaner_backoff_ms(self) -> int:
        return self.get_int("log.cleaner.backoff.ms")

    @property
    def message_max_bytes(self) -> int:
        return self.get_int("message.max.bytes")

    @property
    def fetch_max_bytes(self) -> int:
        return self.get_int("fetch.max.bytes")

    @property
    def log_retention_check_interval_ms(self) -> int:
        return self.get_int("log.retention.check.interval.ms")

    @property
    def producer_id_expiration_ms(self) -> int:
        return self.get_int("producer.id.expiration.ms")

    @property
    def node_id(self) -> int:
        """``node.id``, or the older ``broker.id`` when only that one is set."""
        if self.lookup_set("node.id") is None and self.lookup_set("broker.id") is not None:
            return self.get_int("broker.id")
        return self.get_int("node.id")

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self.get_int("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    @property
    def delete_topic_enable(self) -> bool:
        return self.get_bool("delete.topic.enable")

    @property
    def offsets_topic_num_partitions(self) -> int:
        return self.get_int("offsets.topic.num.partitions")


def validate_dynamic_update(current: BrokerConfig, new: BrokerConfig) -> None:
    """Kafka's rule for changing ``log.cleaner.threads`` at runtime (≥1, ≥ current/2, ≤ current×2)."""
    current_threads, new_threads = current.log_cleaner_threads, new.log_cleaner_threads
    if new_threads == current_threads:
        return
    if new_threads < 1:
        raise ConfigError("Log cleaner threads should be at least 1")
    if new_threads < current_threads // 2:
        raise ConfigError(
            f"Log cleaner threads cannot be reduced to less than half the current value {current_threads}"
        )
    if new_threads > current_threads * 2:
        raise ConfigError(
            f"Log cleaner threads cannot be increased to more than double the current value {current_threads}"
        )
