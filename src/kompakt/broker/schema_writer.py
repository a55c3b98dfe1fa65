"""The writer beside :mod:`kompakt.broker.schema_reader`: one key or value of Kafka's internal topics.

Kafka generates a writer per schema; kompakt writes the few schemas of ``__consumer_offsets`` by
hand, so it writes them with one set of primitives: big-endian integers, classic (int16-length)
and compact (uvarint length + 1) strings and bytes, compact arrays and the tagged-field section.
Each method is the inverse of the :class:`~kompakt.broker.schema_reader.SchemaReader` method of
the same name, so a schema's encoder and decoder read as mirror images.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def uvarint(value: int) -> bytes:
    """An unsigned varint (the lengths and counts of flexible versions)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class SchemaWriter:
    """Appends fields in order; :meth:`finish` returns the bytes."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def raw(self, data: bytes) -> SchemaWriter:
        self._parts.append(data)
        return self

    def i8(self, value: int) -> SchemaWriter:
        return self.raw(_I8.pack(value))

    def i16(self, value: int) -> SchemaWriter:
        return self.raw(_I16.pack(value))

    def i32(self, value: int) -> SchemaWriter:
        return self.raw(_I32.pack(value))

    def i64(self, value: int) -> SchemaWriter:
        return self.raw(_I64.pack(value))

    def uvarint(self, value: int) -> SchemaWriter:
        return self.raw(uvarint(value))

    def uuid(self, value: uuid.UUID) -> SchemaWriter:
        return self.raw(value.bytes)

    def classic_string(self, value: str) -> SchemaWriter:
        data = value.encode()
        return self.i16(len(data)).raw(data)

    def nullable_classic_string(self, value: str | None) -> SchemaWriter:
        return self.i16(-1) if value is None else self.classic_string(value)

    def int32_bytes(self, value: bytes) -> SchemaWriter:
        """Bytes with an int32 length (a classic ``bytes`` field)."""
        return self.i32(len(value)).raw(value)

    def compact_nullable_string(self, value: str | None) -> SchemaWriter:
        if value is None:
            return self.uvarint(0)
        data = value.encode()
        return self.uvarint(len(data) + 1).raw(data)

    def compact_string(self, value: str) -> SchemaWriter:
        return self.compact_nullable_string(value)

    def compact_bytes(self, value: bytes) -> SchemaWriter:
        """Bytes with a uvarint length + 1 (a flexible ``bytes`` field)."""
        return self.uvarint(len(value) + 1).raw(value)

    def compact_array_count(self, count: int) -> SchemaWriter:
        return self.uvarint(count + 1)

    def tagged_fields(self, tags: Mapping[int, bytes] | None = None) -> SchemaWriter:
        """The tagged-field section; a field is written only when it differs from its default,
        so most structs end with a single zero byte."""
        tags = tags or {}
        self.uvarint(len(tags))
        for tag in sorted(tags):
            self.uvarint(tag).uvarint(len(tags[tag])).raw(tags[tag])
        return self

    def finish(self) -> bytes:
        return b"".join(self._parts)
