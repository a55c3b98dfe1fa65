"""Native (numba) scans of v2 record batches: batch headers, then records, into column tables.

Python costs about a microsecond per record; these kernels walk the raw bytes of a segment (or of
a buffer of decompressed payloads) held as a ``np.ndarray[np.uint8]`` and produce column arrays
(:class:`BatchTable`, :class:`RecordTable`, laid out as :mod:`kompakt.records.layout` says), so
Python only runs per batch or per segment, never per record. Every kernel is
``@njit(cache=True, nogil=True)``: the JIT cost is paid once per installation rather than once per
process, and a thread never holds the GIL while it walks a segment.

Produce validation (:mod:`kompakt.broker.validation`), the cleaner's map and copy passes and the
explain engine all scan with these; the format is Kafka's ``DefaultRecordBatch`` and
``DefaultRecord``. numba is imported here, so callers on a start path import this module on first
use only.

Contract between kernels and callers: later kernels trust the column arrays they are handed only
as far as :func:`scan_records` produced them; any bytes read from segment buffers are
bounds-checked, because numba does not check indexes and a corrupt segment must raise, not crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

import crc32c
import numpy as np
from numba import njit

from kompakt.errors import CorruptRecordError
from kompakt.records.batch import BATCH_OVERHEAD
from kompakt.records.layout import (
    B_ATTRIBUTES,
    B_BASE_OFFSET,
    B_BASE_SEQ,
    B_BASE_TS,
    B_COUNT,
    B_CRC,
    B_EPOCH,
    B_LAST_DELTA,
    B_MAX_TS,
    B_NCOLS,
    B_PEPOCH,
    B_PID,
    B_POSITION,
    B_SIZE,
    R_BATCH,
    R_KEY_LEN,
    R_KEY_START,
    R_LENGTH,
    R_NCOLS,
    R_OFFSET,
    R_POSITION,
    R_TIMESTAMP,
    R_VALUE_LEN,
    R_VALUE_START,
)
from kompakt.records.native import (
    BoolArray,
    I64Array,
    Scalar,
    U8Array,
    Workspace,
    call_crc32c,
    ptr,
    read_be,
    read_varint,
    take_array,
)
from kompakt.records.precompiled import entry_point

#: Bytes of a v2 header up to and including the magic byte: what must be there to tell a torn
#: tail from a batch of another format.
_HEADER_TO_MAGIC: Final = 17


class StopReason(IntEnum):
    """Why ``scan_batches`` stopped; anything but END means the rest of the range is unusable."""

    END = 0
    PARTIAL = 1  # fewer bytes left than a header or than the declared batch size (torn tail)
    BAD_SIZE = 2  # declared size below the 61-byte v2 header
    BAD_MAGIC = 3  # not a v2 batch


class _Column:
    """Typed read-only access to one row of a table's ``columns`` array, by field name."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, obj: BatchTable | RecordTable, owner: type | None = None) -> I64Array:
        column: I64Array = obj.columns[self.index, : len(obj)]
        return column


@dataclass(frozen=True, slots=True)
class BatchTable:
    """Header fields of consecutive v2 batches, one contiguous int64 column per field.

    ``stop_position``/``stop_reason`` say where and why the scan ended, so log recovery can
    truncate there and the cleaner can refuse to clean past it.
    """

    columns: I64Array  # shape (13, n)
    stop_position: int
    stop_reason: StopReason

    def __len__(self) -> int:
        return int(self.columns.shape[1])

    position = _Column(B_POSITION)
    size = _Column(B_SIZE)
    base_offset = _Column(B_BASE_OFFSET)
    last_offset_delta = _Column(B_LAST_DELTA)
    attributes = _Column(B_ATTRIBUTES)
    partition_leader_epoch = _Column(B_EPOCH)
    base_timestamp = _Column(B_BASE_TS)
    max_timestamp = _Column(B_MAX_TS)
    producer_id = _Column(B_PID)
    producer_epoch = _Column(B_PEPOCH)
    base_sequence = _Column(B_BASE_SEQ)
    records_count = _Column(B_COUNT)
    crc = _Column(B_CRC)

    @property
    def magic(self) -> I64Array:
        """Always 2: the scan stops at any other magic; kept for symmetry with Kafka's batch API."""
        return np.full(len(self), 2, dtype=np.int64)

    @property
    def last_offset(self) -> I64Array:
        last: I64Array = self.columns[B_BASE_OFFSET] + self.columns[B_LAST_DELTA]
        return last


# ---------------------------------------------------------------------------------------------
# Batch headers


@njit(cache=True, nogil=True)
def _next_batch(buf: U8Array, pos: Scalar, end: Scalar) -> tuple[Scalar, Scalar]:
    """``(size, reason)`` of the batch at ``pos``; reason -1 means a usable batch."""
    remaining = end - pos
    if remaining == 0:
        return 0, 0
    if remaining < _HEADER_TO_MAGIC:
        return 0, 1
    size = read_be(buf, pos + 8, 4) + 12
    if size < BATCH_OVERHEAD:
        return size, 2
    if size > remaining:
        return size, 1
    if buf[pos + 16] != 2:
        return size, 3
    return size, -1


@entry_point("Tuple((i8[:,::1], i8, i8))(u1[::1], i8, i8)")
@njit(cache=True, nogil=True)
def _scan_batches(buf: U8Array, start: Scalar, end: Scalar) -> tuple[I64Array, Scalar, Scalar]:
    # Two hops: counting first costs one cache line per batch and avoids over-allocating the
    # table by (end - start) / 61 rows.
    p = ptr(buf)
    pos = start
    n = 0
    while True:
        size, reason = _next_batch(p, pos, end)
        if reason >= 0:
            break
        n += 1
        pos += size
    table = np.empty((B_NCOLS, n), dtype=np.int64)
    pos = start
    for i in range(n):
        size = read_be(p, pos + 8, 4) + 12
        table[B_POSITION, i] = pos
        table[B_SIZE, i] = size
        table[B_BASE_OFFSET, i] = read_be(p, pos, 8)
        table[B_EPOCH, i] = read_be(p, pos + 12, 4)
        table[B_CRC, i] = read_be(p, pos + 17, 4) & 0xFFFFFFFF
        table[B_ATTRIBUTES, i] = read_be(p, pos + 21, 2)
        table[B_LAST_DELTA, i] = read_be(p, pos + 23, 4)
        table[B_BASE_TS, i] = read_be(p, pos + 27, 8)
        table[B_MAX_TS, i] = read_be(p, pos + 35, 8)
        table[B_PID, i] = read_be(p, pos + 43, 8)
        table[B_PEPOCH, i] = read_be(p, pos + 51, 2)
        table[B_BASE_SEQ, i] = read_be(p, pos + 53, 4)
        table[B_COUNT, i] = read_be(p, pos + 57, 4)
        pos += size
    return table, pos, reason


def scan_batches(buf: U8Array, start: int = 0, end: int | None = None) -> BatchTable:
    """Walk the batch headers in ``buf[start:end]`` without checking CRCs (see ``batch_crcs_ok``)."""
    stop = len(buf) if end is None else end
    if not 0 <= start <= stop <= len(buf):
        raise ValueError(f"bad scan range [{start}, {stop}) for a buffer of {len(buf)} bytes")
    table, pos, reason = _scan_batches(buf, start, stop)
    return BatchTable(table, int(pos), StopReason(int(reason)))


def batch_crcs_ok(buf: U8Array, table: BatchTable) -> BoolArray:
    """CRC-32C of every batch against its header; one hardware-accelerated C call per batch."""
    view = buf.data
    ok = np.empty(len(table), dtype=np.bool_)
    for i, (pos, size, crc) in enumerate(zip(table.position, table.size, table.crc, strict=True)):
        ok[i] = crc32c.crc32c(view[pos + 21 : pos + size]) == crc
    return ok


@entry_point("i8(u1[::1], i8[::1], i8[::1], i8[::1], i8)")
@njit(cache=True, nogil=True)
def _first_bad_crc(buf: U8Array, positions: I64Array, sizes: I64Array, crcs: I64Array, fn: Scalar) -> Scalar:
    """Index of the first batch whose CRC-32C (over its bytes from the attributes on) differs from
    its header's, or -1; ``fn`` is the address of the raw CRC function (``native.call_crc32c``)."""
    p = ptr(buf)
    for i in range(positions.shape[0]):
        pos = positions[i]
        size = sizes[i]
        if pos < 0 or size < 21 or pos + size > buf.shape[0]:
            return i
        if call_crc32c(fn, 0xFFFFFFFF, p, pos + 21, size - 21) ^ 0xFFFFFFFF != crcs[i]:
            return i
    return -1


_crc_function: int | None = None


def _raw_crc32c_address() -> int:
    """The address of the crc32c package's raw CRC-32C function (hardware when the package uses
    it), checked against the package's own result; 0 when it cannot be found or disagrees, and
    the Python path is used. The raw functions are not the package's API: the check guards a
    version that changed them."""
    global _crc_function
    if _crc_function is None:
        _crc_function = 0
        try:
            import ctypes
            import os

            from crc32c import _crc32c as extension

            name = "_crc32c_hw_adler" if crc32c.hardware_based else "_crc32c_sw_slicing_by_8"
            fn = getattr(ctypes.CDLL(extension.__file__), name)
            fn.restype, fn.argtypes = ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
            samples = (b"", b"123456789", os.urandom(7), os.urandom(70_001))
            if all(fn(0xFFFFFFFF, d, len(d)) ^ 0xFFFFFFFF == crc32c.crc32c(d) for d in samples):
                _crc_function = int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
        except (OSError, AttributeError, ImportError, TypeError):
            _crc_function = 0
    return _crc_function


def first_bad_crc(buf: U8Array, table: BatchTable) -> int:
    """The index of the first batch of ``table`` whose CRC does not match, or -1: one native call
    that holds no GIL (the batches' CRCs in one loop), else ``batch_crcs_ok``."""
    fn = _raw_crc32c_address()
    if fn:
        positions, sizes, crcs = (np.ascontiguousarray(c) for c in (table.position, table.size, table.crc))
        return int(_first_bad_crc(buf, positions, sizes, crcs, fn))
    ok = batch_crcs_ok(buf, table)
    return -1 if bool(ok.all()) else int(np.argmin(ok))


# ---------------------------------------------------------------------------------------------
# Records

_RECORD_ERRORS: Final = {
    1: "record count is negative",
    2: "record length varint is malformed or runs past the batch end",
    3: "record length runs past the batch end",
    4: "record field varint is malformed or runs past the record end",
    5: "key or value length is invalid or runs past the record end",
    6: "header is malformed or runs past the record end",
    7: "record fields do not fill the declared record length",
    8: "batch holds bytes after its declared record count",
    9: "records section lies outside the buffer",
}


@dataclass(frozen=True, slots=True)
class RecordTable:
    """Per-record columns; ``batch`` indexes the span arrays passed to ``scan_records``.

    Positions are into the buffer that was scanned (the segment, or a decompressed payload
    buffer). ``batch_first[b]:batch_first[b+1]`` is the row range of span ``b``.
    """

    columns: I64Array  # shape (9, capacity); rows [0, count) are valid
    batch_first: I64Array  # shape (spans + 1,)
    count: int

    def __len__(self) -> int:
        return self.count

    offset = _Column(R_OFFSET)
    position = _Column(R_POSITION)
    length = _Column(R_LENGTH)
    timestamp = _Column(R_TIMESTAMP)
    key_start = _Column(R_KEY_START)
    key_len = _Column(R_KEY_LEN)
    value_start = _Column(R_VALUE_START)
    value_len = _Column(R_VALUE_LEN)
    batch = _Column(R_BATCH)


@njit(cache=True, nogil=True)
def parse_fields(buf: U8Array, pos: Scalar, limit: Scalar) -> tuple[Scalar, ...]:
    """Parse and validate one record at ``pos``. Returns ``(next_pos, error_code, offset_delta,
    timestamp_delta, key_start, key_len, value_start, value_len)``; error 0 = ok, and on an error
    ``next_pos`` is ``pos``. ``buf`` is a pointer or an array; ``pos >= 0`` and ``limit`` must lie
    within it."""
    length, body = read_varint(buf, pos, limit, 5)
    if body < 0:
        return pos, 2, 0, 0, 0, 0, 0, 0
    rec_end = body + length
    if length < 0 or rec_end > limit:
        return pos, 3, 0, 0, 0, 0, 0, 0
    ts_delta, p = read_varint(buf, body + 1, rec_end, 10)  # body + 1: after the attributes byte
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    off_delta, p = read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    key_len, p = read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    if key_len < -1 or p + max(key_len, 0) > rec_end:
        return pos, 5, 0, 0, 0, 0, 0, 0
    key_start = p
    p += max(key_len, 0)
    value_len, p = read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    if value_len < -1 or p + max(value_len, 0) > rec_end:
        return pos, 5, 0, 0, 0, 0, 0, 0
    value_start = p
    p += max(value_len, 0)
    headers, p = read_varint(buf, p, rec_end, 5)
    if p < 0 or headers < 0:
        return pos, 6, 0, 0, 0, 0, 0, 0
    for _ in range(headers):
        hk, p = read_varint(buf, p, rec_end, 5)
        if p < 0 or hk < 0 or p + hk > rec_end:
            return pos, 6, 0, 0, 0, 0, 0, 0
        p += hk
        hv, p = read_varint(buf, p, rec_end, 5)
        if p < 0 or hv < -1 or p + max(hv, 0) > rec_end:
            return pos, 6, 0, 0, 0, 0, 0, 0
        p += max(hv, 0)
    if p != rec_end:
        return pos, 7, 0, 0, 0, 0, 0, 0
    return rec_end, 0, off_delta, ts_delta, key_start, key_len, value_start, value_len


@entry_point("UniTuple(i8, 3)(u1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[:,::1])")
@njit(cache=True, nogil=True)
def _scan_records(
    buf: U8Array,
    starts: I64Array,
    ends: I64Array,
    base_offsets: I64Array,
    base_timestamps: I64Array,
    counts: I64Array,
    first: I64Array,
    out: I64Array,
) -> tuple[Scalar, Scalar, Scalar]:
    """Fill ``out[:, :first[-1]]``; ``first`` holds the prefix sums of ``counts`` (validated here)."""
    nb = starts.shape[0]
    for b in range(nb):
        if counts[b] < 0:
            return 1, b, starts[b]
        if starts[b] < 0 or ends[b] < starts[b] or ends[b] > buf.shape[0]:
            return 9, b, starts[b]
    p = ptr(buf)
    for b in range(nb):
        pos = starts[b]
        limit = ends[b]
        base_off = base_offsets[b]
        base_ts = base_timestamps[b]
        for row in range(first[b], first[b + 1]):
            nxt, err, od, td, ks, kl, vs, vl = parse_fields(p, pos, limit)
            if err != 0:
                return err, b, pos
            out[R_OFFSET, row] = base_off + od
            out[R_POSITION, row] = pos
            out[R_LENGTH, row] = nxt - pos
            out[R_TIMESTAMP, row] = base_ts + td
            out[R_KEY_START, row] = ks
            out[R_KEY_LEN, row] = kl
            out[R_VALUE_START, row] = vs
            out[R_VALUE_LEN, row] = vl
            out[R_BATCH, row] = b
            pos = nxt
        if pos != limit:
            return 8, b, pos
    return 0, 0, 0


@dataclass(frozen=True, slots=True)
class Spans:
    """Where the records of some batches lie in a buffer, with the header fields parsing needs.

    For uncompressed batches the spans point into the segment (``of_batches``); for compressed
    ones the caller decompresses each payload into one buffer and builds spans over it.
    """

    records_start: I64Array
    records_end: I64Array
    base_offset: I64Array
    base_timestamp: I64Array
    records_count: I64Array

    def __len__(self) -> int:
        return len(self.records_start)

    @classmethod
    def of_batches(cls, table: BatchTable, which: I64Array | None = None) -> Spans:
        idx = np.arange(len(table)) if which is None else np.asarray(which, dtype=np.int64)
        pos = table.position[idx]
        return cls(
            pos + BATCH_OVERHEAD,
            pos + table.size[idx],
            table.base_offset[idx],
            table.base_timestamp[idx],
            table.records_count[idx],
        )

    def arrays(self) -> tuple[I64Array, I64Array, I64Array, I64Array, I64Array]:
        """The five columns as contiguous int64, ready for a kernel."""
        s, e, o, t, c = (
            np.ascontiguousarray(a, dtype=np.int64)
            for a in (
                self.records_start,
                self.records_end,
                self.base_offset,
                self.base_timestamp,
                self.records_count,
            )
        )
        if not len(s) == len(e) == len(o) == len(t) == len(c):
            raise ValueError("span arrays differ in length")
        return s, e, o, t, c


def record_error(code: int, span: int, position: int) -> CorruptRecordError:
    """The exception for a kernel's record error code."""
    return CorruptRecordError(f"{_RECORD_ERRORS[code]} (batch {span}, position {position})")


def scan_records(
    buf: U8Array,
    records_start: I64Array,
    records_end: I64Array,
    base_offset: I64Array,
    base_timestamp: I64Array,
    records_count: I64Array,
    workspace: Workspace | None = None,
) -> RecordTable:
    """Parse the records of many batches, each given as a span ``[start, end)`` of ``buf``.

    Spans rather than batch headers, so the same kernel serves raw segments and a buffer of
    concatenated decompressed payloads. Raises CorruptRecordError naming the span index and
    byte position of the first malformed record; a record count that disagrees with the bytes
    present, in either direction, is malformed too.
    """
    spans = Spans(records_start, records_end, base_offset, base_timestamp, records_count).arrays()
    counts = spans[4]
    first = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.maximum(counts, 0), out=first[1:])
    cols = take_array(workspace, "records", R_NCOLS, int(first[-1]), np.int64)
    err, batch, pos = _scan_records(buf, *spans, first, cols)
    if err:
        raise record_error(int(err), int(batch), int(pos))
    return RecordTable(cols, first, int(first[-1]))


def scan_batch_records(
    buf: U8Array, table: BatchTable, which: I64Array | None = None, workspace: Workspace | None = None
) -> RecordTable:
    """``scan_records`` over the (uncompressed) batches ``which`` of ``table`` in ``buf``."""
    sp = Spans.of_batches(table, which)
    return scan_records(
        buf, sp.records_start, sp.records_end, sp.base_offset, sp.base_timestamp, sp.records_count, workspace
    )
