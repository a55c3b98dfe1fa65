"""A topic's config values from its overrides and the broker: Kafka's per-key resolution.

A topic's effective value is resolved per key, in Kafka's order: the topic override, then the
broker synonyms in priority order (``log.roll.ms`` before ``log.roll.hours``), each looked up in
the broker's layers (dynamic per-broker, dynamic cluster default, static ``server.properties``),
then the built-in default. The typed view the storage runs with is
:class:`kompakt.log.config.LogConfig` (Kafka keeps ``LogConfig`` in its storage module too);
DescribeConfigs shows the same resolution with every synonym (:mod:`kompakt.config.describe`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigSource, ConfigValue, closest
from kompakt.config.log_defs import TOPIC_CONFIGS, TOPIC_NAME_OF_BROKER_SYNONYM, TopicConfigDef
from kompakt.errors import ConfigError

__all__ = ["parse_topic_overrides", "resolve_topic_value"]


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
