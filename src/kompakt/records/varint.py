"""Zigzag varints, as Kafka's record format (magic v2) encodes lengths, deltas and counts.

Zigzag maps signed to unsigned so small negative numbers stay short: ``(n << 1) ^ (n >> 63)``. The
unsigned result is written little-endian base-128: 7 bits per byte, high bit = "more follows". An
int varint takes at most 5 bytes, a long at most 10.

These helpers serve the slow paths (building batches in tests and tools, decoding for display). The
cleaner and produce validation parse records with native kernels instead.
"""

from __future__ import annotations

from kompakt.errors import CorruptRecordError


def zigzag_encode(value: int) -> int:
    """Map a signed 64-bit integer to its zigzag unsigned form."""
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def zigzag_decode(raw: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (raw >> 1) ^ -(raw & 1)


def encode_varint(value: int) -> bytes:
    """Encode a signed integer as a zigzag varint."""
    raw = zigzag_encode(value)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int, limit: int | None = None) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; return ``(value, next_pos)``.

    Raises CorruptRecordError when the varint runs past ``limit`` (default: the buffer end) or is
    longer than 10 bytes, which no valid record contains.
    """
    end = len(buf) if limit is None else limit
    raw = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptRecordError(f"varint runs past the end of its record at position {pos}")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            # A 10th byte may carry bits past 64; Java's long shifts drop them, and so do we.
            return zigzag_decode(raw & 0xFFFFFFFFFFFFFFFF), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError(f"varint longer than 10 bytes ending at position {pos}")


def varint_size(value: int) -> int:
    """Bytes :func:`encode_varint` would use for ``value``."""
    raw = zigzag_encode(value)
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size
