"""The backup's data path without a broker (issue 33): what a Fetch answer becomes in a backup,
what a stored batch becomes in a Produce, and the check of a file read in pieces."""

from __future__ import annotations

import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kompakt.backup import wire
from kompakt.backup.batches import (
    BACKUP_CODEC_EPOCH,
    HEADER_ORIGINAL_OFFSET,
    HEADER_OSO,
    backup_compressed,
    for_produce,
    ingest,
)
from kompakt.backup.errors import BackupError, CorruptBackupError
from kompakt.backup.reader import as_restored
from kompakt.backup.restore import ORIGINAL_OFFSET_HEADER, _oso_headers
from kompakt.backup.segment import (
    BatchSegment,
    SegmentBuilder,
    StreamCheck,
    segment_path,
    sha256_hex,
    verify_segment,
)
from kompakt.backup.storage import FilesystemStorage
from kompakt.protocol import client
from kompakt.records.batch import BATCH_OVERHEAD, RecordBatchView, TimestampType, iter_batches
from kompakt.records.builder import SimpleRecord, build_batch, finish_crc
from kompakt.records.compression import Compression
from kompakt.records.control import ControlType, build_control_batch
from kompakt.records.record import Record, decode_records

PID = 7


def _records(batch: bytes | bytearray | memoryview) -> list[Record]:
    return [r for b in iter_batches(batch) for r in decode_records(b)]


def _ingest(data: bytes, **kwargs: object) -> object:
    args: dict[str, object] = {
        "next_offset": 0,
        "target": None,
        "aborted": [],
        "retention_ms": None,
        "consumed_ms": 1_000,
        "batch_max_bytes": 1 << 20,
        "where": "t-0",
    }
    args.update(kwargs)
    return ingest(data, **args)  # type: ignore[arg-type]


def _txn(base: int, values: list[bytes], pid: int = PID) -> bytes:
    return build_batch(
        [SimpleRecord(b"k", v, 100 + i, (), i) for i, v in enumerate(values)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=3,
        base_sequence=base,
        is_transactional=True,
        partition_leader_epoch=9,
    )


def test_aborted_transactions_and_markers_are_left_out_and_producer_ids_cleared() -> None:
    answer = (
        _txn(0, [b"a", b"b"])
        + build_control_batch(ControlType.COMMIT, producer_id=PID, producer_epoch=3, base_offset=2)
        + _txn(3, [b"x", b"y"])  # aborted: the answer lists (PID, 3)
        + build_control_batch(ControlType.ABORT, producer_id=PID, producer_epoch=3, base_offset=5)
        + _txn(6, [b"c"])
        + build_control_batch(ControlType.COMMIT, producer_id=PID, producer_epoch=3, base_offset=7)
        + build_batch([SimpleRecord(b"p", b"plain", 5)], base_offset=8)
    )
    chunk = _ingest(answer, aborted=[(PID, 3)])
    stored = chunk.batches  # type: ignore[attr-defined]
    assert [(s.base_offset, s.last_offset) for s in stored] == [(0, 1), (6, 6), (8, 8)]
    assert [r.value for s in stored for r in _records(s.data)] == [b"a", b"b", b"c", b"plain"]
    for s in stored:
        view = RecordBatchView(s.data)
        assert view.is_valid() and not view.is_transactional
        assert (view.producer_id, view.producer_epoch, view.base_sequence) == (-1, -1, -1)
        assert view.partition_leader_epoch == -1
    # The committed batches are the producer's own bytes: only the header changed.
    assert bytes(stored[0].body) == bytes(RecordBatchView(_txn(0, [b"a", b"b"])).records_section)
    assert chunk.fetch_end == 9  # type: ignore[attr-defined]


def test_a_corrupt_batch_stops_the_backup_at_its_offset() -> None:
    good = build_batch([SimpleRecord(b"k", b"v" * 100, 1)], base_offset=0)
    bad = bytearray(build_batch([SimpleRecord(b"k", b"w" * 100, 1)], base_offset=1))
    bad[-5] ^= 0xFF
    with pytest.raises(BackupError, match="t-0: the batch at offset 1 fails its CRC-32C check"):
        _ingest(good + bytes(bad))


def test_tombstone_batches_get_a_horizon_no_earlier_than_consumed_plus_retention() -> None:
    tombstones = build_batch([SimpleRecord(b"a", b"1", 10, (), 0), SimpleRecord(b"b", None, 11, (), 1)])
    late = build_batch(
        [SimpleRecord(b"c", None, 12, (), 0)], base_offset=2, delete_horizon_ms=10**12
    )  # the source's own horizon, later than the backup's: kept
    values = build_batch([SimpleRecord(b"d", b"4", 13, (), 0)], base_offset=3)
    chunk = _ingest(tombstones + late + values, retention_ms=5_000, consumed_ms=1_000_000)
    stored = chunk.batches  # type: ignore[attr-defined]
    horizons = [RecordBatchView(s.data).delete_horizon_ms for s in stored]
    assert horizons == [1_005_000, 10**12, None]
    assert [s.tombstones for s in stored] == [1, 1, 0]
    # Timestamps survive the new base timestamp.
    assert [(r.offset, r.timestamp, r.value) for s in stored for r in _records(s.data)] == [
        (0, 10, b"1"),
        (1, 11, None),
        (2, 12, None),
        (3, 13, b"4"),
    ]
    # Not a compacted topic: nothing is stamped.
    plain = _ingest(tombstones, retention_ms=None)
    assert RecordBatchView(plain.batches[0].data).delete_horizon_ms is None  # type: ignore[attr-defined]


def test_big_batches_are_cut_and_records_outside_the_range_trimmed_at_their_offsets() -> None:
    batch = build_batch(
        [SimpleRecord(b"k%d" % i, b"v" * 1000, 50 + i, (("h", b"x"),), i * 2) for i in range(10)],
        base_offset=100,
        compression=Compression.LZ4,
    )
    chunk = _ingest(batch, next_offset=104, target=115, batch_max_bytes=3000)
    stored = chunk.batches  # type: ignore[attr-defined]
    assert [(s.base_offset, s.records) for s in stored] == [(104, 3), (110, 3)]
    assert [r.offset for s in stored for r in _records(s.data)] == [104, 106, 108, 110, 112, 114]
    assert all(r.headers == (("h", b"x"),) for s in stored for r in _records(s.data))
    assert chunk.reached_target  # type: ignore[attr-defined]


def test_a_segment_compresses_while_it_pays() -> None:
    text = [build_batch([SimpleRecord(b"k", b"abc" * 40_000, 1)], base_offset=i) for i in range(12)]
    noise = [build_batch([SimpleRecord(b"k", os.urandom(120_000), 1)], base_offset=i) for i in range(12)]
    for batches, want in ((text, {Compression.ZSTD}), (noise, {Compression.ZSTD, Compression.NONE})):
        segment = BatchSegment(Compression.ZSTD, 1)
        for stored in _ingest(b"".join(batches)).batches:  # type: ignore[attr-defined]
            segment.add(stored)
        built = segment.finish()
        data = b"".join(bytes(p) for p in built.data)
        assert built.sha256 == sha256_hex(data)
        codecs = [b.compression for b in iter_batches(data)]
        assert set(codecs) == want
        if Compression.NONE in want:  # the first MiB showed it does not pay: the rest is stored as it is
            assert codecs[-1] == Compression.NONE and codecs[0] == Compression.ZSTD
        assert [r.value for r in _records(data)] == [r.value for b in batches for r in _records(b)]


def test_a_stored_batch_becomes_a_produce_batch() -> None:
    plain = build_batch([SimpleRecord(b"k%d" % i, b"v", 10 + i, (), i) for i in range(3)], base_offset=40)
    out = for_produce(memoryview(plain), producer_id=5, producer_epoch=1, sequence=77)
    view = RecordBatchView(out.data)
    assert view.is_valid() and view.base_offset == 0
    assert (view.producer_id, view.producer_epoch, view.base_sequence) == (5, 1, 77)
    assert bytes(view.records_section) == bytes(RecordBatchView(plain).records_section)  # not re-encoded
    assert out.originals is None and out.base_original == 40

    # Holes, a delete horizon and LogAppendTime: rebuilt, with contiguous deltas and the headers.
    holes = build_batch(
        [SimpleRecord(b"a", None, 0, (("x", None),), 0), SimpleRecord(b"b", b"", 0, (), 5)],
        base_offset=90,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=1_234,
        delete_horizon_ms=9_999,
        compression=Compression.ZSTD,
    )
    out = for_produce(
        memoryview(holes),
        producer_id=5,
        producer_epoch=1,
        sequence=80,
        headers=HEADER_ORIGINAL_OFFSET | HEADER_OSO,
        partition=3,
    )
    view = RecordBatchView(out.data)
    assert view.is_valid() and view.compression == Compression.ZSTD
    assert view.timestamp_type == TimestampType.CREATE_TIME and view.delete_horizon_ms is None
    assert (view.last_offset_delta, view.records_count, view.base_sequence) == (1, 2, 80)
    assert out.originals is not None and out.originals.tolist() == [90, 95]
    got = decode_records(view)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (0, 1_234, b"a", None),
        (1, 1_234, b"b", b""),
    ]
    assert list(got[0].headers) == [("x", None), (ORIGINAL_OFFSET_HEADER, b"90"), *_oso_headers(90, 1_234, 3)]
    assert list(got[1].headers) == [(ORIGINAL_OFFSET_HEADER, b"95"), *_oso_headers(95, 1_234, 3)]


def test_a_file_checked_in_pieces_says_what_the_whole_file_check_says() -> None:
    builder = SegmentBuilder(Compression.NONE, None, 2_000, None)
    for i in range(300):
        builder.add(i * 2, 1_000 + i, TimestampType.CREATE_TIME, b"k%d" % i, b"v" * (i % 50), [], 0)
    built = builder.finish()
    data = built.data
    assert isinstance(data, bytes)
    entry = {
        "name": "f",
        "sha256": built.sha256,
        "first_offset": built.first_offset,
        "last_offset": built.last_offset,
        "records": built.records,
    }
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 1
    cases = [
        (data, {}),
        (bytes(flipped), {}),
        (bytes(flipped), {"sha256": sha256_hex(bytes(flipped))}),
        (data[:-3], {"sha256": sha256_hex(data[:-3])}),
        (data, {"records": 3}),
        (data, {"last_offset": 5}),
    ]
    for content, changes in cases:
        args = {**entry, **changes}
        try:
            verify_segment(content, **args)  # type: ignore[arg-type]
            whole = "ok"
        except CorruptBackupError as exc:
            whole = str(exc)
        for piece in (1, 61, 1000, len(content)):
            check = StreamCheck(**args)  # type: ignore[arg-type]
            for i in range(0, len(content), piece):
                check.feed(content[i : i + piece])
            try:
                check.finish()
                pieces = "ok"
            except CorruptBackupError as exc:
                pieces = str(exc)
            assert pieces == whole, (piece, changes)


def test_a_segment_is_on_disk_as_it_grows_and_appears_whole_at_its_put(tmp_path: Path) -> None:
    """A staged segment (issue 33): each batch reaches its file when it is added, not when the
    segment is full; the key appears only at the put, whole and with the hash the manifest keeps."""
    storage = FilesystemStorage(tmp_path)
    key = f"b/{segment_path('t', 0, 0)}"
    segment = BatchSegment(
        Compression.NONE, None, stage=lambda first: storage.stage(f"b/{segment_path('t', 0, first)}")
    )
    data = b"".join(build_batch([SimpleRecord(b"k", bytes([i]) * 5000, 1)], base_offset=i) for i in range(6))
    for stored in _ingest(data).batches:  # type: ignore[attr-defined]
        segment.add(stored)
        staged = list((tmp_path / "b/topics/t-0").glob("*.tmp"))
        assert len(staged) == 1 and staged[0].stat().st_size == segment.size
        assert storage.list("b/") == []
    built = segment.finish()
    storage.put(key, built.data)
    assert storage.get(key) == data
    assert built.sha256 == sha256_hex(data) and built.size == len(data)
    assert storage.list("b/") == [key] and not list(tmp_path.rglob("*.tmp"))


def test_a_staged_segment_that_is_not_put_leaves_nothing(tmp_path: Path) -> None:
    storage = FilesystemStorage(tmp_path)
    segment = BatchSegment(
        Compression.NONE, None, stage=lambda first: storage.stage(f"b/{segment_path('t', 0, first)}")
    )
    for stored in _ingest(build_batch([SimpleRecord(b"k", b"v", 1)], base_offset=3)).batches:  # type: ignore[attr-defined]
        segment.add(stored)
    segment.discard()
    assert storage.list("") == [] and not list(tmp_path.rglob("*.tmp"))


def test_an_answer_read_ahead_is_handed_over_and_a_close_wakes_its_reader() -> None:
    """The backup reads a connection's next Fetch answer on a thread of its own (issue 33): the
    thread that takes it gets that answer's error (or records), and closing the connection while
    the broker says nothing ends the reader at once instead of after the connection's timeout."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        fetcher = wire.Fetcher(client.Connection("127.0.0.1", port, 30.0), 12)
        peer, _ = server.accept()
        with peer:
            wire.receive_ahead(fetcher, 1, 100)
            reading = fetcher.reading
            assert reading is not None and not reading.done.wait(0.2)  # the broker has not answered
            started = time.monotonic()
            wire.close_fetcher(fetcher)
            assert reading.done.wait(10) and time.monotonic() - started < 10
            assert isinstance(reading.error, BackupError)

        fetcher = wire.Fetcher(client.Connection("127.0.0.1", port, 30.0), 12)
        peer, _ = server.accept()
        with peer:
            wire.receive_ahead(fetcher, 1, 100)
            peer.sendall((5).to_bytes(4, "big") + b"\x00" * 5)  # a frame that is no Fetch answer
            with pytest.raises(BackupError, match="Fetch"):
                wire.receive_fetch(fetcher, 1, 100)
            assert fetcher.reading is None
            wire.close_fetcher(fetcher)


def _file_of(answer: bytes, segment: BatchSegment) -> bytes:
    for stored in _ingest(answer).batches:  # type: ignore[attr-defined]
        segment.add(stored)
    return b"".join(bytes(p) for p in segment.finish().data)  # type: ignore[union-attr]


@pytest.mark.parametrize("threads", [0, 2])
def test_a_restore_gets_back_the_batches_the_backup_compressed_as_the_source_had_them(threads: int) -> None:
    """Issue 33: a zstd backup compresses the batches the producer did not; the restore gives
    those back byte for byte, while a producer's own zstd batch stays as the producer sent it,
    and so does every batch after compression stopped paying in the segment."""
    text = [SimpleRecord(b"k%d" % i, b"text %d " % i * 300, 100 + i, (("h", b"x"),), i) for i in range(20)]
    source = [
        build_batch(text[:7], base_offset=0),
        build_batch(text[7:12], base_offset=7, compression=Compression.ZSTD),  # the producer's zstd
        build_batch(text[12:], base_offset=12),
        *[build_batch([SimpleRecord(b"r", os.urandom(300_000), 5)], base_offset=20 + i) for i in range(6)],
    ]
    data = _file_of(b"".join(source), BatchSegment(Compression.ZSTD, 1))
    stored = list(iter_batches(data))
    # Stored: zstd three times (twice the backup's, marked), then the noise compressed while the
    # first MiB was sampled, then stored as it is.
    codecs = [(b.compression, b.producer_epoch) for b in stored]
    assert codecs[:3] == [(Compression.ZSTD, BACKUP_CODEC_EPOCH), (Compression.ZSTD, -1)] + [
        (Compression.ZSTD, BACKUP_CODEC_EPOCH)
    ]
    assert (Compression.ZSTD, BACKUP_CODEC_EPOCH) in codecs[3:] and codecs[-1] == (Compression.NONE, -1)
    assert [backup_compressed(b.raw) for b in stored] == [e == BACKUP_CODEC_EPOCH for _, e in codecs]
    assert all(b.is_valid() for b in stored)

    pool = ThreadPoolExecutor(threads) if threads else None
    try:
        restored = list(as_restored(stored, pool, "f.log"))
    finally:
        if pool is not None:
            pool.shutdown()
    assert [s is b for s, b in restored] == [not backup_compressed(s.raw) for s, _ in restored]
    # Every batch is the source's, byte for byte: the producer's zstd one because it was never
    # touched, the others because the backup's compression is undone.
    assert [bytes(b.raw) for _, b in restored] == source


def test_batches_built_from_consumed_records_are_marked_and_a_bad_payload_is_named() -> None:
    builder = SegmentBuilder(Compression.ZSTD, None, 1 << 20, None)
    for i in range(5):
        builder.add(i * 3, 1_000 + i, TimestampType.CREATE_TIME, b"k%d" % i, b"v" * 500, [], 0)
    data = builder.finish().data
    assert isinstance(data, bytes)
    (view,) = iter_batches(data)
    assert view.compression == Compression.ZSTD and backup_compressed(view.raw)
    ((_, back),) = as_restored([view], None, "f.log")
    assert back.compression == Compression.NONE and back.is_valid() and back.producer_epoch == -1
    assert decode_records(back) == decode_records(view)

    broken = bytearray(data[:BATCH_OVERHEAD]) + b"not zstd at all"
    broken[8:12] = (len(broken) - 12).to_bytes(4, "big")
    bad = RecordBatchView(finish_crc(broken))
    assert bad.is_valid()  # the CRC holds: the backup wrote it so
    with pytest.raises(CorruptBackupError, match=r"f\.log: batch at offset 0: invalid zstd"):
        list(as_restored([bad], None, "f.log"))
    with ThreadPoolExecutor(1) as pool, pytest.raises(CorruptBackupError, match=r"f\.log: batch at offset 0"):
        list(as_restored([view, bad], pool, "f.log"))


def test_an_lz4_backup_gives_back_its_batches_and_a_restore_codec_keeps_the_stored_one() -> None:
    text = [SimpleRecord(b"k%d" % i, b"lz4 %d " % i * 200, 7, (), i) for i in range(5)]
    source = [build_batch(text, base_offset=b * 5) for b in range(3)]
    stored = list(iter_batches(_file_of(b"".join(source), BatchSegment(Compression.LZ4, None))))
    assert [(b.compression, backup_compressed(b.raw)) for b in stored] == [(Compression.LZ4, True)] * 3
    assert [bytes(b.raw) for _, b in as_restored(stored, None, "f.log")] == source
    # restore.producer_compression: the stored batch goes out with that codec, under the
    # restore's producer (the mark gone with the rest of the stored producer fields).
    producer = {"producer_id": 5, "producer_epoch": 1, "sequence": 0}
    view = RecordBatchView(for_produce(stored[0].raw, **producer, compression=Compression.LZ4).data)
    assert view.is_valid() and view.compression == Compression.LZ4 and view.producer_epoch == 1
    assert bytes(view.records_section) == bytes(stored[0].records_section)
    view = RecordBatchView(for_produce(stored[0].raw, **producer, compression=Compression.NONE).data)
    assert bytes(view.records_section) == bytes(RecordBatchView(source[0]).records_section)
