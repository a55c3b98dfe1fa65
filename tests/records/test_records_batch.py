"""RecordBatch v2: building, reading back, in-place mutators, framing and integrity checks."""

from __future__ import annotations

import struct

import pytest

from kompakt.errors import CompressionError, CorruptRecordError
from kompakt.records.batch import (
    BATCH_OVERHEAD,
    Compression,
    RecordBatchView,
    TimestampType,
    iter_batches,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
)
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import (
    ControlType,
    build_control_batch,
    control_key,
    control_type_of,
    parse_control_key,
)
from kompakt.records.record import Record, decode_records

ALL_CODECS = list(Compression)


def _records() -> list[SimpleRecord]:
    return [
        SimpleRecord(b"k0", b"v0" * 50, 1_700_000_000_000),
        SimpleRecord(None, b"no key", 1_700_000_000_005, (("h", b"x"),)),
        SimpleRecord(b"k2", None, 1_700_000_000_001),
        SimpleRecord(b"", b"", 1_700_000_000_009, (("null-valued", None), ("utf8-\u00e9", b""))),
        SimpleRecord(b"k4", b"v4" * 200, 1_699_999_999_000),
    ]


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_round_trip_every_codec(codec: Compression) -> None:
    records = _records()
    raw = build_batch(
        records,
        base_offset=1000,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
    )
    view = RecordBatchView(raw)
    view.validate()
    assert view.is_valid()
    assert view.magic == 2
    assert view.size == len(raw)
    assert view.batch_length == len(raw) - 12
    assert view.compression == codec
    assert view.base_offset == 1000
    assert view.last_offset_delta == 4
    assert view.last_offset == 1004
    assert view.next_offset == 1005
    assert view.records_count == 5
    assert view.base_timestamp == 1_700_000_000_000
    assert view.max_timestamp == 1_700_000_000_009
    assert view.producer_id == 42
    assert view.has_producer_id
    assert view.producer_epoch == 3
    assert view.base_sequence == 17
    assert view.last_sequence == 21
    assert view.partition_leader_epoch == 9
    assert view.timestamp_type == TimestampType.CREATE_TIME
    assert not view.is_transactional
    assert not view.is_control
    assert not view.has_delete_horizon
    assert view.delete_horizon_ms is None
    assert bytes(view.raw) == raw
    decoded = decode_records(view)
    assert decoded == [
        Record(1000 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]


def test_null_and_empty_are_distinct() -> None:
    raw = build_batch(
        [
            SimpleRecord(None, None),
            SimpleRecord(b"", b""),
            SimpleRecord(b"k", None),
            SimpleRecord(b"k", b""),
        ]
    )
    decoded = decode_records(RecordBatchView(raw))
    assert [(r.key, r.value) for r in decoded] == [(None, None), (b"", b""), (b"k", None), (b"k", b"")]
    # Only a keyed record with a null value is a tombstone; an empty value is a normal value.
    assert [r.is_tombstone for r in decoded] == [False, False, True, False]


def test_headers_round_trip_including_null_values() -> None:
    headers = (("a", b"1"), ("a", b"2"), ("empty", b""), ("null", None), ("", b"empty key"))
    raw = build_batch([SimpleRecord(b"k", b"v", 5, headers)], compression=Compression.ZSTD)
    (record,) = decode_records(RecordBatchView(raw))
    assert record.headers == headers


def test_negative_timestamp_deltas() -> None:
    raw = build_batch(
        [SimpleRecord(b"a", b"1", 1000), SimpleRecord(b"b", b"2", 10), SimpleRecord(b"c", b"3", 500)]
    )
    view = RecordBatchView(raw)
    assert view.base_timestamp == 1000
    assert view.max_timestamp == 1000
    assert [r.timestamp for r in decode_records(view)] == [1000, 10, 500]


def test_known_size_of_a_minimal_record() -> None:
    # ``DefaultRecord`` / ``DefaultRecordBatch`` sizes: key "0", value "0", no headers, deltas 0: a 9-byte
    # record, a 70-byte batch.
    raw = build_batch([SimpleRecord(b"0", b"0", 0)])
    assert len(raw) == 70
    # 1-byte length prefix (zigzag 8) + 8 body bytes = the 9-byte record.
    assert raw[BATCH_OVERHEAD] == 8 << 1
    assert len(raw) - BATCH_OVERHEAD == 9


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_delete_horizon_stamped_timestamps_unchanged(codec: Compression) -> None:
    # ``MemoryRecordsTest.testBaseTimestampToDeleteHorizonConversion``: now = 2^30 - 2, delete.retention.ms =
    # 1 -> horizon 2^30 - 1.
    horizon = 1_073_741_823
    records = [SimpleRecord(b"0", b"0", 5), SimpleRecord(b"1", None, 10), SimpleRecord(b"2", b"2", 15)]
    raw = build_batch(records, compression=codec, delete_horizon_ms=horizon)
    view = RecordBatchView(raw)
    view.validate()
    assert view.has_delete_horizon
    assert view.delete_horizon_ms == horizon
    assert view.base_timestamp == horizon
    assert view.max_timestamp == 15
    decoded = decode_records(view)
    assert [r.timestamp for r in decoded] == [5, 10, 15]
    assert [r.key for r in decoded] == [b"0", b"1", b"2"]
    assert decoded[1].is_tombstone


@pytest.mark.parametrize("transactional", [False, True])
def test_empty_header_batch_keeps_last_offset_delta(transactional: bool) -> None:
    # ``MemoryRecordsTest.testFilterToEmptyBatchRetention``: an emptied batch keeps its base/last offsets,
    # producer info and max timestamp.
    raw = build_batch(
        [],
        base_offset=3,
        last_offset_delta=1,
        producer_id=23,
        producer_epoch=5,
        base_sequence=10,
        partition_leader_epoch=293,
        is_transactional=transactional,
        max_timestamp=12,
        compression=Compression.GZIP,
    )
    assert len(raw) == BATCH_OVERHEAD
    view = RecordBatchView(raw)
    view.validate()
    assert view.records_count == 0
    assert view.base_offset == 3
    assert view.last_offset == 4
    assert view.base_sequence == 10
    assert view.last_sequence == 11
    assert view.producer_id == 23
    assert view.producer_epoch == 5
    assert view.partition_leader_epoch == 293
    assert view.max_timestamp == 12
    assert view.base_timestamp == -1
    assert view.compression == Compression.NONE
    assert view.timestamp_type == TimestampType.CREATE_TIME
    assert view.is_transactional is transactional
    assert not view.has_delete_horizon
    assert decode_records(view) == []


def test_empty_batch_needs_explicit_last_offset_delta() -> None:
    with pytest.raises(ValueError, match="last_offset_delta"):
        build_batch([])


def test_explicit_offset_deltas_model_a_compacted_batch() -> None:
    # ``MemoryRecordsTest.testFilterToAlreadyCompactedLog``: one batch (base 0) whose only survivor is offset
    # 8, last offset still 10.
    raw = build_batch([SimpleRecord(b"1", b"b", 11, offset_delta=8)], last_offset_delta=10)
    view = RecordBatchView(raw)
    assert (view.base_offset, view.last_offset, view.records_count) == (0, 10, 1)
    assert decode_records(view) == [Record(8, 11, b"1", b"b")]


def test_offset_deltas_must_increase() -> None:
    with pytest.raises(ValueError, match="increasing"):
        build_batch([SimpleRecord(b"a", b"1", offset_delta=2), SimpleRecord(b"b", b"2", offset_delta=2)])
    with pytest.raises(ValueError, match="increasing"):
        build_batch([SimpleRecord(b"a", b"1", offset_delta=3), SimpleRecord(b"b", b"2", offset_delta=1)])


def test_last_sequence_wraps_past_int32_max() -> None:
    raw = build_batch(
        [SimpleRecord(b"a", b"1")] * 4, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    assert RecordBatchView(raw).last_sequence == 1
    no_seq = RecordBatchView(build_batch([SimpleRecord(b"a", b"1")]))
    assert no_seq.last_sequence == -1
    assert not no_seq.has_producer_id


@pytest.mark.parametrize("control_type", [ControlType.COMMIT, ControlType.ABORT])
def test_control_batch_round_trip(control_type: ControlType) -> None:
    raw = build_control_batch(
        control_type,
        producer_id=99384,
        producer_epoch=234,
        coordinator_epoch=7,
        timestamp=1234,
        base_offset=50,
        partition_leader_epoch=4,
    )
    view = RecordBatchView(raw)
    view.validate()
    assert view.is_control
    assert view.is_transactional
    assert view.producer_id == 99384
    assert view.producer_epoch == 234
    assert view.base_offset == 50
    assert view.last_offset == 50
    assert view.partition_leader_epoch == 4
    assert control_type_of(view) == control_type
    (record,) = decode_records(view)
    assert record.key == struct.pack(">hh", 0, int(control_type))
    assert record.value == struct.pack(">hi", 0, 7)
    assert record.timestamp == 1234
    assert not record.is_tombstone


def test_control_type_edge_cases() -> None:
    with pytest.raises(ValueError, match="not a control batch"):
        control_type_of(RecordBatchView(build_batch([SimpleRecord(b"a", b"1")])))
    emptied = build_batch(
        [], last_offset_delta=0, producer_id=1, producer_epoch=0, is_transactional=True, is_control=True
    )
    assert control_type_of(RecordBatchView(emptied)) is None
    assert parse_control_key(control_key(ControlType.LEADER_CHANGE)) == ControlType.LEADER_CHANGE
    assert parse_control_key(struct.pack(">hh", 0, 77)) == 77
    with pytest.raises(CorruptRecordError):
        parse_control_key(b"\x00\x00")
    keyless = build_batch(
        [SimpleRecord(None, b"\x00\x00\x00\x00\x00\x00")], is_control=True, is_transactional=True
    )
    with pytest.raises(CorruptRecordError):
        control_type_of(RecordBatchView(keyless))


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_log_append_time(codec: Compression) -> None:
    buf = bytearray(build_batch(_records(), compression=codec))
    crc_before = RecordBatchView(buf).crc
    set_max_timestamp_log_append(buf, 0, 1_800_000_000_000)
    view = RecordBatchView(buf)
    view.validate()
    assert view.crc != crc_before
    assert view.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert view.max_timestamp == 1_800_000_000_000
    assert view.compression == codec
    assert {r.timestamp for r in decode_records(view)} == {1_800_000_000_000}


def test_set_base_offset_and_leader_epoch_keep_crc() -> None:
    first = build_batch([SimpleRecord(b"a", b"1"), SimpleRecord(b"b", b"2")])
    second = build_batch([SimpleRecord(b"c", b"3")], compression=Compression.LZ4)
    buf = bytearray(first + second)
    crcs = [v.crc for v in iter_batches(buf)]
    set_base_offset(buf, 0, 5000)
    set_base_offset(buf, len(first), 5002)
    set_partition_leader_epoch(buf, len(first), 12)
    views = list(iter_batches(buf))
    assert [v.crc for v in views] == crcs
    for view in views:
        view.validate()
    assert [r.offset for v in views for r in decode_records(v)] == [5000, 5001, 5002]
    assert views[1].partition_leader_epoch == 12
    assert views[1].last_offset == 5002
    # Works on a memoryview of a larger buffer too.
    mv = memoryview(buf)
    set_base_offset(mv, 0, 7)
    assert RecordBatchView(buf).base_offset == 7


def test_iter_batches_stops_at_partial_tail() -> None:
    batches = [build_batch([SimpleRecord(b"k%d" % i, b"v" * i)], base_offset=i) for i in range(4)]
    whole = b"".join(batches)
    assert [v.base_offset for v in iter_batches(whole)] == [0, 1, 2, 3]
    assert [v.position for v in iter_batches(whole)] == [sum(len(b) for b in batches[:i]) for i in range(4)]
    for cut in range(1, len(batches[3])):
        truncated = whole[: len(whole) - cut]
        assert [v.base_offset for v in iter_batches(truncated)] == [0, 1, 2]
    # A window given by start and end.
    start = len(batches[0])
    end = start + len(batches[1]) + len(batches[2]) + 5
    assert [v.base_offset for v in iter_batches(whole, start, end)] == [1, 2]
    assert list(iter_batches(b"")) == []
    assert list(iter_batches(whole[:11])) == []


def test_iter_batches_stops_at_size_below_minimum() -> None:
    good = build_batch([SimpleRecord(b"a", b"1")])
    bad = bytearray(build_batch([SimpleRecord(b"b", b"2")], base_offset=1))
    struct.pack_into(">i", bad, 8, BATCH_OVERHEAD - 12 - 1)  # size 60 < 61
    after = build_batch([SimpleRecord(b"c", b"3")], base_offset=2)
    assert [v.base_offset for v in iter_batches(good + bytes(bad) + after)] == [0]
    struct.pack_into(">i", bad, 8, -5)
    assert [v.base_offset for v in iter_batches(good + bytes(bad) + after)] == [0]


def test_validate_catches_a_flipped_byte_anywhere_under_the_crc() -> None:
    raw = build_batch([SimpleRecord(b"key", b"value", 3, (("h", b"v"),)), SimpleRecord(b"k2", None, 4)])
    for index in range(21, len(raw)):
        corrupt = bytearray(raw)
        corrupt[index] ^= 0x01
        view = RecordBatchView(corrupt)
        with pytest.raises(CorruptRecordError):
            view.validate()
        assert not view.is_valid()
    # The stored CRC itself.
    for index in range(17, 21):
        corrupt = bytearray(raw)
        corrupt[index] ^= 0x80
        with pytest.raises(CorruptRecordError, match="corrupt"):
            RecordBatchView(corrupt).validate()


def test_fields_outside_the_crc_do_not_invalidate() -> None:
    raw = build_batch([SimpleRecord(b"key", b"value")])
    for index in [*range(8), *range(12, 16)]:  # base offset, partition leader epoch
        changed = bytearray(raw)
        changed[index] ^= 0xFF
        RecordBatchView(changed).validate()


def test_validate_bad_magic() -> None:
    corrupt = bytearray(build_batch([SimpleRecord(b"k", b"v")]))
    for magic in (0, 1, 3):
        corrupt[16] = magic
        with pytest.raises(CorruptRecordError, match="magic"):
            RecordBatchView(corrupt).validate()


def test_validate_truncation_and_sizes() -> None:
    raw = build_batch([SimpleRecord(b"k", b"v" * 100)])
    with pytest.raises(CorruptRecordError, match="past the end"):
        RecordBatchView(raw[:-1]).validate()
    with pytest.raises(CorruptRecordError, match="past the end"):
        RecordBatchView(raw).validate(available=len(raw) - 10)
    with pytest.raises(CorruptRecordError, match="truncated"):
        RecordBatchView(raw[:60]).validate()
    small = bytearray(raw)
    struct.pack_into(">i", small, 8, 40)
    with pytest.raises(CorruptRecordError, match="minimum"):
        RecordBatchView(small).validate()
    # A batch inside a larger buffer validates against its own bytes only.
    padded = b"\x00" * 7 + raw + b"trailing"
    RecordBatchView(padded, 7).validate()


def test_validate_negative_count() -> None:
    from kompakt.records.builder import finish_crc

    bad = bytearray(build_batch([SimpleRecord(b"k", b"v")]))
    struct.pack_into(">i", bad, 57, -1)
    finish_crc(bad)
    with pytest.raises(CorruptRecordError, match="negative"):
        RecordBatchView(bad).validate()


def test_decode_rejects_count_mismatch() -> None:
    from kompakt.records.builder import finish_crc

    raw = bytearray(build_batch([SimpleRecord(b"a", b"1"), SimpleRecord(b"b", b"2")]))
    more = bytearray(raw)
    struct.pack_into(">i", more, 57, 3)
    finish_crc(more)
    with pytest.raises(CorruptRecordError):
        decode_records(RecordBatchView(more))
    fewer = bytearray(raw)
    struct.pack_into(">i", fewer, 57, 1)
    finish_crc(fewer)
    with pytest.raises(CorruptRecordError, match="after its"):
        decode_records(RecordBatchView(fewer))


def test_decode_rejects_bad_compressed_payload() -> None:
    from kompakt.records.builder import finish_crc

    raw = bytearray(build_batch([SimpleRecord(b"a", b"1" * 100)], compression=Compression.ZSTD))
    raw[BATCH_OVERHEAD + 2 :] = b"\x00" * (len(raw) - BATCH_OVERHEAD - 2)
    finish_crc(raw)
    view = RecordBatchView(raw)
    view.validate()  # the CRC is fine; the payload is not
    with pytest.raises(CompressionError):
        decode_records(view)


def test_unknown_codec_id() -> None:
    from kompakt.records.builder import finish_crc

    raw = bytearray(build_batch([SimpleRecord(b"a", b"1")]))
    struct.pack_into(">h", raw, 21, 5)
    finish_crc(raw)
    with pytest.raises(CompressionError, match="unknown"):
        decode_records(RecordBatchView(raw))


def test_compression_from_name() -> None:
    assert Compression.from_name("zstd") is Compression.ZSTD
    assert Compression.from_name(" GZIP ") is Compression.GZIP
    assert Compression.from_name("none") is Compression.NONE
    with pytest.raises(CompressionError):
        Compression.from_name("producer")


def test_repr_mentions_offsets() -> None:
    text = repr(RecordBatchView(build_batch([SimpleRecord(b"a", b"1")], base_offset=9)))
    assert "base_offset=9" in text and "last_offset=9" in text
