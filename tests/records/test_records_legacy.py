"""Legacy message sets (magic v0/v1), built by kafka-python's independent LegacyRecordBatchBuilder."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest

from kompakt.errors import CompressionError, CorruptRecordError
from kompakt.records.batch import TimestampType, iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression, compress
from kompakt.records.legacy import (
    LegacyRecord,
    iter_legacy_messages,
    iter_legacy_records,
)

legacy = pytest.importorskip("kafka.record.legacy_records")
kafka_codec = pytest.importorskip("kafka.codec")

LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
SAMPLE: list[tuple[bytes | None, bytes | None, int]] = [
    (b"k0", b"value zero " * 20, 1000),
    (None, b"keyless " * 20, 1005),
    (b"k2", None, 990),
    (b"", b"", 1001),
]


def _build(magic: int, codec: int, first_offset: int = 0, relative: bool = False) -> bytearray:
    builder: Any = legacy.LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (key, value, ts) in enumerate(SAMPLE):
        builder.append(i if relative else first_offset + i, timestamp=ts, key=key, value=value)
    return bytearray(builder.build())


def _wrapper(
    magic: int, codec: int, offset: int, value: bytes, timestamp: int = 0, log_append: bool = False
) -> bytes:
    """A wrapper message encoded by hand, as a broker stores it."""
    attributes = codec | (0x08 if log_append else 0)
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


@pytest.mark.parametrize("magic", [0, 1])
def test_plain_messages(magic: int) -> None:
    buf = _build(magic, 0, first_offset=40)
    messages = list(iter_legacy_messages(buf))
    assert [m.offset for m in messages] == [40, 41, 42, 43]
    assert all(m.is_valid and m.magic == magic for m in messages)
    assert sum(m.size for m in messages) == len(buf)
    records = list(iter_legacy_records(buf))
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _ in SAMPLE]
    assert [r.offset for r in records] == [40, 41, 42, 43]
    if magic == 0:
        assert {r.timestamp for r in records} == {-1}
        assert {r.timestamp_type for r in records} == {None}
    else:
        assert [r.timestamp for r in records] == [ts for _, _, ts in SAMPLE]
        assert {r.timestamp_type for r in records} == {TimestampType.CREATE_TIME}


@pytest.mark.parametrize("codec", LEGACY_CODECS[1:], ids=lambda c: c.name)
def test_v1_compressed_wrapper_relative_offsets(codec: Compression) -> None:
    assert kafka_codec.has_snappy() and kafka_codec.has_lz4(), "codec libraries missing: run `make test`"
    buf = _build(1, int(codec), relative=True)
    # The broker stores the absolute offset of the last inner message in the wrapper (outside the CRC).
    struct.pack_into(">q", buf, 0, 103)
    (wrapper,) = list(iter_legacy_messages(buf))
    assert wrapper.compression == codec
    assert wrapper.is_valid
    records = list(iter_legacy_records(buf))
    assert [r.offset for r in records] == [100, 101, 102, 103]
    assert [(r.key, r.value, r.timestamp) for r in records] == SAMPLE
    assert all(r.magic == 1 for r in records)


def test_v1_log_append_time_wrapper() -> None:
    inner = bytes(_build(1, 0, relative=True))
    buf = _wrapper(1, Compression.GZIP, 7, compress(Compression.GZIP, inner), timestamp=5555, log_append=True)
    records = list(iter_legacy_records(buf))
    assert [r.offset for r in records] == [4, 5, 6, 7]
    assert {r.timestamp for r in records} == {5555}
    assert {r.timestamp_type for r in records} == {TimestampType.LOG_APPEND_TIME}


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY], ids=lambda c: c.name)
def test_v0_compressed_wrapper_absolute_offsets(codec: Compression) -> None:
    assert kafka_codec.has_snappy(), "python-snappy missing: run `make test`"
    buf = _build(0, int(codec), first_offset=20)
    struct.pack_into(">q", buf, 0, 23)
    records = list(iter_legacy_records(buf))
    assert [r.offset for r in records] == [20, 21, 22, 23]
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _ in SAMPLE]


def test_v0_lz4_with_the_old_broken_header_checksum() -> None:
    inner = bytes(_build(0, 0, first_offset=0))
    frame = bytearray(compress(Compression.LZ4, inner))
    frame[6] ^= 0x5A  # Kafka 0.8/0.9 wrote a header checksum the LZ4 spec disagrees with
    buf = _wrapper(0, Compression.LZ4, 3, bytes(frame))
    assert [r.offset for r in iter_legacy_records(buf)] == [0, 1, 2, 3]


def test_kafka_python_reads_the_same() -> None:
    buf = _build(1, int(Compression.GZIP), relative=True)
    struct.pack_into(">q", buf, 0, 13)
    theirs = [(r.offset, r.timestamp, r.key, r.value) for r in legacy.LegacyRecordBatch(bytes(buf), 1)]
    ours = [(r.offset, r.timestamp, r.key, r.value) for r in iter_legacy_records(buf)]
    assert ours == theirs


def test_crc_checks() -> None:
    buf = _build(1, 0)
    buf[40] ^= 0x01
    assert not all(m.is_valid for m in iter_legacy_messages(buf))
    with pytest.raises(CorruptRecordError, match="corrupt"):
        list(iter_legacy_records(buf))
    assert len(list(iter_legacy_records(buf, verify_crc=False))) == 4
    # The offset is outside the CRC.
    ok = _build(1, 0)
    struct.pack_into(">q", ok, 0, 999)
    assert all(m.is_valid for m in iter_legacy_messages(ok))


def test_corrupt_inner_message_detected() -> None:
    inner = bytearray(_build(1, 0, relative=True))
    inner[30] ^= 0x01
    buf = _wrapper(1, Compression.GZIP, 3, compress(Compression.GZIP, bytes(inner)))
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_records(buf))


def test_partial_tail_and_v2_boundary() -> None:
    buf = bytes(_build(1, 0))
    sizes = [m.size for m in iter_legacy_messages(buf)]
    assert len(list(iter_legacy_messages(buf[:-1]))) == 3
    assert list(iter_legacy_messages(buf[:10])) == []
    # An upgraded log continues with v2 batches; legacy iteration stops there.
    v2 = build_batch([SimpleRecord(b"x", b"y")], base_offset=4)
    mixed = buf + v2
    messages = list(iter_legacy_messages(mixed))
    assert len(messages) == 4
    boundary = messages[-1].position + messages[-1].size
    assert boundary == sum(sizes)
    assert [v.base_offset for v in iter_batches(mixed, boundary)] == [4]


def test_malformed_messages() -> None:
    first = next(iter_legacy_messages(_build(0, 0)))
    bad = bytearray(_build(0, 0)[: first.size])  # key b"k0"
    struct.pack_into(">i", bad, 18, 5000)  # key length past the message
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_messages(bad))
    nested = _wrapper(
        1, Compression.GZIP, 0, compress(Compression.GZIP, _wrapper(1, Compression.GZIP, 0, b""))
    )
    with pytest.raises((CorruptRecordError, CompressionError)):
        list(iter_legacy_records(nested))
    zstd = _wrapper(1, Compression.ZSTD, 0, compress(Compression.ZSTD, bytes(_build(1, 0))))
    with pytest.raises(CompressionError):
        list(iter_legacy_records(zstd))
    body = struct.pack(">bbq", 1, 1, 0) + struct.pack(">ii", -1, -1)
    null_value = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecordError, match="null value"):
        list(iter_legacy_records(null_value))


def test_record_type() -> None:
    (record, *_rest) = list(iter_legacy_records(_build(1, 0)))
    assert isinstance(record, LegacyRecord)
    assert record.crc == next(iter(iter_legacy_messages(_build(1, 0)))).crc
