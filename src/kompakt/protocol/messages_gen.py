"""Writes :mod:`kompakt.protocol.messages`: the typed union of every served version of each API.

``python -m kompakt.protocol.messages_gen`` rewrites every module for the versions it already
covers (after a kio upgrade or a change here); ``python -m kompakt.protocol.messages_gen fetch 4 13``
(re)writes one API's module for a new version range, which the handler's ``SPEC`` must then
match (``kompakt.broker.dispatch`` refuses a handler whose versions differ from its module's).

The rules, per entity (kio's classes of one name across the versions):

* a field is in the union when any served version has it; its type is kio's, with ``| None``
  when any version has it nullable;
* request side (a ``Protocol``): a field that some served version lacks gets the value Kafka
  assumes for it there: kio's default (the schema's ``default``), else the zero of its type;
* response side (a :class:`~kompakt.protocol.messages.Message`): a field every served version
  requires has no default; one with the same default wherever it exists (kio's default, ``None``
  when nullable everywhere, ``0`` for ``throttle_time``) gets it; any other gets ``UNSET``: each
  version's own default, refused where that version requires the field.
  Plain values stand for kio's wrappers: ``int`` milliseconds for durations and timestamps, ``int``
  for error codes, any sequence for arrays.

Only kio's classes as :mod:`kompakt.protocol.codec` hands them out are read, so this module needs
no kio import of its own. The output is already in ``ruff format`` style (one parameter a line).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import enum
import re
import sys
import typing
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from types import NoneType, UnionType

from kompakt.protocol import codec
from kompakt.protocol.apis import VersionRange

PACKAGE_DIR = Path(__file__).resolve().parent / "messages"

_INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


@dataclass(slots=True)
class _Field:
    """One field of an entity, merged over the served versions."""

    name: str
    kafka_type: str | None  # None for a nested entity or an array of them
    entity: str | None  # the nested entity's name (generated), if any
    is_array: bool
    nullable_in: set[int] = field(default_factory=set)
    versions: set[int] = field(default_factory=set)
    #: version -> kio's default (MISSING when the field is required there)
    defaults: dict[int, object] = field(default_factory=dict)


@dataclass(slots=True)
class _Entity:
    name: str
    kio_name: str
    top_level: bool
    versions: set[int] = field(default_factory=set)
    fields: dict[str, _Field] = field(default_factory=dict)


def _unwrap(annotation: object) -> tuple[object, bool, bool]:
    """``(inner type, is_array, nullable)`` of a kio field annotation (as ``codec._plan`` reads it)."""
    nullable = False
    if typing.get_origin(annotation) in (UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not NoneType]
        nullable = True
        annotation = args[0]
    is_array = typing.get_origin(annotation) is tuple
    inner = typing.get_args(annotation)[0] if is_array else annotation
    if typing.get_origin(inner) in (UnionType, typing.Union):
        args = [a for a in typing.get_args(inner) if a is not NoneType]
        inner = args[0]
        if not is_array:
            nullable = True
    return inner, is_array, nullable


def _collect(
    cls: type, version: int, entities: dict[str, _Entity], rename: Mapping[str, str], top_level: bool
) -> str:
    """Merge kio's ``cls`` at ``version`` into ``entities`` (recursively); return its generated name."""
    name = rename.get(cls.__qualname__, cls.__qualname__)
    entity = entities.setdefault(name, _Entity(name, cls.__qualname__, top_level))
    entity.versions.add(version)
    hints = typing.get_type_hints(cls)
    previous: str | None = None
    for f in dataclasses.fields(cls):
        inner, is_array, nullable = _unwrap(hints[f.name])
        nested = None
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            nested = _collect(inner, version, entities, rename, top_level=False)
        merged = entity.fields.get(f.name)
        if merged is None:
            kafka_type = f.metadata.get("kafka_type") if nested is None else None
            merged = _Field(f.name, kafka_type, nested, is_array)
            entity.fields = _insert_after(entity.fields, previous, merged)
        elif (merged.entity, merged.is_array) != (nested, is_array):
            raise TypeError(f"{name}.{f.name} changes shape between versions")
        merged.versions.add(version)
        if nullable:
            merged.nullable_in.add(version)
        merged.defaults[version] = f.default if f.default is not MISSING else _default_factory(f)
        previous = f.name
    return name


def _default_factory(f: dataclasses.Field[object]) -> object:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _insert_after(fields: dict[str, _Field], previous: str | None, new: _Field) -> dict[str, _Field]:
    """Keep the fields in schema order when an older version had a field the newer ones dropped."""
    items = list(fields.items())
    position = 0 if previous is None else [k for k, _ in items].index(previous) + 1
    items.insert(position, (new.name, new))
    return dict(items)


def _merge(api_key: int, versions: VersionRange, request: bool) -> dict[str, _Entity]:
    load = codec.request_class if request else codec.response_class
    entities: dict[str, _Entity] = {}
    for version in range(versions.min_version, versions.max_version + 1):
        _collect(load(api_key, version), version, entities, {}, top_level=True)
    return entities


def _version_note(present: set[int], versions: VersionRange, within: set[int] | None = None) -> str:
    """``v5+``, ``v0-3``, or ``v1, v4`` for what some served versions lack ("" when all have it).

    ``within``: the versions of the entity holding a field, so a field is not flagged for the
    versions that lack its whole entity.
    """
    served = set(range(versions.min_version, versions.max_version + 1)) if within is None else within
    if present >= served:
        return ""
    low, high = min(present), max(present)
    if present == set(range(low, high + 1)):
        return f"v{low}+" if high == versions.max_version else f"v{low}-{high}"
    return ", ".join(f"v{v}" for v in sorted(present))


# --------------------------------------------------------------------------------------------------
# Types and values as source text


def _primitive(kafka_type: str | None, request: bool) -> str:
    if kafka_type in _INTS or kafka_type == "error_code":
        return "int"
    match kafka_type:
        case "bool":
            return "bool"
        case "string":
            return "str"
        case "bytes":
            return "bytes"
        case "float64":
            return "float"
        case "uuid":
            return "uuid.UUID"
        case "records":
            return "bytes" if request else "bytes | memoryview | FileRange"
        case "timedelta_i32" | "timedelta_i64":
            return "datetime.timedelta" if request else "int"
        case "datetime_i64":
            return "datetime.datetime" if request else "int"
    raise TypeError(f"unknown kafka type {kafka_type!r}")


def _annotation(f: _Field, request: bool) -> str:
    inner = f.entity if f.entity is not None else _primitive(f.kafka_type, request)
    text = inner
    if f.is_array:
        text = f"tuple[{inner}, ...]" if request else f"Sequence[{inner}]"
    # kio reads a uuid as nullable (the zero uuid is None); so does every records field.
    if f.nullable_in or f.kafka_type == "uuid":
        text = f"{text} | None"
    return text


def _literal(value: object, f: _Field, request: bool) -> str:
    """Source text of kio's default ``value`` as the generated field holds it."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, datetime.timedelta):
        ms = round(value.total_seconds() * 1000)
        if request:
            return f"datetime.timedelta(milliseconds={ms})" if ms else "datetime.timedelta(0)"
        return str(ms)
    if isinstance(value, enum.IntEnum | int):
        return str(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return repr(bytes(value))
    if isinstance(value, tuple) and not value:
        return "()"
    if isinstance(value, uuid.UUID):
        return f"uuid.UUID(int={value.int})"
    raise TypeError(f"{f.name}: no literal for default {value!r}")


def _zero(f: _Field, request: bool) -> str:
    """The value a request field has in a version that lacks it and that kio gives no default."""
    if f.is_array:
        return "()"
    if f.nullable_in or f.entity is not None or f.kafka_type in ("uuid", "records"):
        return "None"
    match f.kafka_type:
        case "bool":
            return "False"
        case "string":
            return '""'
        case "bytes":
            return 'b""'
        case "float64":
            return "0.0"
        case "timedelta_i32" | "timedelta_i64":
            return "datetime.timedelta(0)"
    return "0"


def _request_default(f: _Field, entity: _Entity) -> str | None:
    if f.versions >= entity.versions:
        return None
    given = {_literal(d, f, True) for d in f.defaults.values() if d is not MISSING}
    if len(given) > 1:
        raise TypeError(f"{entity.name}.{f.name}: defaults differ between versions: {sorted(given)}")
    return given.pop() if given else _zero(f, True)


def _response_default(f: _Field, entity: _Entity) -> str | None:
    """The default of a response field; ``None`` when it has none (required in every version)."""
    per_version: set[str] = set()
    for version in entity.versions:
        if version not in f.versions:
            continue
        default = f.defaults[version]
        if default is not MISSING and f.entity is not None and not f.is_array:
            return "UNSET"  # a nested entity's default (Fetch's diverging_epoch): kio's own value
        if default is not MISSING:
            per_version.add(_literal(default, f, False))
        elif version in f.nullable_in:
            per_version.add("None")
        elif f.name == "throttle_time":
            per_version.add("0")
        else:
            per_version.add("")  # required in this version
    if per_version == {""}:
        return None if f.versions >= entity.versions else "UNSET"
    if len(per_version) == 1:
        return per_version.pop()
    return "UNSET"


# --------------------------------------------------------------------------------------------------
# Rendering


def _class_doc(entity: _Entity, versions: VersionRange, request: bool) -> str:
    side = "request" if request else "response"
    note = _version_note(entity.versions, versions)
    span = f", {note}" if note else ""
    return f'"""Kafka\'s ``{entity.kio_name}`` ({side}{span})."""'


def _render_protocol(entity: _Entity, versions: VersionRange) -> list[str]:
    lines = [f"class {entity.name}(Protocol):", f"    {_class_doc(entity, versions, True)}", ""]
    for f in entity.fields.values():
        default = _request_default(f, entity)
        note = _version_note(f.versions, versions, entity.versions)
        comment = f"  # {note}" if note else ""
        value = f" = {default}" if default is not None else ""
        lines.append(f"    {f.name}: {_annotation(f, True)}{value}{comment}")
    return lines


def _render_message(entity: _Entity, versions: VersionRange) -> list[str]:
    names = list(entity.fields)
    lines = [f"class {entity.name}(Message):", f"    {_class_doc(entity, versions, False)}", ""]
    if not names:
        lines.append("    __slots__ = ()")
    elif len(names) == 1:
        lines.append(f"    __slots__ = ({names[0]!r},)".replace("'", '"'))
    else:
        lines.append("    __slots__ = (")
        lines.extend(f'        "{name}",' for name in names)
        lines.append("    )")
    lines.append("")
    for f in entity.fields.values():
        note = _version_note(f.versions, versions, entity.versions)
        comment = f"  # {note}" if note else ""
        lines.append(f"    {f.name}: {_annotation(f, False)}{comment}")
    lines.append("")
    if not names:
        lines.append("    def __init__(self) -> None:")
        lines.append("        pass")
        return lines
    lines.append("    def __init__(")
    lines.append("        self,")
    lines.append("        *,")
    for f in entity.fields.values():
        default = _response_default(f, entity)
        value = f" = {default}" if default is not None else ""
        lines.append(f"        {f.name}: {_annotation(f, False)}{value},")
    lines.append("    ) -> None:")
    lines.extend(f"        self.{name} = {name}" for name in names)
    return lines


def _ordered(entities: dict[str, _Entity]) -> list[_Entity]:
    """Top-level class first, then each nested entity after the one that holds it (depth first)."""
    result: list[_Entity] = []

    def visit(entity: _Entity) -> None:
        if entity in result:
            return
        result.append(entity)
        for f in entity.fields.values():
            if f.entity is not None:
                visit(entities[f.entity])

    for entity in entities.values():
        if entity.top_level:
            visit(entity)
    return result


def render(api_key: int, versions: VersionRange) -> str:
    """The source of the messages module of one API at ``versions``."""
    api = codec.api_name(api_key)
    requests = _merge(api_key, versions, request=True)
    responses = _merge(api_key, versions, request=False)
    # One module holds both sides; a nested name both use (ConsumerGroupHeartbeat's TopicPartitions)
    # is prefixed on the request side, which handlers only name in annotations.
    clashes = {name: f"Request{name}" for name in requests if name in responses}
    if clashes:
        requests = {}
        for version in range(versions.min_version, versions.max_version + 1):
            _collect(codec.request_class(api_key, version), version, requests, clashes, top_level=True)
    request_classes = _ordered(requests)
    response_classes = _ordered(responses)
    body: list[str] = []
    for entity in request_classes:
        body += ["", "", *_render_protocol(entity, versions)]
    for entity in response_classes:
        body += ["", "", *_render_message(entity, versions)]
    text = "\n".join(body) + "\n"
    title = "".join(part.capitalize() for part in api.split("_"))
    imports = ["from __future__ import annotations", ""]
    stdlib = [m for m in ("datetime", "uuid") if re.search(rf"\b{m}\.", text)]
    imports += [f"import {m}" for m in stdlib]
    if "Sequence[" in text:
        imports += ["from collections.abc import Sequence"]
    typing_names = ["Protocol"]
    if "FileRange" in text:
        typing_names = ["TYPE_CHECKING", "Protocol"]
    imports += [f"from typing import {', '.join(typing_names)}", ""]
    imports += ["from kompakt.protocol.apis import VersionRange"]
    message_names = (["UNSET"] if "UNSET" in text else []) + ["Message"]  # isort: constants first
    imports += [f"from kompakt.protocol.messages import {', '.join(message_names)}"]
    if "FileRange" in text:
        imports += ["", "if TYPE_CHECKING:", "    from kompakt.protocol.codec import FileRange"]
    header = [
        f'"""{title} ({api_key}), v{versions.min_version}-{versions.max_version}: '
        "the request as handlers read it, the response they build.",
        "",
        "Generated by ``python -m kompakt.protocol.messages_gen`` from kio's classes; do not edit.",
        '"""',
        "",
        *imports,
        "",
        f"API_KEY = {api_key}",
        f"VERSIONS = VersionRange({versions.min_version}, {versions.max_version})",
        "",
    ]
    footer = [
        "",
        "",
        f"REQUEST = {request_classes[0].name}",
        f"RESPONSE = {response_classes[0].name}",
        "",
    ]
    return "\n".join(header) + text + "\n".join(footer)


def module_path(api_key: int) -> Path:
    return PACKAGE_DIR / f"{codec.api_name(api_key)}.py"


def recorded_versions() -> dict[int, VersionRange]:
    """The API keys and ranges of the modules written so far, read from their text (not imported,
    so a module that no longer imports can still be rewritten)."""
    found: dict[int, VersionRange] = {}
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        text = path.read_text()
        key = re.search(r"^API_KEY = (\d+)$", text, re.MULTILINE)
        span = re.search(r"^VERSIONS = VersionRange\((\d+), (\d+)\)$", text, re.MULTILINE)
        if key and span:
            found[int(key.group(1))] = VersionRange(int(span.group(1)), int(span.group(2)))
    return found


def _api_key(name: str) -> int:
    for key in range(200):
        if codec.api_name(key) == name:
            return key
    raise SystemExit(f"unknown api {name!r} (kio's names, e.g. create_topics)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kompakt.protocol.messages_gen", description=__doc__)
    parser.add_argument("api", nargs="?", help="kio's name of one API to (re)write, e.g. fetch")
    parser.add_argument("min_version", nargs="?", type=int)
    parser.add_argument("max_version", nargs="?", type=int)
    args = parser.parse_args(argv)
    targets = recorded_versions()
    if args.api is not None:
        if args.min_version is None or args.max_version is None:
            parser.error("give the api's min_version and max_version")
        targets = {_api_key(args.api): VersionRange(args.min_version, args.max_version)}
    for key, versions in sorted(targets.items()):
        module_path(key).write_text(render(key, versions))
        sys.stdout.write(f"wrote {module_path(key)} (v{versions.min_version}-{versions.max_version})\n")


if __name__ == "__main__":
    main()
