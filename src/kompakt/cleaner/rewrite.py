"""Rewriting one group of segments into a ``.cleaned`` segment (Kafka's ``Cleaner.cleanInto``).

For each source batch the pass decides, in Kafka's order (``checkBatchRetention`` of ``Cleaner.cleanInto``'s
filter): keep an empty header for an active producer's last batch or for the batch ending at the round's upper
bound; drop a batch whose records are all discardable (aborted data, expired markers); otherwise filter its
records against the offset map (``Cleaner.shouldRetainRecord``). A batch that keeps every record and needs no
delete horizon is copied byte for byte; one that loses records or needs a horizon is rebuilt with the same
base offset, last offset delta, producer fields, codec and timestamp type, and a new CRC
(``MemoryRecords.filterTo``).

Hot path: header decisions are numpy operations over the chunk's batch table; record filtering and
re-encoding are native kernels over whole runs of batches; only rebuilt batches cost a few Python
operations each (header, optional compression, CRC), and transactional/control batches are
handled one by one because they drive the transaction tracker.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from dataclasses import dataclass, field

import numpy as np

from kompakt.cleaner.dedupe import CleanerIo, decompressed_spans
from kompakt.cleaner.kernels.rewrite import rewrite_batches
from kompakt.cleaner.offset_map import OffsetMap
from kompakt.cleaner.pipeline import Prepare, Prepared
from kompakt.cleaner.readers import TombstoneHold
from kompakt.cleaner.segment_reader import Chunk
from kompakt.cleaner.stats import CleanerStats
from kompakt.cleaner.transactions import TransactionTracker
from kompakt.errors import CompressionError, CorruptRecordError
from kompakt.log.segment import LogSegment
from kompakt.log.txn_index import AbortedTxn
from kompakt.records import checksum
from kompakt.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    CRC_START,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    RecordBatchView,
)
from kompakt.records.compression import Compression, compress
from kompakt.records.control import control_type_of
from kompakt.records.layout import B_BASE_OFFSET, B_BASE_SEQ, B_EPOCH, B_LAST_DELTA, B_PEPOCH, B_PID
from kompakt.records.native import BoolArray, I64Array, U8Array, Workspace
from kompakt.records.scan import BatchTable, RecordTable, Spans, scan_records

_U32 = struct.Struct(">I")

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FilterContext:
    """Everything one cleaning round's rewrite decisions depend on."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    upper_bound_offset: int
    active_producers: dict[int, tuple[int | None, int]]
    tracker: TransactionTracker
    stats: CleanerStats
    workspace: Workspace
    reindex: list[AbortedTxn] = field(default_factory=list)
    #: kompakt's reader hold (beyond Kafka): batches past their horizon that a named group or a
    #: backup has not read keep their tombstones and markers (:mod:`kompakt.cleaner.readers`).
    hold: TombstoneHold | None = None


def horizon_held(
    hold: TombstoneHold | None, has_horizon: BoolArray, horizon: I64Array, last_offset: I64Array, now_ms: int
) -> BoolArray:
    """Per batch: stamped, and kept past its delete horizon by a reader that has not read it yet
    (kompakt's reader hold, :class:`~kompakt.cleaner.readers.TombstoneHold`; none without a hold)."""
    if hold is None:
        return np.zeros(len(has_horizon), dtype=np.bool_)
    return has_horizon & hold.held(horizon, last_offset, now_ms)


def past_delete_horizon(has_horizon: BoolArray, horizon: I64Array, held: BoolArray, now_ms: int) -> BoolArray:
    """Per batch: whether a clean at ``now_ms`` removes its tombstones and, where its transaction
    needs it no more, its marker: the batch carries a delete horizon (stamped by an earlier clean,
    KIP-534), the horizon has passed, and no reader holds it (``held``, :func:`horizon_held`).

    The one statement of the rule: the rewrite applies it (a tombstone is retained unless this
    holds, ``Cleaner.shouldRetainRecord``; a control batch goes when this holds and
    ``CleanedTransactionMetadata`` may discard it), and ``kompakt log explain`` predicts with it.
    ``horizon`` is the batch's base timestamp where ``has_horizon``; anything elsewhere.
    """
    return has_horizon & (horizon <= now_ms) & ~held


@dataclass(slots=True)
class _Output:
    """Output of one chunk, in order: byte pieces (single batches or verbatim runs of batches)
    plus, per output batch, the header facts the segment indexes by (Kafka's per-batch rule)."""

    pieces: list[bytes | bytearray | memoryview] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)
    max_timestamps: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


def _empty_header(table: BatchTable, i: int) -> bytearray:
    """``MemoryRecords.filterTo``'s empty batch: a 61-byte header keeping the batch's offsets and producer
    fields, with no records."""
    attrs = int(table.attributes[i]) & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    return _header(table, i, attrs, -1, int(table.max_timestamp[i]), 0, b"")


def _header(
    table: BatchTable, i: int, attrs: int, base_ts: int, max_ts: int, count: int, body: bytes | memoryview
) -> bytearray:
    """A whole batch: the header fields of batch ``i`` kept, the given ones replaced, and a CRC."""
    fields = table.columns[:, i].tolist()  # one array access instead of one per field
    return _pack_batch(fields, attrs, base_ts, max_ts, count, body)


def _pack_batch(
    fields: list[int], attrs: int, base_ts: int, max_ts: int, count: int, body: bytes | memoryview
) -> bytearray:
    out = bytearray(BATCH_OVERHEAD + len(body))
    out[BATCH_OVERHEAD:] = body
    _pack_header_into(memoryview(out), fields, attrs, base_ts, max_ts, count)
    return out  # not copied into bytes: it is joined into the chunk's output and written once


def _pack_header_into(
    batch: memoryview, fields: list[int], attrs: int, base_ts: int, max_ts: int, count: int
) -> None:
    """Write the header and CRC of the batch ``batch`` whose records are already in place after
    its first ``BATCH_OVERHEAD`` bytes."""
    body_len = len(batch) - BATCH_OVERHEAD
    HEADER.pack_into(
        batch,
        0,
        fields[B_BASE_OFFSET],
        BATCH_OVERHEAD - LOG_OVERHEAD + body_len,
        fields[B_EPOCH],
        MAGIC_V2,
        0,
        attrs,
        fields[B_LAST_DELTA],
        base_ts,
        max_ts,
        fields[B_PID],
        fields[B_PEPOCH],
        fields[B_BASE_SEQ],
        count,
    )
    _U32.pack_into(batch, 17, checksum.crc32c(batch[CRC_START:]))


def _last_batch_of_active_producer(table: BatchTable, ctx: FilterContext) -> BoolArray:
    """Rule (a) of ``Cleaner``'s ``checkBatchRetention``, vectorised over the chunk: a producer's last data
    batch, or, for a producer with no data, its control batch of the current epoch."""
    result = np.zeros(len(table), dtype=np.bool_)
    if not ctx.active_producers:
        return result
    pids = table.producer_id
    candidates = np.flatnonzero(pids >= 0)
    for i in candidates.tolist():
        entry = ctx.active_producers.get(int(pids[i]))
        if entry is None:
            continue
        last_data_offset, epoch = entry
        if last_data_offset is not None:
            result[i] = int(table.last_offset[i]) == last_data_offset
        else:
            result[i] = (
                bool(int(table.attributes[i]) & ATTR_CONTROL) and int(table.producer_epoch[i]) == epoch
            )
    return result


def _transaction_decisions(chunk: Chunk, ctx: FilterContext) -> tuple[BoolArray, BoolArray]:
    """``(can_discard, contains_marker_for_empty_txn)`` per batch (``CleanedTransactionMetadata.onBatchRead``
    / ``onControlBatchRead``)."""
    table = chunk.table
    can_discard = np.zeros(len(table), dtype=np.bool_)
    empty_txn_marker = np.zeros(len(table), dtype=np.bool_)
    special = np.flatnonzero((table.attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL)) != 0)
    for i in special.tolist():
        pid = int(table.producer_id[i])
        last_offset = int(table.last_offset[i])
        if int(table.attributes[i]) & ATTR_CONTROL:
            pos = int(table.position[i])
            view = RecordBatchView(chunk.buf[pos : pos + int(table.size[i])].data)
            discard, reindex = ctx.tracker.on_control_batch_read(pid, control_type_of(view), last_offset)
            can_discard[i] = discard
            empty_txn_marker[i] = discard
            if reindex is not None:
                ctx.reindex.append(reindex)
        else:
            can_discard[i] = ctx.tracker.on_batch_read(pid, True, last_offset)
    return can_discard, empty_txn_marker


def _retained_records(
    chunk: Chunk, which: I64Array, tombstone_ok: BoolArray, ctx: FilterContext, compressed: bool
) -> tuple[U8Array, RecordTable]:
    """Run ``Cleaner.shouldRetainRecord`` over the records of batches ``which`` (all raw, or all
    compressed)."""
    table = chunk.table
    if compressed:
        parts = [decompressed_spans(chunk.buf, table, int(i), int(i) + 1) for i in which]
        offsets = np.cumsum([0] + [len(p[0]) for p in parts])
        src = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, dtype=np.uint8)
        spans = Spans(
            np.concatenate([p[1].records_start + o for p, o in zip(parts, offsets[:-1], strict=True)]),
            np.concatenate([p[1].records_end + o for p, o in zip(parts, offsets[:-1], strict=True)]),
            table.base_offset[which],
            table.base_timestamp[which],
            table.records_count[which],
        )
    else:
        src = chunk.buf
        spans = Spans.of_batches(table, which)
    # Plain batches' keyed records at or above the first dirty offset were all put by the map pass.
    all_put = not bool((table.attributes[which] & ATTR_TRANSACTIONAL).any())
    result = ctx.offset_map.retain_spans(src, spans, tombstone_ok, ctx.workspace, all_put=all_put)
    ctx.stats.invalid_messages_read += result.invalid_dropped
    ctx.stats.tombstone_removed(result.tombstones_dropped)
    return src, result.kept


def _rebuild(
    chunk: Chunk,
    which: I64Array,
    sel: I64Array,
    src: U8Array,
    kept: RecordTable,
    new_horizon: BoolArray,
    ctx: FilterContext,
) -> dict[int, tuple[bytes | bytearray | memoryview, int, int]]:
    """Rebuild the batches that lost records or need a horizon: ``sel`` are their positions in
    the kept table's span list, ``which`` their indexes in the chunk. Returns ``batch index ->
    (bytes, max timestamp, records)``."""
    table = chunk.table
    first = kept.batch_first
    attrs = table.attributes[which]
    compressed = bool((attrs & ATTR_COMPRESSION_MASK).any())  # all or none (filter_chunk)
    had_horizon = (attrs & ATTR_DELETE_HORIZON) != 0
    stamped = new_horizon | had_horizon
    horizon = np.where(had_horizon, table.base_timestamp[which], ctx.now_ms + ctx.delete_retention_ms)
    ts = kept.timestamp
    base_ts = np.where(stamped, horizon, ts[first[sel]])  # every batch here keeps >= 1 record
    # Max record timestamp per kept span. reduceat needs starts inside the array: a sentinel slot
    # lets empty spans start at len(ts) without clamping, which would cut the last record off
    # the span before them (and write a too-small max timestamp for that batch).
    span_max = np.maximum.reduceat(np.append(ts, np.iinfo(np.int64).min), first[:-1])
    max_ts = np.where((attrs & ATTR_TIMESTAMP_TYPE) != 0, table.max_timestamp[which], span_max[sel])
    # Re-encoding only changes two varints per record (<= 15 bytes), plus a header gap per batch.
    bound = int(kept.length.sum()) + 15 * len(kept) + BATCH_OVERHEAD * (len(sel) + 1)
    # One array per kind: the uncompressed batches are framed in place and handed on as views of
    # it, which the chunk's compressed batches must not overwrite before the chunk is written.
    # Room for half as much again as the chunk from the first call, so the array is allocated once
    # per workspace rather than regrown in steps as the kept share rises along the log: every
    # regrowth is fresh memory, and only the pages written cost anything.
    room = max(bound, chunk.length + chunk.length // 2)
    out = ctx.workspace.take("rewrite_out_z" if compressed else "rewrite_out", 0, room, np.uint8)
    starts, ends = rewrite_batches(src, kept, None, sel, base_ts, out)
    counts = (first[sel + 1] - first[sel]).tolist()
    new_attrs = np.where(stamped, attrs | ATTR_DELETE_HORIZON, attrs & ~ATTR_DELETE_HORIZON).tolist()
    result: dict[int, tuple[bytes | bytearray | memoryview, int, int]] = {}
    for i, a, b_ts, m_ts, n, lo, hi in zip(
        which.tolist(),
        new_attrs,
        base_ts.tolist(),
        max_ts.tolist(),
        counts,
        starts.tolist(),
        ends.tolist(),
        strict=True,
    ):
        codec = a & ATTR_COMPRESSION_MASK
        if codec == Compression.NONE:
            # Framed where the records are (the kernel left the header's room before them): no
            # copy, and no fresh memory, which a process that cleans once pays a fault for.
            batch = out[lo - BATCH_OVERHEAD : hi].data
            _pack_header_into(batch, table.columns[:, i].tolist(), a, b_ts, m_ts, n)
            result[i] = (batch, m_ts, n)
            continue
        body = compress(Compression(codec), out[lo:hi].data)
        result[i] = (_header(table, i, a, b_ts, m_ts, n, body), m_ts, n)
    return result


def filter_chunk(chunk: Chunk, ctx: FilterContext) -> _Output:
    """Apply ``Cleaner.cleanInto``'s filter and ``MemoryRecords.filterTo`` to one chunk of whole batches."""
    table = chunk.table
    attrs = table.attributes
    is_control = (attrs & ATTR_CONTROL) != 0
    has_horizon = (attrs & ATTR_DELETE_HORIZON) != 0
    horizon = table.base_timestamp
    counts = table.records_count
    can_discard, empty_txn_marker = _transaction_decisions(chunk, ctx)
    held = horizon_held(ctx.hold, has_horizon, horizon, table.last_offset, ctx.now_ms)
    expired = past_delete_horizon(has_horizon, horizon, held, ctx.now_ms)
    discard_records = np.where(is_control, can_discard & expired, can_discard)
    retain_empty = _last_batch_of_active_producer(table, ctx) | (
        table.last_offset + 1 == ctx.upper_bound_offset
    )
    ctx.stats.read_messages(int(counts.sum()), chunk.length)
    _count_discarded(chunk, is_control, discard_records, ctx.stats)

    kept_count = np.where(discard_records, 0, counts)  # control batches keep their one record
    rebuilt: dict[int, tuple[bytes | bytearray | memoryview, int, int]] = {}
    data = np.flatnonzero(~is_control & ~discard_records & (counts > 0))
    tombstone_ok = ~expired
    compressed = (attrs & ATTR_COMPRESSION_MASK) != 0
    for is_compressed in (False, True):
        which = data[compressed[data] == is_compressed]
        if len(which) == 0:
            continue
        src, kept = _retained_records(chunk, which, tombstone_ok[which], ctx, is_compressed)
        first = kept.batch_first
        per_batch = first[1:] - first[:-1]
        kept_count[which] = per_batch
        if len(kept):
            tomb = (kept.value_len < 0).astype(np.int64)
            # The sentinel slot keeps a trailing empty span from cutting off the record before it.
            tomb_per_batch = np.add.reduceat(np.append(tomb, 0), first[:-1]) * (per_batch > 0)
        else:
            tomb_per_batch = np.zeros(len(which), dtype=np.int64)
        need_horizon = (tomb_per_batch > 0) & ~has_horizon[which]
        changed = (per_batch < counts[which]) | need_horizon
        sel = np.flatnonzero(changed & (per_batch > 0))
        if len(sel):
            rebuilt.update(_rebuild(chunk, which[sel], sel, src, kept, need_horizon[sel], ctx))
    # Control markers kept but discardable: stamp their horizon once (KIP-534,
    # ``CleanedTransactionMetadata``).
    stamp_markers = np.flatnonzero(
        is_control & empty_txn_marker & ~discard_records & ~has_horizon & (counts > 0)
    )
    for i in stamp_markers.tolist():
        rebuilt[i] = _stamp_marker(chunk, i, ctx)
    return _assemble(chunk, ctx, kept_count, retain_empty, rebuilt)


def _count_discarded(chunk: Chunk, is_control: BoolArray, discard: BoolArray, stats: CleanerStats) -> None:
    """Count what the batches dropped whole held: markers, and the records of aborted transactions.

    These batches never reach the record filter (Kafka drops them on their header alone), so the
    filter's counts cannot see them; an aborted batch's tombstones are parsed here so that
    ``tombstones_removed`` counts every keyed null the clean removed, as a reader of the files
    before and after would. Aborted data is rare: this costs nothing on the common path.
    """
    counts = chunk.table.records_count
    stats.markers_dropped(int(counts[is_control & discard].sum()))
    aborted = np.flatnonzero(~is_control & discard & (counts > 0))
    if len(aborted) == 0:
        return
    stats.aborted_dropped(int(counts[aborted].sum()), _tombstones_in(chunk, aborted))


def _tombstones_in(chunk: Chunk, which: I64Array) -> int:
    """Keyed records with a null value in batches ``which`` of the chunk (compressed or not).

    Kafka drops an aborted batch on its header alone, so a batch whose records do not parse is
    still dropped: only the count of its tombstones is lost, with a warning, never the clean.
    """
    table = chunk.table
    total = 0
    for i in which.tolist():
        try:
            if table.attributes[i] & ATTR_COMPRESSION_MASK:
                buf, spans = decompressed_spans(chunk.buf, table, i, i + 1)
            else:
                buf, spans = chunk.buf, Spans.of_batches(table, np.array([i], dtype=np.int64))
            records = scan_records(buf, *spans.arrays())
        except (CorruptRecordError, CompressionError) as exc:
            log.warning(
                "Aborted batch at offset %d is dropped without counting its tombstones: %s",
                int(table.base_offset[i]),
                exc,
            )
            continue
        total += int(((records.key_len >= 0) & (records.value_len < 0)).sum())
    return total


def _stamp_marker(
    chunk: Chunk, i: int, ctx: FilterContext
) -> tuple[bytes | bytearray | memoryview, int, int]:
    table = chunk.table
    pos = int(table.position[i])
    raw = chunk.buf[pos : pos + int(table.size[i])].tobytes()
    view = RecordBatchView(raw)
    # A control batch is never compressed by Kafka's coordinator; keep whatever codec it has.
    body = raw[BATCH_OVERHEAD:]
    horizon = ctx.now_ms + ctx.delete_retention_ms
    if view.compression == Compression.NONE:
        body = _retimestamp_single(body, view.base_timestamp, horizon)
        attrs = view.attributes | ATTR_DELETE_HORIZON
        return (
            _header(table, i, attrs, horizon, view.max_timestamp, view.records_count, body),
            view.max_timestamp,
            1,
        )
    return raw, view.max_timestamp, 1


def _retimestamp_single(body: bytes, old_base: int, new_base: int) -> bytes:
    """Re-encode uncompressed records against a new base timestamp (slow path, markers only)."""
    from kompakt.records.varint import decode_varint, encode_varint

    out = []
    pos = 0
    while pos < len(body):
        length, p = decode_varint(body, pos)
        end = p + length
        attr = body[p : p + 1]
        delta, q = decode_varint(body, p + 1)
        rest = body[q:end]
        rec = attr + encode_varint(old_base + delta - new_base) + rest
        out.append(encode_varint(len(rec)) + rec)
        pos = end
    return b"".join(out)


def _assemble(
    chunk: Chunk,
    ctx: FilterContext,
    kept_count: I64Array,
    retain_empty: BoolArray,
    rebuilt: dict[int, tuple[bytes | bytearray | memoryview, int, int]],
) -> _Output:
    table = chunk.table
    out = _Output()
    verbatim = (kept_count == table.records_count) & (kept_count > 0)
    run_start = -1
    written_records = 0

    def flush_run(upto: int) -> None:
        nonlocal run_start
        if run_start < 0:
            return
        lo = int(table.position[run_start])
        hi = int(table.position[upto - 1] + table.size[upto - 1])
        # A view, not a copy: the chunk's buffer holds until the walk moves on, after the write.
        out.pieces.append(chunk.buf[lo:hi].data)
        out.last_offsets.extend(table.last_offset[run_start:upto].tolist())
        out.max_timestamps.extend(table.max_timestamp[run_start:upto].tolist())
        out.sizes.extend(table.size[run_start:upto].tolist())
        run_start = -1

    for i in range(len(table)):
        if i in rebuilt:
            flush_run(i)
            data, max_ts, records = rebuilt[i]
            out.pieces.append(data)
            out.last_offsets.append(int(table.last_offset[i]))
            out.max_timestamps.append(max_ts)
            out.sizes.append(len(data))
            written_records += records
        elif verbatim[i]:
            if run_start < 0:
                run_start = i
            written_records += int(table.records_count[i])
        else:
            flush_run(i)
            if bool(retain_empty[i]):
                data = _empty_header(table, i)
                out.pieces.append(data)
                out.last_offsets.append(int(table.last_offset[i]))
                out.max_timestamps.append(int(table.max_timestamp[i]))
                out.sizes.append(len(data))
    flush_run(len(table))
    ctx.stats.recopy_messages(written_records, sum(out.sizes))
    return out


def copy_preparer(ctx: FilterContext) -> Prepare[tuple[_Output, CleanerStats] | None]:
    """The worker's part of the copy pass: the whole filter of a chunk without transactional or
    control batches, which is all the tracker would be asked about (so a worker needs no state
    another chunk changes). Its counts go to a stats object of its own; ``None`` leaves the chunk
    to the caller, in order."""

    def prepare(chunk: Chunk, workspace: Workspace) -> tuple[_Output, CleanerStats] | None:
        if bool(((chunk.table.attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL)) != 0).any()):
            return None
        stats = CleanerStats(ctx.stats.clock)
        output = filter_chunk(chunk, dataclasses.replace(ctx, stats=stats, workspace=workspace, reindex=[]))
        return output, stats

    return prepare


def write_chunk(
    item: Prepared[tuple[_Output, CleanerStats] | None], dest: LogSegment, ctx: FilterContext, io: CleanerIo
) -> None:
    """Append one chunk's output to ``dest``, filtering it here if no worker did."""
    io.check_abort()
    io.throttle(item.chunk.length)
    if item.value is None:
        output = filter_chunk(item.chunk, ctx)
    else:
        output, stats = item.value
        ctx.stats.add_counts(stats)
    _append_output(dest, output)
    io.throttle(sum(output.sizes))


def _append_output(dest: LogSegment, output: _Output) -> None:
    """Append one chunk's output with one write; the segment indexes it batch by batch, as
    Kafka 4.1's ``LogSegment.append`` does for each write-buffer flush of ``Cleaner.cleanInto``."""
    if not output.pieces:
        return
    records = output.pieces[0] if len(output.pieces) == 1 else b"".join(output.pieces)
    dest.append(records, output.sizes, output.last_offsets, output.max_timestamps)
