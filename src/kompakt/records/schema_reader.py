"""A bounds-checked cursor over one key or value of Kafka's internal topics.

The records of ``__consumer_offsets`` (classic offsets and group metadata, KIP-848 group records),
of ``__transaction_state`` and of KRaft's metadata log ``__cluster_metadata`` are Kafka's generated
messages: big-endian integers, classic (int16-length) and compact (uvarint length + 1) strings,
compact arrays and tagged fields. They come back from the log at every start (and the metadata log
from a directory an offline tool is pointed at), so a corrupt or hostile record must fail with that
topic's own format error, never allocate a length it claims, and never be half-applied. Every read
here checks the bytes that are left before it takes any.

It lives with the byte formats, the lowest layer, because the broker's coordinators and the log
layer's metadata-log reader (which the offline tools and the cleaner's offline entry point use)
both read with it.
"""

from __future__ import annotations

import struct

from kompakt.errors import KompaktError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_F64 = struct.Struct(">d")
UUID_BYTES = 16


class SchemaReader:
    """Reads one record; raises ``error`` (the format error of the topic being read) when malformed."""

    __slots__ = ("data", "error", "pos")

    def __init__(self, data: bytes, error: type[KompaktError]) -> None:
        self.data = data
        self.error = error
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, size: int) -> bytes:
        if size < 0 or size > self.remaining():
            raise self.error(f"field of {size} bytes at byte {self.pos} of a {len(self.data)}-byte record")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def expect_end(self) -> None:
        if self.pos != len(self.data):
            raise self.error(f"{self.remaining()} unexpected bytes after the record")

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uint16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def float64(self) -> float:
        return float(_F64.unpack(self.take(8))[0])

    def boolean(self) -> bool:
        return self.take(1) != b"\x00"

    def uuid(self) -> bytes:
        """A Kafka ``uuid`` field: 16 raw bytes."""
        return self.take(UUID_BYTES)

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if shift > 28:
                raise self.error(f"uvarint longer than 5 bytes at byte {self.pos}")
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def bounded_count(self, count: int, min_element_size: int) -> int:
        """An array count already read, refused unless the bytes left could hold that many
        elements of at least ``min_element_size`` bytes (so a claimed count allocates nothing)."""
        if count < 0:
            raise self.error(f"negative array count {count} at byte {self.pos}")
        if count * min_element_size > self.remaining():
            raise self.error(
                f"array of {count} elements at byte {self.pos} is longer than the "
                f"{self.remaining()} bytes left"
            )
        return count

    def compact_array_count(self, min_element_size: int) -> int:
        """A compact (uvarint count + 1) array count; a null array is refused."""
        raw = self.uvarint()
        if raw == 0:
            raise self.error(f"null where an array is required at byte {self.pos}")
        return self.bounded_count(raw - 1, min_element_size)

    def nullable_classic_string(self) -> str | None:
        length = self.i16()
        return None if length < 0 else self._decode(self.take(length))

    def classic_string(self) -> str:
        value = self.nullable_classic_string()
        if value is None:
            raise self.error(f"null where a string is required at byte {self.pos}")
        return value

    def compact_nullable_string(self) -> str | None:
        length = self.uvarint()
        return None if length == 0 else self._decode(self.take(length - 1))

    def compact_string(self) -> str:
        value = self.compact_nullable_string()
        if value is None:
            raise self.error(f"null where a string is required at byte {self.pos}")
        return value

    def compact_bytes(self) -> bytes:
        """Bytes with a uvarint length + 1 (a flexible ``bytes`` field); a null is refused."""
        length = self.uvarint()
        if length == 0:
            raise self.error(f"null where bytes are required at byte {self.pos}")
        return self.take(length - 1)

    def compact_nullable_bytes(self) -> bytes | None:
        """Bytes with a uvarint length + 1 (a flexible ``bytes`` field); 0 is null."""
        length = self.uvarint()
        return None if length == 0 else self.take(length - 1)

    def int32_bytes(self) -> bytes:
        """Bytes with an int32 length (a classic ``bytes`` field)."""
        return self.take(self.i32())

    def tagged_fields(self) -> dict[int, bytes]:
        """The tagged-field section: ``tag -> raw value`` (callers pick the tags they know)."""
        found: dict[int, bytes] = {}
        for _ in range(self.bounded_count(self.uvarint(), 2)):  # a plain count, not count + 1
            tag = self.uvarint()
            found[tag] = self.take(self.uvarint())
        return found

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise self.error(f"string is not UTF-8: {exc}") from None
