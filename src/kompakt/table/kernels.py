"""Native (numba) kernels of the key index: an open-addressing table of 128-bit key digests.

The table is a ``uint64`` array of shape ``(capacity, 3)``: ``[digest hi, digest lo, word]`` with
``word = ((offset << 1) | tombstone) + 1`` and ``word == 0`` for a free slot, so a fresh
``np.zeros`` table is empty and an all-zero digest is an ordinary key. 24 bytes a slot, the
cleaner's offset-map slot plus one bit; the digests are the ones
:func:`kompakt.cleaner.kernels.hashing.hash_keys` computes, so one key hashes the same for the cleaner,
``explain`` and the index.

Probing is linear from the home slot (the top 32 digest bits mapped onto ``[0, capacity)`` with a
multiply): adjacent slots share cache lines, and the index never deletes (a key whose latest
record is a tombstone keeps its slot with the tombstone bit), so no probe chain is ever broken.
The callers keep the load at or below :data:`MAX_LOAD`.

Updates follow one rule, "the higher offset wins": applying a record whose offset is below the
stored one changes nothing. The result is therefore independent of the order in which runs of
records are applied, which lets the builder apply decompressed and plain runs as they come.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.kernels.hashing import hash_one
from kompakt.records.lazy_numba import njit
from kompakt.records.memory import HUGE_PAGE, zeros_u8
from kompakt.records.native import prefetch, ptr
from kompakt.records.precompiled import entry_point
from kompakt.records.scan import parse_fields

U64Array = npt.NDArray[np.uint64]
I64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Scalar: TypeAlias = Any
"""A numba integer inside a kernel (numpy's stubs do not model numba's integer typing)."""

#: Grow (or, after a rebuild, size) the table so that at most this share of slots is used.
MAX_LOAD: Final = 0.8
#: The load a table is sized for when it is built or grown: between this and MAX_LOAD a slot
#: costs 24 / load bytes per key, 30 to 37.5.
TARGET_LOAD: Final = 0.66
MIN_CAPACITY: Final = 1024

#: Status of :func:`apply_records` and :func:`apply_spans`: every record applied, or stopped
#: because the table is full (grow it and call again from where it stopped). A positive status
#: of :func:`apply_spans` is a record error code of :func:`kompakt.records.scan.record_error`.
APPLIED: Final = 0
NEEDS_GROWTH: Final = -1


#: Probe loops prefetch the home slot of the record this many places ahead.
_AHEAD: Final = 16


def zeroed_table(capacity: int) -> U64Array:
    """An empty ``(capacity, 3)`` table whose pages cost nothing until written.

    Large tables come from an anonymous mapping advised for 2 MiB pages: random probes into a
    table bigger than the caches then miss the TLB far less often (the cleaner's offset map does
    the same).
    """
    nbytes = capacity * 24
    if nbytes < 4 * HUGE_PAGE:
        return np.zeros((capacity, 3), dtype=np.uint64)
    table: U64Array = zeros_u8(nbytes, huge=True).view(np.uint64).reshape(capacity, 3)
    return table


@njit(cache=True, nogil=True)
def _home(hi: Scalar, cap: Scalar) -> Scalar:
    return np.int64(((hi >> np.uint64(32)) * np.uint64(cap)) >> np.uint64(32))


@njit(cache=True, nogil=True)
def _find(table: U64Array, cap: Scalar, hi: Scalar, lo: Scalar) -> Scalar:
    """Slot of digest (hi, lo), or the free slot where it would go (the table is never full)."""
    idx = _home(hi, cap)
    while True:
        if table[idx, 2] == 0 or (table[idx, 0] == hi and table[idx, 1] == lo):
            return idx
        idx += 1
        if idx == cap:
            idx = 0


@entry_point("UniTuple(i8, 4)(u8[:,::1], u8[::1], u8[::1], i8[::1], i8[::1], i8[::1], i8, i8, i8, i8)")
@njit(cache=True, nogil=True)
def apply_records(
    table: U64Array,
    hi: U64Array,
    lo: U64Array,
    offsets: I64Array,
    key_len: I64Array,
    value_len: I64Array,
    start: Scalar,
    size: Scalar,
    tombstones: Scalar,
    max_size: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar]:
    """Apply records ``start:`` (null keys skipped); stop before a new key would pass ``max_size``.

    Returns ``(status, next_record, size, tombstones)``: ``size`` counts keys (live or
    tombstoned), ``tombstones`` those whose latest record is a tombstone.
    """
    cap = table.shape[0]
    n = offsets.shape[0]
    tp = ptr(table)
    for j in range(start, min(n, start + _AHEAD)):
        prefetch(tp, _home(hi[j], cap) * 3)
    for i in range(start, n):
        if i + _AHEAD < n:
            prefetch(tp, _home(hi[i + _AHEAD], cap) * 3)
        if key_len[i] < 0:
            continue
        h = hi[i]
        g = lo[i]
        idx = _find(table, cap, h, g)
        tomb = np.uint64(1) if value_len[i] < 0 else np.uint64(0)
        word = ((np.uint64(offsets[i]) << np.uint64(1)) | tomb) + np.uint64(1)
        old = table[idx, 2]
        if old == 0:
            if size >= max_size:
                return NEEDS_GROWTH, i, size, tombstones
            table[idx, 0] = h
            table[idx, 1] = g
            table[idx, 2] = word
            size += 1
            tombstones += np.int64(tomb)
        elif word >= old:
            table[idx, 2] = word
            tombstones += np.int64(tomb) - np.int64((old - np.uint64(1)) & np.uint64(1))
    return APPLIED, n, size, tombstones


@entry_point("void(u8[:,::1], u8[:,::1])")
@njit(cache=True, nogil=True)
def rehash(old: U64Array, new: U64Array) -> None:
    """Insert every entry of ``old`` into the empty table ``new`` (capacities may differ)."""
    cap = new.shape[0]
    tp = ptr(new)
    n = old.shape[0]
    for i in range(n):
        if i + _AHEAD < n:
            prefetch(tp, _home(old[i + _AHEAD, 0], cap) * 3)
        if old[i, 2] != 0:
            h = old[i, 0]
            g = old[i, 1]
            idx = _find(new, cap, h, g)
            new[idx, 0] = h
            new[idx, 1] = g
            new[idx, 2] = old[i, 2]


@entry_point("u8(u8[:,::1], u8, u8)")
@njit(cache=True, nogil=True)
def lookup(table: U64Array, hi: Scalar, lo: Scalar) -> Scalar:
    """The stored word of digest (hi, lo): 0 when the key is not in the index."""
    idx = _find(table, table.shape[0], hi, lo)
    return table[idx, 2]


@entry_point("b1[::1](u8[:,::1], u8[::1], u8[::1], i8[::1], i8[::1], b1)")
@njit(cache=True, nogil=True)
def latest_mask(
    table: U64Array,
    hi: U64Array,
    lo: U64Array,
    offsets: I64Array,
    key_len: I64Array,
    include_tombstones: bool,
) -> BoolArray:
    """Per record: is it its key's latest record in the index (and live, unless tombstones count)?"""
    cap = table.shape[0]
    n = offsets.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    tp = ptr(table)
    for j in range(min(n, _AHEAD)):
        prefetch(tp, _home(hi[j], cap) * 3)
    for i in range(n):
        if i + _AHEAD < n:
            prefetch(tp, _home(hi[i + _AHEAD], cap) * 3)
        if key_len[i] < 0:
            continue
        word = table[_find(table, cap, hi[i], lo[i]), 2]
        if word == 0:
            continue
        v = word - np.uint64(1)
        if np.int64(v >> np.uint64(1)) == offsets[i]:
            out[i] = include_tombstones or (v & np.uint64(1)) == 0
    return out


def capacity_for(keys: int) -> int:
    """Slots for ``keys`` keys at :data:`TARGET_LOAD` (at least :data:`MIN_CAPACITY`)."""
    return max(MIN_CAPACITY, int(keys / TARGET_LOAD) + 1)


def max_keys(capacity: int) -> int:
    """Keys a table of ``capacity`` slots takes before it must grow (:data:`MAX_LOAD`)."""
    return int(capacity * MAX_LOAD)


def decode_word(word: int) -> tuple[int, bool]:
    """``(offset, is_tombstone)`` of a non-zero stored word."""
    v = word - 1
    return v >> 1, bool(v & 1)


@entry_point("Tuple((i8[::1], u1[::1]))(u1[::1], i8[::1], i8[::1])")
@njit(cache=True, nogil=True)
def gather(
    buf: npt.NDArray[np.uint8], starts: I64Array, lengths: I64Array
) -> tuple[I64Array, npt.NDArray[np.uint8]]:
    """Concatenate ``buf[starts[i] : starts[i] + lengths[i]]`` (a negative length is null: empty
    here) into one buffer with Arrow's offsets: ``data[offsets[i] : offsets[i + 1]]`` is value i."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, dtype=np.int64)
    total = 0
    for i in range(n):
        offsets[i] = total
        if lengths[i] > 0:
            total += lengths[i]
    offsets[n] = total
    data = np.empty(total, dtype=np.uint8)
    for i in range(n):
        length = lengths[i]
        if length > 0:
            s = starts[i]
            o = offsets[i]
            for j in range(length):
                data[o + j] = buf[s + j]
    return offsets, data


@entry_point(
    "UniTuple(i8, 7)(u1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8, i8, i8, u8[:,::1], i8, i8, i8)"
)
@njit(cache=True, nogil=True)
def apply_spans(
    buf: npt.NDArray[np.uint8],
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    counts: I64Array,
    first_span: Scalar,
    low: Scalar,
    high: Scalar,
    table: U64Array,
    size: Scalar,
    tombstones: Scalar,
    max_size: Scalar,
) -> tuple[Scalar, Scalar, Scalar, Scalar, Scalar, Scalar, Scalar]:
    """Parse, hash and apply the records of spans ``first_span:`` whose offsets lie in ``[low, high)``.

    The build's hot loop, fused: a span's records are parsed and hashed into small scratch arrays
    that stay in the cache (each key's home slot prefetched a few records ahead), then applied.
    Returns ``(status, span, size, tombstones, records, max_offset, position)``: on
    :data:`NEEDS_GROWTH` call again from ``span`` (re-applying its first records changes
    nothing); a record error names the span and byte ``position``.
    """
    most = 0
    for b in range(first_span, starts.shape[0]):
        if counts[b] < 0:
            return 1, b, size, tombstones, 0, -1, starts[b]
        if starts[b] < 0 or ends[b] < starts[b] or ends[b] > buf.shape[0]:
            return 9, b, size, tombstones, 0, -1, starts[b]
        most = max(most, counts[b])
    off = np.empty(most, dtype=np.int64)
    hi = np.empty(most, dtype=np.uint64)
    lo = np.empty(most, dtype=np.uint64)
    tomb = np.empty(most, dtype=np.uint64)
    bp = ptr(buf)
    tp = ptr(table)
    cap = table.shape[0]
    records = 0
    max_offset = np.int64(-1)
    for b in range(first_span, starts.shape[0]):
        n = counts[b]
        err, pos = _parse_span(bp, starts[b], ends[b], base_offsets[b], n, low, high, off, hi, lo, tomb)
        if err != 0:
            return err, b, size, tombstones, records, max_offset, pos
        if size + n > max_size:
            return NEEDS_GROWTH, b, size, tombstones, records, max_offset, 0
        for j in range(min(n, _AHEAD)):
            prefetch(tp, _home(hi[j], cap) * 3)
        for j in range(n):
            if j + _AHEAD < n:
                prefetch(tp, _home(hi[j + _AHEAD], cap) * 3)
            o = off[j]
            if o >= 0:
                grew, delta = _put(table, cap, hi[j], lo[j], o, tomb[j])
                size += grew
                tombstones += delta
                max_offset = max(max_offset, o)
        records += n
    return APPLIED, starts.shape[0], size, tombstones, records, max_offset, 0


@njit(cache=True, nogil=True)
def _parse_span(
    bp: Scalar,
    pos: Scalar,
    limit: Scalar,
    base: Scalar,
    n: Scalar,
    low: Scalar,
    high: Scalar,
    off: I64Array,
    hi: U64Array,
    lo: U64Array,
    tomb: U64Array,
) -> tuple[Scalar, Scalar]:
    """Parse one span's ``n`` records into the scratch arrays (offset -1: not applied);
    ``(error, position)``, error 0 when the span is whole."""
    for j in range(n):
        nxt, err, od, _td, ks, kl, _vs, vl = parse_fields(bp, pos, limit)
        if err != 0:
            return err, pos
        o = base + od
        if kl < 0 or o < low or o >= high:
            off[j] = -1
            hi[j] = 0
        else:
            off[j] = o
            h, g = hash_one(bp, ks, kl)
            hi[j] = h
            lo[j] = g
            tomb[j] = np.uint64(1) if vl < 0 else np.uint64(0)
        pos = nxt
    if pos != limit:
        return 8, pos
    return 0, pos


@njit(cache=True, nogil=True)
def _put(
    table: U64Array, cap: Scalar, h: Scalar, g: Scalar, offset: Scalar, tomb: Scalar
) -> tuple[Scalar, Scalar]:
    """Apply one record (the higher offset wins); ``(1 if the key is new, tombstone count delta)``."""
    idx = _find(table, cap, h, g)
    word = ((np.uint64(offset) << np.uint64(1)) | tomb) + np.uint64(1)
    old = table[idx, 2]
    if old == 0:
        table[idx, 0] = h
        table[idx, 1] = g
        table[idx, 2] = word
        return 1, np.int64(tomb)
    if word >= old:
        table[idx, 2] = word
        return 0, np.int64(tomb) - np.int64((old - np.uint64(1)) & np.uint64(1))
    return 0, 0
