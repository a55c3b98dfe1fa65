"""The cleaner on both cores: the read-ahead walk (``ChunkPipeline``), the map pass hashed in
worker threads (``hash_spans``/``put_hashed``) and the copy pass answering from a sealed map's
bitmap of latest offsets. Each must leave exactly what the one-thread cleaner and the exact map
leave, and meet errors where a sequential read meets them."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.offset_map import ExactOffsetMap, HashedOffsetMap, OffsetMap, hash_spans
from kompakt.cleaner.pipeline import ChunkPipeline, Source
from kompakt.cleaner.segment_reader import Chunk, ReadBuffer, iter_chunks
from kompakt.cleaner.sizing import SLOT_BYTES
from kompakt.clock import FakeClock
from kompakt.errors import CorruptRecordError
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.native import Workspace
from kompakt.records.scan import Spans, scan_batches
from tests.cleaner._harness import all_records, lct_log, log_bytes

Records = list[tuple[bytes | None, bytes | None]]


def _batches(seed: int, n_batches: int, per_batch: int, keys: int) -> list[Records]:
    rng = random.Random(seed)
    out = []
    for _ in range(n_batches):
        recs: Records = []
        for _ in range(per_batch):
            k = None if rng.random() < 0.03 else f"k{rng.randrange(keys)}".encode()
            v = None if rng.random() < 0.1 else bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))
            recs.append((k, v))
        out.append(recs)
    return out


def _raw(batches: list[Records], first_offset: int = 0) -> bytes:
    parts, offset = [], first_offset
    for recs in batches:
        parts.append(build_batch([SimpleRecord(k, v, 0) for k, v in recs], base_offset=offset))
        offset += len(recs)
    return b"".join(parts)


def _segment_files(tmp_path: Path, count: int) -> list[Source]:
    sources, offset = [], 0
    for i in range(count):
        batches = _batches(i, 40, 7, 30)
        path = tmp_path / f"{offset:020d}.log"
        path.write_bytes(_raw(batches, offset))
        offset += sum(len(b) for b in batches)
        sources.append(Source(path, 0, path.stat().st_size))
    return sources


def _describe(chunk: Chunk, _workspace: Workspace) -> tuple[int, int, int]:
    return chunk.file_position, chunk.length, int(chunk.table.base_offset[0])


def _kernel_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kompakt-cleaner-work")]


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_walk_hands_out_every_chunk_in_log_order(tmp_path: Path, workers: int) -> None:
    sources = _segment_files(tmp_path, 3)
    expected = [
        (source.path, (c.file_position, c.length, int(c.table.base_offset[0])))
        for source in sources
        for c in iter_chunks(source.path, 0, source.end, ReadBuffer(4096))
    ]
    assert len(expected) > 3 * 3  # several chunks per segment
    walked = [
        (item.source.path, item.value) for item in ChunkPipeline(4096, workers).walk(sources, _describe)
    ]
    assert walked == expected


def test_a_bad_crc_is_raised_after_the_chunks_before_it(tmp_path: Path) -> None:
    sources = _segment_files(tmp_path, 2)
    chunks = list(iter_chunks(sources[1].path, 0, sources[1].end, ReadBuffer(4096)))
    bad_chunk = chunks[2]
    bad_at = bad_chunk.file_position + int(bad_chunk.table.position[1])
    data = bytearray(sources[1].path.read_bytes())
    data[bad_at + 70] ^= 0xFF  # inside the second batch's records
    sources[1].path.write_bytes(bytes(data))
    seen: list[tuple[Path, int]] = []
    with pytest.raises(CorruptRecordError, match=f"CRC mismatch.*at position {bad_at} "):
        for item in ChunkPipeline(4096, 2).walk(sources, _describe):
            seen.append((item.source.path, item.chunk.file_position))
    first_file = [
        (sources[0].path, c.file_position)
        for c in iter_chunks(sources[0].path, 0, sources[0].end, ReadBuffer(4096))
    ]
    assert seen == first_file + [(sources[1].path, c.file_position) for c in chunks[:2]]
    assert not _kernel_threads()


def test_stopping_a_walk_early_leaves_no_worker_behind(tmp_path: Path) -> None:
    sources = _segment_files(tmp_path, 2)
    pipeline = ChunkPipeline(4096, 2)
    for _ in pipeline.walk(sources, _describe):
        break
    assert not _kernel_threads()
    # The pipeline is usable again, from the start.
    assert len(list(pipeline.walk(sources, _describe))) > 3


def _spans_of(raw: bytes) -> tuple[np.ndarray, Spans]:
    buf = np.frombuffer(raw, dtype=np.uint8).copy()
    return buf, Spans.of_batches(scan_batches(buf, 0, len(buf)))


def _kept(m: OffsetMap, buf: np.ndarray, spans: Spans, *, all_put: bool) -> list[tuple[int, int]]:
    result = m.retain_spans(buf, spans, np.ones(len(spans), dtype=np.bool_), all_put=all_put)
    return list(zip(result.kept.offset.tolist(), result.kept.value_len.tolist(), strict=True))


@pytest.mark.parametrize("start", [0, 1, 137, 400])
def test_a_sealed_map_keeps_what_the_exact_map_keeps(start: int) -> None:
    buf, spans = _spans_of(_raw(_batches(5, 60, 8, 50)))
    last = 60 * 8 - 1
    exact = ExactOffsetMap(10_000, 0.9)
    exact.put_spans(buf, spans, start)
    exact.update_latest_offset(last)
    hashed = HashedOffsetMap(10_000 * SLOT_BYTES, 0.9)
    hashed.put_hashed(hash_spans(buf, spans, start))
    hashed.update_latest_offset(last)
    hashed.seal(start)
    expected = _kept(exact, buf, spans, all_put=True)
    assert len(expected) < 60 * 8 // 2  # most records are superseded
    assert _kept(hashed, buf, spans, all_put=True) == expected
    assert _kept(hashed, buf, spans, all_put=False) == expected


def test_a_map_not_filled_in_offset_order_is_answered_by_lookups() -> None:
    """Puts that go back in offsets (single puts here) leave a map where a record may be its
    key's latest without its offset being the one held; sealing must not use the bitmap."""
    buf, spans = _spans_of(_raw([[(b"a", b"1")], [(b"b", b"2")], [(b"a", b"3")]]))
    for m in (ExactOffsetMap(100, 0.9), HashedOffsetMap(100 * SLOT_BYTES, 0.9)):
        m.put(b"b", 1)
        m.put(b"a", 2)
        m.put(b"a", 0)  # back to an older offset: kept records are those at or above it
        m.update_latest_offset(2)
        m.seal(0)
        assert _kept(m, buf, spans, all_put=True) == [(0, 1), (1, 1), (2, 1)]


def _append(log: PartitionLog, clock: FakeClock, seed: int, n_batches: int) -> None:
    rng = random.Random(seed)
    for i, recs in enumerate(_batches(seed, n_batches, 5, 40)):
        codec = Compression.ZSTD if rng.random() < 0.3 else Compression.NONE
        log.append(build_batch([SimpleRecord(k, v, clock.now_ms()) for k, v in recs], compression=codec))
        if i % 50 == 49:
            log.roll()
    log.roll()


@pytest.mark.parametrize("workers", [1, 2])
def test_cleaning_on_workers_writes_what_one_thread_writes(tmp_path: Path, workers: int) -> None:
    clock = FakeClock()
    logs = [lct_log(tmp_path, clock, name=f"t-{i}", internal_segment_bytes=3000) for i in range(3)]
    maps: list[OffsetMap] = [
        ExactOffsetMap(100_000, 0.9),
        HashedOffsetMap(100_000 * SLOT_BYTES, 0.9),
        HashedOffsetMap(100_000 * SLOT_BYTES, 0.9),
    ]
    for log, m, w in zip(logs, maps, [0, 0, workers], strict=True):
        cleaner = Cleaner(0, m, clock, read_buffer_bytes=4096, workers=w)
        _append(log, clock, 3, 150)
        assert len(log.segments.values()) > 5
        dirty = cleaner.clean(log, 0, log.active_segment.base_offset).end_offset
        # A second clean meets the cleaned records below its first dirty offset.
        _append(log, clock, 4, 100)
        cleaner.clean(log, dirty, log.active_segment.base_offset)
    assert all_records(logs[2]) == all_records(logs[0])
    assert log_bytes(logs[2]) == log_bytes(logs[1])
