"""Codec framing details that other Kafka implementations depend on."""

from __future__ import annotations

import struct

import cramjam
import pytest

from kompakt.errors import CompressionError
from kompakt.records.compression import Compression, compress, decompress

PAYLOAD = b"".join(b"record %d with a repetitive body; " % i for i in range(5000))


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
@pytest.mark.parametrize("data", [b"", b"x", PAYLOAD], ids=["empty", "one-byte", "large"])
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, memoryview(data)))) == data


def test_lz4_frames_have_independent_blocks_and_no_content_checksum() -> None:
    # Kafka's Java KafkaLZ4BlockInputStream rejects frames without the block-independence bit.
    frame = compress(Compression.LZ4, PAYLOAD)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence
    assert not flg & 0x04  # content checksum
    assert not flg & 0x03  # reserved bits


def test_lz4_reads_linked_frames_too() -> None:
    assert decompress(Compression.LZ4, bytes(cramjam.lz4.compress(PAYLOAD))) == PAYLOAD


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    framed = compress(Compression.SNAPPY, PAYLOAD)
    assert framed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    pos = 16
    blocks = []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert pos == len(framed)
    assert all(len(b) == 32 * 1024 for b in blocks[:-1])
    assert b"".join(blocks) == PAYLOAD


def test_snappy_reads_raw() -> None:
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(Compression.SNAPPY, raw) == PAYLOAD


def test_snappy_truncated_xerial_raises() -> None:
    framed = compress(Compression.SNAPPY, PAYLOAD)
    with pytest.raises(CompressionError):
        decompress(Compression.SNAPPY, framed[:-10])
    with pytest.raises(CompressionError):
        decompress(Compression.SNAPPY, framed[:18])


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD], ids=lambda c: c.name
)
def test_garbage_raises_compression_error(codec: Compression) -> None:
    with pytest.raises(CompressionError):
        decompress(codec, b"\xff\xfe\xfd not a compressed stream at all")


def test_unknown_codec_ids() -> None:
    with pytest.raises(CompressionError):
        decompress(6, b"")
    with pytest.raises(CompressionError):
        compress(7, b"")  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD], ids=lambda c: c.name)
def test_levels(codec: Compression) -> None:
    for level in (1, 9):
        assert decompress(codec, compress(codec, PAYLOAD, level)) == PAYLOAD
