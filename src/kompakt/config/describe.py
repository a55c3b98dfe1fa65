"""DescribeConfigs views of topic, broker and group configs, with Kafka's sources and synonyms.

For a topic config the synonym list is, in order: the topic override (``TOPIC_CONFIG``), then
for each broker synonym in priority order its dynamic per-broker, dynamic cluster-default and
static values, then its default (``DEFAULT_CONFIG``) when it has one. The entry's source is the
first synonym's source; its value is the effective topic value (in the topic's unit, e.g.
``segment.ms`` in ms even when ``log.roll.hours`` supplied it). Broker configs work the same way
over the broker's own synonym groups (``log.roll.ms`` then ``log.roll.hours``).
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
    for synonym in tdef.synonyms:
        synonyms.extend(_broker_synonyms(broker, synonym.name))
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
    """``log.roll.ms`` -> (``log.roll.ms``, ``log.roll.hours``): lower-priority forms follow."""
    groups: dict[str, tuple[str, ...]] = {}
    for tdef in TOPIC_CONFIG_DEFS:
        names = tuple(s.name for s in tdef.synonyms)
        for index, name in enumerate(names):
            groups[name] = names[index:]
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
        value, own_source = broker.lookup(name)
        synonyms: list[ConfigSynonym] = []
        for synonym_name in _BROKER_GROUPS.get(name, (name,)):
            synonyms.extend(_broker_synonyms(broker, synonym_name))
        source = synonyms[0].source if synonyms else own_source
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
