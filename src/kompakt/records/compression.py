"""Record-batch compression codecs, by Kafka's codec ids, through ``cramjam``.

A compressed v2 batch stores all of its records as one compressed stream after the 61-byte header.
What every client writes and reads, and therefore what we write:

* 1 gzip: a standard gzip member stream. Everyone agrees.
* 2 snappy: two framings exist. The Java producer (and the Java broker when it recompresses) writes
  the snappy-java *xerial* framing: magic ``\\x82SNAPPY\\x00``, int32 version 1, int32 compatible
  version 1, then int32-length-prefixed raw snappy blocks of 32 KiB of input each. librdkafka writes
  raw (unframed) snappy. Every reader accepts both: snappy-java's ``SnappyInputStream`` falls back to
  raw snappy when the magic is absent, librdkafka checks for the xerial magic and otherwise
  decompresses raw, kafka-python and aiokafka detect the xerial header the same way. So either
  choice is readable by all clients; we **write xerial** because that is the framing a Java
  broker stores, and we read both.
* 3 lz4: the standard LZ4 *frame* format (Kafka fixed its broken header checksum long before v2),
  but Kafka's Java reader (``KafkaLZ4BlockInputStream``) rejects frames whose FLG byte lacks the
  block-independence bit ("Dependent block stream is unsupported"). The LZ4 library default, and
  ``cramjam.lz4.compress``, is *linked* blocks, so we must build frames with
  ``block_linked=False``. We also leave the content checksum off, as Java and kafka-python do;
  cramjam always adds per-block checksums, which the Java reader verifies and accepts.
* 4 zstd: a standard zstd frame. cramjam's default level equals zstd's default 3, which is also
  the Java producer's default.

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


def _lz4_compress(data: bytes | memoryview, level: int | None) -> bytes:
    """An LZ4 frame with independent blocks, the only kind Kafka's Java reader accepts."""
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    compressor.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
    return bytes(compressor.finish())


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
            return _lz4_compress(data, level)
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
