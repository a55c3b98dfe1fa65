"""Record-batch compression codecs, by Kafka's codec ids, through ``cramjam``.

A compressed v2 batch stores all of its records as one compressed stream after the 61-byte header.
Kafka's conventions per codec:

* 1 gzip: a standard gzip member stream.
* 2 snappy: Kafka's Java producer writes the *xerial* framing (magic ``\\x82SNAPPY\\x00``, two
  int32 versions, then int32-length-prefixed raw snappy blocks); librdkafka writes raw snappy and
  reads both. We write xerial framing (what Java consumers expect) and read both.
* 3 lz4: the standard LZ4 *frame* format (Kafka fixed its broken header checksum long before v2).
* 4 zstd: a standard zstd frame.

cramjam is one maintained, wheel-only package that covers all four in C/Rust, which is why it was
chosen over four separate bindings.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from kompakt.errors import CompressionError


class Compression(IntEnum):
    """Kafka's codec ids (attribute bits 0-2 of a record batch)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """Parse Kafka's ``compression.type`` spellings (``none``, ``gzip``, ...)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise CompressionError(f"unknown compression codec {name!r}") from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def _xerial_compress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos = 16
    out = []
    while pos < len(view):
        if pos + 4 > len(view):
            raise CompressionError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CompressionError(f"xerial snappy block of {length} bytes runs past the payload")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(out)


def compress(codec: Compression, data: bytes | memoryview, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.compress(data, level=level))
        if codec == Compression.SNAPPY:
            return _xerial_compress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.compress(data, level=level))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.compress(data, level=level))
    except cramjam.CompressionError as exc:  # pragma: no cover - compression of bytes cannot fail
        raise CompressionError(f"{codec.name.lower()} compression failed: {exc}") from exc
    raise CompressionError(f"unknown compression codec id {int(codec)}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a records section; raise CompressionError on an unknown codec or bad payload."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"invalid {Compression(codec).name.lower()} payload: {exc}") from exc
    raise CompressionError(f"unknown compression codec id {codec}")
