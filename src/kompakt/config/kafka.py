"""Every Kafka 4.1 broker config, as data: names, types, defaults, validators and documentation.

``kafka_broker_configs.json`` beside this module is a dump of Kafka 4.1.2's broker config
definition (``AbstractKafkaConfig.CONFIG_DEF``) with the dynamic ones marked
(``DynamicBrokerConfig.AllDynamicConfigs``); its ``how`` field says exactly what was read. kompakt
defines the configs it acts on itself (:mod:`kompakt.config.tables`, with its own wording and
validators); every other Kafka name comes from here, so that a ``server.properties`` written for
Kafka, and AlterConfigs or DescribeConfigs from Kafka tools, work name for name. Those configs
change nothing in kompakt, and their DescribeConfigs documentation starts by saying so.

Validators are rebuilt from their Kafka ``toString`` forms: ``[min,...]``, ``[min,...,max]``,
``[a, b]`` (one of, for strings and lists), ``(case insensitive) [a, b]``, ``non-empty string``,
``non-empty list`` and ``non-null string``; those are all the forms the dump contains.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from kompakt.config.defs import (
    ConfigDef,
    ConfigType,
    ConfigValue,
    Range,
    Validator,
    ValidList,
    ValidString,
    invalid,
    parse_typed,
)

DATA_FILE = "kafka_broker_configs.json"
#: How the documentation of a config kompakt accepts but does not act on begins.
NOT_ACTED_ON = "kompakt accepts this Kafka broker config but does not act on it."


@dataclass(frozen=True, slots=True)
class KafkaBrokerConfig:
    """One entry of the dump."""

    name: str
    type: ConfigType
    #: Kafka's default as DescribeConfigs prints it; ``None`` for no default or a null one.
    default: str | None
    validator: str | None
    dynamic: bool
    #: SSL configs Kafka changes at runtime only per listener (``listener.name.<l>.<config>``).
    listener_only: bool
    #: Kafka's internal configs: accepted, but DescribeConfigs lists them only when set.
    internal: bool
    documentation: str


@functools.cache
def kafka_broker_configs() -> dict[str, KafkaBrokerConfig]:
    """The dump, by name (read once)."""
    # A plain path, not importlib.resources (which imports zipfile: 20 ms on every start).
    document = json.loads(Path(__file__).with_name(DATA_FILE).read_text(encoding="utf-8"))
    return {
        entry["name"]: KafkaBrokerConfig(
            name=entry["name"],
            type=ConfigType[entry["type"]],
            default=entry["default"],
            validator=entry["validator"],
            dynamic=entry["dynamic"],
            listener_only=entry["listener_only"],
            internal=entry["internal"],
            documentation=entry["documentation"],
        )
        for entry in document["configs"]
    }


@dataclass(frozen=True, slots=True)
class CaseInsensitiveValidString:
    """Kafka's ``CaseInsensitiveValidString``."""

    allowed: tuple[str, ...]

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, str) and value.upper() not in {a.upper() for a in self.allowed}:
            raise invalid(name, value, f"String must be one of (case insensitive): {', '.join(self.allowed)}")


@dataclass(frozen=True, slots=True)
class NonEmptyString:
    """Kafka's ``NonEmptyString``."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, str) and not value.strip():
            raise invalid(name, value, "String must be non-empty")


@dataclass(frozen=True, slots=True)
class NonEmptyList:
    """Kafka's non-empty list validators (``QuorumConfig`` and the like)."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, tuple) and not value:
            raise invalid(name, "", "Empty list is not allowed")


_RANGE = re.compile(r"\[(?P<min>[^,\]]+)?,\.\.\.(?:,(?P<max>[^\]]+))?\]")
_RANGE_MAX_ONLY = re.compile(r"\[\.\.\.,(?P<max>[^\]]+)\]")


def _number(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eE") else int(text)


def validator_from(text: str | None, config_type: ConfigType) -> Validator | None:
    """A validator from Kafka's ``Validator.toString`` (see the module docstring for the forms)."""
    if text is None or text == "non-null string":
        return None
    if text == "non-empty string":
        return NonEmptyString()
    if text == "non-empty list":
        return NonEmptyList()
    match = _RANGE.fullmatch(text)
    if match:
        return Range(_number(match["min"]), _number(match["max"]) if match["max"] else None)
    match = _RANGE_MAX_ONLY.fullmatch(text)
    if match:
        return Range(None, _number(match["max"]))
    case_insensitive = text.startswith("(case insensitive) ")
    body = text.removeprefix("(case insensitive) ")
    if body.startswith("[") and body.endswith("]"):
        allowed = tuple(part.strip() for part in body[1:-1].split(","))
        if case_insensitive:
            return CaseInsensitiveValidString(allowed)
        return ValidList(allowed) if config_type is ConfigType.LIST else ValidString(allowed)
    raise ValueError(f"unknown Kafka validator form {text!r}")


def config_def_of(entry: KafkaBrokerConfig) -> ConfigDef:
    """A :class:`ConfigDef` for a Kafka config kompakt does not act on."""
    default = None if entry.default is None else parse_typed(entry.name, entry.type, entry.default)
    return ConfigDef(
        entry.name,
        entry.type,
        default,
        f"{NOT_ACTED_ON} Kafka: {entry.documentation}",
        validator_from(entry.validator, entry.type),
        entry.dynamic,
    )
