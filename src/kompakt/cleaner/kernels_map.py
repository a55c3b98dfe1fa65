"""Numba kernels over the offset map's table, and the fused per-span map and copy passes.

The table is a uint64 array of shape (slots, 3): [digest hi, digest lo, offset]. A free slot has
offset ``_EMPTY`` (all ones, never a real offset), so an all-zero digest is an ordinary key. One
row per slot keeps a probe within one or two cache lines.

The fused passes exist for speed: materialising nine int64 columns per record and re-reading them
costs more than parsing. They work one span (batch) at a time: parse and hash the span into small
scratch arrays that stay in cache, then probe the table in a tight loop whose independent cache
misses the CPU can overlap.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numba import njit

from kompakt.cleaner.kernels import (
    _R_KEY_LEN,
    _R_KEY_START,
    _R_NCOLS,
    _R_OFFSET,
    _R_TIMESTAMP,
    _R_VALUE_LEN,
    BoolArray,
    I64Array,
    Scalar,
    U8Array,
    U64Array,
    _hash_one,
    _parse_record,
    _read_varint,
)

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_DOUBLE_PROBES: Final = 32  # after this many double-hashing steps, fall back to linear probing


@njit(cache=True)
def _probe(table: U64Array, hi: Scalar, lo: Scalar) -> Scalar:
    """Slot holding digest (hi, lo), else the free slot where it would go; -1 if neither exists.

    Double hashing spreads clusters at Kafka's 0.9 load factor; since ``slots`` is arbitrary the
    step may share a factor with it, so after a bounded number of steps the walk turns linear,
    which reaches every slot.
    """
    slots = table.shape[0]
    idx = np.int64(hi % np.uint64(slots))
    step = np.int64(1) if slots <= 1 else np.int64(1) + np.int64(lo % np.uint64(slots - 1))
    for attempt in range(slots + _DOUBLE_PROBES):
        if table[idx, 2] == _EMPTY or (table[idx, 0] == hi and table[idx, 1] == lo):
            return idx
        idx += step if attempt < _DOUBLE_PROBES else 1
        if idx >= slots:
            idx -= slots
    return -1


@njit(cache=True)
def _lookup(table: U64Array, hi: Scalar, lo: Scalar) -> Scalar:
    idx = _probe(table, hi, lo)
    if idx < 0 or table[idx, 2] == _EMPTY:
        return -1
    return np.int64(table[idx, 2])


@njit(cache=True)
def _put_one(table: U64Array, hi: Scalar, lo: Scalar, offset: Scalar) -> Scalar:
    """Store and return the size increment (1 for a new key, 0 for an overwrite)."""
    idx = _probe(table, hi, lo)
    grew = 0
    if table[idx, 2] == _EMPTY:
        table[idx, 0] = hi
        table[idx, 1] = lo
        grew = 1
    table[idx, 2] = np.uint64(offset)
    return grew


@njit(cache=True)
def _put_records(
    table: U64Array,
    hi: U64Array,
    lo: U64Array,
    offsets: I64Array,
    key_len: I64Array,
    start_offset: Scalar,
    size: Scalar,
    max_keys: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar]:
    last_put = np.int64(-1)
    for i in range(offsets.shape[0]):
        if key_len[i] < 0 or offsets[i] < start_offset:
            continue
        if size >= max_keys:
            return i, size, True, last_put
        size += _put_one(table, hi[i], lo[i], offsets[i])
        last_put = offsets[i]
    return offsets.shape[0], size, False, last_put


@njit(cache=True)
def _get_many(table: U64Array, hi: U64Array, lo: U64Array, key_len: I64Array) -> I64Array:
    out = np.empty(hi.shape[0], dtype=np.int64)
    for i in range(hi.shape[0]):
        out[i] = -1 if key_len[i] < 0 else _lookup(table, hi[i], lo[i])
    return out


@njit(cache=True)
def _retain(
    table: U64Array,
    hi: U64Array,
    lo: U64Array,
    offsets: I64Array,
    key_len: I64Array,
    value_len: I64Array,
    tombstone_ok: BoolArray,
    latest: Scalar,
) -> tuple[BoolArray, Scalar]:
    keep = np.empty(offsets.shape[0], dtype=np.bool_)
    invalid = 0
    for i in range(offsets.shape[0]):
        if offsets[i] > latest:
            keep[i] = True
        elif key_len[i] < 0:
            keep[i] = False
            invalid += 1
        else:
            found = _lookup(table, hi[i], lo[i])
            keep[i] = offsets[i] >= found and (value_len[i] >= 0 or tombstone_ok[i])
    return keep, invalid


# ---------------------------------------------------------------------------------------------
# Fused passes over spans (a span = one batch's records section, in the segment or in a buffer of
# decompressed payloads)

# status codes of _map_spans; positive codes are record errors (kernels._RECORD_ERRORS)
DONE: Final = 0
FULL: Final = -1


@njit(cache=True)
def _parse_key(buf: U8Array, pos: Scalar, limit: Scalar) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar]:
    """Just what the map pass needs: ``(record_end, error, offset_delta, key_start, key_len)``.

    Values and headers are skipped via the length prefix; the copy pass parses every record in
    full, so a record malformed past its key is still caught before anything is written.
    """
    length, body = _read_varint(buf, pos, limit, 5)
    if body < 0:
        return pos, 2, 0, 0, 0
    rec_end = body + length
    if length < 0 or rec_end > limit:
        return pos, 3, 0, 0, 0
    _, p = _read_varint(buf, body + 1, rec_end, 10)
    if p < 0:
        return pos, 4, 0, 0, 0
    off_delta, p = _read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0
    key_len, p = _read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0
    if key_len < -1 or p + max(key_len, 0) > rec_end:
        return pos, 5, 0, 0, 0
    return rec_end, 0, off_delta, p, key_len


@njit(cache=True)
def _map_spans(
    buf: U8Array,
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    counts: I64Array,
    table: U64Array,
    start_offset: Scalar,
    size: Scalar,
    max_keys: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar, Scalar]:
    """§2.5 over spans. Returns ``(status, span, records_done_in_span, size, last_put, position)``;
    status DONE, FULL, or a record error code (> 0) with the span and byte position."""
    most = 0
    for b in range(starts.shape[0]):
        if counts[b] < 0:
            return 1, b, 0, size, -1, starts[b]
        most = max(most, counts[b])
    off = np.empty(most, dtype=np.int64)
    klen = np.empty(most, dtype=np.int64)
    hi = np.empty(most, dtype=np.uint64)
    lo = np.empty(most, dtype=np.uint64)
    last_put = np.int64(-1)
    for b in range(starts.shape[0]):
        pos = starts[b]
        limit = ends[b]
        if pos < 0 or limit < pos or limit > buf.shape[0]:
            return 9, b, 0, size, last_put, pos
        for j in range(counts[b]):
            pos, err, od, ks, kl = _parse_key(buf, pos, limit)
            if err != 0:
                return err, b, 0, size, last_put, pos
            off[j] = base_offsets[b] + od
            klen[j] = kl
            if kl >= 0:
                hi[j], lo[j] = _hash_one(buf, ks, kl)
        if pos != limit:
            return 8, b, 0, size, last_put, pos
        for j in range(counts[b]):
            if klen[j] < 0 or off[j] < start_offset:
                continue
            if size >= max_keys:
                return FULL, b, j, size, last_put, 0
            size += _put_one(table, hi[j], lo[j], off[j])
            last_put = off[j]
    return DONE, starts.shape[0], 0, size, last_put, 0


@njit(cache=True)
def _retain_spans(
    buf: U8Array,
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    base_timestamps: I64Array,
    counts: I64Array,
    tombstone_ok: BoolArray,
    table: U64Array,
    latest: Scalar,
    kept: I64Array,
    kept_first: I64Array,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar]:
    """§2.9 over spans, writing only the kept records' columns into ``kept`` (a RecordTable layout)
    and their per-span prefix counts into ``kept_first``. Returns ``(error, span, position,
    invalid_dropped, tombstones_dropped)``; the ``batch`` column holds the span index."""
    most = 0
    for b in range(starts.shape[0]):
        if counts[b] < 0:
            return 1, b, starts[b], 0, 0
        if starts[b] < 0 or ends[b] < starts[b] or ends[b] > buf.shape[0]:
            return 9, b, starts[b], 0, 0
        most = max(most, counts[b])
    rows = np.empty((_R_NCOLS, most), dtype=np.int64)
    hi = np.empty(most, dtype=np.uint64)
    lo = np.empty(most, dtype=np.uint64)
    n_kept = 0
    invalid = 0
    tombstones = 0
    kept_first[0] = 0
    for b in range(starts.shape[0]):
        pos = starts[b]
        limit = ends[b]
        for j in range(counts[b]):
            pos, err = _parse_record(buf, pos, limit, rows, j)
            if err != 0:
                return err, b, pos, invalid, tombstones
            rows[_R_OFFSET, j] += base_offsets[b]
            rows[_R_TIMESTAMP, j] += base_timestamps[b]
            if rows[_R_KEY_LEN, j] >= 0:
                hi[j], lo[j] = _hash_one(buf, rows[_R_KEY_START, j], rows[_R_KEY_LEN, j])
        if pos != limit:
            return 8, b, pos, invalid, tombstones
        for j in range(counts[b]):
            offset = rows[_R_OFFSET, j]
            if offset > latest:
                keep = True
            elif rows[_R_KEY_LEN, j] < 0:
                keep = False
                invalid += 1
            else:
                found = _lookup(table, hi[j], lo[j])
                keep = offset >= found and (rows[_R_VALUE_LEN, j] >= 0 or tombstone_ok[b])
                if not keep and rows[_R_VALUE_LEN, j] < 0:
                    tombstones += 1
            if keep:
                for c in range(_R_NCOLS - 1):
                    kept[c, n_kept] = rows[c, j]
                kept[_R_NCOLS - 1, n_kept] = b
                n_kept += 1
        kept_first[b + 1] = n_kept
    return 0, 0, 0, invalid, tombstones
