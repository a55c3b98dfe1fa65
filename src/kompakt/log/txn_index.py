"""The aborted-transaction index (``.txnindex``).

File layout of ``<20-digit base offset>.txnindex``: a plain array of 34-byte big-endian entries::

    offset size field
       0    2  version              int16 = 0
       2    8  producer_id          int64
      10    8  first_offset         int64, first offset of the aborted transaction
      18    8  last_offset          int64, offset of the ABORT marker
      26    8  last_stable_offset   int64, the LSO right after the marker was written

An entry goes into the segment holding the ABORT marker. ``read_committed`` fetches collect the
entries overlapping the fetched range so consumers can drop aborted data. The file may be absent
(no aborts in that segment). It is small and read whole on first use.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kompakt.errors import CorruptIndexError
from kompakt.log import nowait
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps

_ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = _ENTRY.size


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction as recorded in a ``.txnindex``."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TransactionIndex:
    """The aborted transactions of one segment. Not thread-safe (guarded by the log lock)."""

    def __init__(self, path: Path, base_offset: int, *, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
        self.path = path
        self.base_offset = base_offset
        self._ops = file_ops
        self._entries: list[AbortedTxn] | None = None

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            nowait.check("a transaction index not loaded yet")
            raw = self.path.read_bytes() if self.path.exists() else b""
            if len(raw) % ENTRY_SIZE:
                raise CorruptIndexError(
                    f"Transaction index {self.path} has a partial entry ({len(raw)} bytes)"
                )
            entries = []
            for pos in range(0, len(raw), ENTRY_SIZE):
                version, pid, first, last, lso = _ENTRY.unpack_from(raw, pos)
                if version != 0 or last < first:
                    raise CorruptIndexError(f"Transaction index {self.path} has a bad entry at byte {pos}")
                entries.append(AbortedTxn(pid, first, last, lso))
            self._entries = entries
        return self._entries

    def sanity_check(self) -> None:
        self._load()

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise CorruptIndexError(
                f"The last offset of appended transaction {txn} is not greater than "
                f"the last one in {self.path}"
            )
        fd = self._ops.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        try:
            self._ops.pwrite(fd, txn.encode(), len(entries) * ENTRY_SIZE)
        finally:
            os.close(fd)
        entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound); True when the search is complete.

        The search is complete once an entry's recorded LSO reaches the upper bound: later segments
        cannot hold aborts overlapping the range.
        """
        found: list[AbortedTxn] = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose ABORT marker is at or after ``offset``."""
        entries = self._load()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        fd = self._ops.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        try:
            self._ops.ftruncate(fd, len(keep) * ENTRY_SIZE)
        finally:
            os.close(fd)

    def reset(self) -> None:
        self._entries = []
        if self.path.exists():
            fd = self._ops.open_fd(self.path, os.O_RDWR)
            try:
                self._ops.ftruncate(fd, 0)
            finally:
                os.close(fd)

    def flush(self) -> None:
        if self.path.exists():
            fd = self._ops.open_fd(self.path, os.O_RDWR)
            try:
                self._ops.fsync(fd)
            finally:
                os.close(fd)

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            self._ops.rename(self.path, path)
        self.path = path

    def delete_if_exists(self) -> bool:
        if self.path.exists():
            self._ops.unlink(self.path)
            return True
        return False
