"""DescribeConfigs views of topic, broker and group configs, with Kafka's sources and synonyms.

For a topic config the synonym list is, in order: the topic override (``TOPIC_CONFIG``), then
the broker synonyms as Kafka's ``ConfigHelper.configSynonyms`` lists them: layer by layer
(dynamic per-broker, dynamic cluster-default, static, default), within a layer the names in
priority order (``log.roll.ms`` before ``log.roll.hours``), and then everything before the first
entry of the primary name dropped. So ``segment.ms`` on a broker that leaves ``log.roll.ms``
unset lists no broker synonym at all, exactly as Kafka 4.1 does. The entry's source is the first
synonym's source (``DEFAULT_CONFIG`` when there is none); its value is the effective topic value
(in the topic's unit, e.g. ``segment.ms`` in ms even when ``log.roll.hours`` supplied it).
Broker configs work the same way over the broker's whole synonym group, the primary name being
the described config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigSource, ConfigType, ConfigValue
from kompakt.config.group_defs import GROUP_CONFIGS, group_config_values
from kompakt.config.tables import BROKER_CONFIGS, INTERNAL_BROKER_NAMES, TOPIC_CONFIG_DEFS, TopicConfigDef
from kompakt.config.topic import parse_topic_overrides, resolve_topic_value


class ConfigSynonym(NamedTuple):
    """One place a config's value could come from."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigEntry:
    """One row of a DescribeConfigs result."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: ConfigType
    documentation: str


def _broker_synonyms(broker: BrokerConfig | None, name: str) -> list[ConfigSynonym]:
    definition = BROKER_CONFIGS[name]
    layers: list[tuple[ConfigValue, ConfigSource]]
    if broker is None:
        layers = [] if definition.default is None else [(definition.default, ConfigSource.DEFAULT_CONFIG)]
    else:
        layers = broker.layer_values(name)
    return [ConfigSynonym(name, definition.format(value), source) for value, source in layers]


_LAYER_ORDER = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DEFAULT_CONFIG,
)


def _kafka_synonyms(broker: BrokerConfig | None, names: tuple[str, ...], primary: str) -> list[ConfigSynonym]:
    """``ConfigHelper.configSynonyms``: ``names``' values layer by layer, then the entries before
    the first one of ``primary`` dropped (Kafka drops listener overrides that way, and with them
    e.g. ``log.roll.hours`` when ``log.roll.ms`` has no value)."""
    per_name = {name: _broker_synonyms(broker, name) for name in names}
    ordered = [s for source in _LAYER_ORDER for name in names for s in per_name[name] if s.source is source]
    while ordered and ordered[0].name != primary:
        ordered.pop(0)
    return ordered


def _topic_entry(
    tdef: TopicConfigDef, overrides: Mapping[str, str], broker: BrokerConfig | None
) -> ConfigEntry:
    parsed = parse_topic_overrides({k: v for k, v in overrides.items() if k == tdef.name})
    value, _ = resolve_topic_value(tdef, parsed, broker)
    definition = tdef.definition
    synonyms: list[ConfigSynonym] = []
    if tdef.name in parsed:
        synonyms.append(
            ConfigSynonym(tdef.name, definition.format(parsed[tdef.name]), ConfigSource.TOPIC_CONFIG)
        )
    names = tuple(synonym.name for synonym in tdef.synonyms)
    if names:
        synonyms.extend(_kafka_synonyms(broker, names, names[0]))
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(
        name=tdef.name,
        value=definition.format(value),
        source=source,
        is_default=source is ConfigSource.DEFAULT_CONFIG,
        read_only=False,
        sensitive=definition.type is ConfigType.PASSWORD,
        synonyms=tuple(synonyms),
        type=definition.type,
        documentation=definition.doc,
    )


def describe_topic_config(
    overrides: Mapping[str, str], broker: BrokerConfig | None = None
) -> list[ConfigEntry]:
    """Every topic config of a topic with ``overrides`` on ``broker``, sorted by name.

    An internal config (``internal.segment.bytes``) is listed only when the topic sets it, as
    Kafka's ``ConfigHelper`` lists a config's originals plus its non-internal values."""
    parse_topic_overrides(overrides)  # reject unknown or invalid overrides before describing
    return [
        _topic_entry(tdef, overrides, broker)
        for tdef in sorted(TOPIC_CONFIG_DEFS, key=lambda d: d.name)
        if not tdef.internal or tdef.name in overrides
    ]


def _broker_groups() -> dict[str, tuple[str, ...]]:
    """``log.roll.hours`` -> (``log.roll.ms``, ``log.roll.hours``): the whole synonym group in
    priority order (``DynamicBrokerConfig.brokerConfigSynonyms``)."""
    groups: dict[str, tuple[str, ...]] = {}
    for tdef in TOPIC_CONFIG_DEFS:
        names = tuple(s.name for s in tdef.synonyms)
        for name in names:
            groups[name] = names
    return groups


_BROKER_GROUPS = _broker_groups()


def describe_broker_config(broker: BrokerConfig) -> list[ConfigEntry]:
    """Every broker config, sorted by name; dynamic keys are the ones not read-only.

    Kafka's internal configs are left out unless set, as Kafka's ``ConfigHelper.allConfigs``
    lists only non-internal values and the originals.
    """
    entries = []
    for name in sorted(BROKER_CONFIGS):
        definition = BROKER_CONFIGS[name]
        if name in INTERNAL_BROKER_NAMES and broker.lookup_set(name) is None:
            continue
        value, _ = broker.lookup(name)
        synonyms = _kafka_synonyms(broker, _BROKER_GROUPS.get(name, (name,)), name)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=definition.format(value),
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                read_only=not definition.dynamic,
                sensitive=definition.type is ConfigType.PASSWORD,
                synonyms=tuple(synonyms),
                type=definition.type,
                documentation=definition.doc,
            )
        )
    return entries


def describe_group_config(overrides: Mapping[str, str], broker: BrokerConfig) -> list[ConfigEntry]:
    """Every config of a group with ``overrides``, sorted by name (Kafka's
    ``ConfigHelper.createGroupConfigEntry``).

    A group config's value is the group's own (source ``GROUP_CONFIG``) or else its default, which
    for the session timeouts, heartbeat intervals and record lock duration is the broker's
    ``group.*`` config of the same meaning (source ``DEFAULT_CONFIG`` all the same, as Kafka shows
    it). The one synonym is the entry itself: a group config has no broker synonyms.
    """
    values = group_config_values(overrides, broker)
    entries = []
    for name in sorted(GROUP_CONFIGS):
        definition = GROUP_CONFIGS[name]
        value = definition.format(values[name])
        source = ConfigSource.GROUP_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                sensitive=False,
                synonyms=(ConfigSynonym(name, value, source),),
                type=definition.type,
                documentation=definition.doc,
            )
        )
    return entries
