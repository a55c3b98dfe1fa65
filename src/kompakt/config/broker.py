"""The broker config (Kafka's ``KafkaConfig``): every broker config by name, in three layers.

A value is looked up in the layers dynamic per-broker, dynamic cluster default, static
``server.properties``, then the definition's default (:mod:`kompakt.config.tables`). Building one
parses every value and runs every owner's cross-field rules (the log's and cleaner's, the group
coordinator's, the server's), so an invalid configuration fails with a :class:`ConfigError`
before the broker opens anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar, Self

from kompakt.config.defs import (
    ConfigDef,
    ConfigSource,
    ConfigValue,
    closest,
    parse_properties_file,
)
from kompakt.config.group_defs import check_group_rules
from kompakt.config.listener_defs import LISTENER_PREFIX
from kompakt.config.log_defs import DYNAMIC_CLEANER_KEYS, check_log_rules
from kompakt.config.server_defs import check_server_rules
from kompakt.config.tables import BROKER_CONFIGS, INERT_BROKER_CONFIGS, LISTENER_ONLY_BROKER_NAMES
from kompakt.errors import ConfigError

__all__ = ["BrokerConfig", "validate_dynamic_update"]


def _unknown_broker_config(name: str) -> ConfigError:
    suggestion = closest(name, list(BROKER_CONFIGS))
    hint = f" (did you mean {suggestion}?)" if suggestion else ""
    return ConfigError(f"Unknown broker config name: {name}{hint}")


def listener_prefixed(name: str) -> ConfigDef | None:
    """The definition behind a per-listener name (Kafka's ``listener.name.<listener>.<config>``,
    or ``listener.name.<listener>.<mechanism>.<config>`` for SASL), or None if ``name`` is not one.

    Kafka keeps such names as they are and resolves them per listener; so does kompakt
    (:mod:`kompakt.config.listeners`). The value is parsed and validated as its base config.
    """
    if not name.startswith(LISTENER_PREFIX):
        return None
    _, sep, rest = name[len(LISTENER_PREFIX) :].partition(".")
    if not sep:
        return None
    definition = BROKER_CONFIGS.get(rest)
    if definition is None:
        _, sep, base = rest.partition(".")
        definition = BROKER_CONFIGS.get(base) if sep else None
    # Errors name the prefixed config, the line the operator wrote.
    return dataclasses.replace(definition, name=name) if definition is not None else None


def _parse_layer(layer: Mapping[str, str], dynamic: bool) -> dict[str, ConfigValue]:
    """Parse one layer; a dynamic layer takes only what Kafka lets AlterConfigs change
    (``DynamicBrokerConfig.validateConfigs``: dynamic configs, SSL ones only per listener)."""
    parsed: dict[str, ConfigValue] = {}
    not_dynamic = []
    listener_only = []
    for name, raw in layer.items():
        definition = BROKER_CONFIGS.get(name) or listener_prefixed(name)
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
        """Every owner's cross-field rules, on the merged layers (Kafka checks them when it
        builds ``KafkaConfig`` and its owners' configs, before anything starts)."""
        check_log_rules(self)
        check_server_rules(self)
        check_group_rules(self)

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
        """Human-readable warnings for configs that are set but deprecated.

        ``log.cleaner.enable=true`` (a line many Kafka server.properties carry) says what the
        default already does, so it passes silently; only ``false`` changes anything, and only
        that is worth a warning."""
        warnings = []
        if self.lookup_set("log.cleaner.enable") is not None and not self.log_cleaner_enable:
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
