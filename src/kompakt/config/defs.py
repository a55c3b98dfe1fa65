"""Kafka's config machinery in miniature: types, parsing, validators and value formatting.

A config value travels as a string (server.properties, CreateTopics, AlterConfigs) and is parsed
by its :class:`ConfigType` the way Kafka's ``ConfigDef`` does: surrounding spaces trimmed,
booleans ``true``/``false`` in any case, ``INT`` in 32 bits, ``LONG`` in 64 bits, ``LIST``
split on commas with spaces around each element trimmed (the empty string is the empty list).
Values are formatted back exactly as Kafka shows them in DescribeConfigs: lists joined with
``,``, doubles in Java's ``Double.toString`` form (``0.5``, ``1.7976931348623157E308``).

Errors carry Kafka's ``ConfigException`` wording:
``Invalid value <value> for configuration <name>: <reason>``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from pathlib import Path
from typing import Protocol

from kompakt.errors import ConfigError

#: Java's bounds (``Integer.MAX_VALUE``, ``Long.MAX_VALUE``...): Kafka's INT and LONG configs, and
#: the "no limit" of its ``Long.MAX_VALUE`` defaults. The one definition kompakt has of each.
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
DOUBLE_MAX = 1.7976931348623157e308

ConfigValue = bool | int | float | str | tuple[str, ...] | None


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ``ConfigType`` ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


BOOL, STR, INT, LONG, DBL, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)


class ConfigSource(IntEnum):
    """Where a config value came from, with Kafka's DescribeConfigs ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    #: A group config resource's own value (KIP-848's ``consumer.session.timeout.ms`` and friends).
    GROUP_CONFIG = 8


def invalid(name: str, value: object, reason: str) -> ConfigError:
    """Build an error worded like Kafka's ``ConfigException(name, value, message)``."""
    return ConfigError(f"Invalid value {format_any(value)} for configuration {name}: {reason}")


def java_double_str(value: float) -> str:
    """Format a double as Java's ``Double.toString`` does (shortest round-trip digits).

    Java uses plain notation for magnitudes in [10^-3, 10^7) and ``d.dddE<exp>`` otherwise, always
    with at least one digit after the point.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(value)
        if "e" in text:  # repr never does this in this range, but stay safe
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digit_tuple).rstrip("0") or "0"
    scientific_exponent = len(digit_tuple) + exponent - 1
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{scientific_exponent}"


def format_any(value: object) -> str:
    """Format a parsed value (or a raw string) as Kafka prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, tuple | list | frozenset):
        return ",".join(str(v) for v in value)
    return str(value)


class Validator(Protocol):
    """Checks a parsed value; raises :class:`ConfigError` naming the config."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None: ...


@dataclass(frozen=True, slots=True)
class Range:
    """Kafka's ``Range.atLeast``/``between``; bounds keep their Java type when printed."""

    min: int | float | None = None
    max: int | float | None = None

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return
        if self.min is not None and value < self.min:
            raise invalid(name, value, f"Value must be at least {format_any(self.min)}")
        if self.max is not None and value > self.max:
            raise invalid(name, value, f"Value must be no more than {format_any(self.max)}")


@dataclass(frozen=True, slots=True)
class ValidString:
    """One of a fixed set of strings (case-sensitive, as Kafka's ``ValidString``)."""

    allowed: tuple[str, ...]

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is not None and value not in self.allowed:
            raise invalid(name, value, f"String must be one of: {', '.join(self.allowed)}")


@dataclass(frozen=True, slots=True)
class ValidList:
    """Every element in a fixed set; ``case_insensitive`` for ``cleanup.policy``."""

    allowed: tuple[str, ...]
    case_insensitive: bool = False

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, tuple):
            return
        for element in value:
            probe = element.lower() if self.case_insensitive else element
            if probe not in self.allowed:
                raise invalid(name, element, f"String must be one of: {', '.join(self.allowed)}")


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """``*`` or ``partition:broker`` pairs, as Kafka's throttled-replicas list validator."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, tuple) or value == ("*",):
            return
        for element in value:
            if not re.fullmatch(r"\d+:\d+", element):
                raise invalid(
                    name,
                    value,
                    "must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
                )


@dataclass(frozen=True, slots=True)
class GzipLevel:
    """``compression.gzip.level``: -1 (the codec's default) or 1..9."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, int) and value != -1 and not 1 <= value <= 9:
            raise invalid(name, value, "Value must be between 1 and 9 or equal to -1")


_INTEGER_RE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config: Kafka's name, type, default (already parsed; None = no default) and rules."""

    name: str
    type: ConfigType
    default: ConfigValue
    doc: str
    validator: Validator | None = None
    dynamic: bool = True

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate a string value; errors name this config."""
        value = parse_typed(self.name, self.type, raw)
        if self.validator is not None:
            self.validator.ensure_valid(self.name, value)
        return value

    def format(self, value: ConfigValue) -> str | None:
        """The string Kafka would show for ``value`` (None stays None; passwords are hidden)."""
        if value is None or self.type is ConfigType.PASSWORD:
            return None
        return format_any(value)


def define(
    name: str,
    kind: ConfigType,
    default: ConfigValue,
    doc: str,
    validator: Validator | None = None,
    dynamic: bool = True,
) -> ConfigDef:
    """One broker config (Kafka's ``ConfigDef.define``); the owner tables are lists of these."""
    return ConfigDef(name, kind, default, doc, validator, dynamic)


def int_value(name: str, value: ConfigValue) -> int:
    """``value`` as the int it must be (a typed setting reading its table's default)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} has no integer value ({value!r})")
    return value


def float_value(name: str, value: ConfigValue) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} has no numeric value ({value!r})")
    return float(value)


def bool_value(name: str, value: ConfigValue) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} has no boolean value ({value!r})")
    return value


def str_value(name: str, value: ConfigValue) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} has no string value ({value!r})")
    return value


def list_value(name: str, value: ConfigValue) -> tuple[str, ...]:
    if not isinstance(value, tuple):
        raise TypeError(f"{name} has no list value ({value!r})")
    return value


class Lookup(Protocol):
    """What a cross-field rule reads: a broker config's typed values (:class:`BrokerConfig`).

    The owners' rules (``log_defs``, ``group_defs``, ``server_defs``) sit below the broker config
    that runs them, so they read it through this protocol rather than importing it.
    """

    def get_int(self, name: str) -> int: ...

    def get_float(self, name: str) -> float: ...

    def get_bool(self, name: str) -> bool: ...

    def get_list(self, name: str) -> tuple[str, ...]: ...

    def get_str(self, name: str) -> str | None: ...

    def lookup_set(self, name: str) -> tuple[ConfigValue, ConfigSource] | None: ...


def parse_typed(name: str, config_type: ConfigType, raw: str) -> ConfigValue:
    """Parse one raw string by type, with Kafka's error wording."""
    text = raw.strip()
    if config_type is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise invalid(name, raw, "Expected value to be either true or false")
    if config_type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        bounds = {
            ConfigType.INT: (INT_MIN, INT_MAX),
            ConfigType.SHORT: (-(2**15), 2**15 - 1),
            ConfigType.LONG: (LONG_MIN, LONG_MAX),
        }[config_type]
        if _INTEGER_RE.fullmatch(text) and bounds[0] <= int(text) <= bounds[1]:
            return int(text)
        raise invalid(name, raw, f"Not a number of type {config_type.name}")
    if config_type is ConfigType.DOUBLE:
        try:
            if "_" in text:
                raise ValueError(text)
            return float(text)
        except ValueError:
            raise invalid(name, raw, "Not a number of type DOUBLE") from None
    if config_type is ConfigType.LIST:
        return tuple(part.strip() for part in text.split(",")) if text else ()
    return text


def closest(name: str, candidates: Sequence[str]) -> str | None:
    """The most similar known name, for "did you mean" hints."""
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def parse_properties_text(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``#``/``!`` comments, ``=``/``:``/space separators,
    backslash line continuations and the common escapes."""
    props: dict[str, str] = {}
    logical = ""
    for physical in text.splitlines():
        line = physical.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _ends_with_odd_backslashes(line):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _ends_with_odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key = line[:index]
    rest = line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        nxt = text[index + 1]
        if nxt == "u" and index + 6 <= len(text):
            out.append(chr(int(text[index + 2 : index + 6], 16)))
            index += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        index += 2
    return "".join(out)


def parse_properties_file(path: str | Path) -> dict[str, str]:
    """Read a ``server.properties`` file (ISO-8859-1 text, as Java reads it; UTF-8 accepted)."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_properties_text(text)
