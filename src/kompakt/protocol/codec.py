"""The kio adapter: the only module in kompakt that imports ``kio`` (pinned to 0.6.5).

Everything else reaches kio's generated message classes through the names re-exported here, so a kio
upgrade (which has broken its API between minors before) touches one file.

Decoding (:func:`decode_request`): peek the api key and version *before* loading a schema, so an
unsupported version is refused with the right correlation id; then check every length and count in
the frame against the bytes that are there (:mod:`kompakt.protocol.bounds`, with a layout compiled
here once per api key and version from kio's classes), and only then read the header and the body
with kio's native readers. The check comes first because kio sizes an array from its count before
reading it, and a failed allocation aborts the process instead of raising. Anything that does not
decode (short buffers, bad lengths, unknown tagged fields, which kio 0.6.5 rejects with a
``KeyError`` although the protocol says to skip them) becomes :class:`MalformedRequest`; the
boundary catches broadly on purpose, because kio's native reader can raise a variety of exception
types on hostile input.

Encoding (:func:`encode_response`): kio's writers call ``write(chunk)`` repeatedly; a list-collecting
writer keeps record memoryviews as they are (no copy) and the server hands the list to
``transport.writelines``. A records field may also hold a :class:`FileRange` (a byte range of a
segment file): kio only takes its ``len()`` and passes it on to ``write``, so it lands in the chunk
list as it is and the server sends it from the file (``sendfile``, or a page-cache read and a
write to a peer on the same host). The response header version comes from the
response class (``__header_schema__``), which already knows that ApiVersions always answers with
header v0.

The typed seam (:func:`request_view`, :func:`from_message`): one handler body serves every version
of its API. It reads the request as its API's view in :mod:`kompakt.protocol.messages` (the decoded
kio object itself when its version has every field, a filled-in copy otherwise) and answers with
that module's response classes, which hold the union of the fields of every served version; the
builder keeps only the fields the target version has and converts plain values (``int`` error
codes, millisecond durations and timestamps) to kio's types.

Building from mappings (:func:`build`), for clients, tests and generic error answers: the same
conversion from nested mappings, where a key that *no* version of the message has is refused (a
misspelling), and a key only other versions have is dropped.
"""

# ruff: noqa: E402 - kio is imported after hiding hypothesis from it (see _hide_hypothesis)

from __future__ import annotations

import datetime
import difflib
import functools
import importlib
import pkgutil
import struct
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from types import ModuleType, NoneType, SimpleNamespace, UnionType
from typing import IO, Protocol, TypeAlias, TypeVar, cast


def _hide_hypothesis() -> bool:
    """Keep kio from registering hypothesis strategies for its types while it is first imported.

    kio does that whenever hypothesis (a test-only dependency of kompakt) can be imported, which
    costs about 0.2 s at every start of the broker and the CLI. A process that imported hypothesis
    before kio (the test suite, through the pytest plugin) keeps the strategies.
    """
    if "hypothesis" in sys.modules or "kio" in sys.modules:
        return False
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes ``import hypothesis`` fail
    return True


_HIDDEN = _hide_hypothesis()
try:
    import kio.static.primitive  # noqa: F401 - the module that looks for hypothesis
finally:
    if _HIDDEN:
        del sys.modules["hypothesis"]

from kio.index import load_request_schema as _load_request_schema
from kio.index import load_response_schema as _load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion as _ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as _ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial.readers import Reader
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

from kompakt.errors import KompaktError
from kompakt.protocol import bounds, produce_reader
from kompakt.protocol.apis import ApiKey, VersionRange
from kompakt.protocol.messages import UNSET, Message


@functools.cache
def load_request_schema(api_key: int, version: int) -> type[RequestPayload]:
    """kio's request class, memoised: kio resolves it by dotted name (``pkgutil``) on every call,
    about 20 µs a request on the hot path."""
    return _load_request_schema(api_key, version)


@functools.cache
def load_response_schema(api_key: int, version: int) -> type[ResponsePayload]:
    """kio's response class, memoised like :func:`load_request_schema`."""
    return _load_response_schema(api_key, version)


__all__ = [
    "Chunks",
    "DecodedRequest",
    "Entity",
    "ErrorCode",
    "FileRange",
    "MalformedRequest",
    "MalformedResponse",
    "ProtocolError",
    "RequestHeader",
    "RequestPayload",
    "ResponsePayload",
    "UnsupportedVersion",
    "api_name",
    "build",
    "build_message",
    "close_chunks",
    "decode_request",
    "decode_response",
    "duration_ms",
    "encode_api_versions_fallback",
    "encode_error_response",
    "encode_request",
    "encode_response",
    "from_message",
    "messages_for",
    "request_class",
    "request_view",
    "response_class",
]

E = TypeVar("E")

RequestHeader: TypeAlias = RequestHeaderV1 | RequestHeaderV2


class FileRange(Protocol):
    """Record bytes left in a file: ``size`` bytes at ``position`` of the descriptor ``fileno()``.

    Put one in a records field to have the server send it from the file; ``bytes()`` reads it
    (tests and fallbacks), ``close()`` releases it once it is sent.
    """

    position: int
    size: int

    def fileno(self) -> int: ...
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    def close(self) -> None: ...


#: What :func:`encode_response` returns: the size prefix, then the encoded pieces, in order.
Chunks: TypeAlias = list[bytes | bytearray | memoryview | FileRange]

_PEEK = struct.Struct(">hhi")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_SIZE = struct.Struct(">i")


class ProtocolError(KompaktError):
    """A request that cannot be served as sent."""


class MalformedRequest(ProtocolError):
    """Bytes that kio cannot decode as the request they claim to be; the connection is closed.

    ``correlation_id`` is ``None`` when the frame was too short to carry one.
    """

    def __init__(self, message: str, correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id


class MalformedResponse(ProtocolError):
    """A response frame that does not decode (a length or count the bytes do not back, a bad tag)."""


class UnsupportedVersion(ProtocolError):
    """An api key or version outside what this broker implements."""

    def __init__(self, api_key: int, version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api key {api_key} version {version}")
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """One decoded request frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header: RequestHeader
    body: RequestPayload


#: Encoded fields smaller than this are copied into one buffer as they come; larger ones are kept
#: as they are, and so are record memoryviews and file ranges of any size.
JOIN_BYTES = 64 * 1024


class _ChunkWriter:
    """The ``Writable`` kio writes to: the fields it encodes joined as they come, records as given.

    kio writes field by field, each a new ``bytes``: kept in a list, they took about 50 bytes of
    Python objects per byte of a large response (a ListOffsets answer for 200,000 partitions made
    1.4 million of them); joined, the encoding takes what the response takes. Record data (a
    memoryview of a segment or of a request, a file range) stays a chunk of its own, uncopied.
    """

    __slots__ = ("_small", "chunks", "size")

    def __init__(self) -> None:
        self.chunks: Chunks = [b""]
        self._small = bytearray()
        self.size = 0

    def write(self, chunk: bytes | memoryview | FileRange) -> int:
        length = chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)
        if length < JOIN_BYTES and isinstance(chunk, bytes):
            self._small += chunk
        else:
            if self._small:
                self.chunks.append(self._small)
                self._small = bytearray()
            self.chunks.append(chunk)
        self.size += length
        return length

    @property
    def writable(self) -> IO[bytes]:
        """This object typed as kio's ``Writable``: kio only ever calls ``write`` on it."""
        return cast(IO[bytes], self)

    def finish(self) -> Chunks:
        if self._small:
            self.chunks.append(self._small)
        self.chunks[0] = _SIZE.pack(self.size)
        return self.chunks


def api_name(api_key: int) -> str:
    """Kafka's name of an api key, for log lines (``"unknown"`` for keys Kafka does not define)."""
    return api_key_map.get(api_key, "unknown")


def request_class(api_key: int, version: int) -> type[RequestPayload]:
    """kio's request class for a key and version (``KeyError``-like errors if kio lacks it)."""
    return load_request_schema(api_key, version)


def response_class(api_key: int, version: int) -> type[ResponsePayload]:
    """kio's response class for a key and version."""
    return load_response_schema(api_key, version)


def peek(frame: bytes | memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` from the first 8 bytes of a request frame."""
    if len(frame) < _PEEK.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame, 0)
    return int(api_key), int(api_version), int(correlation_id)


def decode_request(frame: bytes | memoryview, supported: Mapping[int, VersionRange]) -> DecodedRequest:
    """Decode one request frame (without its size prefix).

    Raises :class:`UnsupportedVersion` when the key or version is not in ``supported`` (checked before
    any schema is loaded) and :class:`MalformedRequest` for anything that does not decode.
    """
    api_key, api_version, correlation_id = peek(frame)
    version_range = supported.get(api_key)
    if version_range is None or api_version not in version_range:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    # A writable frame (a large one, received in place) stays writable for Produce only, whose
    # records the log updates in place; kio's readers take read-only buffers.
    readable = frame.toreadonly() if isinstance(frame, memoryview) and not frame.readonly else frame
    try:
        check, read_header, read_body = _request_readers(api_key, api_version)
        check(readable)
        header, header_size = read_header(readable, 0)
        if api_key == ApiKey.PRODUCE and produce_reader.reads(api_version):
            body = produce_reader.read_produce(frame, header_size, api_version)
        else:
            body, _ = read_body(readable, header_size)
    except Exception as exc:  # noqa: BLE001 - kio's native reader raises many types on hostile input
        raise MalformedRequest(
            f"cannot decode {api_name(api_key)} v{api_version}: {type(exc).__name__}: {exc}",
            correlation_id,
        ) from exc
    return DecodedRequest(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=header.client_id,
        header=header,
        body=body,
    )


# --------------------------------------------------------------------------------------------------
# Wire layouts for the bounds check, compiled from kio's classes the way kio's native reader
# compiles its own schema (``kio.serial._introspect`` is what that compiler calls), so that both
# read the same grammar.

_FIXED_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


@functools.cache
def request_checker(api_key: int, version: int) -> bounds.Checker:
    """The bounds check of a request's header and body, compiled on first use of this version."""
    body_class = load_request_schema(api_key, version)
    layouts = (_layout(cast(type[Entity], body_class.__header_schema__)), _layout(body_class))
    return bounds.compile_checker(layouts, f"{api_name(api_key)} v{version}")


@functools.cache
def _request_readers(
    api_key: int, version: int
) -> tuple[Callable[[bytes | memoryview], int], Reader[RequestHeader], Reader[RequestPayload]]:
    """What :func:`decode_request` runs for one version: the bounds check, then kio's readers."""
    body_class = load_request_schema(api_key, version)
    header_class = body_class.__header_schema__
    return request_checker(api_key, version).check, entity_reader(header_class), entity_reader(body_class)


def length_fields(frame: bytes | memoryview) -> list[bounds.LengthField]:
    """Every length, count, null marker and tag header of a valid request frame, in order.

    For fuzzers: they overwrite these to test the bounds check. Raises
    :class:`bounds.FrameBoundsError` when the frame does not pass the check itself.
    """
    api_key, api_version, _ = peek(frame)
    return request_checker(api_key, api_version).length_fields(frame)


@functools.cache
def _layout(cls: type[Entity]) -> bounds.Struct:
    """The wire layout of one kio entity class; mirrors kio's ``compile_entity_schema``."""
    flexible = cls.__flexible__
    is_header = cls.__name__ == "RequestHeader"
    ops: list[bounds.Op] = []
    tags: dict[int, bounds.Struct] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        op = _field_op(cls, f, flexible, is_header=is_header, is_tagged=tag is not None)
        if tag is None:
            ops.append(op)
        else:
            tags[int(tag)] = bounds.layout(f"{cls.__qualname__}.{f.name}", [op])
    return bounds.layout(cls.__qualname__, ops, tagged=flexible, tags=tags)


def _field_op(cls: type, f: Field[object], flexible: bool, *, is_header: bool, is_tagged: bool) -> bounds.Op:
    if is_header and f.name == "client_id":
        # Kafka keeps the header's client id a legacy nullable string even in header v2.
        return bounds.string(bounds.LEGACY_STRING, True, f.name)
    kind = classify_field(f)
    if isinstance(kind, PrimitiveField):
        # A tagged field is optional by its tag; kio reads its value as non-nullable.
        return _primitive_op(get_schema_field_type(f), flexible, is_optional(f) and not is_tagged, f.name)
    if isinstance(kind, PrimitiveTupleField):
        item = _primitive_op(get_schema_field_type(f), flexible, False, "item")
        return bounds.array(flexible, bounds.layout(f"{cls.__qualname__}.{f.name}[]", [item]), f.name)
    if isinstance(kind, EntityField):
        return bounds.nested(_layout(kind.type_), is_optional(f), f.name)
    if isinstance(kind, EntityTupleField):
        return bounds.array(flexible, _layout(kind.type_), f.name)
    raise TypeError(f"{cls.__qualname__}.{f.name}: unknown field class {kind!r}")


def _primitive_op(kafka_type: str, flexible: bool, nullable: bool, name: str) -> bounds.Op:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return bounds.skip(size, name)
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"{name}: unknown kafka type {kafka_type!r}")
    if flexible:
        return bounds.string(bounds.COMPACT_STRING, nullable, name)
    code = bounds.LEGACY_STRING if kafka_type == "string" else bounds.LEGACY_BYTES
    return bounds.string(code, nullable, name)


def encode_response(correlation_id: int, response: ResponsePayload) -> Chunks:
    """Encode a response with its header and int32 size prefix, as a list of chunks."""
    writer = _ChunkWriter()
    header_class = response.__header_schema__
    entity_writer(header_class)(writer.writable, header_class(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(writer.writable, response)
    return writer.finish()


def encode_request(request: RequestPayload, correlation_id: int, client_id: str | None = "kompakt") -> bytes:
    """Encode a request frame with its size prefix (for tests and tools acting as a client)."""
    writer = _ChunkWriter()
    header_class = request.__header_schema__
    header = header_class(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_class)(writer.writable, header)
    entity_writer(type(request))(writer.writable, request)
    return b"".join(bytes(chunk) for chunk in writer.finish())


def close_chunks(chunks: Chunks) -> None:
    """Release the file ranges of an encoded response (after it is sent, or when it never will be)."""
    for chunk in chunks:
        if not isinstance(chunk, bytes | bytearray | memoryview):
            chunk.close()


def decode_response(frame: bytes | memoryview, api_key: int, version: int) -> tuple[int, ResponsePayload]:
    """Decode a response frame (without its size prefix) into ``(correlation_id, body)``.

    Every length and count is checked against the frame first (:func:`response_checker`), as for
    a request: a response comes from a peer the client does not control, and kio would size an
    array from a hostile count before reading it. Anything that does not decode is a
    :class:`MalformedResponse`.
    """
    try:
        check, read_header, read_body = _response_readers(api_key, version)
        check(frame)
        header, header_size = read_header(frame, 0)
        body, _ = read_body(frame, header_size)
    except Exception as exc:  # noqa: BLE001 - kio's native reader raises many types on hostile input
        raise MalformedResponse(
            f"cannot decode {api_name(api_key)} v{version} response: {type(exc).__name__}: {exc}"
        ) from exc
    return int(header.correlation_id), body


@functools.cache
def response_checker(api_key: int, version: int) -> bounds.Checker:
    """The bounds check of a response's header and body, compiled on first use of this version."""
    body_class = load_response_schema(api_key, version)
    layouts = (_layout(cast(type[Entity], body_class.__header_schema__)), _layout(body_class))
    return bounds.compile_checker(layouts, f"{api_name(api_key)} v{version} response")


@functools.cache
def _response_readers(
    api_key: int, version: int
) -> tuple[Callable[[bytes | memoryview], int], Reader[typing.Any], Reader[ResponsePayload]]:
    body_class = load_response_schema(api_key, version)
    header_class = body_class.__header_schema__
    return response_checker(api_key, version).check, entity_reader(header_class), entity_reader(body_class)


def encode_api_versions_fallback(correlation_id: int, supported: Mapping[int, VersionRange]) -> Chunks:
    """The answer to ApiVersions at a version we do not know: v0 format, UNSUPPORTED_VERSION, our ranges.

    Clients read the v0 body whatever version they asked for, pick the highest common ApiVersions
    version and retry (kafka-python starts at v4 and relies on this).
    """
    response = _ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            _ApiVersionV0(api_key=i16(key), min_version=i16(r.min_version), max_version=i16(r.max_version))
            for key, r in sorted(supported.items())
        ),
    )
    return encode_response(correlation_id, response)


def encode_error_response(
    correlation_id: int, api_key: int, version: int, error_code: ErrorCode
) -> Chunks | None:
    """A generic error answer, or ``None`` when the response has no top-level error code to carry it.

    Used for requests we refuse before a handler runs. Every other field gets its zero value.
    """
    if api_key == ApiKey.API_VERSIONS:
        raise ValueError("ApiVersions errors use encode_api_versions_fallback")
    try:
        cls = load_response_schema(api_key, version)
    except Exception:  # noqa: BLE001 - kio raises its own index errors for unknown keys/versions
        return None
    if "error_code" not in {f.name for f in fields(cls)}:
        return None
    return encode_response(correlation_id, build(cls, {"error_code": error_code}, zero_fill=True))


def duration_ms(value: datetime.timedelta) -> int:
    """Milliseconds in one of kio's ``timedelta`` fields (session timeouts and the like)."""
    return round(value.total_seconds() * 1000)


# --------------------------------------------------------------------------------------------------
# Building entities from mappings


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None
    nullable: bool
    is_array: bool
    entity: type[object] | None
    required: bool


@functools.cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in fields(cls):
        annotation = hints[f.name]
        is_array = typing.get_origin(annotation) is tuple
        inner = typing.get_args(annotation)[0] if is_array else annotation
        nullable = False
        if typing.get_origin(inner) in (UnionType, typing.Union):
            args = [a for a in typing.get_args(inner) if a is not NoneType]
            nullable = len(args) < len(typing.get_args(inner))
            inner = args[0]
        if typing.get_origin(annotation) in (UnionType, typing.Union):
            # ``tuple[X, ...] | None``: a nullable array.
            args = [a for a in typing.get_args(annotation) if a is not NoneType]
            nullable = True
            is_array = typing.get_origin(args[0]) is tuple
            inner = typing.get_args(args[0])[0] if is_array else args[0]
        plans.append(
            _FieldPlan(
                name=f.name,
                kafka_type=f.metadata.get("kafka_type"),
                nullable=nullable,
                is_array=is_array,
                entity=inner if isinstance(inner, type) and is_dataclass(inner) else None,
                required=f.default is MISSING and f.default_factory is MISSING,
            )
        )
    return tuple(plans)


def _zero(plan: _FieldPlan) -> object:
    if plan.is_array:
        return ()
    if plan.nullable:
        return None
    match plan.kafka_type:
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "bool":
            return False
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(0)
        case "float64":
            return 0.0
        case _:
            return 0


def _convert(plan: _FieldPlan, value: object, zero_fill: bool) -> object:
    if value is None:
        return None
    if plan.entity is not None:
        if plan.is_array:
            return tuple(_entity(plan.entity, item, zero_fill) for item in cast(Iterable[object], value))
        return _entity(plan.entity, value, zero_fill)
    if plan.is_array:
        return tuple(cast(Iterable[object], value))
    match plan.kafka_type:
        case "error_code" if not isinstance(value, ErrorCode):
            return ErrorCode(cast(int, value))
        case "timedelta_i32" | "timedelta_i64" if isinstance(value, int):
            return datetime.timedelta(milliseconds=value)
        case "datetime_i64" if isinstance(value, int):
            if value < 0 and plan.nullable:
                return None  # -1, "no time", is null where the field may be
            return _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def _entity(cls: type[object], value: object, zero_fill: bool) -> object:
    if isinstance(value, cls):
        return value
    return build(cls, cast(Mapping[str, object], value), zero_fill=zero_fill)


@functools.cache
def _names_in_any_version(cls: type) -> frozenset[str]:
    """Every field name the entity ``cls`` has in any version of its message that kio knows.

    kio's classes live at ``kio.schema.<api>.v<N>.<request|response>``; a nested entity keeps its
    name (``CreatableTopicResult``) across versions, so the union is over the classes of that name.
    """
    names = {f.name for f in fields(cls)}
    parts = cls.__module__.split(".")
    if len(parts) != 5 or parts[:2] != ["kio", "schema"]:
        return frozenset(names)
    _, _, api, _, kind = parts
    package = importlib.import_module(f"kio.schema.{api}")
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"kio.schema.{api}.{info.name}.{kind}")
        sibling = getattr(module, cls.__qualname__, None)
        if sibling is not None:
            names.update(f.name for f in fields(sibling))
    return frozenset(names)


def _refuse_unknown(cls: type, values: Mapping[str, object], plans: tuple[_FieldPlan, ...]) -> None:
    """Raise for a key that *no* version of ``cls``'s message has: a misspelt field name.

    A key that only other versions have is the point of one handler serving every version and is
    dropped; a misspelt one used to be dropped too, so a misspelt nullable field silently became
    ``None`` on the wire.
    """
    own = {plan.name for plan in plans}
    extra = [key for key in values if key not in own]
    if not extra:
        return
    known = _names_in_any_version(cls)
    for key in extra:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{cls.__module__}.{cls.__qualname__} has no field {key!r} in any version{hint}")


def build(cls: type[E], values: Mapping[str, object], *, zero_fill: bool = False) -> E:
    """Construct a kio entity from a mapping, recursively, keeping only the fields ``cls`` has.

    Keys that other versions of the message have are dropped (one mapping serves every version);
    a key that no version has raises ``ValueError``. Missing fields fall back to the schema
    default; failing that, ``throttle_time`` becomes 0 and nullable fields become ``None``. Any
    other missing field is a bug in the caller and raises ``ValueError``, unless ``zero_fill``
    asks for zero values everywhere (generic error responses).
    """
    kwargs: dict[str, object] = {}
    plans = _plan(cast(type, cls))
    _refuse_unknown(cast(type, cls), values, plans)
    for plan in plans:
        if plan.name in values:
            kwargs[plan.name] = _convert(plan, values[plan.name], zero_fill)
        elif not plan.required:
            continue
        elif zero_fill or plan.nullable or plan.name == "throttle_time":
            kwargs[plan.name] = _convert(plan, _zero(plan), zero_fill)
        else:
            raise ValueError(f"{cls.__module__}.{cls.__qualname__} needs field {plan.name!r}")
    return cls(**kwargs)


# --------------------------------------------------------------------------------------------------
# The typed seam (kompakt.protocol.messages): requests as views, responses from messages


def messages_for(api_key: int) -> ModuleType:
    """The typed messages module of an API (``kompakt.protocol.messages.<api>``): its ``API_KEY``,
    the ``VERSIONS`` it covers, and its ``REQUEST`` view and ``RESPONSE`` message classes."""
    return importlib.import_module(f"kompakt.protocol.messages.{api_name(api_key)}")


def request_view(body: RequestPayload, view: type) -> object:
    """``body`` as the handler's view ``view`` (a request ``Protocol`` of :mod:`kompakt.protocol.messages`).

    When ``body``'s version has every field of the view, at every depth, ``body`` itself is the
    view (the newest versions: no copy on the hot path). Otherwise the answer is a copy holding the
    fields it has, plus the view's stated value for each field its version lacks.
    """
    convert = _view_converter(type(body), view)
    return body if convert is None else convert(body)


_MESSAGES = "kompakt.protocol.messages."


def _view_protocol(annotation: object) -> tuple[type | None, bool]:
    """The nested view class of a view field's annotation (``None`` for a plain value), and whether
    the field is an array of it."""
    if typing.get_origin(annotation) in (UnionType, typing.Union):
        annotation = next(a for a in typing.get_args(annotation) if a is not NoneType)
    is_array = typing.get_origin(annotation) is tuple
    inner = typing.get_args(annotation)[0] if is_array else annotation
    if isinstance(inner, type) and inner.__module__.startswith(_MESSAGES):
        return inner, is_array
    return None, is_array


_Convert: TypeAlias = Callable[[object], object]


@dataclass(frozen=True, slots=True)
class _ViewStep:
    """One field of a view copy: the stated value (``fill``), or the field read and converted."""

    name: str
    fill: object = None
    is_fill: bool = False
    inner: _Convert | None = None
    is_array: bool = False


@functools.cache
def _view_converter(kio_cls: type, view: type) -> _Convert | None:
    """How to turn an instance of ``kio_cls`` into ``view``; ``None`` when it already is one."""
    own = {plan.name: plan for plan in _plan(kio_cls)}
    steps: list[_ViewStep] = []
    for name, annotation in typing.get_type_hints(view).items():
        plan = own.get(name)
        if plan is None:
            if name not in view.__dict__:
                raise TypeError(
                    f"{view.__qualname__}.{name}: {kio_cls.__module__} lacks it and it has no value"
                )
            steps.append(_ViewStep(name, fill=view.__dict__[name], is_fill=True))
            continue
        nested, is_array = _view_protocol(annotation)
        inner = (
            None
            if nested is None or plan.entity is None
            else _view_converter(cast(type, plan.entity), nested)
        )
        steps.append(_ViewStep(name, inner=inner, is_array=is_array))
    if all(not step.is_fill and step.inner is None for step in steps):
        return None

    def convert(obj: object) -> object:
        values: dict[str, object] = {}
        for step in steps:
            if step.is_fill:
                values[step.name] = step.fill
                continue
            value = getattr(obj, step.name)
            if step.inner is not None and value is not None:
                inner = step.inner
                value = tuple(map(inner, cast(Iterable[object], value))) if step.is_array else inner(value)
            values[step.name] = value
        return SimpleNamespace(**values)

    return convert


def from_message(message: Message, cls: type[E]) -> E:
    """kio's ``cls`` (one version of a response, or of an entity in it) from a typed message.

    Fields ``cls``'s version lacks are dropped; a field left :data:`~kompakt.protocol.messages.UNSET`
    takes the version's default, and raises ``ValueError`` where the version requires it.
    """
    return cast(E, _message_builder(type(message), cast(type, cls))(message))


#: ``(message class, kio class) -> builder``; filled on first use of each pair, never emptied (a few
#: hundred pairs at most). A plain dict: ``functools.cache`` cannot be typed for class keys here.
_BUILDERS: dict[tuple[type, type], Callable[[Message], object]] = {}


def build_message(request: RequestPayload, message: Message) -> ResponsePayload:
    """The response to ``request``, at its version, from the handler's typed ``message``."""
    return from_message(message, load_response_schema(request.__api_key__, request.__version__))


def _message_builder(message_cls: type, cls: type) -> Callable[[Message], object]:
    builder = _BUILDERS.get((message_cls, cls))
    if builder is None:
        builder = _BUILDERS[(message_cls, cls)] = _compile_builder(message_cls, cls)
    return builder


def _compile_builder(message_cls: type, cls: type) -> Callable[[Message], object]:
    plans = _plan(cls)
    names = set(cast(tuple[str, ...], getattr(message_cls, "__slots__", ())))
    missing = [plan.name for plan in plans if plan.name not in names]
    if missing:
        raise TypeError(
            f"{message_cls.__qualname__} lacks {missing} that {cls.__module__}.{cls.__qualname__} has: "
            "regenerate kompakt.protocol.messages (python -m kompakt.protocol.messages_gen)"
        )

    def build_one(message: Message) -> object:
        kwargs: dict[str, object] = {}
        for plan in plans:
            value = getattr(message, plan.name)
            if value is UNSET:
                if not plan.required:
                    continue
                if not (plan.nullable or plan.name == "throttle_time"):
                    raise ValueError(f"{cls.__module__}.{cls.__qualname__} needs field {plan.name!r}")
                value = _zero(plan)
            kwargs[plan.name] = _convert_typed(plan, value)
        return cls(**kwargs)

    return build_one


def _convert_typed(plan: _FieldPlan, value: object) -> object:
    entity = plan.entity
    if entity is None or value is None:
        return _convert(plan, value, False)
    if plan.is_array:
        return tuple(_typed_entity(entity, item) for item in cast(Iterable[object], value))
    return _typed_entity(entity, value)


def _typed_entity(cls: type, value: object) -> object:
    if isinstance(value, Message):
        return _message_builder(type(value), cls)(value)
    if isinstance(value, cls):
        return value
    raise TypeError(f"{cls.__qualname__} is built from a message, not {type(value).__name__}")
