"""Numba kernels over the offset map's table, and the fused per-span map and copy passes.

The table is a uint64 array of shape (slots, 3): [digest hi, digest lo, offset + 1]. A free slot
holds offset word 0, so an all-zero digest is an ordinary key and an all-zero buffer (fresh
``mmap`` pages, which cost no memory until touched) is an empty table. One row per slot keeps a
probe within one or two cache lines.

Only a prefix of ``cap`` slots is in use: the map starts small and doubles in place (``_grow``)
whenever the prefix passes ``_GROW_LOAD``, up to all ``slots``. Few keys thus stay in a table that
fits the caches instead of being scattered over the whole dedupe buffer, while the capacity rule
is unchanged: ``max_keys_per_pass`` still counts the whole buffer. Slots past ``cap`` must be
zero; ``clear`` re-zeroes the prefix it used.

The fused passes exist for speed: materialising nine int64 columns per record and re-reading them
costs more than parsing. They work one span (batch) at a time: parse and hash the span into small
scratch arrays that stay in cache, prefetching each key's home slot, then probe the table in a
tight loop whose cache misses have mostly been served by then.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numba import njit

from kompakt.cleaner.kernels.hashing import hash_one
from kompakt.records.layout import (
    R_BATCH,
    R_KEY_LEN,
    R_KEY_START,
    R_LENGTH,
    R_OFFSET,
    R_POSITION,
    R_TIMESTAMP,
    R_VALUE_LEN,
    R_VALUE_START,
)
from kompakt.records.native import BoolArray, I64Array, Scalar, U8Array, U64Array, prefetch, ptr, read_varint
from kompakt.records.precompiled import entry_point
from kompakt.records.scan import parse_fields

_LINEAR_PROBES: Final = 8  # first probe this many adjacent slots (about three cache lines), then
_DOUBLE_PROBES: Final = 32  # this many double-hashing steps, then linear probing to the end
_MOVED = np.uint64(1 << 63)  # marks entries already placed during an in-place _grow
_NOT_MOVED = np.uint64((1 << 63) - 1)
INITIAL_CAP: Final = 1 << 14  # slots in use after a clear (384 KiB: within L2)
_GROW_NUM: Final = 1  # grow once size reaches cap * _GROW_NUM / _GROW_DEN
_GROW_DEN: Final = 2
_GROW_FACTOR: Final = 4  # fewer, larger steps: each rehash moves every key once
MAX_SLOTS: Final = (1 << 32) - 1  # _home maps 32 hash bits onto [0, cap)
_AHEAD: Final = 16  # probe loops prefetch the home slot of the key this many places ahead


@njit(cache=True, nogil=True)
def _prefetch_slot(tp: Scalar, cap: Scalar, hi: Scalar) -> None:
    """Prefetch the cache line of the home slot of digest ``hi`` and the line after it (a slot may
    straddle two lines, and the first probes are adjacent)."""
    row = _home(hi, cap) * 3
    prefetch(tp, row)
    prefetch(tp, row + 8)


@njit(cache=True, nogil=True)
def _home(h: Scalar, cap: Scalar) -> Scalar:
    """Map the top 32 bits of ``h`` onto ``[0, cap)`` with a multiply (no division)."""
    return np.int64(((h >> np.uint64(32)) * np.uint64(cap)) >> np.uint64(32))


@njit(cache=True, nogil=True)
def _step(lo: Scalar, cap: Scalar) -> Scalar:
    """Double-hashing step in ``[1, cap - 1]`` (1 if ``cap <= 2``)."""
    if cap <= 2:
        return np.int64(1)
    return np.int64(1) + _home(lo, cap - 1)


@njit(cache=True, nogil=True)
def _next_step(attempt: Scalar, lo: Scalar, cap: Scalar) -> Scalar:
    """How far probe ``attempt`` moves on: 1, then a double-hashing step, then 1 again."""
    if attempt < _LINEAR_PROBES - 1 or attempt >= _LINEAR_PROBES + _DOUBLE_PROBES:
        return np.int64(1)
    return _step(lo, cap)


@njit(cache=True, nogil=True)
def _grow_at(cap: Scalar, slots: Scalar) -> Scalar:
    """The size at which a table using ``cap`` of ``slots`` slots grows (never, once all are used)."""
    if cap >= slots:
        return np.int64(1) << np.int64(62)
    return cap * _GROW_NUM // _GROW_DEN


@njit(cache=True, nogil=True)
def _probe(tp: Scalar, cap: Scalar, hi: Scalar, lo: Scalar) -> Scalar:
    """Slot holding digest (hi, lo), else the free slot where it would go; -1 if neither exists.

    The first probes are adjacent, so nearly every probe at the table's usual load (at most half
    full while it can still grow) stays within the cache lines prefetched for the home slot. Then
    double hashing spreads clusters at Kafka's 0.9 load factor; since ``cap`` is arbitrary the step
    may share a factor with it, so after a bounded number of steps the walk turns linear again,
    which reaches every slot.
    """
    idx = _home(hi, cap)
    for attempt in range(cap + _LINEAR_PROBES + _DOUBLE_PROBES):
        row = idx * 3
        if tp[row + 2] == 0 or (tp[row] == hi and tp[row + 1] == lo):
            return idx
        idx += _next_step(attempt, lo, cap)
        if idx >= cap:
            idx -= cap
    return -1


@njit(cache=True, nogil=True)
def _lookup_p(tp: Scalar, cap: Scalar, hi: Scalar, lo: Scalar) -> Scalar:
    idx = _probe(tp, cap, hi, lo)
    if idx < 0:
        return np.int64(-1)
    return np.int64(tp[idx * 3 + 2]) - 1


@njit(cache=True, nogil=True)
def _put_p(tp: Scalar, cap: Scalar, hi: Scalar, lo: Scalar, offset: Scalar) -> Scalar:
    """Store and return the size increment (1 for a new key, 0 for an overwrite). A free slot must
    exist (the callers' size checks guarantee one)."""
    row = _probe(tp, cap, hi, lo) * 3
    grew = np.int64(tp[row + 2] == 0)
    # Unconditional stores (the digest is unchanged on an overwrite): no branch to mispredict.
    tp[row] = hi
    tp[row + 1] = lo
    tp[row + 2] = np.uint64(offset + 1)
    return grew


@njit(cache=True, nogil=True)
def _grow_p(tp: Scalar, cap: Scalar, new_cap: Scalar) -> None:
    """Rehash slots ``[0, cap)`` into ``[0, new_cap)`` in place; slots ``[cap, new_cap)`` are zero.

    Each entry not yet moved is taken out and placed along its new probe sequence at the first slot
    that is free or holds an entry not yet moved; in the latter case that entry is taken out in
    turn. Moved entries carry a flag bit until the end, so no probe ever passes a slot that later
    empties: a slot only empties when its unmoved entry is taken out, and probes never pass those.
    """
    for i in range(cap):
        if i + _AHEAD < cap:
            _prefetch_slot(tp, new_cap, tp[(i + _AHEAD) * 3])
        v = tp[i * 3 + 2]
        if v == 0 or (v & _MOVED) != 0:
            continue
        hi = tp[i * 3]
        lo = tp[i * 3 + 1]
        tp[i * 3 + 2] = 0
        while True:
            idx = _home(hi, new_cap)
            attempt = 0
            while True:
                row = idx * 3
                w = tp[row + 2]
                if w == 0 or (w & _MOVED) == 0:
                    break
                idx += _next_step(attempt, lo, new_cap)
                if idx >= new_cap:
                    idx -= new_cap
                attempt += 1
            ohi = tp[row]
            olo = tp[row + 1]
            tp[row] = hi
            tp[row + 1] = lo
            tp[row + 2] = v | _MOVED
            if w == 0:
                break
            hi, lo, v = ohi, olo, w
    for i in range(new_cap):
        tp[i * 3 + 2] &= _NOT_MOVED


@njit(cache=True, nogil=True)
def _maybe_grow(tp: Scalar, cap: Scalar, slots: Scalar, size: Scalar) -> Scalar:
    """The cap after making room for one more key at ``size``: grown if the load reached the limit."""
    while size >= _grow_at(cap, slots):
        new_cap = min(cap * _GROW_FACTOR, slots)
        _grow_p(tp, cap, new_cap)
        cap = new_cap
    return cap


@entry_point("i8(u8[:,::1], i8, u8, u8)")
@njit(cache=True, nogil=True)
def lookup(table: U64Array, cap: Scalar, hi: Scalar, lo: Scalar) -> Scalar:
    return _lookup_p(ptr(table), cap, hi, lo)


@entry_point("UniTuple(i8, 2)(u8[:,::1], i8, i8, i8, u8, u8, i8)")
@njit(cache=True, nogil=True)
def put_one(
    table: U64Array, cap: Scalar, slots: Scalar, size: Scalar, hi: Scalar, lo: Scalar, offset: Scalar
) -> tuple[Scalar, Scalar]:
    """``(size increment, new cap)`` of a single put."""
    tp = ptr(table)
    cap = _maybe_grow(tp, cap, slots, size)
    return _put_p(tp, cap, hi, lo, offset), cap


@entry_point("Tuple((i8, i8, b1, i8, i8))(u8[:,::1], i8, u8[::1], u8[::1], i8[::1], i8[::1], i8, i8, i8)")
@njit(cache=True, nogil=True)
def put_records(
    table: U64Array,
    cap: Scalar,
    hi: U64Array,
    lo: U64Array,
    offsets: I64Array,
    key_len: I64Array,
    start_offset: Scalar,
    size: Scalar,
    max_keys: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar]:
    """Returns ``(consumed, size, full, last_put, cap)``."""
    tp = ptr(table)
    slots = table.shape[0]
    grow_at = _grow_at(cap, slots)
    last_put = np.int64(-1)
    for i in range(offsets.shape[0]):
        if key_len[i] < 0 or offsets[i] < start_offset:
            continue
        if size >= max_keys:
            return i, size, True, last_put, cap
        if size >= grow_at:
            cap = _maybe_grow(tp, cap, slots, size)
            grow_at = _grow_at(cap, slots)
        size += _put_p(tp, cap, hi[i], lo[i], offsets[i])
        last_put = offsets[i]
    return offsets.shape[0], size, False, last_put, cap


@entry_point("i8[::1](u8[:,::1], i8, u8[::1], u8[::1], i8[::1])")
@njit(cache=True, nogil=True)
def get_many(table: U64Array, cap: Scalar, hi: U64Array, lo: U64Array, key_len: I64Array) -> I64Array:
    tp = ptr(table)
    out = np.empty(hi.shape[0], dtype=np.int64)
    for i in range(hi.shape[0]):
        out[i] = -1 if key_len[i] < 0 else _lookup_p(tp, cap, hi[i], lo[i])
    return out


@entry_point("Tuple((b1[::1], i8))(u8[:,::1], i8, u8[::1], u8[::1], i8[::1], i8[::1], i8[::1], b1[::1], i8)")
@njit(cache=True, nogil=True)
def retain(
    table: U64Array,
    cap: Scalar,
    hi: U64Array,
    lo: U64Array,
    offsets: I64Array,
    key_len: I64Array,
    value_len: I64Array,
    tombstone_ok: BoolArray,
    latest: Scalar,
) -> tuple[BoolArray, Scalar]:
    tp = ptr(table)
    keep = np.empty(offsets.shape[0], dtype=np.bool_)
    invalid = 0
    for i in range(offsets.shape[0]):
        if offsets[i] > latest:
            keep[i] = True
        elif key_len[i] < 0:
            keep[i] = False
            invalid += 1
        else:
            found = _lookup_p(tp, cap, hi[i], lo[i])
            keep[i] = offsets[i] >= found and (value_len[i] >= 0 or tombstone_ok[i])
    return keep, invalid


# ---------------------------------------------------------------------------------------------
# Fused passes over spans (a span = one batch's records section, in the segment or in a buffer of
# decompressed payloads)

# status codes of map_spans; positive codes are record errors (kernels._RECORD_ERRORS)
DONE: Final = 0
FULL: Final = -1


@njit(cache=True, nogil=True)
def _parse_key(buf: Scalar, pos: Scalar, limit: Scalar) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar]:
    """Just what the map pass needs: ``(record_end, error, offset_delta, key_start, key_len)``.

    Values and headers are skipped via the length prefix; the copy pass parses every record in
    full, so a record malformed past its key is still caught before anything is written.
    """
    length, body = read_varint(buf, pos, limit, 5)
    if body < 0:
        return pos, 2, 0, 0, 0
    rec_end = body + length
    if length < 0 or rec_end > limit:
        return pos, 3, 0, 0, 0
    _, p = read_varint(buf, body + 1, rec_end, 10)
    if p < 0:
        return pos, 4, 0, 0, 0
    off_delta, p = read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0
    key_len, p = read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0
    if key_len < -1 or p + max(key_len, 0) > rec_end:
        return pos, 5, 0, 0, 0
    return rec_end, 0, off_delta, p, key_len


@entry_point("UniTuple(i8, 7)(u1[::1], i8[::1], i8[::1], i8[::1], i8[::1], u8[:,::1], i8, i8, i8, i8)")
@njit(cache=True, nogil=True)
def map_spans(
    buf: U8Array,
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    counts: I64Array,
    table: U64Array,
    cap: Scalar,
    start_offset: Scalar,
    size: Scalar,
    max_keys: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar, Scalar, Scalar]:
    """``Cleaner.buildOffsetMapForSegment`` over spans. Returns ``(status, span, records_done_in_span, size,
    last_put, position, cap)``; status DONE, FULL, or a record error code (> 0) with the span and byte
    position."""
    most = 0
    for b in range(starts.shape[0]):
        if counts[b] < 0:
            return 1, b, 0, size, -1, starts[b], cap
        most = max(most, counts[b])
    off = np.empty(most, dtype=np.int64)
    hi = np.empty(most, dtype=np.uint64)
    lo = np.empty(most, dtype=np.uint64)
    bp = ptr(buf)
    tp = ptr(table)
    slots = table.shape[0]
    grow_at = _grow_at(cap, slots)
    last_put = np.int64(-1)
    for b in range(starts.shape[0]):
        pos = starts[b]
        limit = ends[b]
        if pos < 0 or limit < pos or limit > buf.shape[0]:
            return 9, b, 0, size, last_put, pos, cap
        base = base_offsets[b]
        # Parse and hash the span, then put; the put loop prefetches the home slots of the keys
        # _AHEAD places ahead, so that many table misses are in flight at once. A null key or an
        # offset below start_offset is never put: its offset becomes -1 (its digest is 0).
        n = counts[b]
        for j in range(n):
            pos, err, od, ks, kl = _parse_key(bp, pos, limit)
            if err != 0:
                return err, b, 0, size, last_put, pos, cap
            o = base + od
            if kl < 0 or o < start_offset:
                off[j] = -1
                hi[j] = 0
                lo[j] = 0
            else:
                off[j] = o
                h, g = hash_one(bp, ks, kl)
                hi[j] = h
                lo[j] = g
        if pos != limit:
            return 8, b, 0, size, last_put, pos, cap
        for j in range(min(n, _AHEAD)):
            _prefetch_slot(tp, cap, hi[j])
        for j in range(n):
            if j + _AHEAD < n:
                _prefetch_slot(tp, cap, hi[j + _AHEAD])
            o = off[j]
            if o < 0:
                continue
            if size >= max_keys:
                return FULL, b, j, size, last_put, 0, cap
            if size >= grow_at:
                cap = _maybe_grow(tp, cap, slots, size)
                grow_at = _grow_at(cap, slots)
            size += _put_p(tp, cap, hi[j], lo[j], o)
            last_put = o
    return DONE, starts.shape[0], 0, size, last_put, 0, cap


@entry_point("UniTuple(i8, 3)(u1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8, i8[::1], u8[::1], u8[::1])")
@njit(cache=True, nogil=True)
def hash_spans(
    buf: U8Array,
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    counts: I64Array,
    start_offset: Scalar,
    off: I64Array,
    hi: U64Array,
    lo: U64Array,
) -> tuple[Scalar, Scalar, Scalar]:
    """The parsing half of ``map_spans``: each record's offset and key digest, in order, into
    ``off``/``hi``/``lo`` (a null key or an offset below ``start_offset`` gets offset -1, digest 0).

    It reads only ``buf`` and writes only its outputs, so a map pass runs it for several chunks at
    once in worker threads while ``put_hashed`` fills the table in log order. Returns ``(error,
    span, position)`` with ``map_spans``'s codes: error 0, or the error ``map_spans`` would have
    stopped at over the same spans, after putting the spans before ``span`` (which are complete
    here; none for a negative count, which ``map_spans`` checks first). The outputs need room for
    the sum of ``counts``.
    """
    room = min(off.shape[0], hi.shape[0], lo.shape[0])
    total = 0
    for b in range(starts.shape[0]):
        if counts[b] < 0:
            return 1, b, starts[b]
        total += counts[b]
    if total > room:
        return 9, 0, 0
    k = 0
    bp = ptr(buf)
    for b in range(starts.shape[0]):
        pos = starts[b]
        limit = ends[b]
        if pos < 0 or limit < pos or limit > buf.shape[0]:
            return 9, b, pos
        base = base_offsets[b]
        for _ in range(counts[b]):
            pos, err, od, ks, kl = _parse_key(bp, pos, limit)
            if err != 0:
                return err, b, pos
            o = base + od
            if kl < 0 or o < start_offset:
                off[k] = -1
                hi[k] = 0
                lo[k] = 0
            else:
                off[k] = o
                h, g = hash_one(bp, ks, kl)
                hi[k] = h
                lo[k] = g
            k += 1
        if pos != limit:
            return 8, b, pos
    return 0, starts.shape[0], 0


@entry_point("UniTuple(i8, 6)(u8[:,::1], i8, i8[::1], u8[::1], u8[::1], i8, i8, i8, i8, i8)")
@njit(cache=True, nogil=True)
def put_hashed(
    table: U64Array,
    cap: Scalar,
    off: I64Array,
    hi: U64Array,
    lo: U64Array,
    first: Scalar,
    end: Scalar,
    size: Scalar,
    max_keys: Scalar,
    prev: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar, Scalar]:
    """The table half of ``map_spans``: put records ``first:end`` of ``hash_spans``'s output in
    order, prefetching the home slots ``_AHEAD`` records on. Returns ``(status, record, size,
    last_put, cap, ordered)``: DONE (record is ``end``), or FULL at the record that found the map
    at ``max_keys`` (the records before it are put); the capacity rule is ``map_spans``'s.
    ``ordered`` is 1 when every offset put was above the one before it, starting from ``prev``."""
    tp = ptr(table)
    slots = table.shape[0]
    grow_at = _grow_at(cap, slots)
    last_put = np.int64(-1)
    ordered = 1
    end = min(end, off.shape[0], hi.shape[0], lo.shape[0])
    for j in range(first, min(end, first + _AHEAD)):
        _prefetch_slot(tp, cap, hi[j])
    for j in range(first, end):
        if j + _AHEAD < end:
            _prefetch_slot(tp, cap, hi[j + _AHEAD])
        o = off[j]
        if o < 0:
            continue
        if size >= max_keys:
            return FULL, j, size, last_put, cap, ordered
        if size >= grow_at:
            cap = _maybe_grow(tp, cap, slots, size)
            grow_at = _grow_at(cap, slots)
        size += _put_p(tp, cap, hi[j], lo[j], o)
        if o <= prev:
            ordered = 0
        prev = o
        last_put = o
    return DONE, end, size, last_put, cap, ordered


@njit(cache=True, nogil=True)
def _check_spans(
    buf: U8Array, starts: I64Array, ends: I64Array, counts: I64Array
) -> tuple[Scalar, Scalar, Scalar, Scalar]:
    """``(error, span, position, most)``: the first span whose count or bounds are impossible
    (error 1 or 9), else error 0 and the largest record count, which sizes the scratch arrays."""
    most = 0
    for b in range(starts.shape[0]):
        if counts[b] < 0:
            return 1, b, starts[b], 0
        if starts[b] < 0 or ends[b] < starts[b] or ends[b] > buf.shape[0]:
            return 9, b, starts[b], 0
        most = max(most, counts[b])
    return 0, 0, 0, most


@njit(cache=True, nogil=True)
def _parse_span(
    bp: Scalar,
    pos: Scalar,
    limit: Scalar,
    base_off: Scalar,
    base_ts: Scalar,
    n: Scalar,
    latest: Scalar,
    bit_base: Scalar,
    rows: I64Array,
    hi: U64Array,
    lo: U64Array,
) -> tuple[Scalar, Scalar]:
    """Parse the ``n`` records of one span in full into ``rows`` and hash the keys that need a
    lookup (keyed, at or below ``latest`` and below ``bit_base``; the others get digest 0).
    ``(error, position)``: error 0 with the end of the last record, or a record error code where
    it was met."""
    for j in range(n):
        nxt, err, od, td, ks, kl, vs, vl = parse_fields(bp, pos, limit)
        if err != 0:
            return err, pos
        o = base_off + od
        rows[R_OFFSET, j] = o
        rows[R_POSITION, j] = pos
        rows[R_LENGTH, j] = nxt - pos
        rows[R_TIMESTAMP, j] = base_ts + td
        rows[R_KEY_START, j] = ks
        rows[R_KEY_LEN, j] = kl
        rows[R_VALUE_START, j] = vs
        rows[R_VALUE_LEN, j] = vl
        if kl >= 0 and o <= latest and o < bit_base:
            h, g = hash_one(bp, ks, kl)
            hi[j] = h
            lo[j] = g
        else:
            hi[j] = 0
            lo[j] = 0
        pos = nxt
    return 0, pos


@njit(cache=True, nogil=True)
def _lookup_span(
    tp: Scalar,
    cap: Scalar,
    n: Scalar,
    latest: Scalar,
    bit_base: Scalar,
    rows: I64Array,
    hi: U64Array,
    lo: U64Array,
    found: I64Array,
) -> None:
    """The map's offset for each parsed key that needs one, prefetching the home slots of the keys
    ``_AHEAD`` places on, so that many table misses are in flight at once."""
    for j in range(min(n, _AHEAD)):
        _prefetch_slot(tp, cap, hi[j])
    for j in range(n):
        if j + _AHEAD < n:
            _prefetch_slot(tp, cap, hi[j + _AHEAD])
        if rows[R_KEY_LEN, j] >= 0 and rows[R_OFFSET, j] <= latest and rows[R_OFFSET, j] < bit_base:
            found[j] = _lookup_p(tp, cap, hi[j], lo[j])


@njit(cache=True, nogil=True)
def _emit_span(
    b: Scalar,
    n: Scalar,
    latest: Scalar,
    tombstone_ok: Scalar,
    bits: Scalar,
    bit_base: Scalar,
    rows: I64Array,
    found: I64Array,
    kept: I64Array,
    n_kept: Scalar,
) -> tuple[Scalar, Scalar, Scalar]:
    """Decide each record of span ``b`` and append the kept ones to ``kept``. ``(n_kept, invalid,
    tombstones)``: the new row count and how many unkeyed records and tombstones were dropped."""
    invalid = 0
    tombstones = 0
    for j in range(n):
        offset = rows[R_OFFSET, j]
        if offset > latest:
            keep = True
        elif rows[R_KEY_LEN, j] < 0:
            keep = False
            invalid += 1
        else:
            if offset >= bit_base:  # the map's own latest offsets: kept iff it is one of them
                i = offset - bit_base
                latest_of_key = (bits[i >> 3] >> (i & 7)) & 1 != 0
            else:
                latest_of_key = offset >= found[j]
            keep = latest_of_key and (rows[R_VALUE_LEN, j] >= 0 or tombstone_ok)
            if not keep and rows[R_VALUE_LEN, j] < 0:
                tombstones += 1
        if keep:
            for c in range(R_BATCH):
                kept[c, n_kept] = rows[c, j]
            kept[R_BATCH, n_kept] = b
            n_kept += 1
    return n_kept, invalid, tombstones


@entry_point(
    "UniTuple(i8, 5)(u1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], b1[::1], u8[:,::1], i8, i8,"
    " u1[::1], i8, i8[:,::1], i8[::1])"
)
@njit(cache=True, nogil=True)
def retain_spans(
    buf: U8Array,
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    base_timestamps: I64Array,
    counts: I64Array,
    tombstone_ok: BoolArray,
    table: U64Array,
    cap: Scalar,
    latest: Scalar,
    bits: U8Array,
    bit_base: Scalar,
    kept: I64Array,
    kept_first: I64Array,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar]:
    """``Cleaner.shouldRetainRecord`` over spans, writing only the kept records' columns into ``kept``
    (a RecordTable layout) and their per-span prefix counts into ``kept_first``. Returns ``(error,
    span, position, invalid_dropped, tombstones_dropped)``; the ``batch`` column holds the span
    index.

    ``bits`` (from ``latest_offsets_bitmap``) answers for keyed records at offsets ``[bit_base,
    latest]`` without hashing or probing: bit ``o - bit_base`` is set iff ``o`` is the offset the map
    holds for some key. Pass ``bit_base > latest`` to look every key up.

    Per span: parse every record in full and hash the keys that need a lookup, then look them up,
    then decide and emit. The steps are helpers LLVM inlines (one compiled loop nest, as before).
    """
    err, b, pos, most = _check_spans(buf, starts, ends, counts)
    if err != 0:
        return err, b, pos, 0, 0
    if bit_base <= latest and (bit_base < 0 or (latest - bit_base) >> 3 >= bits.shape[0]):
        bit_base = latest + 1  # a bitmap that does not cover the range is not used
    rows = np.empty((R_BATCH, most), dtype=np.int64)
    found = np.empty(most, dtype=np.int64)
    hi = np.empty(most, dtype=np.uint64)
    lo = np.empty(most, dtype=np.uint64)
    bp = ptr(buf)
    tp = ptr(table)
    bitp = ptr(bits)
    n_kept = 0
    invalid = 0
    tombstones = 0
    kept_first[0] = 0
    for b in range(starts.shape[0]):
        n = counts[b]
        err, pos = _parse_span(
            bp, starts[b], ends[b], base_offsets[b], base_timestamps[b], n, latest, bit_base, rows, hi, lo
        )
        if err != 0:
            return err, b, pos, invalid, tombstones
        if pos != ends[b]:
            return 8, b, pos, invalid, tombstones
        _lookup_span(tp, cap, n, latest, bit_base, rows, hi, lo, found)
        n_kept, dropped_invalid, dropped_tombstones = _emit_span(
            b, n, latest, tombstone_ok[b], bitp, bit_base, rows, found, kept, n_kept
        )
        invalid += dropped_invalid
        tombstones += dropped_tombstones
        kept_first[b + 1] = n_kept
    return 0, 0, 0, invalid, tombstones


@entry_point("i8(u8[:,::1], i8, i8, i8, u1[::1])")
@njit(cache=True, nogil=True)
def latest_offsets_bitmap(
    table: U64Array, cap: Scalar, first: Scalar, latest: Scalar, bits: U8Array
) -> Scalar:
    """Set bit ``o - first`` of ``bits`` (zeroed, covering ``[first, latest]``) for every offset
    ``o`` in that range the table holds; returns how many. One sequential sweep of the slots in use,
    so the copy pass can tell a record that is its key's latest from its offset alone."""
    if first > latest or (latest - first) >> 3 >= bits.shape[0]:
        return -1
    tp = ptr(table)
    bp = ptr(bits)
    n = 0
    for i in range(min(cap, table.shape[0])):
        v = tp[i * 3 + 2]
        if v == 0:
            continue
        o = np.int64(v) - 1
        if first <= o <= latest:
            k = o - first
            bp[k >> 3] |= np.uint8(1 << (k & 7))
            n += 1
    return n
