"""Structure-aware request fuzzing: valid requests of every served API, and their length fields
overwritten with extreme values.

:func:`populated` builds a request of any kio class with every array holding two elements and
every nullable or tagged field set, so that every length field of its version is on the wire;
:func:`length_mutations` finds those fields (through the codec's own bounds check, which records
where each sits) and rewrites each one with the values a hostile client would pick. Random
requests come from hypothesis (:func:`register_kio_strategies`). The test code imports kio only
for those strategies.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from collections.abc import Iterator
from types import NoneType, UnionType

from hypothesis import strategies as st
from kio.static._phantom import Phantom
from kio.static.primitive import Records

from kompakt.broker.dispatch import HANDLERS
from kompakt.protocol import codec

#: The broker's api keys and versions, as it advertises them.
SUPPORTED = {key: spec.versions for key, spec in HANDLERS.items()}
SERVED = [
    (key, version)
    for key, spec in sorted(HANDLERS.items())
    for version in range(spec.versions.min_version, spec.versions.max_version + 1)
]

_SCALARS: dict[str, object] = {
    "int8": 1,
    "int16": 1,
    "int32": 1,
    "int64": 1,
    "uint8": 1,
    "uint16": 1,
    "uint32": 1,
    "uint64": 1,
    "float64": 1.0,
    "bool": True,
    "string": "ab",
    "bytes": b"xy",
    "records": b"xy",
    "uuid": uuid.UUID(int=1),
    "error_code": 0,
    "timedelta_i32": 1,
    "timedelta_i64": 1,
    "datetime_i64": 1,
}


def register_kio_strategies() -> None:
    """Give hypothesis a strategy for each of kio's primitive types used by the served requests.

    kio registers these itself when hypothesis can be imported as kio is first imported, but the
    codec hides hypothesis from kio to keep start-up fast, and in a test run it depends on which
    module came first; registering them here does not. ``Records`` gets short byte strings.
    """
    for key, version in SERVED:
        codec.request_class(key, version)  # define every phantom type those requests use
    pending: list[type] = [Phantom]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        cls.__hypothesis_hook__()  # type: ignore[attr-defined]
    st.register_type_strategy(Records, st.binary(max_size=64))


def populated(cls: type[codec.RequestPayload]) -> codec.RequestPayload:
    """An instance of ``cls`` with two elements in every array and a value in every field."""
    return codec.build(cls, _values(cls))


def _values(cls: type) -> dict[str, object]:
    hints = typing.get_type_hints(cls)
    return {f.name: _value(hints[f.name], f.metadata.get("kafka_type")) for f in dataclasses.fields(cls)}


def _value(annotation: object, kafka_type: str | None) -> object:
    if typing.get_origin(annotation) in (UnionType, typing.Union):
        (inner,) = [a for a in typing.get_args(annotation) if a is not NoneType]
        return _value(inner, kafka_type)
    if typing.get_origin(annotation) is tuple:
        element = typing.get_args(annotation)[0]
        return [_value(element, kafka_type) for _ in range(2)]
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _values(annotation)
    assert kafka_type is not None, annotation
    return _SCALARS[kafka_type]


def request_frame(body: codec.RequestPayload) -> bytes:
    """A request frame without its size prefix, as the server hands it to the codec."""
    return codec.encode_request(body, correlation_id=1, client_id="fuzz")[4:]


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encodings(encoding: str, remaining: int) -> Iterator[bytes]:
    """The replacement bytes tried for one length field, ``remaining`` bytes before the frame ends."""
    if encoding == "uvarint":
        for value in (
            0,
            1,
            2,
            127,
            128,
            remaining,
            remaining + 1,
            remaining + 2,
            2**31 - 1,
            2**31,
            2**32 - 1,
            2**35 - 1,
        ):
            yield uvarint(value)
        yield b"\xff\xff\xff\xff\xff\x01"  # six bytes: longer than any varint
        yield b"\x80\x80\x80\x80\x00"  # zero, in five bytes
    elif encoding == "int32":
        for value in (
            0,
            1,
            -1,
            -2,
            2**31 - 1,
            -(2**31),
            min(remaining, 2**31 - 1),
            min(remaining + 1, 2**31 - 1),
        ):
            yield value.to_bytes(4, "big", signed=True)
    elif encoding == "int16":
        for value in (
            0,
            1,
            -1,
            -2,
            2**15 - 1,
            -(2**15),
            min(remaining, 2**15 - 1),
            min(remaining + 1, 2**15 - 1),
        ):
            yield value.to_bytes(2, "big", signed=True)
    else:
        assert encoding == "int8", encoding
        for value in (-1, 0, 1, 127, -128):
            yield value.to_bytes(1, "big", signed=True)


def length_mutations(frame: bytes) -> list[tuple[str, bytes]]:
    """``(description, frame)`` for every extreme value of every length field of ``frame``, plus
    the frame cut off inside each field."""
    cases: dict[bytes, str] = {}
    for mark in codec.length_fields(frame):
        head, tail = frame[: mark.position], frame[mark.position + mark.width :]
        for replacement in _encodings(mark.encoding, len(tail)):
            cases.setdefault(head + replacement + tail, f"{mark.name} ({mark.role}) = {replacement.hex()}")
        cases.setdefault(head + b"\xff", f"{mark.name} ({mark.role}) cut off")
    cases.pop(frame, None)
    return [(description, data) for data, description in cases.items()]
