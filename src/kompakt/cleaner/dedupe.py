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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kompakt.cleaner.offset_map import OffsetMap
from kompakt.cleaner.segment_reader import Chunk, ReadBuffer, iter_chunks
from kompakt.cleaner.stats import CleanerStats
from kompakt.cleaner.throttler import Throttler
from kompakt.cleaner.transactions import TransactionTracker
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
from kompakt.records.native import I64Array, U8Array
from kompakt.records.scan import BatchTable, Spans

_PLAIN_RAW, _PLAIN_COMPRESSED, _SPECIAL = 0, 1, 2


@dataclass(slots=True)
class CleanerIo:
    """Per-thread resources of a cleaning pass."""

    read_buffer: ReadBuffer
    throttler: Throttler | None = None
    check_abort: Callable[[], None] = lambda: None

    def throttle(self, size_bytes: int) -> None:
        if self.throttler is not None:
            self.throttler.maybe_throttle(size_bytes)


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
    offset_map: OffsetMap, buf: U8Array, spans: Spans, last_offsets: I64Array, start: int
) -> tuple[bool, int]:
    """Put one run; return ``(full, records consumed in the run)``; keeps latest_offset right."""
    result = offset_map.put_spans(buf, spans, start)
    if not result.full:
        if len(last_offsets) and int(last_offsets[-1]) >= start:
            offset_map.update_latest_offset(int(last_offsets[-1]))
        return False, int(spans.records_count.sum())
    s = result.span
    latest = offset_map.latest_offset
    if s > 0 and int(last_offsets[s - 1]) >= start:
        latest = max(latest, int(last_offsets[s - 1]))
    offset_map.update_latest_offset(latest)
    return True, int(spans.records_count[:s].sum()) + result.records_done


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
        full, consumed = _put_run(offset_map, buf, spans, table.last_offset[i : i + 1], start)
        if full:
            return True, consumed
    if last_offset >= start:
        offset_map.update_latest_offset(last_offset)
    return False, int(table.records_count[i])


def _map_chunk(
    offset_map: OffsetMap, chunk: Chunk, start: int, tracker: TransactionTracker, stats: CleanerStats
) -> bool:
    table = chunk.table
    last_offsets = table.last_offset
    for kind, first, end in runs(batch_kinds(table)):
        if kind == _SPECIAL:
            for i in range(first, end):
                full, consumed = _map_special(offset_map, chunk, i, start, tracker)
                stats.index_messages_read(consumed)
                if full:
                    return True
            continue
        # Batches wholly below ``start`` hold nothing to put and do not move latest_offset.
        rel = first + int(np.searchsorted(last_offsets[first:end], start, side="left"))
        stats.index_messages_read(int(table.records_count[first:rel].sum()))
        if rel == end:
            continue
        if kind == _PLAIN_COMPRESSED:
            buf, spans = decompressed_spans(chunk.buf, table, rel, end)
        else:
            buf, spans = chunk.buf, Spans.of_batches(table, np.arange(rel, end, dtype=np.int64))
        full, consumed = _put_run(offset_map, buf, spans, last_offsets[rel:end], start)
        stats.index_messages_read(consumed)
        if full:
            return True
    return False


def _map_segment(
    segment: LogSegment,
    start: int,
    offset_map: OffsetMap,
    tracker: TransactionTracker,
    stats: CleanerStats,
    io: CleanerIo,
) -> bool:
    position = segment.offset_index.lookup(start)[1] if start > segment.base_offset else 0
    for chunk in iter_chunks(segment.log_path, position, segment.size, io.read_buffer):
        io.check_abort()
        stats.index_bytes_read(chunk.length)
        io.throttle(chunk.length)
        if _map_chunk(offset_map, chunk, start, tracker, stats):
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
    for idx, segment in enumerate(dirty):
        next_start = dirty[idx + 1].base_offset if idx + 1 < len(dirty) else end
        if _map_segment(segment, start, offset_map, tracker, stats, io):
            break
        offset_map.update_latest_offset(next_start - 1)
    stats.buffer_utilization = offset_map.utilization
