"""The key index of one partition: key digest -> offset of the key's latest record (or tombstone).

Memory: 24 bytes a slot (16-byte digest, 8-byte word holding the offset and a tombstone bit) and
no key bytes: a lookup reads the record at the offset and compares its key, so a digest collision
(about n^2 / 2^129 for n keys) can never return another key's value. The table grows by
rehashing into a larger one when it passes :data:`~kompakt.table.kernels.MAX_LOAD` and is sized
for :data:`~kompakt.table.kernels.TARGET_LOAD`, so a key costs 30 to 37.5 bytes between growths
(briefly more while a growth holds both tables).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kompakt.cleaner.kernels.hashing import hash_key
from kompakt.records.native import U8Array
from kompakt.records.scan import Spans, record_error
from kompakt.table import kernels as tk
from kompakt.table.kernels import BoolArray, I64Array, U64Array

SLOT_BYTES = 24
#: A finished build is shrunk when its table costs more than this per key.
MAX_BYTES_PER_KEY = 40


def expected_keys(offsets: int, log_bytes: int) -> int:
    """How many keys to size a build for: at most one per offset, and (an estimate) one per 32
    bytes of log; too few costs a growth or two, too many a shrink at the end (:meth:`KeyIndex.fit`)."""
    return max(0, min(offsets, log_bytes // 32))


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """What the index says about one key."""

    offset: int
    tombstone: bool


@dataclass(frozen=True, slots=True)
class IndexStats:
    """Counts and memory of one index (``keys`` = live keys + tombstoned keys)."""

    live_keys: int
    tombstones: int
    slots: int
    memory_bytes: int

    @property
    def keys(self) -> int:
        return self.live_keys + self.tombstones

    @property
    def bytes_per_key(self) -> float | None:
        return self.memory_bytes / self.keys if self.keys else None


class KeyIndex:
    """A growable digest table (see the module docstring). Not thread-safe: the owner locks."""

    def __init__(self, expected_keys: int = 0) -> None:
        self._table: U64Array = tk.zeroed_table(tk.capacity_for(expected_keys))
        self._max_size = tk.max_keys(len(self._table))
        self._size = 0
        self._tombstones = 0

    @property
    def stats(self) -> IndexStats:
        return IndexStats(
            self._size - self._tombstones, self._tombstones, len(self._table), self._table.nbytes
        )

    def __len__(self) -> int:
        """Keys whose latest record is not a tombstone."""
        return self._size - self._tombstones

    def apply(
        self,
        hi: U64Array,
        lo: U64Array,
        offsets: I64Array,
        key_len: I64Array,
        value_len: I64Array,
        *,
        growth: float = 1.25,
    ) -> None:
        """Record that these records exist (any order: the higher offset per key wins).

        ``growth``: how much larger the table becomes when it fills; a build passes 4 (fewer
        rehashes, then :meth:`fit` shrinks it), small catch-ups keep the default.
        """
        start = 0
        n = len(offsets)
        while start < n:
            status, start, size, tombs = tk.apply_records(
                self._table,
                hi,
                lo,
                offsets,
                key_len,
                value_len,
                start,
                self._size,
                self._tombstones,
                self._max_size,
            )
            self._size, self._tombstones = int(size), int(tombs)
            if status == tk.NEEDS_GROWTH:
                # Room for the rest of this run when it is smaller than the index (a build), else
                # one growth step; a build that overestimates is shrunk by fit().
                more = min(n - int(start), self._size)
                self._resize(tk.capacity_for(max(self._size + more, int(self._size * growth))))

    def apply_spans(
        self, buf: U8Array, spans: Spans, low: int, high: int, *, growth: float = 1.25
    ) -> tuple[int, int]:
        """Parse, hash and apply the records of ``spans`` with offsets in ``[low, high)``, natively;
        returns ``(records parsed, highest offset applied or -1)``. See :meth:`apply` for ``growth``."""
        starts, ends, base_offsets, _timestamps, counts = spans.arrays()
        first = 0
        records = 0
        highest = -1
        while True:
            status, first, size, tombs, done, top, position = tk.apply_spans(
                buf,
                starts,
                ends,
                base_offsets,
                counts,
                first,
                low,
                high,
                self._table,
                self._size,
                self._tombstones,
                self._max_size,
            )
            self._size, self._tombstones = int(size), int(tombs)
            records += int(done)
            highest = max(highest, int(top))
            if status == tk.APPLIED:
                return records, highest
            if status != tk.NEEDS_GROWTH:
                raise record_error(int(status), int(first), int(position))
            more = int(counts[first:].sum())
            self._resize(
                tk.capacity_for(
                    max(
                        self._size + min(more, max(self._size, 1)),
                        int(self._size * growth),
                        self._size + int(counts[first]),
                    )
                )
            )

    def _resize(self, capacity: int) -> None:
        new = tk.zeroed_table(max(capacity, tk.capacity_for(self._size)))
        tk.rehash(self._table, new)
        self._table = new
        self._max_size = tk.max_keys(len(new))

    def fit(self) -> None:
        """Shrink to :data:`~kompakt.table.kernels.TARGET_LOAD` when the table is far emptier
        (a build sized for every record of a log whose keys repeat)."""
        if self._table.nbytes > MAX_BYTES_PER_KEY * max(self._size, 1) and len(self._table) > tk.MIN_CAPACITY:
            self._resize(tk.capacity_for(self._size))

    def get(self, key: bytes) -> IndexEntry | None:
        """The latest record of ``key`` per the index (its digest, unverified), or None."""
        hi, lo = hash_key(key)
        word = int(tk.lookup(self._table, np.uint64(hi), np.uint64(lo)))
        if word == 0:
            return None
        offset, tomb = tk.decode_word(word)
        return IndexEntry(offset, tomb)

    def latest_mask(
        self, hi: U64Array, lo: U64Array, offsets: I64Array, key_len: I64Array, include_tombstones: bool
    ) -> BoolArray:
        """Which of these records are their key's latest (live ones only unless asked)."""
        return tk.latest_mask(self._table, hi, lo, offsets, key_len, include_tombstones)
