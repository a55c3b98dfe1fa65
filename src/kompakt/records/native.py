"""numba building blocks for kernels over raw Kafka record bytes: pointers, loads, varints, scratch.

Every native pass over segment bytes (the scans in :mod:`kompakt.records.scan`, and the cleaner's
hashing, offset-table and rewrite kernels in :mod:`kompakt.cleaner.kernels`) is built from these.
They live at the bottom layer because the record scan does, and the record scan does because
produce validation (the broker), the cleaner and the explain engine all parse the same format.

Hot loops read buffers through raw pointers (:data:`ptr`), not through arrays: numba
reference-counts an array every time one is handed to a helper function, and those atomic
increments and decrements, several per record, used to cost more than the parsing itself. A
pointer is valid for as long as the caller holds its array, i.e. for the whole kernel call.

Varints are zigzag then little-endian base-128 (at most 5 bytes for an int, 10 for a long), as in
Kafka's ``ByteUtils.readVarint``/``readVarlong``. The helpers are plain ``@njit`` functions: numba
links them into each kernel's LLVM module and LLVM inlines them there, so the kernels' machine
code is cached with them (``cache=True``). They are not ``inline="always"``: that inlines at
numba's IR level, which gave the same machine code (bench/bench_kernels.py: map+copy 1,446 vs
1,449 MB/s) but doubled the first compile after an install (15.1 s against 7.9 s).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from kompakt.records.lazy_numba import cgutils, intrinsic, ir, njit, types
from kompakt.records.memory import empty

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]
Scalar: TypeAlias = Any
"""An int64/uint64 scalar inside a numba kernel. Left to numba's typing: numpy's stubs model neither
numba's integer promotion nor the uint64 wrap-around arithmetic the hashing relies on."""


class Workspace:
    """Output arrays reused from one kernel call to the next.

    Fresh memory costs a page fault per 4 KiB on first touch, which on this VM is slower than
    parsing the records that fill it (≈0.5 GB/s against several GB/s). A cleaner thread keeps one
    workspace for its lifetime, as Kafka keeps its I/O buffers. Results that were written into a
    workspace are valid only until the next call that uses the same workspace slot.
    """

    def __init__(self, *, huge_pages: bool = True) -> None:
        """``huge_pages``: large arrays in 2 MiB pages (numpy's default), for a workspace that
        lives for many calls; base pages for one used once (:mod:`kompakt.records.memory`)."""
        self._arrays: dict[str, npt.NDArray[Any]] = {}
        self.huge_pages = huge_pages

    def take(self, name: str, rows: int, n: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
        """A ``(rows, capacity >= n)`` array of ``dtype`` (1-D of ``capacity`` if ``rows == 0``)."""
        arr = self._arrays.get(name)
        cap = 0 if arr is None else arr.shape[-1]
        if arr is None or arr.dtype != dtype or cap < n:
            cap = max(n, cap + cap // 4, 1024)
            arr = empty(cap if rows == 0 else (rows, cap), dtype, huge=self.huge_pages)
            self._arrays[name] = arr
        return arr


def take_array(
    ws: Workspace | None, name: str, rows: int, n: int, dtype: type[np.generic]
) -> npt.NDArray[Any]:
    """``ws.take(...)``, or a fresh array when the caller keeps no workspace."""
    if ws is None:
        return np.empty(n if rows == 0 else (rows, n), dtype=dtype)
    return ws.take(name, rows, n, dtype)


# ---------------------------------------------------------------------------------------------
# Raw pointers: loads without reference counting, unaligned 8-byte loads, prefetch


def _ptr_typer(typingctx: Any, arr: Any) -> Any:
    """The data pointer of a contiguous array, indexable as ``p[i]`` (no bounds or refcounts)."""
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return sig, codegen


ptr: Any = intrinsic(_ptr_typer)


def _load_u64le_typer(typingctx: Any, ptr: Any, idx: Any) -> Any:
    """The little-endian uint64 at byte ``ptr + idx`` (any alignment); ``ptr`` points to bytes."""
    sig = types.uint64(ptr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        addr = builder.bitcast(builder.gep(args[0], [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(addr, align=1)

    return sig, codegen


load_u64le: Any = intrinsic(_load_u64le_typer)


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


prefetch: Any = intrinsic(_prefetch_typer)


def _memcpy_typer(typingctx: Any, dst: Any, dst_pos: Any, src: Any, src_pos: Any, n: Any) -> Any:
    """Copy ``n`` bytes from ``src + src_pos`` to ``dst + dst_pos`` (byte pointers, no overlap)."""
    sig = types.void(dst, dst_pos, src, src_pos, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        d = builder.gep(args[0], [args[1]])
        s = builder.gep(args[2], [args[3]])
        cgutils.raw_memcpy(builder, d, s, args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


memcpy: Any = intrinsic(_memcpy_typer)


def _call_crc32c_typer(typingctx: Any, fn: Any, crc: Any, p: Any, pos: Any, n: Any) -> Any:
    """``fn(crc, p + pos, n)`` for the address ``fn`` of a C function ``uint32_t (uint32_t crc,
    const uint8_t *data, size_t len)`` (the crc32c package's raw CRC-32C update: no pre- or
    post-inversion). The address is an argument, not a constant, so a precompiled kernel finds
    the function wherever this process loaded it."""
    sig = types.int64(fn, crc, p, pos, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
        target = builder.inttoptr(args[0], ir.FunctionType(i32, [i32, i8p, i64]).as_pointer())
        data = builder.bitcast(builder.gep(args[2], [args[3]]), i8p)
        result = builder.call(target, [builder.trunc(args[1], i32), data, args[4]])
        return builder.zext(result, i64)

    return sig, codegen


call_crc32c: Any = intrinsic(_call_crc32c_typer)


# ---------------------------------------------------------------------------------------------
# Byte-level helpers (inlined by LLVM into the kernels that use them). ``buf`` is an array or a
# pointer from ``ptr``; hot kernels pass pointers.


@njit(cache=True, nogil=True)
def read_be(buf: U8Array, pos: Scalar, width: Scalar) -> Scalar:
    """Big-endian signed integer of ``width`` bytes (2, 4 or 8)."""
    acc = np.uint64(0)
    for i in range(width):
        acc = (acc << np.uint64(8)) | np.uint64(buf[pos + i])
    if width == 8:
        return np.int64(acc)
    sign = np.uint64(1) << np.uint64(width * 8 - 1)
    return np.int64(acc ^ sign) - np.int64(sign)


@njit(cache=True, nogil=True)
def read_varint(buf: U8Array, pos: Scalar, limit: Scalar, max_bytes: Scalar) -> tuple[Scalar, Scalar]:
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
    """``read_varint`` for three bytes and more, and for the error cases (kept out of line)."""
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


@njit(cache=True, nogil=True)
def varint_size(value: Scalar) -> Scalar:
    raw = np.uint64((value << 1) ^ (value >> 63))
    size = 1
    while raw >= np.uint64(0x80):
        raw >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, nogil=True)
def write_varint(out: U8Array, pos: Scalar, value: Scalar) -> Scalar:
    raw = np.uint64((value << 1) ^ (value >> 63))
    while raw >= np.uint64(0x80):
        out[pos] = np.uint8((raw & np.uint64(0x7F)) | np.uint64(0x80))
        raw >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(raw)
    return pos + 1
