"""Native re-encoding of the records a clean keeps, batch by batch (Kafka's ``MemoryRecords.filterTo``).

A rebuilt batch keeps its base offset, so each kept record's offset delta, key, value and headers
are copied unchanged; only the timestamp delta moves (to a new base timestamp: the first kept
record's, or the delete horizon) and with it the record's length prefix. The Python layer then
writes the 61-byte header, compresses if the codec says so, and computes the CRC.
"""

from __future__ import annotations

import numpy as np

from kompakt.errors import CorruptRecordError
from kompakt.records.batch import BATCH_OVERHEAD
from kompakt.records.lazy_numba import njit
from kompakt.records.native import (
    BoolArray,
    I64Array,
    Scalar,
    U8Array,
    memcpy,
    ptr,
    read_varint,
    varint_size,
    write_varint,
)
from kompakt.records.precompiled import entry_point
from kompakt.records.scan import RecordTable


@njit(cache=True, nogil=True)
def _rewrite_span(
    sp: Scalar,
    src_len: Scalar,
    rec_start: I64Array,
    rec_len: I64Array,
    rec_ts: I64Array,
    keep: BoolArray,
    lo: Scalar,
    hi: Scalar,
    new_base_ts: Scalar,
    op: Scalar,
    out_len: Scalar,
    out_pos: Scalar,
) -> Scalar:
    """Re-encode kept rows ``lo:hi`` from the ``src_len`` bytes at pointer ``sp`` into the
    ``out_len`` bytes at pointer ``op``; returns the new ``out_pos``, -1 if the output is too small,
    -2 if a record does not parse (callers pass rows from ``scan_records``, so this is a bug)."""
    for i in range(lo, hi):
        if not keep[i]:
            continue
        p = rec_start[i]
        end = p + rec_len[i]
        if p < 0 or end > src_len or end <= p:
            return -2
        if out_pos + rec_len[i] + 12 > out_len:  # delta may grow by 9 bytes, length by 1
            return -1
        _, q = read_varint(sp, p, end, 5)
        if q < 0 or q >= end:
            return -2
        attrs = sp[q]
        old_delta, r = read_varint(sp, q + 1, end, 10)
        if r < 0:
            return -2
        delta = rec_ts[i] - new_base_ts
        if delta == old_delta:  # byte-identical record: copy as is
            memcpy(op, out_pos, sp, p, end - p)
            out_pos += end - p
            continue
        rest = end - r
        out_pos = write_varint(op, out_pos, 1 + varint_size(delta) + rest)
        op[out_pos] = attrs
        out_pos = write_varint(op, out_pos + 1, delta)
        memcpy(op, out_pos, sp, r, rest)
        out_pos += rest
    return out_pos


@entry_point("i8(u1[::1], i8[::1], i8[::1], i8[::1], b1[::1], i8, u1[::1], i8)")
@njit(cache=True, nogil=True)
def _rewrite_one(
    src: U8Array,
    rec_start: I64Array,
    rec_len: I64Array,
    rec_ts: I64Array,
    keep: BoolArray,
    new_base_ts: Scalar,
    out: U8Array,
    out_pos: Scalar,
) -> Scalar:
    n = rec_start.shape[0]
    if rec_len.shape[0] != n or rec_ts.shape[0] != n or keep.shape[0] != n:
        return -2
    return _rewrite_span(
        ptr(src),
        src.shape[0],
        rec_start,
        rec_len,
        rec_ts,
        keep,
        0,
        n,
        new_base_ts,
        ptr(out),
        out.shape[0],
        out_pos,
    )


@entry_point(
    "Tuple((i8[::1], i8[::1], i8))"
    "(u1[::1], i8[::1], i8[::1], i8[::1], b1[::1], i8[::1], i8[::1], i8[::1], u1[::1], i8, i8)"
)
@njit(cache=True, nogil=True)
def _rewrite_batches(
    src: U8Array,
    rec_start: I64Array,
    rec_len: I64Array,
    rec_ts: I64Array,
    keep: BoolArray,
    batch_lo: I64Array,
    batch_hi: I64Array,
    new_base_ts: I64Array,
    out: U8Array,
    out_pos: Scalar,
    gap: Scalar,
) -> tuple[I64Array, I64Array, Scalar]:
    nb = batch_lo.shape[0]
    starts = np.empty(nb, dtype=np.int64)
    ends = np.empty(nb, dtype=np.int64)
    sp = ptr(src)
    op = ptr(out)
    n = rec_start.shape[0]
    if rec_len.shape[0] != n or rec_ts.shape[0] != n or keep.shape[0] != n:
        return starts, ends, -2
    for b in range(nb):
        if batch_lo[b] < 0 or batch_hi[b] > n:
            return starts, ends, -2
        if out_pos + gap > out.shape[0]:
            return starts, ends, -1
        out_pos += gap
        starts[b] = out_pos
        out_pos = _rewrite_span(
            sp,
            src.shape[0],
            rec_start,
            rec_len,
            rec_ts,
            keep,
            batch_lo[b],
            batch_hi[b],
            new_base_ts[b],
            op,
            out.shape[0],
            out_pos,
        )
        if out_pos < 0:
            return starts, ends, out_pos
        ends[b] = out_pos
    return starts, ends, 0


def _check_rewrite(status: int) -> None:
    if status == -1:
        raise ValueError("output buffer too small for the rewritten records")
    if status == -2:
        raise CorruptRecordError("a record to rewrite does not parse or lies outside the source buffer")


def rewrite_records(
    src: U8Array,
    rec_start: I64Array,
    rec_len: I64Array,
    rec_timestamp: I64Array,
    keep: BoolArray,
    new_base_timestamp: int,
    out: U8Array,
    out_pos: int = 0,
) -> int:
    """Re-encode the kept records of one batch into ``out[out_pos:]``; returns the bytes written.

    Only the timestamp delta (now relative to ``new_base_timestamp``, possibly negative) and the
    length prefix change; offset deltas, key, value and headers are copied, because a rebuilt
    batch keeps its base offset. ``out`` needs ``sum(rec_len[keep]) + 11 * kept`` bytes of room
    at most. The caller writes the 61-byte header, compresses and computes the CRC.
    """
    if not 0 <= out_pos <= len(out):
        raise ValueError(f"out_pos {out_pos} lies outside the output buffer")
    end = _rewrite_one(
        src,
        np.ascontiguousarray(rec_start, dtype=np.int64),
        np.ascontiguousarray(rec_len, dtype=np.int64),
        np.ascontiguousarray(rec_timestamp, dtype=np.int64),
        np.ascontiguousarray(keep, dtype=np.bool_),
        new_base_timestamp,
        out,
        out_pos,
    )
    _check_rewrite(int(end))
    return int(end) - out_pos


def rewrite_batches(
    src: U8Array,
    records: RecordTable,
    keep: BoolArray | None,
    batches: I64Array,
    new_base_timestamp: I64Array,
    out: U8Array,
    out_pos: int = 0,
    gap: int = BATCH_OVERHEAD,
) -> tuple[I64Array, I64Array]:
    """``rewrite_records`` for many batches (indexes into ``records.batch_first``) in one call.

    ``keep=None`` keeps every row (the table from ``retain_spans`` holds kept records only).
    Each batch's records are preceded by ``gap`` bytes left for its header; returns the
    ``(records_start, records_end)`` positions in ``out`` per batch.
    """
    if not 0 <= out_pos <= len(out):
        raise ValueError(f"out_pos {out_pos} lies outside the output buffer")
    b = np.asarray(batches, dtype=np.int64)
    starts, ends, status = _rewrite_batches(
        src,
        records.position,
        records.length,
        records.timestamp,
        np.ones(len(records), dtype=np.bool_) if keep is None else np.ascontiguousarray(keep, dtype=np.bool_),
        records.batch_first[b],
        records.batch_first[b + 1],
        np.ascontiguousarray(new_base_timestamp, dtype=np.int64),
        out,
        out_pos,
        gap,
    )
    _check_rewrite(int(status))
    return starts, ends
