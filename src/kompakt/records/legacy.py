"""Reading legacy message sets (magic v0 and v1), for inspecting old Kafka log directories.

kompakt never writes these formats; a log written by Kafka before 0.11 (or by a broker pinned to an
old ``log.message.format.version``) still holds them, and tools want to show what is inside.

Layout of one entry (big-endian)::

    offset size field
       0    8  offset          int64: the message's offset (a wrapper's: its *last* inner offset)
       8    4  message_size    int32 = entry size - 12
      12    4  crc             uint32 CRC-32 (zlib's, not CRC-32C) of bytes [16, end)
      16    1  magic           0 or 1 (the same position as a v2 batch's magic)
      17    1  attributes      bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 timestamp type
      18    8  timestamp       int64, magic 1 only
     ..    4  key length      -1 = null key, then the key
     ..    4  value length    -1 = null value, then the value

A compressed *wrapper* message carries a whole inner message set, compressed, as its value. Inner
offsets are absolute for magic 0; for magic 1 they are relative (0..n-1) and the absolute offset of
inner message ``i`` is ``wrapper.offset - last_inner.offset + inner.offset``. For a magic 1 wrapper
with LogAppendTime every inner message reports the wrapper's timestamp. Kafka allows only one level
of compression.

Kafka 0.8/0.9 computed the LZ4 frame header checksum over the wrong bytes (KIP-57), so for magic 0
LZ4 wrappers we recompute that one byte before decompressing.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from kompakt.errors import CompressionError, CorruptRecordError
from kompakt.records.batch import TimestampType
from kompakt.records.compression import Compression, decompress

LEGACY_LOG_OVERHEAD: Final = 12
V0_RECORD_OVERHEAD: Final = 14
"""crc + magic + attributes + key length + value length."""
V1_RECORD_OVERHEAD: Final = 22
"""The v0 overhead plus the 8-byte timestamp."""
NO_TIMESTAMP: Final = -1

_ATTR_CODEC_MASK: Final = 0x07
_ATTR_TIMESTAMP_TYPE: Final = 0x08
_I64_I32: Final = struct.Struct(">qi")
_U32: Final = struct.Struct(">I")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One v0/v1 entry as stored: a plain message or a compressed wrapper."""

    position: int
    offset: int
    size: int
    """Bytes of the entry including the 12-byte log overhead."""
    crc: int
    computed_crc: int
    magic: int
    attributes: int
    timestamp: int
    """``NO_TIMESTAMP`` (-1) for magic 0."""
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & _ATTR_CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType | None:
        """None for magic 0, which has no timestamps."""
        if self.magic == 0:
            return None
        if self.attributes & _ATTR_TIMESTAMP_TYPE:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_valid(self) -> bool:
        return self.crc == self.computed_crc

    def validate(self) -> None:
        if not self.is_valid:
            raise CorruptRecordError(
                f"Message is corrupt (stored crc = {self.crc}, computed crc = {self.computed_crc}) "
                f"at position {self.position}"
            )


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """One logical record of a legacy message set, with its absolute offset."""

    offset: int
    timestamp: int
    timestamp_type: TimestampType | None
    key: bytes | None
    value: bytes | None
    magic: int
    crc: int


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError(f"length field at position {pos} runs past its message")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"field of {length} bytes at position {pos} runs past its message")
    return bytes(buf[pos : pos + length]), pos + length


def _parse_message(buf: Buffer, pos: int, size: int) -> LegacyMessage:
    end = pos + size
    offset = int(_I64.unpack_from(buf, pos)[0])
    (crc,) = _U32.unpack_from(buf, pos + 12)
    magic = buf[pos + 16]
    attributes = buf[pos + 17]
    if magic == 1:
        if size < LEGACY_LOG_OVERHEAD + V1_RECORD_OVERHEAD:
            raise CorruptRecordError(f"v1 message of {size} bytes at position {pos} is too small")
        timestamp = int(_I64.unpack_from(buf, pos + 18)[0])
        field_pos = pos + 26
    else:
        timestamp = NO_TIMESTAMP
        field_pos = pos + 18
    key, field_pos = _read_bytes(buf, field_pos, end)
    value, field_pos = _read_bytes(buf, field_pos, end)
    if field_pos != end:
        raise CorruptRecordError(f"message at position {pos} has {end - field_pos} bytes after its value")
    computed = zlib.crc32(memoryview(buf)[pos + 16 : end])
    return LegacyMessage(pos, offset, size, int(crc), computed, magic, attributes, timestamp, key, value)


def iter_legacy_messages(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[LegacyMessage]:
    """Yield each complete v0/v1 entry in ``buf[start:end]`` without decompressing wrappers.

    Stops at a partial tail, at a size below the v0 minimum, and at the first entry whose magic is
    not 0 or 1 (a log upgraded in place continues with v2 batches there; read those with
    :func:`kompakt.records.batch.iter_batches` from ``position``). CRCs are computed but not
    enforced: check :attr:`LegacyMessage.is_valid`. Malformed key/value lengths raise
    CorruptRecordError.
    """
    limit = len(buf) if end is None else end
    pos = start
    while pos + LEGACY_LOG_OVERHEAD + 6 <= limit:
        (_offset, message_size) = _I64_I32.unpack_from(buf, pos)
        size = message_size + LEGACY_LOG_OVERHEAD
        if message_size < V0_RECORD_OVERHEAD or pos + size > limit:
            return
        if buf[pos + 16] not in (0, 1):
            return
        yield _parse_message(buf, pos, size)
        pos += size


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 for inputs under 16 bytes: all an LZ4 frame descriptor (at most 14 bytes) needs."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF
    if len(data) >= 16:
        raise ValueError("only short inputs are supported")

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = (seed + p5 + len(data)) & mask
    pos = 0
    while pos + 4 <= len(data):
        h = (rotl((h + int.from_bytes(data[pos : pos + 4], "little") * p3) & mask, 17) * p4) & mask
        pos += 4
    for byte in data[pos:]:
        h = (rotl((h + byte * p5) & mask, 11) * p1) & mask
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    """Rewrite the frame descriptor checksum byte as the LZ4 spec defines it."""
    if len(frame) < 7 or frame[:4] != b"\x04\x22\x4d\x18":
        return frame
    flg = frame[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= descriptor_end:
        return frame
    checksum = (_xxh32_short(frame[4:descriptor_end]) >> 8) & 0xFF
    return frame[:descriptor_end] + bytes([checksum]) + frame[descriptor_end + 1 :]


def _decompress_wrapper(message: LegacyMessage) -> bytes:
    codec = message.compression
    if codec > Compression.LZ4:
        raise CompressionError(f"codec id {codec} is not valid for magic {message.magic} messages")
    if message.value is None:
        raise CorruptRecordError(f"compressed wrapper at position {message.position} has a null value")
    payload = message.value
    if codec == Compression.LZ4 and message.magic == 0:
        payload = _fix_lz4_header_checksum(payload)
    return decompress(codec, payload)


def iter_legacy_records(
    buf: Buffer, start: int = 0, end: int | None = None, *, verify_crc: bool = True
) -> Iterator[LegacyRecord]:
    """Yield every logical record in ``buf[start:end]``, decompressing wrappers.

    With ``verify_crc`` (the default) a CRC mismatch in an outer or inner message raises
    CorruptRecordError. Framing stops exactly as :func:`iter_legacy_messages` does.
    """
    for message in iter_legacy_messages(buf, start, end):
        if verify_crc:
            message.validate()
        if message.compression == Compression.NONE:
            yield LegacyRecord(
                message.offset,
                message.timestamp,
                message.timestamp_type,
                message.key,
                message.value,
                message.magic,
                message.crc,
            )
            continue
        inner_buf = _decompress_wrapper(message)
        inner = list(iter_legacy_messages(inner_buf))
        consumed = inner[-1].position + inner[-1].size if inner else 0
        if consumed != len(inner_buf):
            raise CorruptRecordError(
                f"compressed wrapper at position {message.position} holds a partial inner message"
            )
        relative = message.magic > 0
        base = message.offset - inner[-1].offset if relative and inner else 0
        log_append = message.timestamp_type == TimestampType.LOG_APPEND_TIME
        for msg in inner:
            if verify_crc:
                msg.validate()
            if msg.compression != Compression.NONE:
                raise CorruptRecordError(
                    f"message at offset {msg.offset} inside the wrapper at position {message.position} "
                    "is compressed again"
                )
            yield LegacyRecord(
                base + msg.offset if relative else msg.offset,
                message.timestamp if log_append else msg.timestamp,
                message.timestamp_type if msg.magic > 0 else None,
                msg.key,
                msg.value,
                msg.magic,
                msg.crc,
            )


__all__ = [
    "LEGACY_LOG_OVERHEAD",
    "NO_TIMESTAMP",
    "V0_RECORD_OVERHEAD",
    "V1_RECORD_OVERHEAD",
    "LegacyMessage",
    "LegacyRecord",
    "iter_legacy_messages",
    "iter_legacy_records",
]
