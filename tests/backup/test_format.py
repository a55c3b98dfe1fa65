"""The backup format without a broker: segments, verification, manifest, config parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.backup.config import ErasureConfig, parse_backup_config, parse_restore_config
from kompakt.backup.erasure import RecordFilter
from kompakt.backup.errors import BackupConfigError, CorruptBackupError
from kompakt.backup.manifest import FORMAT_VERSION, Manifest, PartitionEntry
from kompakt.backup.segment import SegmentBuilder, sha256_hex, verify_segment
from kompakt.records.batch import TimestampType, iter_batches
from kompakt.records.compression import Compression
from kompakt.records.record import Record, decode_records


def _build() -> tuple[bytes, SegmentBuilder]:
    builder = SegmentBuilder(Compression.ZSTD, None, 1024, delete_retention_ms=1000)
    builder.add(5, 100, TimestampType.CREATE_TIME, b"a", b"1", [("h", None)], 50)
    builder.add(7, 101, TimestampType.CREATE_TIME, b"b", None, [], 60)  # a gap at 6
    builder.add(8, 500, TimestampType.LOG_APPEND_TIME, b"c", b"", [], 70)
    builder.add(9, 600, TimestampType.LOG_APPEND_TIME, None, b"x", [], 70)
    built = builder.finish()
    return built.data, builder


def test_segment_keeps_offsets_nulls_types_and_horizons() -> None:
    data, _ = _build()
    batches = list(iter_batches(data))
    # Cut where the timestamp type changes, and where the LogAppendTime time changes.
    assert [(b.base_offset, b.last_offset, b.timestamp_type) for b in batches] == [
        (5, 7, TimestampType.CREATE_TIME),
        (8, 8, TimestampType.LOG_APPEND_TIME),
        (9, 9, TimestampType.LOG_APPEND_TIME),
    ]
    assert batches[0].delete_horizon_ms == 60 + 1000 and batches[1].delete_horizon_ms is None
    assert all(b.compression == Compression.ZSTD for b in batches)
    records = [r for b in batches for r in decode_records(b)]
    assert records == [
        Record(5, 100, b"a", b"1", (("h", None),)),
        Record(7, 101, b"b", None, ()),
        Record(8, 500, b"c", b"", ()),
        Record(9, 600, None, b"x", ()),
    ]


def test_verify_segment_catches_every_kind_of_damage() -> None:
    data, _ = _build()
    good = {"name": "f", "sha256": sha256_hex(data), "first_offset": 5, "last_offset": 9, "records": 4}
    assert len(verify_segment(data, **good)) == 3  # type: ignore[arg-type]
    flipped = bytearray(data)
    flipped[70] ^= 1
    with pytest.raises(CorruptBackupError, match="checksum mismatch"):
        verify_segment(bytes(flipped), **good)  # type: ignore[arg-type]
    with pytest.raises(CorruptBackupError, match="CRC|crc|corrupt|Corrupt"):
        verify_segment(bytes(flipped), **{**good, "sha256": sha256_hex(bytes(flipped))})  # type: ignore[arg-type]
    truncated = data[:-3]
    with pytest.raises(CorruptBackupError, match="truncated"):
        verify_segment(truncated, **{**good, "sha256": sha256_hex(truncated)})  # type: ignore[arg-type]
    with pytest.raises(CorruptBackupError, match="manifest says 5..10"):
        verify_segment(data, **{**good, "last_offset": 10})  # type: ignore[arg-type]


def test_manifest_round_trip_and_gap_merging() -> None:
    entry = PartitionEntry("t", 0, 0, 10, 0)
    entry.add_gap(2, 3)
    entry.add_gap(4, 4)
    entry.add_gap(7, 8)
    assert entry.gaps == [[2, 4], [7, 8]] and entry.gap_offsets == 5
    manifest = Manifest(
        "b", 1, 2, "complete", {"bootstrap_servers": "x"}, "zstd", partitions={("t", 0): entry}
    )
    raw = manifest.to_json()
    assert raw["version"] == FORMAT_VERSION
    assert Manifest.from_json(raw).partitions[("t", 0)].gaps == [[2, 4], [7, 8]]
    with pytest.raises(CorruptBackupError, match="version 99"):
        Manifest.from_json({**raw, "version": 99})


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    base = {"backup_id": "b", "source": {"bootstrap_servers": "h:1"}}
    assert parse_backup_config(base).compression == "zstd"
    for bad, message in [
        ({**base, "backup_id": "a/b"}, "backup_id"),
        ({**base, "backup": {"start_offset": "middle"}}, "start_offset"),
        ({**base, "backup": {"continuous": True, "stop_at_current_offsets": True}}, "cannot both"),
        ({**base, "storage": {"backend": "s3"}}, "storage.bucket"),
        ({"backup_id": "b", "source": {}}, "bootstrap_servers"),
    ]:
        with pytest.raises(BackupConfigError, match=message):
            parse_backup_config(bad)
    target = {"backup_id": "b", "target": {"bootstrap_servers": "h:1"}}
    config = parse_restore_config(
        {
            **target,
            "restore": {"time_window_start": "2024-01-01T00:00:00Z", "erasure": {"keys": ["base64:AAE="]}},
        }
    )
    assert config.time_window_start == 1704067200000 and config.erasure.keys == {b"\x00\x01"}
    with pytest.raises(BackupConfigError, match="exactly one"):
        parse_restore_config({"backup_id": "b", "target": {}})
    with pytest.raises(BackupConfigError, match="keys_file"):
        parse_restore_config({**target, "restore": {"erasure": {"keys_file": "missing.txt"}}}, tmp_path)


def test_filter_window_and_tombstone_once() -> None:
    spec = RecordFilter(10, 20, ErasureConfig(frozenset({b"k"}), "tombstone"))
    part = spec.for_partition()
    records = [
        Record(0, 5, b"a", b"1"),
        Record(1, 10, b"k", b"1"),
        Record(2, 15, b"k", b"2"),
        Record(3, 20, b"b", b""),
    ]
    kept, changed = part.apply(records)
    assert changed and kept == [Record(1, 10, b"k", None, ()), Record(3, 20, b"b", b"")]
    assert (part.counts.outside_window, part.counts.erased, part.counts.tombstoned) == (1, 1, 1)


def test_fast_encoder_matches_build_batch() -> None:
    from kompakt.backup.segment import encode_batch
    from kompakt.records.builder import SimpleRecord, build_batch

    records = [
        (100, 1_000, b"k", b"v" * 300, [("h", b"x"), ("n", None)]),
        (103, 999, None, b"", []),
        (70_000 + 100, 5_000_000_000, b"t", None, []),
    ]
    for codec in (Compression.NONE, Compression.ZSTD, Compression.LZ4):
        for horizon in (None, 123_456_789):
            fast = encode_batch(
                records,
                compression=codec,
                compression_level=None,
                timestamp_type=TimestampType.CREATE_TIME,
                delete_horizon_ms=horizon,
            )
            slow = build_batch(
                [SimpleRecord(k, v, t, tuple(h), o - 100) for o, t, k, v, h in records],
                base_offset=100,
                compression=codec,
                delete_horizon_ms=horizon,
            )
            assert fast == slow
