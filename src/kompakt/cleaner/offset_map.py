"""The cleaner's offset map (Kafka's dedupe buffer): key -> latest offset, with Kafka's capacity rules.

Two implementations share one protocol. ``HashedOffsetMap`` is the production map: a fixed,
preallocated open-addressing table of 24-byte slots (16-byte key digest + 8-byte offset), exactly
the memory model of Kafka's ``SkimpyOffsetMap``, so ``log.cleaner.dedupe.buffer.size`` means the
same number of keys per pass as in Kafka. Its bulk paths run in numba over the column arrays the
kernels produce. ``ExactOffsetMap`` is a dict keyed by raw key bytes with the same capacity
semantics; it exists as the oracle that the hashed map is tested against.

Capacity semantics (Kafka's ``SkimpyOffsetMap``, ``Cleaner.buildOffsetMap``): ``max_keys_per_pass =
floor(slots x load_factor)``, and a bulk put stops when ``size`` has reached it, checked before every put even
when the key is already present.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.kernels import offset_table as km
from kompakt.cleaner.kernels.hashing import hash_key, hash_keys
from kompakt.cleaner.sizing import SLOT_BYTES
from kompakt.errors import ConfigError, OffsetMapTooSmallError
from kompakt.records.layout import R_NCOLS
from kompakt.records.memory import HUGE_PAGE, zeros_u8
from kompakt.records.native import BoolArray, I64Array, U8Array, U64Array, Workspace, take_array
from kompakt.records.scan import RecordTable, Spans, record_error, scan_records

_UNSEALED: Final = 2**63 - 1
_NO_BITS: Final[U8Array] = np.zeros(1, dtype=np.uint8)
_TOO_SMALL: Final = (
    "offset map is too small to fit in even a single message, so log cleaning will never make "
    "progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads"
)


@dataclass(frozen=True, slots=True)
class RecordKeys:
    """The keys of a run of records, as both maps need them.

    ``buf``/``key_start``/``key_len`` locate the raw bytes (``key_len`` -1 = null key), which the
    exact map uses; ``hash_hi``/``hash_lo`` are their digests, which the hashed map uses.
    """

    buf: U8Array
    key_start: I64Array
    key_len: I64Array
    hash_hi: U64Array
    hash_lo: U64Array

    @classmethod
    def of(
        cls, buf: U8Array, key_start: I64Array, key_len: I64Array, workspace: Workspace | None = None
    ) -> RecordKeys:
        hi, lo = hash_keys(buf, key_start, key_len, workspace)
        return cls(buf, key_start, key_len, hi, lo)

    def key(self, i: int) -> bytes | None:
        n = int(self.key_len[i])
        if n < 0:
            return None
        s = int(self.key_start[i])
        return self.buf[s : s + n].tobytes()


@dataclass(frozen=True, slots=True)
class PutResult:
    """Outcome of a bulk put: ``consumed`` records were handled before stopping (all of them
    unless ``full``); ``full`` means record ``consumed`` found the map at capacity."""

    consumed: int
    full: bool


@dataclass(frozen=True, slots=True)
class RetainResult:
    """Per-record retention (``Cleaner.shouldRetainRecord``) and the count of unkeyed records dropped
    ("invalid messages")."""

    keep: BoolArray
    invalid_dropped: int


@dataclass(frozen=True, slots=True)
class SpanPutResult:
    """Outcome of ``put_spans``: if ``full``, span ``span`` stopped after ``records_done`` of its
    records (the map's latest offset is then the last offset put); otherwise every span was done."""

    full: bool
    span: int
    records_done: int


@dataclass(frozen=True, slots=True)
class SpanRetainResult:
    """Outcome of ``retain_spans``: the kept records only, ``kept.batch_first`` indexing by span."""

    kept: RecordTable
    invalid_dropped: int
    tombstones_dropped: int = 0


@dataclass(frozen=True, slots=True)
class HashedSpans:
    """The records of some spans parsed and hashed ahead of ``HashedOffsetMap.put_hashed``: per
    record its offset (-1: not to put) and digest, ``first`` the per-span prefix of record counts,
    and the record error the parse stopped at (``error`` 0: none; ``done`` spans were parsed)."""

    off: I64Array
    hi: U64Array
    lo: U64Array
    first: I64Array
    error: int
    span: int
    position: int
    done: int


def hash_spans(
    buf: U8Array, spans: Spans, start_offset: int, workspace: Workspace | None = None
) -> HashedSpans:
    """The parse-and-hash half of ``HashedOffsetMap.put_spans``, which touches no map: a map
    pass runs it in worker threads for the chunks ahead of the one it puts."""
    arrays = spans.arrays()
    counts = arrays[4]
    first = np.zeros(len(spans) + 1, dtype=np.int64)
    np.cumsum(np.maximum(counts, 0), out=first[1:])
    n = int(first[-1])
    off = take_array(workspace, "map_offsets", 0, n, np.int64)
    digests = take_array(workspace, "map_digests", 2, n, np.uint64)
    err, span, pos = km.hash_spans(buf, *arrays[:3], counts, start_offset, off, digests[0], digests[1])
    # A negative count is found before any record is parsed, as ``map_spans`` checks them first.
    done = len(spans) if err == 0 else (0 if err == 1 else int(span))
    return HashedSpans(off, digests[0], digests[1], first, int(err), int(span), int(pos), done)


class OffsetMap(Protocol):
    """What the cleaner needs from a dedupe map; see the module docstring for the semantics."""

    @property
    def slots(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def latest_offset(self) -> int: ...
    @property
    def max_keys_per_pass(self) -> int: ...
    @property
    def utilization(self) -> float: ...
    def put(self, key: bytes, offset: int) -> None: ...
    def get(self, key: bytes) -> int: ...
    def clear(self) -> None: ...
    def update_latest_offset(self, offset: int) -> None: ...
    def seal(self, first_offset: int) -> None: ...
    def put_records(self, keys: RecordKeys, offsets: I64Array, start_offset: int) -> PutResult: ...
    def get_many(self, keys: RecordKeys) -> I64Array: ...
    def retain_mask(
        self, keys: RecordKeys, offsets: I64Array, value_len: I64Array, tombstone_may_be_kept: BoolArray
    ) -> RetainResult: ...
    def put_spans(self, buf: U8Array, spans: Spans, start_offset: int) -> SpanPutResult: ...
    def retain_spans(
        self,
        buf: U8Array,
        spans: Spans,
        tombstone_may_be_kept: BoolArray,
        workspace: Workspace | None = None,
        *,
        all_put: bool = False,
    ) -> SpanRetainResult: ...


def _max_keys(slots: int, load_factor: float) -> int:
    if not 0.0 < load_factor <= 1.0:
        raise ConfigError(f"log.cleaner.io.buffer.load.factor must be in (0, 1], got {load_factor}")
    if slots * load_factor <= 1:
        raise OffsetMapTooSmallError(_TOO_SMALL)
    return math.floor(slots * load_factor)


def _i64(a: I64Array) -> I64Array:
    return np.ascontiguousarray(a, dtype=np.int64)


def _take_columns(workspace: Workspace | None, n: int) -> I64Array:
    if workspace is None:
        return np.empty((R_NCOLS, n), dtype=np.int64)
    cols: I64Array = workspace.take("kept", R_NCOLS, n, np.int64)
    return cols


def _check_lengths(n: int, *arrays: npt.NDArray[Any]) -> None:
    if any(len(a) != n for a in arrays):
        raise ValueError("per-record arrays differ in length")


def _zeroed_table(slots: int, huge_pages: bool) -> U64Array:
    """A zero ``(slots, 3)`` uint64 table whose pages cost no memory until first written.

    Large tables come from an anonymous private mapping (:mod:`kompakt.records.memory`), by
    default aligned to, and advised for, 2 MiB pages: random probes into a table bigger than the
    caches then miss the TLB far less often. Small ones come from ``np.zeros`` (calloc, equally
    lazy).
    """
    nbytes = slots * SLOT_BYTES
    if nbytes < 4 * HUGE_PAGE:
        return np.zeros((slots, 3), dtype=np.uint64)
    table: U64Array = zeros_u8(nbytes, huge=huge_pages).view(np.uint64).reshape(slots, 3)
    return table


class HashedOffsetMap:
    """Kafka's dedupe buffer: ``memory_bytes // 24`` slots preallocated once, reused every pass.

    The buffer is reserved up front but its pages are only touched as the table grows into them
    (see :mod:`kompakt.cleaner.kernels.offset_table`): a map that holds few keys keeps them in a
    small, cache-resident prefix.
    """

    def __init__(
        self,
        memory_bytes: int,
        load_factor: float,
        *,
        initial_slots: int = km.INITIAL_CAP,
        huge_pages: bool = True,
    ) -> None:
        """``initial_slots``: how many slots are in use after each ``clear`` (tests lower it to
        exercise growth on small maps). ``huge_pages``: the table in 2 MiB pages, for a map that
        lives for many cleans; a process that cleans once is faster with base pages
        (:mod:`kompakt.records.memory`)."""
        self._slots = memory_bytes // SLOT_BYTES
        self._max_keys = _max_keys(self._slots, load_factor)
        if self._slots > km.MAX_SLOTS:
            raise ConfigError(f"offset map of {memory_bytes} bytes exceeds {km.MAX_SLOTS} slots")
        if initial_slots < 1:
            raise ValueError(f"initial_slots must be positive, got {initial_slots}")
        self._table: U64Array = _zeroed_table(self._slots, huge_pages)
        self._initial_cap = min(self._slots, initial_slots)
        self._cap = self._initial_cap  # slots in use; those past it are zero
        self._size = 0
        self._latest = -1
        self._dirty = False  # any put since the last clear; lets clear() skip the sweep
        #: Every put since the clear came through ``put_hashed`` with offsets rising (see ``seal``).
        self._ordered = True
        self._last_put = -1
        self._unseal()

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def size(self) -> int:
        return self._size

    @property
    def latest_offset(self) -> int:
        return self._latest

    @property
    def max_keys_per_pass(self) -> int:
        return self._max_keys

    @property
    def utilization(self) -> float:
        return self._size / self._slots

    def put(self, key: bytes, offset: int) -> None:
        """Single put; like Kafka's ``put`` it does not itself enforce ``max_keys_per_pass``."""
        self._unseal()
        self._ordered = False
        if self._size >= self._slots and self.get(key) < 0:
            raise OverflowError("offset map has no free slot")
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        hi, lo = hash_key(key)
        grew, cap = km.put_one(
            self._table, self._cap, self._slots, self._size, np.uint64(hi), np.uint64(lo), offset
        )
        self._size += int(grew)
        self._cap = int(cap)
        self._dirty = True
        self._latest = offset

    def _unseal(self) -> None:
        self._bits = _NO_BITS
        self._bit_base = _UNSEALED

    def seal(self, first_offset: int) -> None:
        """Declare the map complete for the copy pass: every keyed record at offsets
        ``[first_offset, latest_offset]`` (outside discarded batches) went through a put, in offset
        order, as ``build_offset_map`` does. When every put since the clear also came through
        ``put_hashed`` with rising offsets (the map checks), such a record is its key's latest
        exactly when its offset is one the map holds, so ``retain_spans`` decides those records
        from a bitmap of the held offsets, without hashing the key or probing the table (the copy
        pass's cost on a table larger than the caches). The bitmap costs one bit per offset of the
        range and is only built when that is at most a quarter of the map's memory; any later put
        drops it."""
        self._unseal()
        span = self._latest - first_offset + 1
        if not self._ordered or first_offset < 0 or span <= 0:
            return
        if span // 8 + 1 > max(1 << 20, self._slots * SLOT_BYTES // 4):
            return
        bits = np.zeros(span // 8 + 1, dtype=np.uint8)
        if km.latest_offsets_bitmap(self._table, self._cap, first_offset, self._latest, bits) >= 0:
            self._bits, self._bit_base = bits, first_offset

    def get(self, key: bytes) -> int:
        hi, lo = hash_key(key)
        return int(km.lookup(self._table, self._cap, np.uint64(hi), np.uint64(lo)))

    @property
    def slots_in_use(self) -> int:
        """How many slots the table currently spans (it grows towards ``slots`` as keys arrive)."""
        return self._cap

    def clear(self) -> None:
        self._unseal()
        if self._dirty:
            self._table[: self._cap] = 0
        self._cap = self._initial_cap
        self._dirty = False
        self._ordered = True
        self._last_put = -1
        self._size = 0
        self._latest = -1

    def update_latest_offset(self, offset: int) -> None:
        self._unseal()
        self._latest = offset

    def put_records(self, keys: RecordKeys, offsets: I64Array, start_offset: int) -> PutResult:
        """Bulk map build (``Cleaner.buildOffsetMapForSegment``) over records in offset order; see
        ``PutResult``."""
        self._unseal()
        self._ordered = False
        offs = _i64(offsets)
        _check_lengths(len(offs), keys.key_len, keys.hash_hi, keys.hash_lo)
        consumed, size, full, last_put, cap = km.put_records(
            self._table,
            self._cap,
            keys.hash_hi,
            keys.hash_lo,
            offs,
            _i64(keys.key_len),
            start_offset,
            self._size,
            self._max_keys,
        )
        if last_put >= 0:
            self._dirty = True
            self._latest = int(last_put)
        self._size = int(size)
        self._cap = int(cap)
        return PutResult(int(consumed), bool(full))

    def get_many(self, keys: RecordKeys) -> I64Array:
        """Offset per record key, -1 for absent and for null keys."""
        _check_lengths(len(keys.key_len), keys.hash_hi, keys.hash_lo)
        return km.get_many(self._table, self._cap, keys.hash_hi, keys.hash_lo, _i64(keys.key_len))

    def retain_mask(
        self, keys: RecordKeys, offsets: I64Array, value_len: I64Array, tombstone_may_be_kept: BoolArray
    ) -> RetainResult:
        """``Cleaner.shouldRetainRecord`` for records of non-control, non-discarded batches;
        ``tombstone_may_be_kept`` is per record (true iff its batch has no delete horizon yet or ``now`` is
        before it)."""
        offs = _i64(offsets)
        _check_lengths(len(offs), keys.key_len, keys.hash_hi, keys.hash_lo, value_len, tombstone_may_be_kept)
        keep, invalid = km.retain(
            self._table,
            self._cap,
            keys.hash_hi,
            keys.hash_lo,
            offs,
            _i64(keys.key_len),
            _i64(value_len),
            np.ascontiguousarray(tombstone_may_be_kept, dtype=np.bool_),
            self._latest,
        )
        return RetainResult(keep, int(invalid))

    def put_spans(self, buf: U8Array, spans: Spans, start_offset: int) -> SpanPutResult:
        """``put_records`` fused with parsing and hashing, over whole batches' records sections.

        Parses only up to each key (the copy pass validates records in full). The caller skips
        control and aborted batches and moves ``latest_offset`` to batch ends itself
        (``Cleaner.buildOffsetMapForSegment``).
        """
        self._unseal()
        self._ordered = False  # its puts' offsets are not checked
        arrays = spans.arrays()
        status, span, done, size, last_put, pos, cap = km.map_spans(
            buf, *arrays[:3], arrays[4], self._table, self._cap, start_offset, self._size, self._max_keys
        )
        self._size = int(size)
        self._cap = int(cap)
        if last_put >= 0:
            self._dirty = True
            self._latest = int(last_put)
        if status > 0:
            raise record_error(int(status), int(span), int(pos))
        return SpanPutResult(status == km.FULL, int(span), int(done))

    def put_hashed(self, hashed: HashedSpans) -> SpanPutResult:
        """``put_spans`` over spans that ``hash_spans`` parsed and hashed already: the same
        records put, the same result, and the same record error raised after the same puts."""
        self._unseal()
        stop = int(hashed.first[hashed.done])
        status, record, size, last_put, cap, ordered = km.put_hashed(
            self._table,
            self._cap,
            hashed.off,
            hashed.hi,
            hashed.lo,
            0,
            stop,
            self._size,
            self._max_keys,
            self._last_put,
        )
        self._size = int(size)
        self._cap = int(cap)
        self._ordered = self._ordered and bool(ordered)
        if last_put >= 0:
            self._dirty = True
            self._latest = self._last_put = int(last_put)
        if status == km.FULL:
            span = int(np.searchsorted(hashed.first, record, side="right")) - 1
            return SpanPutResult(True, span, int(record) - int(hashed.first[span]))
        if hashed.error:
            raise record_error(hashed.error, hashed.span, hashed.position)
        return SpanPutResult(False, len(hashed.first) - 1, 0)

    def retain_spans(
        self,
        buf: U8Array,
        spans: Spans,
        tombstone_may_be_kept: BoolArray,
        workspace: Workspace | None = None,
        *,
        all_put: bool = False,
    ) -> SpanRetainResult:
        """``retain_mask`` fused with full record parsing and hashing; returns only kept records.

        ``tombstone_may_be_kept`` is per span. Spans must be non-control, non-discarded batches.
        ``all_put``: the caller knows that the map pass put every keyed record of these spans at
        or above the sealed first offset (non-transactional batches, which no transaction state
        can have kept out of the map), so a sealed map may answer those from its bitmap.
        """
        arrays = spans.arrays()
        total = int(np.maximum(arrays[4], 0).sum())
        kept = _take_columns(workspace, total)
        kept_first = np.zeros(len(spans) + 1, dtype=np.int64)
        tomb = np.ascontiguousarray(tombstone_may_be_kept, dtype=np.bool_)
        _check_lengths(len(spans), tomb)
        err, span, pos, invalid, tombstones = km.retain_spans(
            buf,
            *arrays,
            tomb,
            self._table,
            self._cap,
            self._latest,
            self._bits,
            self._bit_base if all_put else _UNSEALED,
            kept,
            kept_first,
        )
        if err:
            raise record_error(int(err), int(span), int(pos))
        return SpanRetainResult(
            RecordTable(kept, kept_first, int(kept_first[-1])), int(invalid), int(tombstones)
        )


class ExactOffsetMap:
    """Dict keyed by raw key bytes, with the hashed map's capacity semantics: the test oracle."""

    def __init__(self, slots: int, load_factor: float) -> None:
        self._slots = slots
        self._max_keys = _max_keys(slots, load_factor)
        self._map: dict[bytes, int] = {}
        self._latest = -1

    @classmethod
    def for_memory(cls, memory_bytes: int, load_factor: float) -> ExactOffsetMap:
        """The same capacity a ``HashedOffsetMap(memory_bytes, load_factor)`` would have."""
        return cls(memory_bytes // SLOT_BYTES, load_factor)

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def latest_offset(self) -> int:
        return self._latest

    @property
    def max_keys_per_pass(self) -> int:
        return self._max_keys

    @property
    def utilization(self) -> float:
        return len(self._map) / self._slots

    def put(self, key: bytes, offset: int) -> None:
        if len(self._map) >= self._slots and key not in self._map:
            raise OverflowError("offset map has no free slot")
        self._map[bytes(key)] = offset
        self._latest = offset

    def get(self, key: bytes) -> int:
        return self._map.get(bytes(key), -1)

    def clear(self) -> None:
        self._map.clear()
        self._latest = -1

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    def seal(self, first_offset: int) -> None:
        """Nothing to prepare: the oracle looks every key up."""

    def put_records(self, keys: RecordKeys, offsets: I64Array, start_offset: int) -> PutResult:
        for i, offset in enumerate(offsets.tolist()):
            key = keys.key(i)
            if key is None or offset < start_offset:
                continue
            if len(self._map) >= self._max_keys:
                return PutResult(i, True)
            self.put(key, offset)
        return PutResult(len(offsets), False)

    def get_many(self, keys: RecordKeys) -> I64Array:
        out = [-1 if (k := keys.key(i)) is None else self.get(k) for i in range(len(keys.key_len))]
        return np.array(out, dtype=np.int64)

    def retain_mask(
        self, keys: RecordKeys, offsets: I64Array, value_len: I64Array, tombstone_may_be_kept: BoolArray
    ) -> RetainResult:
        keep = np.zeros(len(offsets), dtype=np.bool_)
        invalid = 0
        for i, offset in enumerate(offsets.tolist()):
            key = keys.key(i)
            if offset > self._latest:
                keep[i] = True
            elif key is None:
                invalid += 1
            else:
                keep[i] = offset >= self.get(key) and (value_len[i] >= 0 or bool(tombstone_may_be_kept[i]))
        return RetainResult(keep, invalid)

    def put_spans(self, buf: U8Array, spans: Spans, start_offset: int) -> SpanPutResult:
        recs = scan_records(buf, *spans.arrays())
        keys = RecordKeys.of(buf, recs.key_start, recs.key_len)
        res = self.put_records(keys, recs.offset, start_offset)
        if not res.full:
            return SpanPutResult(False, len(spans), 0)
        span = int(recs.batch[res.consumed])
        return SpanPutResult(True, span, res.consumed - int(recs.batch_first[span]))

    def retain_spans(
        self,
        buf: U8Array,
        spans: Spans,
        tombstone_may_be_kept: BoolArray,
        workspace: Workspace | None = None,
        *,
        all_put: bool = False,
    ) -> SpanRetainResult:
        recs = scan_records(buf, *spans.arrays())
        keys = RecordKeys.of(buf, recs.key_start, recs.key_len)
        tomb = np.asarray(tombstone_may_be_kept, dtype=np.bool_)[recs.batch]
        res = self.retain_mask(keys, recs.offset, recs.value_len, tomb)
        cols = np.ascontiguousarray(recs.columns[:, : len(recs)][:, res.keep])
        first = np.zeros(len(spans) + 1, dtype=np.int64)
        np.cumsum(np.bincount(recs.batch[res.keep], minlength=len(spans)), out=first[1:])
        dropped_tombstones = int(((~res.keep) & (recs.value_len < 0) & (recs.key_len >= 0)).sum())
        return SpanRetainResult(
            RecordTable(cols, first, int(first[-1])), res.invalid_dropped, dropped_tombstones
        )
