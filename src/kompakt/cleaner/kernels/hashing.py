"""The key digest of the offset map: a 128-bit hash per key, computed natively over segment bytes.

The digest stands in for the key in the offset map, as MD5 does in Kafka's ``SkimpyOffsetMap``, so
two keys with equal digests would be deduplicated as one (see :func:`hash_keys` for the odds).
:func:`hash_one` is the building block (inlined by LLVM) the fused map and retain passes of
:mod:`kompakt.cleaner.kernels.offset_table` call per record.
"""

from __future__ import annotations

import numpy as np

from kompakt.records.lazy_numba import njit
from kompakt.records.native import (
    I64Array,
    Scalar,
    U8Array,
    U64Array,
    Workspace,
    load_u64le,
    ptr,
    take_array,
)
from kompakt.records.precompiled import entry_point

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_M4 = np.uint64(0xD6E8FEB86659FD93)
_F1 = np.uint64(0x7FB5D329728EA185)
_F2 = np.uint64(0x81DADEF4BC2DD44D)
_SEED1 = np.uint64(0x2545F4914F6CDD1D)
_SEED2 = np.uint64(0x5851F42D4C957F2D)


@njit(cache=True, nogil=True)
def _rotl(x: Scalar, r: Scalar) -> Scalar:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, nogil=True)
def _final(x: Scalar) -> Scalar:
    x ^= x >> np.uint64(31)
    x *= _F1
    x ^= x >> np.uint64(27)
    x *= _F2
    x ^= x >> np.uint64(33)
    return x


@njit(cache=True, nogil=True)
def _absorb(h1: Scalar, h2: Scalar, w: Scalar) -> tuple[Scalar, Scalar]:
    return _rotl((h1 ^ w) * _M1, 31) * _M2, _rotl((h2 ^ w) * _M3, 29) * _M4


@njit(cache=True, nogil=True)
def hash_one(p: Scalar, start: Scalar, length: Scalar) -> tuple[Scalar, Scalar]:
    """Digest of the ``length`` bytes at ``p + start``; ``p`` is a byte pointer from ``ptr``."""
    # Two lanes absorb the same little-endian 8-byte words through different bijective
    # multiply-rotate-multiply steps. The length is mixed in first so zero padding of the last
    # word is unambiguous; keys of up to 8 bytes and equal length never collide in either lane.
    n = np.uint64(length)
    h1 = _SEED1 ^ (n * _M1)
    h2 = _SEED2 ^ (n * _M3)
    pos = start
    end = start + length
    while pos + 8 <= end:
        h1, h2 = _absorb(h1, h2, load_u64le(p, pos))
        pos += 8
    rest = end - pos
    if rest > 0:
        if length >= 8:
            # the last 8 bytes of the key, shifted so the tail's bytes are the low ones
            w = load_u64le(p, end - 8) >> np.uint64(8 * (8 - rest))
        else:
            w = np.uint64(0)
            for i in range(rest):
                w |= np.uint64(p[pos + i]) << np.uint64(8 * i)
        h1, h2 = _absorb(h1, h2, w)
    # (h1, h2) -> (final(h1), final(h2 + h1)) is a bijection on pairs: lane independence survives.
    return _final(h1), _final(h2 + h1)


@entry_point("UniTuple(u8, 2)(u1[::1])")
@njit(cache=True, nogil=True)
def _hash_bytes(buf: U8Array) -> tuple[Scalar, Scalar]:
    return hash_one(ptr(buf), 0, buf.shape[0])


@entry_point("i8(u1[::1], i8[::1], i8[::1], u8[::1], u8[::1])")
@njit(cache=True, nogil=True)
def _hash_keys(buf: U8Array, key_start: I64Array, key_len: I64Array, hi: U64Array, lo: U64Array) -> Scalar:
    """Fill ``hi``/``lo``; returns the index of the first key outside ``buf``, or -1."""
    p = ptr(buf)
    for i in range(key_start.shape[0]):
        if key_len[i] >= 0:
            if key_start[i] < 0 or key_start[i] + key_len[i] > buf.shape[0]:
                return i
            hi[i], lo[i] = hash_one(p, key_start[i], key_len[i])
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
    both = take_array(workspace, "hashes", 2, len(ks), np.uint64)
    hi, lo = both[0, : len(ks)], both[1, : len(ks)]
    if _hash_keys(buf, ks, kl, hi, lo) >= 0:
        raise ValueError("a key lies outside the buffer")
    return hi, lo


def hash_key(key: bytes) -> tuple[int, int]:
    """The digest of one key, equal to what ``hash_keys`` gives for the same bytes."""
    hi, lo = _hash_bytes(np.frombuffer(key, dtype=np.uint8))
    return int(hi), int(lo)
