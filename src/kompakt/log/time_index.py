"""The sparse time index (``.timeindex``): max timestamp so far -> offset of the batch holding it.

File layout of ``<20-digit base offset>.timeindex``: a plain array of 12-byte big-endian entries::

    offset size field
       0    8  timestamp        int64, the segment's max batch timestamp so far (ms)
       8    4  relative_offset  int32 = offset of the batch with that timestamp - base offset

Timestamps are strictly increasing (an entry is written only if its timestamp is greater than the
last one) and relative offsets non-decreasing. Entries are tried whenever the offset index gets
one; on roll, close or cleaner finalization the current max is appended once more without the
fullness check. That is why the index counts as full at ``max_entries - 1``: the last slot is
reserved for that final entry.

Preallocation, trimming, lazy loading and rebuild-on-corruption work exactly as for ``.index``
(see :mod:`kompakt.log.offset_index`).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from kompakt.errors import CorruptIndexError, InvalidOffsetError
from kompakt.lazy_import import LazyModule
from kompakt.log.offset_index import INT32_MAX, FixedWidthIndex

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    np = LazyModule("numpy", globals(), "np")  # loaded by the first index read, not at start

NO_TIMESTAMP: Final = -1


class TimeIndex(FixedWidthIndex):
    """Maps timestamps to offsets. Not thread-safe (guarded by the log lock)."""

    entry_size = 12
    layout = [("timestamp", ">i8"), ("relative_offset", ">i4")]

    def _columns(self, table: npt.NDArray[np.void]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return table["timestamp"].astype(np.int64), table["relative_offset"].astype(np.int64)

    def _sanity_check(self, keys: npt.NDArray[np.int64], values: npt.NDArray[np.int64]) -> None:
        if len(keys) == 0:
            return
        if values[0] < 0 or np.any(np.diff(keys) <= 0) or np.any(np.diff(values) < 0):
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has timestamps or offsets "
                f"that are not increasing (base offset {self.base_offset})"
            )

    def _encode(self, key: int, value: int) -> bytes:
        return int(key).to_bytes(8, "big", signed=True) + int(value).to_bytes(4, "big")

    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)`` when empty."""
        n = self.entries
        if n == 0:
            return NO_TIMESTAMP, self.base_offset
        return int(self._keys[n - 1]), self.base_offset + int(self._values[n - 1])

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if the timestamp is greater than the last entry's."""
        if not skip_full_check and self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full time index (size = {self.entries}).")
        last_timestamp, last_offset = self.last_entry()
        if self.entries and offset < last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the "
                f"last offset appended ({last_offset}) to {self.path}."
            )
        if timestamp <= last_timestamp:
            return
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise InvalidOffsetError(f"Integer overflow for offset: {offset} ({self.path})")
        if self.entries >= self.max_entries:
            # The reserved slot was already used; the in-memory max still answers lookups.
            return
        self._append(timestamp, relative)

    def maybe_append_many(
        self, timestamps: list[int], offsets: list[int], *, skip_full_check: bool = False
    ) -> None:
        """:meth:`maybe_append` for each pair in order, with one write for those appended."""
        if not timestamps:
            return
        last_timestamp, last_offset = self.last_entry()
        count = self.entries
        keys: list[int] = []
        values: list[int] = []
        for timestamp, offset in zip(timestamps, offsets, strict=True):
            if not skip_full_check and count + len(keys) >= self.max_entries - 1:
                raise InvalidOffsetError(
                    f"Attempt to append to a full time index (size = {count + len(keys)})."
                )
            if count + len(keys) and offset < last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {count + len(keys)} no larger than "
                    f"the last offset appended ({last_offset}) to {self.path}."
                )
            if timestamp <= last_timestamp:
                continue
            relative = offset - self.base_offset
            if relative < 0 or relative > INT32_MAX:
                raise InvalidOffsetError(f"Integer overflow for offset: {offset} ({self.path})")
            keys.append(timestamp)
            values.append(relative)
            last_timestamp, last_offset = timestamp, offset
        if keys:
            pairs = [v for pair in zip(keys, values, strict=True) for v in pair]
            self._append_many(keys, values, struct.pack(">" + "qi" * len(keys), *pairs))

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the largest entry with timestamp <= target, else ``(-1, base)``."""
        slot = self._floor_slot(target_timestamp)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return int(self._keys[slot]), self.base_offset + int(self._values[slot])

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at offsets >= ``offset``."""
        n = self.entries
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else int(np.searchsorted(self._values[:n], relative, side="left"))
        self._truncate_entries(keep)

    def entry_table(self) -> list[tuple[int, int]]:
        n = self.entries
        return [
            (int(k), self.base_offset + int(v)) for k, v in zip(self._keys[:n], self._values[:n], strict=True)
        ]
