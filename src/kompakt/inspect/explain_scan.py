"""Scanning a partition's segment files for ``explain``: batch and record columns, natively.

Records are never decoded one by one in Python: batch headers and record columns come from the
cleaner's native kernels, keys are hashed natively to the same 128-bit digests the offset map
stores, and distinct keys are counted with ``np.unique`` over those digests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.dedupe import decompressed_spans
from kompakt.cleaner.kernels.hashing import hash_key, hash_keys
from kompakt.cleaner.planning import NO_TIMESTAMP, SegmentInfo
from kompakt.inspect.explain_report import BOOL, I64, MAX_TOMBSTONES_LISTED, U64, PartitionSource
from kompakt.log.producer_state import ProducerStateManager
from kompakt.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    BATCH_OVERHEAD,
    RecordBatchView,
)
from kompakt.records.legacy import iter_legacy_records
from kompakt.records.scan import BatchTable, Spans, scan_batches, scan_records

# --------------------------------------------------------------------------------------------
# Scanning


@dataclass(slots=True)
class _Cols:
    """Per-record columns of one segment (keyed data records and null-key ones)."""

    offset: list[I64]
    hi: list[U64]
    lo: list[U64]
    null_key: list[BOOL]
    tombstone: list[BOOL]
    size: list[I64]
    batch: list[I64]
    timestamp: list[I64]


@dataclass(slots=True)
class _BatchCols:
    base_offset: list[int]
    last_offset: list[int]
    size: list[int]
    attributes: list[int]
    horizon: list[int | None]
    records: list[int]
    payload_bytes: list[int]
    segment: list[int]
    base_timestamp: list[int]


@dataclass(slots=True)
class _SegmentScan:
    info: SegmentInfo
    records: int


@dataclass(slots=True)
class PartitionScan:
    """What :func:`scan_partition` read of one partition, for the engine in :mod:`.explain`."""

    cols: _Cols
    batches: _BatchCols
    segments: list[_SegmentScan]
    producers: ProducerStateManager
    tombstone_keys: dict[int, bytes]
    log_end_offset: int


def scan_partition(source: PartitionSource) -> PartitionScan:
    cols = _Cols([], [], [], [], [], [], [], [])
    batches = _BatchCols([], [], [], [], [], [], [], [], [])
    producers = ProducerStateManager(f"{source.topic}-{source.partition}")
    tomb_keys: dict[int, bytes] = {}
    scans: list[_SegmentScan] = []
    leo = source.segments[0].base_offset if source.segments else 0
    for seg_index, seg in enumerate(source.segments):
        buf = (
            np.fromfile(seg.path, dtype=np.uint8, count=seg.size_bytes)
            if seg.size_bytes
            else np.empty(0, np.uint8)
        )
        first_batch = len(batches.size)
        table = scan_batches(buf, 0, len(buf))
        if len(table) == 0 and len(buf) > 16 and int(buf[16]) in (0, 1):  # a legacy (v0/v1) segment
            largest, first_ts, next_offset = _scan_legacy(buf, seg_index, cols, batches, tomb_keys)
        else:
            largest, first_ts, next_offset = _scan_v2(
                buf, table, seg_index, cols, batches, producers, tomb_keys
            )
        n_records = sum(batches.records[first_batch:])
        if next_offset is None:
            next_offset = seg.base_offset
        else:
            leo = next_offset
        if largest == NO_TIMESTAMP:
            largest = seg.created_ms  # Kafka's fallback: the file's last-modified time
        scans.append(
            _SegmentScan(
                SegmentInfo(seg.base_offset, len(buf), largest, first_ts, seg.created_ms, next_offset),
                n_records,
            )
        )
    if source.segments and scans[-1].info.size_bytes == 0:
        leo = max(leo, source.segments[-1].base_offset)
    return PartitionScan(cols, batches, scans, producers, tomb_keys, leo)


def _add_batch(
    batches: _BatchCols,
    base: int,
    last: int,
    size: int,
    attrs: int,
    horizon: int | None,
    n: int,
    payload: int,
    seg: int,
    base_ts: int = NO_TIMESTAMP,
) -> int:
    batches.base_offset.append(base)
    batches.last_offset.append(last)
    batches.size.append(size)
    batches.attributes.append(attrs)
    batches.horizon.append(horizon)
    batches.records.append(n)
    batches.payload_bytes.append(payload)
    batches.segment.append(seg)
    batches.base_timestamp.append(base_ts)
    return len(batches.size) - 1


def varint_sizes(values: I64) -> I64:
    """Bytes of the zigzag varint encoding of each int64 (records' timestamp deltas)."""
    zz = (values.astype(np.int64) << 1) ^ (values.astype(np.int64) >> 63)
    u = zz.view(np.uint64)
    size = np.ones(len(values), dtype=np.int64)
    for k in range(1, 10):
        size += (u >= np.uint64(1 << (7 * k))).astype(np.int64)
    return size


def _scan_v2(
    buf: npt.NDArray[np.uint8],
    table: BatchTable,
    seg_index: int,
    cols: _Cols,
    batches: _BatchCols,
    producers: ProducerStateManager,
    tomb_keys: dict[int, bytes],
) -> tuple[int, int, int | None]:
    n = len(table)
    if n == 0:
        return NO_TIMESTAMP, NO_TIMESTAMP, None
    attrs = table.attributes
    max_ts = table.max_timestamp
    largest = int(max_ts.max())
    first_ts = int(max_ts[0]) if int(max_ts[0]) >= 0 else NO_TIMESTAMP
    offset0 = len(batches.size)
    for i in range(n):
        a = int(attrs[i])
        _add_batch(
            batches,
            int(table.base_offset[i]),
            int(table.base_offset[i] + table.last_offset_delta[i]),
            int(table.size[i]),
            a,
            int(table.base_timestamp[i]) if a & ATTR_DELETE_HORIZON else None,
            int(table.records_count[i]),
            int(table.size[i]) - BATCH_OVERHEAD,
            seg_index,
            int(table.base_timestamp[i]),
        )
    pids = np.flatnonzero(table.producer_id >= 0)
    raw = buf.data
    for i in pids.tolist():
        producers.update(RecordBatchView(raw, int(table.position[i])))
    data = np.flatnonzero((attrs & ATTR_CONTROL) == 0)
    plain = data[(attrs[data] & ATTR_COMPRESSION_MASK) == 0]
    if len(plain):
        spans = Spans.of_batches(table, plain)
        _add_records(buf, spans, offset0 + plain, cols, tomb_keys)
    for i in data[(attrs[data] & ATTR_COMPRESSION_MASK) != 0].tolist():
        payload, spans = decompressed_spans(buf, table, i, i + 1)
        batches.payload_bytes[offset0 + i] = len(payload)
        _add_records(payload, spans, np.array([offset0 + i], dtype=np.int64), cols, tomb_keys)
    return largest, first_ts, int(table.base_offset[-1] + table.last_offset_delta[-1]) + 1


def _add_records(
    buf: npt.NDArray[np.uint8], spans: Spans, batch_ids: I64, cols: _Cols, tomb_keys: dict[int, bytes]
) -> None:
    table = scan_records(buf, *spans.arrays())
    count = len(table)
    if count == 0:
        return
    key_len = table.key_len.copy()
    key_start = table.key_start.copy()
    hi, lo = hash_keys(buf, key_start, key_len)
    tombstone = (table.value_len < 0) & (key_len >= 0)
    offsets = table.offset.copy()
    cols.offset.append(offsets)
    cols.hi.append(hi.copy())
    cols.lo.append(lo.copy())
    cols.null_key.append(key_len < 0)
    cols.tombstone.append(tombstone)
    cols.size.append(table.length.copy())
    cols.batch.append(np.asarray(batch_ids, dtype=np.int64)[table.batch])
    cols.timestamp.append(table.timestamp.copy())
    for row in np.flatnonzero(tombstone)[: MAX_TOMBSTONES_LISTED * 4].tolist():
        start, length = int(key_start[row]), int(key_len[row])
        tomb_keys[int(offsets[row])] = bytes(buf[start : start + length])


def _scan_legacy(
    buf: npt.NDArray[np.uint8], seg_index: int, cols: _Cols, batches: _BatchCols, tomb_keys: dict[int, bytes]
) -> tuple[int, int, int | None]:
    """Legacy (v0/v1) segments: rare and old, so a Python walk is acceptable here."""
    records = list(iter_legacy_records(buf.tobytes(), verify_crc=False))
    if not records:
        return NO_TIMESTAMP, NO_TIMESTAMP, None
    offs, his, los, nulls, tombs, sizes, bids = [], [], [], [], [], [], []
    for r in records:
        size = 34 + len(r.key or b"") + len(r.value or b"")
        bid = _add_batch(batches, r.offset, r.offset, size, 0, None, 1, size, seg_index)
        h, lw = hash_key(r.key) if r.key is not None else (0, 0)
        offs.append(r.offset)
        his.append(h)
        los.append(lw)
        nulls.append(r.key is None)
        tombs.append(r.key is not None and r.value is None)
        sizes.append(size)
        bids.append(bid)
        if r.key is not None and r.value is None:
            tomb_keys[r.offset] = r.key
    cols.offset.append(np.array(offs, dtype=np.int64))
    cols.hi.append(np.array(his, dtype=np.uint64))
    cols.lo.append(np.array(los, dtype=np.uint64))
    cols.null_key.append(np.array(nulls, dtype=np.bool_))
    cols.tombstone.append(np.array(tombs, dtype=np.bool_))
    cols.size.append(np.array(sizes, dtype=np.int64))
    cols.batch.append(np.array(bids, dtype=np.int64))
    cols.timestamp.append(np.array([r.timestamp for r in records], dtype=np.int64))
    largest = max(r.timestamp for r in records)
    return (
        largest,
        records[0].timestamp if records[0].timestamp >= 0 else NO_TIMESTAMP,
        records[-1].offset + 1,
    )


def concat_columns(parts: Sequence[npt.NDArray[Any]], dtype: Any) -> npt.NDArray[Any]:
    """One column from its per-segment parts (an empty column of ``dtype`` when there are none)."""
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def digest_rows(hi: U64, lo: U64) -> npt.NDArray[np.void]:
    """Each key's 128-bit digest as one 16-byte value, so numpy can sort and compare whole keys."""
    pairs = np.empty((len(hi), 2), dtype=np.uint64)
    pairs[:, 0] = hi
    pairs[:, 1] = lo
    return pairs.view(np.dtype((np.void, 16))).ravel()


def latest_mask(digests: npt.NDArray[np.void], eligible: BOOL) -> BOOL:
    """True for the last (highest-offset) eligible record of each key; records are in offset order."""
    mask = np.zeros(len(digests), dtype=np.bool_)
    idx = np.flatnonzero(eligible)
    if len(idx) == 0:
        return mask
    rev = idx[::-1]
    _, first = np.unique(digests[rev], return_index=True)
    mask[rev[first]] = True
    return mask
