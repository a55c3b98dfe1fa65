"""Interop with independent RecordBatch v2 implementations: kafka-python and aiokafka.

Batches we write must parse (valid CRC, same offsets/keys/values/headers/timestamps) with their
readers, and batches their producers build must parse with ours, for every codec. kafka-python
needs python-snappy, lz4 and zstandard for the snappy/lz4/zstd codecs; aiokafka uses cramjam.
"""

from __future__ import annotations

from typing import Any

import pytest

from kompakt.records.batch import Compression, RecordBatchView, TimestampType, set_max_timestamp_log_append
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import decompress
from kompakt.records.control import ControlType, build_control_batch, control_type_of
from kompakt.records.record import decode_records

kafka_codec = pytest.importorskip("kafka.codec")
kafka_records = pytest.importorskip("kafka.record.default_records")
aiokafka_records = pytest.importorskip("aiokafka.record.default_records")

ALL_CODECS = list(Compression)
READERS = {
    "kafka-python": kafka_records.DefaultRecordBatch,
    "aiokafka": aiokafka_records.DefaultRecordBatch,
}
BUILDERS = {
    "kafka-python": kafka_records.DefaultRecordBatchBuilder,
    "aiokafka": aiokafka_records.DefaultRecordBatchBuilder,
}


def _sample() -> list[SimpleRecord]:
    return [
        SimpleRecord(b"user-1", b'{"name": "ada", "n": 1}' * 20, 1_700_000_000_000),
        SimpleRecord(None, b"keyless value" * 10, 1_700_000_000_050, (("trace", b"abc"),)),
        SimpleRecord(b"user-2", None, 1_699_999_999_990),
        SimpleRecord(b"", b"", 1_700_000_000_020, (("n", None), ("e", b""), ("\u00fc", b"\x00\xff"))),
        SimpleRecord(b"user-3", b"x" * 3000, 1_700_000_000_010),
    ]


def _codec_available(codec: Compression) -> None:
    checks = {
        Compression.NONE: lambda: True,
        Compression.GZIP: kafka_codec.has_gzip,
        Compression.SNAPPY: kafka_codec.has_snappy,
        Compression.LZ4: kafka_codec.has_lz4,
        Compression.ZSTD: kafka_codec.has_zstd,
    }
    # The test extras install python-snappy, lz4 and zstandard, so every codec must be there.
    assert checks[codec](), f"kafka-python has no library for {codec.name}: run `make test`"


def _read_foreign(reader: Any, raw: bytes) -> tuple[Any, list[Any]]:
    batch = reader(raw)
    assert batch.validate_crc()
    return batch, list(batch)


@pytest.mark.parametrize("reader_name", list(READERS))
@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_foreign_reader_parses_our_batches(reader_name: str, codec: Compression) -> None:
    _codec_available(codec)
    records = _sample()
    raw = build_batch(
        records, base_offset=77, compression=codec, producer_id=5, producer_epoch=1, base_sequence=40
    )
    batch, parsed = _read_foreign(READERS[reader_name], raw)
    assert batch.base_offset == 77
    assert batch.compression_type == codec
    assert batch.producer_id == 5
    assert batch.producer_epoch == 1
    assert batch.base_sequence == 40
    assert batch.next_offset == 82
    assert batch.max_timestamp == 1_700_000_000_050
    assert [r.offset for r in parsed] == [77, 78, 79, 80, 81]
    assert [r.key for r in parsed] == [r.key for r in records]
    assert [r.value for r in parsed] == [r.value for r in records]
    assert [r.timestamp for r in parsed] == [r.timestamp for r in records]
    assert [tuple(tuple(h) for h in r.headers) for r in parsed] == [r.headers for r in records]


@pytest.mark.parametrize("reader_name", list(READERS))
@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_foreign_reader_parses_rebuilt_batches(reader_name: str, codec: Compression) -> None:
    """Cleaner output: offset gaps, a preserved last offset, a delete horizon, then LogAppendTime."""
    _codec_available(codec)
    survivors = [
        SimpleRecord(b"a", b"1" * 100, 5, offset_delta=2),
        SimpleRecord(b"b", None, 10, offset_delta=5),
    ]
    raw = build_batch(
        survivors, base_offset=10, compression=codec, last_offset_delta=9, delete_horizon_ms=99_999
    )
    batch, parsed = _read_foreign(READERS[reader_name], raw)
    assert batch.next_offset == 20
    assert [(r.offset, r.timestamp, r.key, r.value) for r in parsed] == [
        (12, 5, b"a", b"1" * 100),
        (15, 10, b"b", None),
    ]

    buf = bytearray(raw)
    set_max_timestamp_log_append(buf, 0, 123_456)
    batch, parsed = _read_foreign(READERS[reader_name], bytes(buf))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in parsed] == [123_456, 123_456]


@pytest.mark.parametrize("reader_name", list(READERS))
def test_foreign_reader_parses_empty_batch(reader_name: str) -> None:
    raw = build_batch(
        [], base_offset=3, last_offset_delta=4, producer_id=2, producer_epoch=0, base_sequence=1
    )
    batch, parsed = _read_foreign(READERS[reader_name], raw)
    assert parsed == []
    assert batch.next_offset == 8


@pytest.mark.parametrize("control_type", [ControlType.ABORT, ControlType.COMMIT])
def test_kafka_python_reads_our_control_batches(control_type: ControlType) -> None:
    raw = build_control_batch(control_type, producer_id=9, producer_epoch=2, coordinator_epoch=4, timestamp=1)
    batch, parsed = _read_foreign(kafka_records.DefaultRecordBatch, raw)
    assert batch.is_control_batch
    assert batch.is_transactional
    (marker,) = parsed
    assert marker.type == int(control_type)
    assert marker.commit is (control_type == ControlType.COMMIT)


def _foreign_build(builder_cls: Any, codec: Compression, transactional: bool) -> bytes:
    pid, epoch, seq = (1000, 3, 12) if transactional else (-1, -1, -1)
    builder = builder_cls(2, int(codec), int(transactional), pid, epoch, seq, 1 << 20)
    for i, record in enumerate(_sample()):
        builder.append(
            i, timestamp=record.timestamp, key=record.key, value=record.value, headers=list(record.headers)
        )
    return bytes(builder.build())


@pytest.mark.parametrize("builder_name", list(BUILDERS))
@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("transactional", [False, True])
def test_we_read_foreign_batches(builder_name: str, codec: Compression, transactional: bool) -> None:
    _codec_available(codec)
    raw = _foreign_build(BUILDERS[builder_name], codec, transactional)
    view = RecordBatchView(raw)
    view.validate()
    assert view.compression == codec  # the sample compresses well, so no fallback to NONE
    assert view.is_transactional is transactional
    assert view.records_count == 5
    assert view.last_offset == 4
    if transactional:
        assert (view.producer_id, view.producer_epoch, view.base_sequence, view.last_sequence) == (
            1000,
            3,
            12,
            16,
        )
    records = _sample()
    decoded = decode_records(view)
    assert [r.offset for r in decoded] == [0, 1, 2, 3, 4]
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (r.key, r.value, r.timestamp, r.headers) for r in records
    ]


def test_we_read_foreign_control_marker_built_by_hand() -> None:
    """kafka-python has no control-batch builder; check ours against its ControlRecord parser."""
    raw = build_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=0)
    assert control_type_of(RecordBatchView(raw)) == ControlType.COMMIT
    _, (marker,) = _read_foreign(kafka_records.DefaultRecordBatch, raw)
    assert (marker.version, marker.commit) == (0, True)


def test_snappy_framings_from_kafka_python() -> None:
    _codec_available(Compression.SNAPPY)
    payload = b"".join(b"snappy block test %d " % i for i in range(10_000))
    xerial = kafka_codec.snappy_encode(payload, xerial_compatible=True)
    assert xerial[:8] == b"\x82SNAPPY\x00"
    raw = kafka_codec.snappy_encode(payload, xerial_compatible=False)
    assert decompress(Compression.SNAPPY, xerial) == payload
    assert decompress(Compression.SNAPPY, raw) == payload


def test_lz4_gzip_zstd_payloads_from_kafka_python() -> None:
    payload = b"".join(b"codec test %d " % i for i in range(10_000))
    for codec, encode in (
        (Compression.GZIP, kafka_codec.gzip_encode),
        (Compression.LZ4, kafka_codec.lz4_encode),
        (Compression.ZSTD, kafka_codec.zstd_encode),
    ):
        _codec_available(codec)
        assert decompress(codec, encode(payload)) == payload
