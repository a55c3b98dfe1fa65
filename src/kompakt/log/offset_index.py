"""The sparse offset index (``.index``) and the fixed-width index machinery it shares with ``.timeindex``.

File layout of ``<20-digit base offset>.index``: a plain array of 8-byte big-endian entries::

    offset size field
       0    4  relative_offset  int32 = offset - segment base offset, in [0, 2^31-1]
       4    4  position         int32 = byte position of a batch start in the ``.log`` file

Entries are strictly increasing in both fields. The index is sparse: a batch gets an entry when more
than ``index.interval.bytes`` were appended since the previous entry, and the entry names that
batch's last offset and its own position (Kafka 4.1's per-batch rule, in
:mod:`kompakt.log.index_rule`). A lookup therefore gives a batch start from which a reader scans at
most ``index.interval.bytes`` plus one batch of headers forward.

While its segment is active the file is preallocated to ``floor(segment.index.bytes / 8) * 8``
bytes (zero filled after the last entry) and trimmed to ``entries * 8`` when the segment rolls or
is closed, as Kafka does. Indexes carry no checksum: a file that fails the sanity check on load
raises :class:`~kompakt.errors.CorruptIndexError` and the segment rebuilds it from the ``.log``.

Loading is lazy (Kafka's ``LazyIndex``): nothing is read until the first lookup or append, so
opening thousands of inactive segments touches no index file. Entries live in numpy arrays and
lookups are one ``np.searchsorted``; appends write 8 bytes with ``pwrite`` at the entry's slot.
"""

from __future__ import annotations

import logging
import os
import struct
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final, cast

from kompakt.errors import CorruptIndexError, InvalidOffsetError
from kompakt.lazy_import import LazyModule
from kompakt.log import nowait
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    np = LazyModule("numpy", globals(), "np")  # loaded by the first index read, not at start

log = logging.getLogger(__name__)

INT32_MAX: Final = 0x7FFFFFFF


#: Columns of an index not loaded yet; replaced, never written, when the file is first read.
_EMPTY: npt.NDArray[np.int64] = cast("npt.NDArray[np.int64]", ())


class FixedWidthIndex(ABC):
    """A memory-resident, lazily loaded array of fixed-width entries backed by one file.

    Subclasses define the entry layout (``layout``) and the meaning of the two columns: ``_keys``
    is the searched column (relative offsets or timestamps), ``_values`` the other one. Not
    thread-safe: the owning :class:`~kompakt.log.segment.LogSegment` is used under its log's lock.
    """

    entry_size: ClassVar[int]
    #: numpy dtype fields of one entry (big-endian, as Kafka writes them).
    layout: ClassVar[list[tuple[str, str]]]

    def __init__(
        self,
        path: Path | str,
        base_offset: int,
        max_index_size: int,
        *,
        file_ops: FileOps = DEFAULT_FILE_OPS,
    ) -> None:
        # The ``Path`` object is built on first use: opening thousands of segments needs only names.
        self._path_str = os.fspath(path)
        self._path: Path | None = path if isinstance(path, Path) else None
        self.base_offset = base_offset
        self._ops = file_ops
        self._max_entries = max(max_index_size // self.entry_size, 0)
        self._preallocated = False
        self._loaded = False
        self._entries = 0
        self._keys: npt.NDArray[np.int64] = _EMPTY
        self._values: npt.NDArray[np.int64] = _EMPTY
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(self._path_str)
        return self._path

    @path.setter
    def path(self, path: Path) -> None:
        self._path = path
        self._path_str = os.fspath(path)

    def _exists(self) -> bool:
        return os.path.exists(self._path_str)

    # ------------------------------------------------------------------ loading

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    @property
    def is_preallocated(self) -> bool:
        return self._preallocated

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        nowait.check("an index not loaded yet")
        raw = _read_file(self._path_str)
        if len(raw) % self.entry_size != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {len(raw)} bytes which is "
                f"neither positive nor a multiple of {self.entry_size}."
            )
        if not raw:
            self._keys = np.zeros(16, dtype=np.int64)
            self._values = np.zeros(16, dtype=np.int64)
            self._entries = 0
            self._loaded = True
            return
        table = np.frombuffer(raw, dtype=np.dtype(self.layout))
        keys, values = self._columns(table)
        # A preallocated file that was never trimmed (unclean shutdown) ends in zero slots.
        nonzero = np.flatnonzero((keys != 0) | (values != 0))
        count = int(nonzero[-1]) + 1 if len(nonzero) else 0
        keys, values = keys[:count], values[:count]
        self._sanity_check(keys, values)
        capacity = max(count, 16)
        self._keys = np.zeros(capacity, dtype=np.int64)
        self._values = np.zeros(capacity, dtype=np.int64)
        self._keys[:count] = keys
        self._values[:count] = values
        self._entries = count
        self._loaded = True

    @abstractmethod
    def _columns(self, table: npt.NDArray[np.void]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The searched column and the other one, as int64, from the file's records."""

    @abstractmethod
    def _sanity_check(self, keys: npt.NDArray[np.int64], values: npt.NDArray[np.int64]) -> None:
        """Raise CorruptIndexError if the loaded entries cannot be a valid index of this kind."""

    @abstractmethod
    def _encode(self, key: int, value: int) -> bytes:
        """One entry's bytes."""

    def sanity_check(self) -> None:
        """Load the file now; raise CorruptIndexError if it is not a valid index."""
        self._ensure_loaded()

    # ------------------------------------------------------------------ sizes

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_bytes(self) -> int:
        """Bytes of real entries (the trimmed file length)."""
        return self.entries * self.entry_size

    def is_full(self) -> bool:
        return self.entries >= self._max_entries

    # ------------------------------------------------------------------ writing

    def _open_for_write(self) -> int:
        if self._fd is None:
            self._fd = self._ops.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        return self._fd

    def _append(self, key: int, value: int) -> None:
        self._ensure_loaded()
        if self._entries >= self._max_entries:
            raise InvalidOffsetError(
                f"Attempt to append to a full index (size = {self._entries}) {self.path}"
            )
        n = self._entries
        if n == len(self._keys):
            grow = min(max(2 * n, 16), max(self._max_entries, n + 1))
            self._keys = np.resize(self._keys, grow)
            self._values = np.resize(self._values, grow)
        self._keys[n] = key
        self._values[n] = value
        fd = self._open_for_write()
        self._ops.pwrite(fd, self._encode(key, value), n * self.entry_size)
        self._entries = n + 1

    def _append_many(self, keys: list[int], values: list[int], encoded: bytes) -> None:
        """Append several entries with one write (``encoded`` is their bytes, in order).

        On a failed write nothing is added and the slots the write may have touched are zeroed
        again (a preallocated index must read as zeros after its last entry).
        """
        self._ensure_loaded()
        k = len(keys)
        if k == 0:
            return
        n = self._entries
        if n + k > self._max_entries:
            raise InvalidOffsetError(
                f"Attempt to append to a full index (size = {self._entries}) {self.path}"
            )
        fd = self._open_for_write()
        try:
            self._ops.pwrite(fd, encoded, n * self.entry_size)
        except BaseException:
            self._restore_tail(fd, n)
            raise
        if n + k > len(self._keys):
            grow = min(max(2 * (n + k), 16), max(self._max_entries, n + k))
            self._keys = np.resize(self._keys, grow)
            self._values = np.resize(self._values, grow)
        self._keys[n : n + k] = keys
        self._values[n : n + k] = values
        self._entries = n + k

    def _restore_tail(self, fd: int, count: int) -> None:
        """Best effort after a failed write: the file again ends (or is zero) after ``count`` entries."""
        try:
            self._ops.ftruncate(fd, count * self.entry_size)
            if self._preallocated:
                self._ops.ftruncate(fd, self._max_entries * self.entry_size)
        except OSError as exc:
            # The in-memory count is right; a later trim, truncate or rebuild fixes the file.
            log.warning("Could not cut %s back to %d entries after a failed write: %s", self.path, count, exc)

    def resize(self, max_index_size: int) -> None:
        """Preallocate the file to ``max_index_size`` rounded down to whole entries (active segment)."""
        self._ensure_loaded()
        self._max_entries = max(max_index_size // self.entry_size, self._entries)
        fd = self._open_for_write()
        self._ops.ftruncate(fd, self._max_entries * self.entry_size)
        self._preallocated = True

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail: the file then holds exactly the entries (inactive segment)."""
        if not self._loaded and not self._preallocated:
            return
        self._ensure_loaded()
        if self._fd is None and _file_size(self._path_str) == self.size_bytes:
            self._preallocated = False
            return
        fd = self._open_for_write()
        self._ops.ftruncate(fd, self.size_bytes)
        self._preallocated = False

    def truncate_entries_to(self, count: int) -> None:
        """Keep the first ``count`` entries (undoing the entries of a failed append)."""
        if self._loaded:
            self._truncate_entries(count)

    def _truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries; the freed slots become zeros again on disk."""
        self._ensure_loaded()
        if count >= self._entries and self._exists():
            return
        self._entries = min(count, self._entries)
        fd = self._open_for_write()
        self._ops.ftruncate(fd, self._entries * self.entry_size)
        if self._preallocated:
            self._ops.ftruncate(fd, self._max_entries * self.entry_size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._loaded = True
        self._entries = 0
        self._keys = np.zeros(16, dtype=np.int64)
        self._values = np.zeros(16, dtype=np.int64)
        fd = self._open_for_write()
        self._ops.ftruncate(fd, 0)
        if self._preallocated:
            self._ops.ftruncate(fd, self._max_entries * self.entry_size)

    def flush(self) -> None:
        if self._fd is not None:
            self._ops.fsync(self._fd)

    def dup_handle(self) -> int | None:
        """A duplicate of the write descriptor (None when the index was not written through this
        object): fsync-ed outside the log lock, it stays valid if the index is closed or deleted."""
        return os.dup(self._fd) if self._fd is not None else None

    def close(self) -> None:
        """Trim and release the file descriptor; the index can be reloaded later."""
        self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename_to(self, path: Path) -> None:
        if self._exists():
            self._ops.rename(self.path, path)
        self.path = path

    def delete_if_exists(self) -> bool:
        self.close_handler()
        if self._exists():
            self._ops.unlink(self.path)
            return True
        return False

    def _floor_slot(self, key: int) -> int:
        """Index of the largest entry whose key is <= ``key``, or -1."""
        n = self.entries
        if n == 0:
            return -1
        return int(np.searchsorted(self._keys[:n], key, side="right")) - 1


def _read_file(path: str) -> bytes:
    """The whole content of ``path``; empty when it does not exist (no buffered file object)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        chunks = []
        position = 0
        while position < size:
            chunk = os.pread(fd, size - position, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def _file_size(path: str) -> int | None:
    """The size of ``path``, or None when it does not exist."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


class OffsetIndex(FixedWidthIndex):
    """Maps offsets to ``.log`` byte positions. Not thread-safe (guarded by the log lock)."""

    entry_size = 8
    layout = [("relative_offset", ">i4"), ("position", ">i4")]

    def _columns(self, table: npt.NDArray[np.void]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return table["relative_offset"].astype(np.int64), table["position"].astype(np.int64)

    def _sanity_check(self, keys: npt.NDArray[np.int64], values: npt.NDArray[np.int64]) -> None:
        if len(keys) == 0:
            return
        if keys[0] < 0 or values[0] < 0 or np.any(np.diff(keys) <= 0) or np.any(np.diff(values) <= 0):
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has entries that are not strictly "
                f"increasing (base offset {self.base_offset})"
            )

    def _encode(self, key: int, value: int) -> bytes:
        return int(key).to_bytes(4, "big") + int(value).to_bytes(4, "big")

    @property
    def last_offset(self) -> int:
        n = self.entries
        return self.base_offset + int(self._keys[n - 1]) if n else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; offsets must be strictly increasing."""
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise InvalidOffsetError(
                f"Integer overflow for offset: {offset} ({self.path}); base offset {self.base_offset}"
            )
        if self.entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {self._entries} no larger than "
                f"the last offset appended ({self.last_offset}) to {self.path}."
            )
        self._append(relative, position)

    def append_many(self, offsets: list[int], positions: list[int]) -> None:
        """Add entries ``(offsets[i], positions[i])`` with one write; offsets strictly increasing.

        Checked entry by entry as :meth:`append` would check them, before anything is written.
        """
        if not offsets:
            return
        previous = self.last_offset if self.entries else None
        relatives: list[int] = []
        for offset in offsets:
            relative = offset - self.base_offset
            if relative < 0 or relative > INT32_MAX:
                raise InvalidOffsetError(
                    f"Integer overflow for offset: {offset} ({self.path}); base offset {self.base_offset}"
                )
            if previous is not None and offset <= previous:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to position {self._entries + len(relatives)} "
                    f"no larger than the last offset appended ({previous}) to {self.path}."
                )
            previous = offset
            relatives.append(relative)
        pairs = [v for pair in zip(relatives, positions, strict=True) for v in pair]
        self._append_many(relatives, positions, struct.pack(f">{len(pairs)}i", *pairs))

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the largest entry with offset <= target, else ``(base, 0)``."""
        if target_offset < self.base_offset:
            return self.base_offset, 0
        slot = self._floor_slot(min(target_offset - self.base_offset, INT32_MAX))
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + int(self._keys[slot]), int(self._values[slot])

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 when none): a known batch start."""
        n = self.entries
        if n == 0:
            return 0
        slot = int(np.searchsorted(self._values[:n], position, side="right")) - 1
        return int(self._values[slot]) if slot >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        n = self.entries
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else int(np.searchsorted(self._keys[:n], relative, side="left"))
        self._truncate_entries(keep)

    def entry_table(self) -> list[tuple[int, int]]:
        """All ``(offset, position)`` entries: for tests and tools."""
        n = self.entries
        return [
            (self.base_offset + int(k), int(v)) for k, v in zip(self._keys[:n], self._values[:n], strict=True)
        ]
