"""Re-encoding a batch's records with new offset and timestamp deltas, natively (backup, restore).

A backup stores the batches a Fetch returns and a restore produces them again, untouched where the
format allows. Where it does not, only a record's framing changes, never its key, value or headers:

* a Produce needs contiguous offset deltas ``0..n-1`` (a compacted source has holes) and a
  CreateTime batch with no delete horizon, so the restore renumbers the deltas and moves the
  timestamp deltas to the first record's timestamp;
* a backup stamps a tombstone batch with a later delete horizon (the base timestamp moves, so does
  every timestamp delta) and trims a batch that starts before the position it resumes at;
* a restore asked for the original position in headers appends them to each record:
  ``kompakt.original.offset`` (decimal ASCII) and OSO kafka-backup's ``x-original-offset``,
  ``x-original-timestamp`` (int64) and ``x-source-partition`` (int32), little-endian as OSO
  writes them.

:func:`rebuild_records` does that for the rows of a :func:`~kompakt.records.scan.scan_records`
table in one call, with the same pointer loads as the cleaner's rewrite, so a batch costs a few
microseconds whatever its record count. The caller writes the 61-byte header, compresses and
computes the CRC.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numba import njit

from kompakt.errors import CorruptRecordError
from kompakt.records.native import (
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

HEADER_ORIGINAL_OFFSET: Final = 1
"""Append ``kompakt.original.offset``: the original offset in decimal ASCII."""
HEADER_OSO: Final = 2
"""Append OSO kafka-backup's three headers: original offset, timestamp (int64) and partition (int32)."""

HEADER_NAMES: Final = (
    b"kompakt.original.offset",
    b"x-original-offset",
    b"x-original-timestamp",
    b"x-source-partition",
)
_NAMES: Final = np.frombuffer(b"".join(HEADER_NAMES), dtype=np.uint8).copy()
_NAME_ENDS: Final = np.cumsum([0, *(len(n) for n in HEADER_NAMES)]).astype(np.int64)
#: The most a record can grow by: length and delta varints (5 + 10 + 5 bytes more), the header
#: count (5), and the headers (names, their length varints, a 20-digit offset, 8 + 8 + 4 bytes).
MAX_GROWTH: Final = 45 + int(_NAME_ENDS[-1]) + 4 * 2 + 20 + 20


@njit(cache=True, nogil=True)
def _le(op: Scalar, pos: Scalar, value: Scalar, width: Scalar) -> Scalar:
    """``value`` as a little-endian integer of ``width`` bytes at ``pos``; returns the next pos."""
    raw = np.uint64(value)
    for i in range(width):
        op[pos + i] = np.uint8((raw >> np.uint64(8 * i)) & np.uint64(0xFF))
    return pos + width


@njit(cache=True, nogil=True)
def _name(op: Scalar, pos: Scalar, names: U8Array, ends: I64Array, which: Scalar) -> Scalar:
    start = ends[which]
    n = ends[which + 1] - start
    pos = write_varint(op, pos, n)
    for i in range(n):
        op[pos + i] = names[start + i]
    return pos + n


@njit(cache=True, nogil=True)
def _decimal(op: Scalar, pos: Scalar, value: Scalar) -> Scalar:
    """``value >= 0`` in decimal ASCII, preceded by its length varint."""
    digits = 1
    probe = value
    while probe >= 10:
        probe //= 10
        digits += 1
    pos = write_varint(op, pos, digits)
    for i in range(digits - 1, -1, -1):
        op[pos + i] = np.uint8(48 + value % 10)
        value //= 10
    return pos + digits


@njit(cache=True, nogil=True)
def _headers_size(mode: Scalar, offset: Scalar, ends: I64Array) -> Scalar:
    size = 0
    if mode & 1:
        digits = 1
        probe = offset
        while probe >= 10:
            probe //= 10
            digits += 1
        size += 1 + (ends[1] - ends[0]) + 1 + digits
    if mode & 2:
        size += 1 + (ends[2] - ends[1]) + 1 + 8
        size += 1 + (ends[3] - ends[2]) + 1 + 8
        size += 1 + (ends[4] - ends[3]) + 1 + 4
    return size


@entry_point(
    "i8(u1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8, i8,"
    " u1[::1], i8[::1], u1[::1], i8)"
)
@njit(cache=True, nogil=True)
def _rebuild(
    src: U8Array,
    rec_pos: I64Array,
    rec_len: I64Array,
    value_end: I64Array,
    offset_delta: I64Array,
    timestamp_delta: I64Array,
    original_offset: I64Array,
    original_timestamp: I64Array,
    mode: Scalar,
    partition: Scalar,
    names: U8Array,
    name_ends: I64Array,
    out: U8Array,
    out_pos: Scalar,
) -> Scalar:
    n = rec_pos.shape[0]
    if (
        rec_len.shape[0] != n
        or value_end.shape[0] != n
        or offset_delta.shape[0] != n
        or timestamp_delta.shape[0] != n
        or original_offset.shape[0] != n
        or original_timestamp.shape[0] != n
    ):
        return -2
    sp = ptr(src)
    op = ptr(out)
    src_len = src.shape[0]
    out_len = out.shape[0]
    for i in range(n):
        p = rec_pos[i]
        end = p + rec_len[i]
        if p < 0 or end > src_len or end <= p:
            return -2
        _, body = read_varint(sp, p, end, 5)
        if body < 0 or body >= end:
            return -2
        attrs = sp[body]
        _, q = read_varint(sp, body + 1, end, 10)  # the old timestamp delta
        if q < 0:
            return -2
        _, kv = read_varint(sp, q, end, 5)  # the old offset delta; key and value follow
        if kv < 0:
            return -2
        vend = value_end[i]
        if vend < kv or vend > end:
            return -2
        count, h = read_varint(sp, vend, end, 5)
        if h < 0 or count < 0:
            return -2
        extra = _headers_size(mode, original_offset[i], name_ends)
        added = (1 if mode & 1 else 0) + (3 if mode & 2 else 0)
        if out_pos + (end - p) + 45 + extra > out_len:
            return -1
        # The body's length is known before it is written: attributes, the two deltas, the
        # key and value as they are, the new header count, the old headers, the new ones.
        body_len = 1 + varint_size(timestamp_delta[i]) + varint_size(offset_delta[i]) + (vend - kv)
        body_len += varint_size(count + added) + (end - h) + extra
        out_pos = write_varint(op, out_pos, body_len)
        op[out_pos] = attrs
        out_pos = write_varint(op, out_pos + 1, timestamp_delta[i])
        out_pos = write_varint(op, out_pos, offset_delta[i])
        memcpy(op, out_pos, sp, kv, vend - kv)
        out_pos += vend - kv
        out_pos = write_varint(op, out_pos, count + added)
        memcpy(op, out_pos, sp, h, end - h)
        out_pos += end - h
        if mode & 1:
            out_pos = _name(op, out_pos, names, name_ends, 0)
            out_pos = _decimal(op, out_pos, original_offset[i])
        if mode & 2:
            out_pos = _name(op, out_pos, names, name_ends, 1)
            out_pos = write_varint(op, out_pos, 8)
            out_pos = _le(op, out_pos, original_offset[i], 8)
            out_pos = _name(op, out_pos, names, name_ends, 2)
            out_pos = write_varint(op, out_pos, 8)
            out_pos = _le(op, out_pos, original_timestamp[i], 8)
            out_pos = _name(op, out_pos, names, name_ends, 3)
            out_pos = write_varint(op, out_pos, 4)
            out_pos = _le(op, out_pos, partition, 4)
    return out_pos


def rebuild_records(
    src: U8Array,
    rec_pos: I64Array,
    rec_len: I64Array,
    value_end: I64Array,
    offset_delta: I64Array,
    timestamp_delta: I64Array,
    *,
    original_offset: I64Array | None = None,
    original_timestamp: I64Array | None = None,
    headers: int = 0,
    partition: int = 0,
) -> bytes:
    """The records at ``rec_pos``/``rec_len`` of ``src`` re-encoded with the given deltas.

    ``value_end`` is where each record's value ends (``value_start + max(value_len, 0)`` of the
    scan): the header count follows it. ``headers`` is a mask of :data:`HEADER_ORIGINAL_OFFSET`
    and :data:`HEADER_OSO`, which need ``original_offset`` (and ``original_timestamp``, the
    timestamp a consumer saw) per record. Raises CorruptRecordError for a record that does not
    parse (callers pass rows of a scan, so that is a bug or a changed buffer).
    """
    n = len(rec_pos)
    zeros = np.zeros(n, dtype=np.int64)
    offsets = zeros if original_offset is None else np.ascontiguousarray(original_offset, dtype=np.int64)
    stamps = zeros if original_timestamp is None else np.ascontiguousarray(original_timestamp, dtype=np.int64)
    if headers and (offsets < 0).any():
        raise ValueError("an original offset header needs offsets >= 0")
    lengths = np.ascontiguousarray(rec_len, dtype=np.int64)
    out = np.empty(int(lengths.sum()) + n * MAX_GROWTH + 16, dtype=np.uint8)
    end = _rebuild(
        src,
        np.ascontiguousarray(rec_pos, dtype=np.int64),
        lengths,
        np.ascontiguousarray(value_end, dtype=np.int64),
        np.ascontiguousarray(offset_delta, dtype=np.int64),
        np.ascontiguousarray(timestamp_delta, dtype=np.int64),
        offsets,
        stamps,
        headers,
        partition,
        _NAMES,
        _NAME_ENDS,
        out,
        0,
    )
    if end == -1:  # pragma: no cover - the buffer is sized for the worst case
        raise ValueError("output buffer too small for the rebuilt records")
    if end < 0:
        raise CorruptRecordError("a record to rebuild does not parse or lies outside its buffer")
    return out[:end].tobytes()
