"""Native (numba) kernels for the cleaner's two passes over segment bytes.

The cleaner touches every record twice per clean (map pass, copy pass). Python costs about a
microsecond per record, Kafka's JVM cleaner about 400 ns; these kernels walk the raw bytes of a
segment held as a ``np.ndarray[np.uint8]`` and produce column arrays, so Python only runs per
batch or per segment, never per record. Every kernel is ``@njit(cache=True, nogil=True)``: the JIT
cost is paid once per installation rather than once per process, and a cleaner thread never holds
the GIL while it walks a segment.

Hot loops read buffers through raw pointers (``_ptr``), not through arrays: numba reference-counts
an array every time one is handed to a helper function, and those atomic increments and
decrements, several per record, used to cost more than the parsing itself. A pointer is valid for
as long as the caller holds its array, i.e. for the whole kernel call.

Contract between kernels and callers: the kernels trust the column arrays they are handed only as
far as ``scan_records`` produced them; any bytes read from segment buffers are bounds-checked,
because numba does not check indexes and a corrupt segment must raise, not crash.

Byte layout: see ``docs/design.md`` and Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``. Varints are zigzag
then little-endian base-128 (at most 5 bytes for an int, 10 for a long).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, TypeAlias

import crc32c
import numpy as np
import numpy.typing as npt
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from kompakt.errors import CorruptRecordError

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]
Scalar: TypeAlias = Any
"""An int64/uint64 scalar inside a numba kernel. Left to numba's typing: numpy's stubs model neither
numba's integer promotion nor the uint64 wrap-around arithmetic the hashing relies on."""

BATCH_OVERHEAD: Final = 61
_HEADER_TO_MAGIC: Final = 17


class StopReason(IntEnum):
    """Why ``scan_batches`` stopped; anything but END means the rest of the range is unusable."""

    END = 0
    PARTIAL = 1  # fewer bytes left than a header or than the declared batch size (torn tail)
    BAD_SIZE = 2  # declared size below the 61-byte v2 header
    BAD_MAGIC = 3  # not a v2 batch


# Column order of the batch table produced by the kernel (rows of a (13, n) int64 array, so each
# column is contiguous for later kernels).
_B_POSITION, _B_SIZE, _B_BASE_OFFSET, _B_LAST_DELTA, _B_ATTRIBUTES, _B_EPOCH = 0, 1, 2, 3, 4, 5
_B_BASE_TS, _B_MAX_TS, _B_PID, _B_PEPOCH, _B_BASE_SEQ, _B_COUNT, _B_CRC = 6, 7, 8, 9, 10, 11, 12
_B_NCOLS: Final = 13


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

    position = _Column(_B_POSITION)
    size = _Column(_B_SIZE)
    base_offset = _Column(_B_BASE_OFFSET)
    last_offset_delta = _Column(_B_LAST_DELTA)
    attributes = _Column(_B_ATTRIBUTES)
    partition_leader_epoch = _Column(_B_EPOCH)
    base_timestamp = _Column(_B_BASE_TS)
    max_timestamp = _Column(_B_MAX_TS)
    producer_id = _Column(_B_PID)
    producer_epoch = _Column(_B_PEPOCH)
    base_sequence = _Column(_B_BASE_SEQ)
    records_count = _Column(_B_COUNT)
    crc = _Column(_B_CRC)

    @property
    def magic(self) -> I64Array:
        """Always 2: the scan stops at any other magic; kept for symmetry with Kafka's batch API."""
        return np.full(len(self), 2, dtype=np.int64)

    @property
    def last_offset(self) -> I64Array:
        last: I64Array = self.columns[_B_BASE_OFFSET] + self.columns[_B_LAST_DELTA]
        return last


class Workspace:
    """Output arrays reused from one kernel call to the next.

    Fresh memory costs a page fault per 4 KiB on first touch, which on this VM is slower than
    parsing the records that fill it (≈0.5 GB/s against several GB/s). A cleaner thread keeps one
    workspace for its lifetime, as Kafka keeps its I/O buffers. Results that were written into a
    workspace are valid only until the next call that uses the same workspace slot.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, npt.NDArray[Any]] = {}

    def take(self, name: str, rows: int, n: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
        """A ``(rows, capacity >= n)`` array of ``dtype`` (1-D of ``capacity`` if ``rows == 0``)."""
        arr = self._arrays.get(name)
        cap = 0 if arr is None else arr.shape[-1]
        if arr is None or arr.dtype != dtype or cap < n:
            cap = max(n, cap + cap // 4, 1024)
            arr = np.empty(cap if rows == 0 else (rows, cap), dtype=dtype)
            self._arrays[name] = arr
        return arr


def _take(ws: Workspace | None, name: str, rows: int, n: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
    if ws is None:
        return np.empty(n if rows == 0 else (rows, n), dtype=dtype)
    return ws.take(name, rows, n, dtype)


# ---------------------------------------------------------------------------------------------
# Raw pointers: loads without reference counting, unaligned 8-byte loads, prefetch


def _ptr_typer(typingctx: Any, arr: Any) -> Any:
    """The data pointer of a contiguous array, indexable as ``p[i]`` (no bounds or refcounts)."""
    sig = types.CPointer(arr.dtype)(arr)  # type: ignore[no-untyped-call]

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return sig, codegen


_ptr: Any = intrinsic(_ptr_typer)


def _load_u64le_typer(typingctx: Any, ptr: Any, idx: Any) -> Any:
    """The little-endian uint64 at byte ``ptr + idx`` (any alignment); ``ptr`` points to bytes."""
    sig = types.uint64(ptr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        addr = builder.bitcast(builder.gep(args[0], [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(addr, align=1)

    return sig, codegen


_load_u64le: Any = intrinsic(_load_u64le_typer)


def _prefetch_typer(typingctx: Any, ptr: Any, idx: Any) -> Any:
    """Hint the cache line holding ``ptr[idx]`` into the cache (a read, high locality)."""
    sig = types.void(ptr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        )
        addr = builder.bitcast(builder.gep(args[0], [args[1]]), i8p)
        builder.call(fn, [addr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


_prefetch: Any = intrinsic(_prefetch_typer)


def _memcpy_typer(typingctx: Any, dst: Any, dst_pos: Any, src: Any, src_pos: Any, n: Any) -> Any:
    """Copy ``n`` bytes from ``src + src_pos`` to ``dst + dst_pos`` (byte pointers, no overlap)."""
    sig = types.void(dst, dst_pos, src, src_pos, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        d = builder.gep(args[0], [args[1]])
        s = builder.gep(args[2], [args[3]])
        cgutils.raw_memcpy(builder, d, s, args[4], 1)  # type: ignore[no-untyped-call]
        return context.get_dummy_value()

    return sig, codegen


_memcpy: Any = intrinsic(_memcpy_typer)


# ---------------------------------------------------------------------------------------------
# Byte-level helpers (inlined by LLVM into the kernels that use them). ``buf`` is an array or a
# pointer from ``_ptr``; hot kernels pass pointers.


@njit(cache=True, nogil=True, inline="always")
def _be(buf: U8Array, pos: Scalar, width: Scalar) -> Scalar:
    """Big-endian signed integer of ``width`` bytes (2, 4 or 8)."""
    acc = np.uint64(0)
    for i in range(width):
        acc = (acc << np.uint64(8)) | np.uint64(buf[pos + i])
    if width == 8:
        return np.int64(acc)
    sign = np.uint64(1) << np.uint64(width * 8 - 1)
    return np.int64(acc ^ sign) - np.int64(sign)


@njit(cache=True, nogil=True, inline="always")
def _read_varint(buf: U8Array, pos: Scalar, limit: Scalar, max_bytes: Scalar) -> tuple[Scalar, Scalar]:
    """Decode a zigzag varint; ``(value, next_pos)`` or ``(0, -1)`` if it overruns or is too long.

    With ``max_bytes == 5`` the value is truncated to 32 bits before un-zigzagging, as a Java int
    read would be.
    """
    if pos < limit:  # most varints in a record take one or two bytes
        b0 = np.uint64(buf[pos])
        if b0 < np.uint64(0x80):
            return np.int64(b0 >> np.uint64(1)) ^ -np.int64(b0 & np.uint64(1)), pos + 1
        if pos + 1 < limit:
            b1 = np.uint64(buf[pos + 1])
            if b1 < np.uint64(0x80):
                two = (b0 & np.uint64(0x7F)) | (b1 << np.uint64(7))
                return np.int64(two >> np.uint64(1)) ^ -np.int64(two & np.uint64(1)), pos + 2
    return _read_varint_long(buf, pos, limit, max_bytes)


@njit(cache=True, nogil=True)
def _read_varint_long(buf: U8Array, pos: Scalar, limit: Scalar, max_bytes: Scalar) -> tuple[Scalar, Scalar]:
    """``_read_varint`` for three bytes and more, and for the error cases (kept out of line)."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(max_bytes):
        if pos >= limit:
            return 0, -1
        b = np.uint64(buf[pos])
        pos += 1
        raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            if max_bytes == 5:
                raw &= np.uint64(0xFFFFFFFF)
            return np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1)), pos
        shift += np.uint64(7)
    return 0, -1


@njit(cache=True, nogil=True, inline="always")
def _varint_size(value: Scalar) -> Scalar:
    raw = np.uint64((value << 1) ^ (value >> 63))
    size = 1
    while raw >= np.uint64(0x80):
        raw >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, nogil=True, inline="always")
def _write_varint(out: U8Array, pos: Scalar, value: Scalar) -> Scalar:
    raw = np.uint64((value << 1) ^ (value >> 63))
    while raw >= np.uint64(0x80):
        out[pos] = np.uint8((raw & np.uint64(0x7F)) | np.uint64(0x80))
        raw >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(raw)
    return pos + 1


# ---------------------------------------------------------------------------------------------
# 1. Batch headers


@njit(cache=True, nogil=True, inline="always")
def _next_batch(buf: U8Array, pos: Scalar, end: Scalar) -> tuple[Scalar, Scalar]:
    """``(size, reason)`` of the batch at ``pos``; reason -1 means a usable batch."""
    remaining = end - pos
    if remaining == 0:
        return 0, 0
    if remaining < _HEADER_TO_MAGIC:
        return 0, 1
    size = _be(buf, pos + 8, 4) + 12
    if size < BATCH_OVERHEAD:
        return size, 2
    if size > remaining:
        return size, 1
    if buf[pos + 16] != 2:
        return size, 3
    return size, -1


@njit(cache=True, nogil=True)
def _scan_batches(buf: U8Array, start: Scalar, end: Scalar) -> tuple[I64Array, Scalar, Scalar]:
    # Two hops: counting first costs one cache line per batch and avoids over-allocating the
    # table by (end - start) / 61 rows.
    p = _ptr(buf)
    pos = start
    n = 0
    while True:
        size, reason = _next_batch(p, pos, end)
        if reason >= 0:
            break
        n += 1
        pos += size
    table = np.empty((_B_NCOLS, n), dtype=np.int64)
    pos = start
    for i in range(n):
        size = _be(p, pos + 8, 4) + 12
        table[_B_POSITION, i] = pos
        table[_B_SIZE, i] = size
        table[_B_BASE_OFFSET, i] = _be(p, pos, 8)
        table[_B_EPOCH, i] = _be(p, pos + 12, 4)
        table[_B_CRC, i] = _be(p, pos + 17, 4) & 0xFFFFFFFF
        table[_B_ATTRIBUTES, i] = _be(p, pos + 21, 2)
        table[_B_LAST_DELTA, i] = _be(p, pos + 23, 4)
        table[_B_BASE_TS, i] = _be(p, pos + 27, 8)
        table[_B_MAX_TS, i] = _be(p, pos + 35, 8)
        table[_B_PID, i] = _be(p, pos + 43, 8)
        table[_B_PEPOCH, i] = _be(p, pos + 51, 2)
        table[_B_BASE_SEQ, i] = _be(p, pos + 53, 4)
        table[_B_COUNT, i] = _be(p, pos + 57, 4)
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


# ---------------------------------------------------------------------------------------------
# 2. Records

_R_OFFSET, _R_POSITION, _R_LENGTH, _R_TIMESTAMP, _R_KEY_START, _R_KEY_LEN = 0, 1, 2, 3, 4, 5
_R_VALUE_START, _R_VALUE_LEN, _R_BATCH = 6, 7, 8
_R_NCOLS: Final = 9

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

    offset = _Column(_R_OFFSET)
    position = _Column(_R_POSITION)
    length = _Column(_R_LENGTH)
    timestamp = _Column(_R_TIMESTAMP)
    key_start = _Column(_R_KEY_START)
    key_len = _Column(_R_KEY_LEN)
    value_start = _Column(_R_VALUE_START)
    value_len = _Column(_R_VALUE_LEN)
    batch = _Column(_R_BATCH)


@njit(cache=True, nogil=True, inline="always")
def _parse_fields(buf: U8Array, pos: Scalar, limit: Scalar) -> tuple[Scalar, ...]:
    """Parse and validate one record at ``pos``. Returns ``(next_pos, error_code, offset_delta,
    timestamp_delta, key_start, key_len, value_start, value_len)``; error 0 = ok, and on an error
    ``next_pos`` is ``pos``. ``buf`` is a pointer or an array; ``pos >= 0`` and ``limit`` must lie
    within it."""
    length, body = _read_varint(buf, pos, limit, 5)
    if body < 0:
        return pos, 2, 0, 0, 0, 0, 0, 0
    rec_end = body + length
    if length < 0 or rec_end > limit:
        return pos, 3, 0, 0, 0, 0, 0, 0
    ts_delta, p = _read_varint(buf, body + 1, rec_end, 10)  # body + 1: after the attributes byte
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    off_delta, p = _read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    key_len, p = _read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    if key_len < -1 or p + max(key_len, 0) > rec_end:
        return pos, 5, 0, 0, 0, 0, 0, 0
    key_start = p
    p += max(key_len, 0)
    value_len, p = _read_varint(buf, p, rec_end, 5)
    if p < 0:
        return pos, 4, 0, 0, 0, 0, 0, 0
    if value_len < -1 or p + max(value_len, 0) > rec_end:
        return pos, 5, 0, 0, 0, 0, 0, 0
    value_start = p
    p += max(value_len, 0)
    headers, p = _read_varint(buf, p, rec_end, 5)
    if p < 0 or headers < 0:
        return pos, 6, 0, 0, 0, 0, 0, 0
    for _ in range(headers):
        hk, p = _read_varint(buf, p, rec_end, 5)
        if p < 0 or hk < 0 or p + hk > rec_end:
            return pos, 6, 0, 0, 0, 0, 0, 0
        p += hk
        hv, p = _read_varint(buf, p, rec_end, 5)
        if p < 0 or hv < -1 or p + max(hv, 0) > rec_end:
            return pos, 6, 0, 0, 0, 0, 0, 0
        p += max(hv, 0)
    if p != rec_end:
        return pos, 7, 0, 0, 0, 0, 0, 0
    return rec_end, 0, off_delta, ts_delta, key_start, key_len, value_start, value_len


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
    p = _ptr(buf)
    for b in range(nb):
        pos = starts[b]
        limit = ends[b]
        base_off = base_offsets[b]
        base_ts = base_timestamps[b]
        for row in range(first[b], first[b + 1]):
            nxt, err, od, td, ks, kl, vs, vl = _parse_fields(p, pos, limit)
            if err != 0:
                return err, b, pos
            out[_R_OFFSET, row] = base_off + od
            out[_R_POSITION, row] = pos
            out[_R_LENGTH, row] = nxt - pos
            out[_R_TIMESTAMP, row] = base_ts + td
            out[_R_KEY_START, row] = ks
            out[_R_KEY_LEN, row] = kl
            out[_R_VALUE_START, row] = vs
            out[_R_VALUE_LEN, row] = vl
            out[_R_BATCH, row] = b
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
    cols = _take(workspace, "records", _R_NCOLS, int(first[-1]), np.int64)
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


# ---------------------------------------------------------------------------------------------
# 3. Key hashing

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_M4 = np.uint64(0xD6E8FEB86659FD93)
_F1 = np.uint64(0x7FB5D329728EA185)
_F2 = np.uint64(0x81DADEF4BC2DD44D)
_SEED1 = np.uint64(0x2545F4914F6CDD1D)
_SEED2 = np.uint64(0x5851F42D4C957F2D)


@njit(cache=True, nogil=True, inline="always")
def _rotl(x: Scalar, r: Scalar) -> Scalar:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, nogil=True, inline="always")
def _final(x: Scalar) -> Scalar:
    x ^= x >> np.uint64(31)
    x *= _F1
    x ^= x >> np.uint64(27)
    x *= _F2
    x ^= x >> np.uint64(33)
    return x


@njit(cache=True, nogil=True, inline="always")
def _absorb(h1: Scalar, h2: Scalar, w: Scalar) -> tuple[Scalar, Scalar]:
    return _rotl((h1 ^ w) * _M1, 31) * _M2, _rotl((h2 ^ w) * _M3, 29) * _M4


@njit(cache=True, nogil=True, inline="always")
def _hash_one(p: Scalar, start: Scalar, length: Scalar) -> tuple[Scalar, Scalar]:
    """Digest of the ``length`` bytes at ``p + start``; ``p`` is a byte pointer from ``_ptr``."""
    # Two lanes absorb the same little-endian 8-byte words through different bijective
    # multiply-rotate-multiply steps. The length is mixed in first so zero padding of the last
    # word is unambiguous; keys of up to 8 bytes and equal length never collide in either lane.
    n = np.uint64(length)
    h1 = _SEED1 ^ (n * _M1)
    h2 = _SEED2 ^ (n * _M3)
    pos = start
    end = start + length
    while pos + 8 <= end:
        h1, h2 = _absorb(h1, h2, _load_u64le(p, pos))
        pos += 8
    rest = end - pos
    if rest > 0:
        if length >= 8:
            # the last 8 bytes of the key, shifted so the tail's bytes are the low ones
            w = _load_u64le(p, end - 8) >> np.uint64(8 * (8 - rest))
        else:
            w = np.uint64(0)
            for i in range(rest):
                w |= np.uint64(p[pos + i]) << np.uint64(8 * i)
        h1, h2 = _absorb(h1, h2, w)
    # (h1, h2) -> (final(h1), final(h2 + h1)) is a bijection on pairs: lane independence survives.
    return _final(h1), _final(h2 + h1)


@njit(cache=True, nogil=True)
def _hash_bytes(buf: U8Array) -> tuple[Scalar, Scalar]:
    return _hash_one(_ptr(buf), 0, buf.shape[0])


@njit(cache=True, nogil=True)
def _hash_keys(buf: U8Array, key_start: I64Array, key_len: I64Array, hi: U64Array, lo: U64Array) -> Scalar:
    """Fill ``hi``/``lo``; returns the index of the first key outside ``buf``, or -1."""
    p = _ptr(buf)
    for i in range(key_start.shape[0]):
        if key_len[i] >= 0:
            if key_start[i] < 0 or key_start[i] + key_len[i] > buf.shape[0]:
                return i
            hi[i], lo[i] = _hash_one(p, key_start[i], key_len[i])
        else:
            hi[i] = 0
            lo[i] = 0
    return -1


def hash_keys(
    buf: U8Array, key_start: I64Array, key_len: I64Array, workspace: Workspace | None = None
) -> tuple[U64Array, U64Array]:
    """A 128-bit digest ``(hi, lo)`` per key; null keys (length -1) get ``(0, 0)`` and are not hashed.

    The digest stands in for the key in the offset map, as MD5 does in Kafka, so two keys with
    equal digests would be deduplicated as one. For n distinct keys the birthday bound gives a
    collision probability of about n^2 / 2^129: 2^-89 for a million keys, 2^-83 for 8 million.
    The hash is not cryptographic; deliberately crafted colliding keys are out of scope, as they
    are for Kafka's MD5.
    """
    ks = np.ascontiguousarray(key_start, dtype=np.int64)
    kl = np.ascontiguousarray(key_len, dtype=np.int64)
    if ks.shape != kl.shape:
        raise ValueError("key_start and key_len differ in length")
    both = _take(workspace, "hashes", 2, len(ks), np.uint64)
    hi, lo = both[0, : len(ks)], both[1, : len(ks)]
    if _hash_keys(buf, ks, kl, hi, lo) >= 0:
        raise ValueError("a key lies outside the buffer")
    return hi, lo


def hash_key(key: bytes) -> tuple[int, int]:
    """The digest of one key, equal to what ``hash_keys`` gives for the same bytes."""
    hi, lo = _hash_bytes(np.frombuffer(key, dtype=np.uint8))
    return int(hi), int(lo)
