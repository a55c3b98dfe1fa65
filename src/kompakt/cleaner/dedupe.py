"""Building the offset map over the dirty section of one log (Kafka's ``Cleaner.buildOffsetMap``).

The map ends up holding, for each key seen in ``[start, end)``, the offset of its latest record,
and ``latest_offset`` tells how far the map reaches: the next dirty offset is ``latest_offset + 1``.
When the map fills (``max_keys_per_pass`` distinct keys), mapping stops at the record that did not
fit, so the pass cleans up to the last key put and the next pass starts there.

Hot path: each chunk of whole batches is split into runs of the same kind. A run of plain
uncompressed batches goes to the native ``put_spans`` kernel directly over the read buffer; a run
of plain compressed batches is decompressed into one payload buffer first; transactional and
control batches (rare) are handled one at a time, because they feed the transaction tracker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from kompakt.cleaner.offset_map import HashedOffsetMap, HashedSpans, OffsetMap, SpanPutResult, hash_spans
from kompakt.cleaner.pipeline import ChunkPipeline, Prepare, Prepared, Source
from kompakt.cleaner.segment_reader import Chunk, ReadBuffer
from kompakt.cleaner.stats import CleanerStats
from kompakt.cleaner.throttler import Throttler
from kompakt.cleaner.transactions import TransactionTracker
from kompakt.errors import CompressionError, CorruptRecordError
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    RecordBatchView,
)
from kompakt.records.compression import decompress
from kompakt.records.control import control_type_of
from kompakt.records.native import I64Array, U8Array, Workspace
from kompakt.records.scan import BatchTable, Spans

_PLAIN_RAW, _PLAIN_COMPRESSED, _SPECIAL = 0, 1, 2

T = TypeVar("T")


@dataclass(slots=True)
class CleanerIo:
    """Per-thread resources of a cleaning pass. Without a ``pipeline`` the pass reads through
    ``read_buffer`` and does all its work in the calling thread."""

    read_buffer: ReadBuffer
    throttler: Throttler | None = None
    check_abort: Callable[[], None] = lambda: None
    pipeline: ChunkPipeline | None = None

    def throttle(self, size_bytes: int) -> None:
        if self.throttler is not None:
            self.throttler.maybe_throttle(size_bytes)

    def walk(self, sources: Sequence[Source], prepare: Prepare[T]) -> Iterator[Prepared[T]]:
        """The chunks of ``sources`` in order, each with ``prepare``'s result (see ``ChunkPipeline``)."""
        pipeline = self.pipeline
        if pipeline is None:
            pipeline = self.pipeline = ChunkPipeline.inline(self.read_buffer)
        return pipeline.walk(sources, prepare)


def batch_kinds(table: BatchTable) -> I64Array:
    """Per batch: plain uncompressed, plain compressed, or transactional/control."""
    attrs = table.attributes
    kinds = np.where((attrs & ATTR_COMPRESSION_MASK) != 0, _PLAIN_COMPRESSED, _PLAIN_RAW)
    kinds = np.where((attrs & (ATTR_TRANSACTIONAL | ATTR_CONTROL)) != 0, _SPECIAL, kinds)
    return kinds.astype(np.int64)


def runs(kinds: I64Array) -> list[tuple[int, int, int]]:
    """``(kind, first, end)`` for each maximal run of equal kinds."""
    if len(kinds) == 0:
        return []
    cuts = np.flatnonzero(np.diff(kinds)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(kinds)]))
    return [(int(kinds[s]), int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def decompressed_spans(buf: U8Array, table: BatchTable, first: int, end: int) -> tuple[U8Array, Spans]:
    """Decompress the records sections of batches ``first:end`` into one buffer, with their spans."""
    payloads = []
    for i in range(first, end):
        pos = int(table.position[i])
        section = buf[pos + BATCH_OVERHEAD : pos + int(table.size[i])]
        payloads.append(decompress(int(table.attributes[i]) & ATTR_COMPRESSION_MASK, section.data))
    lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=len(payloads))
    ends = np.cumsum(lengths)
    joined = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    sl = slice(first, end)
    spans = Spans(
        ends - lengths, ends, table.base_offset[sl], table.base_timestamp[sl], table.records_count[sl]
    )
    return joined, spans


def _put_run(
    result: SpanPutResult, offset_map: OffsetMap, counts: I64Array, last_offsets: I64Array, start: int
) -> tuple[bool, int]:
    """After putting one run: ``(full, records consumed in the run)``; keeps latest_offset right."""
    if not result.full:
        if len(last_offsets) and int(last_offsets[-1]) >= start:
            offset_map.update_latest_offset(int(last_offsets[-1]))
        return False, int(counts.sum())
    s = result.span
    latest = offset_map.latest_offset
    if s > 0 and int(last_offsets[s - 1]) >= start:
        latest = max(latest, int(last_offsets[s - 1]))
    offset_map.update_latest_offset(latest)
    return True, int(counts[:s].sum()) + result.records_done


@dataclass(slots=True)
class _MapWork:
    """What a worker prepared for one chunk of the map pass: its runs of batch kinds and, with a
    hashed map, each plain run's records parsed and hashed, or the error that stopped it (by the
    run's first batch; raised only if the pass gets to that run, as the serial pass would)."""

    runs: list[tuple[int, int, int]]
    hashed: dict[int, HashedSpans | Exception] = field(default_factory=dict)


def _first_to_map(table: BatchTable, first: int, end: int, start: int) -> int:
    """The first batch of run ``first:end`` with anything at or above ``start`` (batches wholly
    below it hold nothing to put and do not move latest_offset)."""
    return first + int(np.searchsorted(table.last_offset[first:end], start, side="left"))


def _map_preparer(offset_map: OffsetMap, start: int) -> Prepare[_MapWork]:
    """The worker's part of the map pass: everything per chunk that needs no map (decompressing,
    parsing and hashing the plain batches' records)."""
    hashed_map = isinstance(offset_map, HashedOffsetMap)

    def prepare(chunk: Chunk, workspace: Workspace) -> _MapWork:
        table = chunk.table
        work = _MapWork(runs(batch_kinds(table)))
        if not hashed_map:
            return work
        for kind, first, end in work.runs:
            rel = _first_to_map(table, first, end, start)
            if kind == _SPECIAL or rel == end:
                continue
            # The workspace holds one run's arrays; a chunk mixing kinds of batches gets fresh
            # arrays for its later runs.
            scratch = None if work.hashed else workspace
            try:
                if kind == _PLAIN_COMPRESSED:
                    buf, spans = decompressed_spans(chunk.buf, table, rel, end)
                else:
                    buf, spans = chunk.buf, Spans.of_batches(table, np.arange(rel, end, dtype=np.int64))
                work.hashed[first] = hash_spans(buf, spans, start, scratch)
            except (CompressionError, CorruptRecordError) as exc:
                work.hashed[first] = exc
        return work

    return prepare


def _map_special(
    offset_map: OffsetMap, chunk: Chunk, i: int, start: int, tracker: TransactionTracker
) -> tuple[bool, int]:
    table = chunk.table
    pos = int(table.position[i])
    last_offset = int(table.last_offset[i])
    pid = int(table.producer_id[i])
    if int(table.attributes[i]) & ATTR_CONTROL:
        view = RecordBatchView(chunk.buf[pos : pos + int(table.size[i])].data)
        tracker.on_control_batch_read(pid, control_type_of(view), last_offset)
    elif not tracker.on_batch_read(pid, True, last_offset):
        if int(table.attributes[i]) & ATTR_COMPRESSION_MASK:
            buf, spans = decompressed_spans(chunk.buf, table, i, i + 1)
        else:
            buf, spans = chunk.buf, Spans.of_batches(table, np.array([i], dtype=np.int64))
        result = offset_map.put_spans(buf, spans, start)
        full, consumed = _put_run(
            result, offset_map, spans.records_count, table.last_offset[i : i + 1], start
        )
        if full:
            return True, consumed
    if last_offset >= start:
        offset_map.update_latest_offset(last_offset)
    return False, int(table.records_count[i])


def _map_chunk(
    offset_map: OffsetMap,
    chunk: Chunk,
    work: _MapWork,
    start: int,
    tracker: TransactionTracker,
    stats: CleanerStats,
) -> bool:
    table = chunk.table
    last_offsets = table.last_offset
    for kind, first, end in work.runs:
        if kind == _SPECIAL:
            for i in range(first, end):
                full, consumed = _map_special(offset_map, chunk, i, start, tracker)
                stats.index_messages_read(consumed)
                if full:
                    return True
            continue
        rel = _first_to_map(table, first, end, start)
        stats.index_messages_read(int(table.records_count[first:rel].sum()))
        if rel == end:
            continue
        hashed = work.hashed.get(first)
        if isinstance(hashed, Exception):
            raise hashed
        if hashed is not None:
            assert isinstance(offset_map, HashedOffsetMap)
            result = offset_map.put_hashed(hashed)
        else:
            if kind == _PLAIN_COMPRESSED:
                buf, spans = decompressed_spans(chunk.buf, table, rel, end)
            else:
                buf, spans = chunk.buf, Spans.of_batches(table, np.arange(rel, end, dtype=np.int64))
            result = offset_map.put_spans(buf, spans, start)
        full, consumed = _put_run(
            result, offset_map, table.records_count[rel:end], last_offsets[rel:end], start
        )
        stats.index_messages_read(consumed)
        if full:
            return True
    return False


def build_offset_map(
    log: PartitionLog, start: int, end: int, offset_map: OffsetMap, stats: CleanerStats, io: CleanerIo
) -> None:
    """Fill ``offset_map`` from the records of ``[start, end)``; ``end`` is segment-aligned."""
    offset_map.clear()
    dirty = [s for s in log.segments.values(start, end) if s.base_offset < end]
    tracker = TransactionTracker()
    tracker.add_aborted(log.collect_aborted_transactions(start, end))
    sources = [Source(s.log_path, _map_position(s, start), s.size) for s in dirty]
    done = 0  # segments walked to their end

    def segment_done() -> None:
        nonlocal done
        next_start = dirty[done + 1].base_offset if done + 1 < len(dirty) else end
        offset_map.update_latest_offset(next_start - 1)
        done += 1

    for item in io.walk(sources, _map_preparer(offset_map, start)):
        while sources[done] is not item.source:
            segment_done()
        io.check_abort()
        stats.index_bytes_read(item.chunk.length)
        io.throttle(item.chunk.length)
        if _map_chunk(offset_map, item.chunk, item.value, start, tracker, stats):
            break
    else:
        while done < len(dirty):
            segment_done()
    stats.buffer_utilization = offset_map.utilization
    offset_map.seal(start)


def _map_position(segment: LogSegment, start: int) -> int:
    return segment.offset_index.lookup(start)[1] if start > segment.base_offset else 0
