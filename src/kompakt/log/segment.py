"""One log segment: a ``.log`` file of whole record batches plus its three indexes.

Files of a segment based at offset B (20-digit zero-padded decimal name, see Kafka's layout)::

    B.log        concatenated v2 batches, offsets in [B, B + 2^31 - 1]
    B.index      sparse offset -> position index   (kompakt.log.offset_index)
    B.timeindex  sparse timestamp -> offset index  (kompakt.log.time_index)
    B.txnindex   aborted transactions, may be absent (kompakt.log.txn_index)

Temporary suffixes go after the extension (``B.log.cleaned``, ``B.index.swap``,
``B.timeindex.deleted``); :meth:`LogSegment.change_file_suffixes` renames all files together. Names
are built by :func:`kompakt.log.files.segment_file_name`, which defines the vocabulary.

The segment never decodes records on its hot paths: appends write whole batches, reads find the
first batch whose last offset reaches the target through the offset index and then walk batch
headers (fixed offsets) forward. Recovery walks every batch once, checking its CRC and offsets.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kompakt.config.defs import LONG_MAX
from kompakt.errors import CorruptIndexError, CorruptRecordError, InvalidOffsetError
from kompakt.log import nowait
from kompakt.log.config import LogConfig
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps, SegmentExtension, segment_file_name
from kompakt.log.index_rule import plan_index_entries
from kompakt.log.offset_index import INT32_MAX, OffsetIndex
from kompakt.log.time_index import NO_TIMESTAMP, TimeIndex
from kompakt.log.txn_index import TransactionIndex
from kompakt.records.batch import BATCH_OVERHEAD, LOG_OVERHEAD, MAGIC_V2, RecordBatchView, TimestampType
from kompakt.records.record import decode_records

log = logging.getLogger(__name__)

_CHUNK: Final = 1 << 16
#: Bytes read at a time while walking batch headers to find the end of a zero-copy range.
_HEADER_WINDOW: Final = 1 << 12
#: Batches indexed per step of a rebuild (bounds its memory on huge segments of small batches).
_REBUILD_BATCHES: Final = 4096


class FileSlice:
    """A byte range of a segment's ``.log`` with its own descriptor, sent from the file by the server.

    The descriptor is a ``dup`` of the segment's: it keeps the inode open after the cleaner renames
    the segment to ``.deleted`` and the delayed delete closes the segment's own descriptor, so the
    range stays readable whatever happens to the segment. Only whole, already written batches are
    ever sliced, and appends only extend a file, so the bytes under a slice never change.

    ``len()`` is the byte count and ``bytes()`` reads the range (tests, fallbacks); :meth:`close`
    releases the descriptor (also done when the object is collected).
    """

    __slots__ = ("_fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = os.dup(fd)
        self.position = position
        self.size = size

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("FileSlice is closed")
        return self._fd

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        data = nowait.pread(self.fileno(), self.size, self.position)
        if len(data) != self.size:
            raise CorruptRecordError(f"segment range of {self.size} bytes ends after {len(data)} bytes")
        return data

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, size={self.size})"


@dataclass(frozen=True, slots=True)
class BatchLocation:
    """Where one batch lies in a segment: what a read or a truncation needs from a header."""

    position: int
    size: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Outcome of walking a ``.log``: ``valid_bytes`` of whole valid batches, then maybe an error."""

    valid_bytes: int
    file_size: int
    error: str | None
    next_offset: int | None


class LogSegment:
    """One segment's files. Not thread-safe: every call happens under the owning log's lock.

    ``roll_jitter_ms`` and the index capacity are fixed when the segment object is created, as in
    Kafka. ``created_ms`` is the (injected) time the object was created or last emptied; it drives
    time-based rolls of segments that hold no timestamps.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int = 0,
        created_ms: int = 0,
        suffix: str = "",
        file_ops: FileOps = DEFAULT_FILE_OPS,
        size: int | None = None,
        lazy_size: bool = False,
    ) -> None:
        """``size`` is the ``.log`` length when the caller knows it; else the file is ``stat``-ed now,
        or on first use with ``lazy_size`` (opening thousands of segments that are never read)."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = created_ms
        self._suffix = suffix
        self._ops = file_ops
        # Paths and index objects are built on first use: opening a directory of thousands of
        # segments then costs one ``stat`` per ``.log`` (none when the caller knows the size).
        self._dir = os.fspath(directory)
        self._log_path: Path | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        #: ``segment.index.bytes`` to preallocate the indexes to on the first append (active segment).
        self._pending_resize: int | None = None
        if size is None and not lazy_size:
            size = os.stat(self._file_path("log")).st_size
        self._known_size = size
        self._fd: int | None = None
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_so_far: int | None = None
        self._offset_of_max_timestamp_so_far: int | None = None
        self._rolling_based_timestamp: int | None = None
        self._preallocated_bytes = 0

    # ------------------------------------------------------------------ construction

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int = 0,
        created_ms: int = 0,
        suffix: str = "",
        preallocate_bytes: int = 0,
        file_ops: FileOps = DEFAULT_FILE_OPS,
    ) -> LogSegment:
        """Create empty files for a new segment (an existing file of the same name is emptied)."""
        log_path = directory / segment_file_name(base_offset, "log", suffix)
        fd = file_ops.open_fd(log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        if preallocate_bytes > 0:
            file_ops.ftruncate(fd, preallocate_bytes)
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            roll_jitter_ms=roll_jitter_ms,
            created_ms=created_ms,
            suffix=suffix,
            file_ops=file_ops,
            size=0,
        )
        segment._fd = fd
        segment._preallocated_bytes = preallocate_bytes
        segment.offset_index_raw.reset()
        segment.time_index_raw.reset()
        segment.txn_index.reset()
        segment.resize_indexes(max_index_size)
        return segment

    @classmethod
    def create_for(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        roll_jitter_ms: int = 0,
        suffix: str = "",
        file_ops: FileOps = DEFAULT_FILE_OPS,
    ) -> LogSegment:
        """:meth:`create` with sizes taken from a topic's :class:`LogConfig`."""
        return cls.create(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=roll_jitter_ms,
            created_ms=now_ms,
            suffix=suffix,
            preallocate_bytes=config.segment_size if config.preallocate else 0,
            file_ops=file_ops,
        )

    # ------------------------------------------------------------------ paths and index objects (lazy)

    def _file_path(self, extension: SegmentExtension) -> str:
        return os.path.join(self._dir, segment_file_name(self.base_offset, extension, self._suffix))

    @property
    def log_path(self) -> Path:
        if self._log_path is None:
            self._log_path = self.directory / segment_file_name(self.base_offset, "log", self._suffix)
        return self._log_path

    @property
    def offset_index_raw(self) -> OffsetIndex:
        """The offset index object without the load-time checks (built on first access)."""
        if self._offset_index is None:
            self._offset_index = OffsetIndex(
                self._file_path("index"), self.base_offset, self.max_index_size, file_ops=self._ops
            )
        return self._offset_index

    @property
    def time_index_raw(self) -> TimeIndex:
        """The time index object without the load-time checks (built on first access)."""
        if self._time_index is None:
            self._time_index = TimeIndex(
                self._file_path("timeindex"), self.base_offset, self.max_index_size, file_ops=self._ops
            )
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            self._txn_index = TransactionIndex(
                self.directory / segment_file_name(self.base_offset, "txnindex", self._suffix),
                self.base_offset,
                file_ops=self._ops,
            )
        return self._txn_index

    # ------------------------------------------------------------------ indexes (lazy, self-healing)

    @property
    def offset_index(self) -> OffsetIndex:
        self._check_indexes()
        return self.offset_index_raw

    @property
    def time_index(self) -> TimeIndex:
        self._check_indexes()
        return self.time_index_raw

    def _check_offset_index(self) -> None:
        """Load the offset index; raise CorruptIndexError if it cannot index this segment's ``.log``."""
        index = self.offset_index_raw
        index.sanity_check()
        if index.entries:
            last = index.last_offset
            if last - self.base_offset > INT32_MAX:
                raise CorruptIndexError(f"index {index.path} points past its segment")
            if index.lookup(last)[1] >= self._size:
                raise CorruptIndexError(f"index {index.path} points past the end of the log")

    def _rebuild_corrupt(self, exc: CorruptIndexError) -> None:
        log.warning("Found a corrupt index for %s (%s); rebuilding it from the log", self.log_path, exc)
        self.rebuild_indexes()

    def _check_indexes(self) -> None:
        if self.offset_index_raw.is_loaded and self.time_index_raw.is_loaded:
            return
        try:
            self._check_offset_index()
            self.time_index_raw.sanity_check()
        except CorruptIndexError as exc:
            self._rebuild_corrupt(exc)

    def _checked_offset_index(self) -> OffsetIndex:
        """The offset index, checked (and rebuilt if corrupt) without loading the time index.

        A loaded offset index was either checked here or by :meth:`_check_indexes`, or rebuilt.
        """
        index = self.offset_index_raw
        if not index.is_loaded:
            try:
                self._check_offset_index()
            except CorruptIndexError as exc:
                self._rebuild_corrupt(exc)
        return index

    def resize_indexes(self, max_index_size: int) -> None:
        """Preallocate both indexes: the segment is (again) the active one."""
        self._pending_resize = None
        self.offset_index.resize(max_index_size)
        self.time_index.resize(max_index_size)

    def resize_indexes_on_first_append(self, max_index_size: int) -> None:
        """:meth:`resize_indexes` deferred to the first append (an active segment just opened).

        Preallocation only reserves room for appends, so an active segment that is never written
        again is neither loaded nor resized, and its files stay as the last clean close left them.
        """
        self._pending_resize = max_index_size

    # ------------------------------------------------------------------ basic facts

    @property
    def _size(self) -> int:
        size = self._known_size
        if size is None:
            nowait.check("the size of a segment not opened yet")
            size = self._known_size = os.stat(self._file_path("log")).st_size
        return size

    @_size.setter
    def _size(self, size: int) -> None:
        self._known_size = size

    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log`` file."""
        return self._size

    @property
    def suffix(self) -> str:
        return self._suffix

    def _file(self) -> int:
        if self._fd is None:
            nowait.check("a segment file not opened yet")
            self._fd = self._ops.open_fd(self.log_path, os.O_RDWR)
        return self._fd

    def read_bytes(self, position: int, size: int) -> bytes:
        """Raw bytes of the ``.log`` (clamped to the valid size)."""
        size = max(0, min(size, self._size - position))
        if size == 0:
            return b""
        return nowait.pread(self._file(), size, position)

    @property
    def last_modified_ms(self) -> int:
        return self.log_path.stat().st_mtime_ns // 1_000_000

    def set_mtime(self, mtime_ms: int) -> None:
        ns = mtime_ms * 1_000_000
        os.utime(self.log_path, ns=(ns, ns))

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_timestamp_so_far is None:
            ts, offset = self.time_index.last_entry()
            self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = ts, offset
        return self._max_timestamp_so_far

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        _ = self.max_timestamp_so_far
        assert self._offset_of_max_timestamp_so_far is not None
        return self._offset_of_max_timestamp_so_far

    @property
    def largest_timestamp(self) -> int:
        """Largest batch timestamp, falling back to the file mtime when the segment has none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch; Long.MAX for an empty segment."""
        if self._rolling_based_timestamp is None and self._size > 0:
            header = self.read_bytes(0, BATCH_OVERHEAD)
            if len(header) == BATCH_OVERHEAD:
                self._rolling_based_timestamp = RecordBatchView(header).max_timestamp
        return LONG_MAX if self._rolling_based_timestamp is None else self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Batch-time elapsed since the first batch, or wall-clock age when there is no timestamp."""
        first = self.first_batch_timestamp()
        if first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # ------------------------------------------------------------------ header scanning

    def iter_batches(
        self,
        start_position: int = 0,
        end_position: int | None = None,
        *,
        headers_only: bool = False,
        first_read: int = _CHUNK,
    ) -> Iterator[tuple[int, RecordBatchView]]:
        """``(file position, view)`` for each whole batch from ``start_position``, stopping at a torn tail.

        Views point into a reused read buffer and are valid only until the next iteration. With
        ``headers_only`` a data batch that runs past the read chunk is not read beyond its 61-byte
        header: such a view has no records to decode. A control batch is always yielded whole,
        because the producer-state rebuild decodes its marker (commit or abort); a header-only
        view of a marker straddling the chunk was once decoded as a truncated record and made a
        valid transactional log unreadable. ``first_read`` sizes the first read (a lookup that
        expects its batch close by reads less).
        """
        end = self._size if end_position is None else min(end_position, self._size)
        pos = start_position
        read_size = first_read
        while pos + LOG_OVERHEAD <= end:
            chunk = self.read_bytes(pos, min(read_size, end - pos))
            cpos = 0
            while cpos + LOG_OVERHEAD <= len(chunk):
                size = int.from_bytes(chunk[cpos + 8 : cpos + 12], "big", signed=True) + LOG_OVERHEAD
                if size < BATCH_OVERHEAD or pos + cpos + size > end:
                    return
                if cpos + size <= len(chunk):
                    yield pos + cpos, RecordBatchView(chunk, cpos)
                    cpos += size
                    continue
                header_in_hand = cpos + BATCH_OVERHEAD <= len(chunk)
                if headers_only and header_in_hand and not RecordBatchView(chunk, cpos).is_control:
                    # The header is in hand; the rest of a batch larger than the chunk is skipped,
                    # and the next read is a header window (large batches tend to follow large ones).
                    yield pos + cpos, RecordBatchView(chunk, cpos)
                    read_size = _HEADER_WINDOW
                elif cpos == 0:
                    # The batch alone is larger than the read: read it whole, or just its header
                    # when that is all the caller needs and the batch is data.
                    whole = self.read_bytes(pos, BATCH_OVERHEAD if headers_only else size)
                    if headers_only and RecordBatchView(whole, 0).is_control:
                        whole = self.read_bytes(pos, size)
                    yield pos, RecordBatchView(whole, 0)
                else:
                    break  # read again from this batch, so that it starts the next chunk
                cpos += size
            pos += cpos

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchLocation | None:
        """The first batch at or after ``starting_position`` whose last offset is >= ``offset``."""
        position = max(self.offset_index.lookup(offset)[1], starting_position)
        # The index has an entry every index.interval.bytes, so the batch is usually within a
        # header window of the entry: one small read for a Fetch, whatever the batch size.
        for pos, view in self.iter_batches(position, headers_only=True, first_read=_HEADER_WINDOW):
            last = view.last_offset
            if last >= offset:
                return BatchLocation(pos, view.size, view.base_offset, last)
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch, or the base offset for an empty segment."""
        size = self._size
        if size == 0:
            return self.base_offset
        if size <= self.index_interval_bytes:
            # Every index entry lies past ``index.interval.bytes`` of appended data (it is written only
            # once more than that many bytes precede it) and before the end of the log, so a valid
            # index of so small a segment is empty: the scan starts at 0 and the index stays unread.
            position = 0
        else:
            index = self._checked_offset_index()
            position = index.lookup(index.last_offset)[1]
        next_offset = self.base_offset
        # Only reads: a segment without a descriptor (just opened) gets a read-only one for the scan.
        transient = self._fd is None
        if transient:
            self._fd = os.open(self._file_path("log"), os.O_RDONLY)
        try:
            for _pos, view in self.iter_batches(position, headers_only=True):
                next_offset = view.next_offset
        finally:
            if transient:
                fd, self._fd = self._fd, None
                if fd is not None:
                    os.close(fd)
        return next_offset

    @contextmanager
    def reading_only(self) -> Iterator[None]:
        """Reads inside the block go through a read-only descriptor when none is open (an offline
        tool's dry run needs no write access to the file, and takes none)."""
        if self._fd is not None:
            yield
            return
        self._fd = os.open(self._file_path("log"), os.O_RDONLY)
        try:
            yield
        finally:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    def validate_tail(self) -> ValidationResult:
        """:meth:`read_next_offset`'s walk, checked: every batch from the last index entry on must be
        whole and valid (magic 2, offsets increasing inside the segment, CRC) and the last must end
        exactly at the end of the file.

        The start-up check of an active segment (no rescan of whole logs: by the index rule the
        walk covers at most ``index.interval.bytes`` plus the last batch, pages the header reads
        that find the log end offset mostly touch anyway). A clean shutdown fsynced every byte, yet
        the end of the file is where a partial copy, a truncated file, blocks a file system
        zero-filled, or bytes appended after the last batch show; some of that keeps the framing (a
        zeroed batch body, a torn last write whose header survived) and only the CRC shows it, and
        a batch served with a bad CRC stalls every consumer at it. Batches before the last index
        entry are not read: their CRCs are crash recovery's and ``kompakt log verify``'s business
        (Kafka reads none at a clean start). When the batch at the index entry itself is bad the
        walk starts again from byte 0, checking frames only up to the entry, so that
        ``next_offset`` is the offset after the last good batch.
        """
        size = self._size
        if size == 0:
            return ValidationResult(0, 0, None, None)
        position = 0
        if size > self.index_interval_bytes:  # see read_next_offset: a smaller log has no entries
            index = self._checked_offset_index()
            position = index.lookup(index.last_offset)[1]
        result = self._walk_frames(position, size, crc_from=position)
        if result.error is not None and result.next_offset is None and position > 0:
            result = self._walk_frames(0, size, crc_from=position)
        return result

    def _walk_frames(self, start: int, size: int, *, crc_from: int) -> ValidationResult:
        """Batch headers from ``start`` (and CRCs from ``crc_from``): where the last whole, valid
        batch ends, and why the walk stopped there."""
        transient = self._fd is None
        if transient:
            self._fd = os.open(self._file_path("log"), os.O_RDONLY)
        try:
            end, next_offset = start, None
            prev_next = self.base_offset
            for pos, view in self.iter_batches(start, size, headers_only=True):
                if view.magic != MAGIC_V2:
                    return ValidationResult(
                        pos, size, f"unsupported magic {view.magic} at byte {pos}", next_offset
                    )
                if (
                    view.base_offset < prev_next
                    or view.last_offset < view.base_offset
                    or not self.can_convert_to_relative_offset(view.last_offset)
                ):
                    return ValidationResult(
                        pos,
                        size,
                        f"batch offsets {view.base_offset}..{view.last_offset} out of order at byte {pos}",
                        next_offset,
                    )
                if pos >= crc_from:
                    crc_error = self._crc_error(pos, view)
                    if crc_error is not None:
                        return ValidationResult(pos, size, crc_error, next_offset)
                prev_next = next_offset = view.next_offset
                end = pos + view.size
            if end == size:
                return ValidationResult(end, size, None, next_offset)
            header = self.read_bytes(end, LOG_OVERHEAD)
            if len(header) < LOG_OVERHEAD:
                reason = f"partial batch header at byte {end}"
            else:
                declared = int.from_bytes(header[8:12], "big", signed=True) + LOG_OVERHEAD
                reason = f"batch of {declared} bytes at byte {end} does not fit"
            return ValidationResult(
                end, size, f"{reason} ({size - end} bytes after the last whole batch)", next_offset
            )
        finally:
            if transient:
                fd, self._fd = self._fd, None
                if fd is not None:
                    os.close(fd)

    def _crc_error(self, pos: int, view: RecordBatchView) -> str | None:
        """Why the whole batch at ``pos`` (``view`` may hold only its header) fails its CRC, or None."""
        if view.position + view.size > len(view.buf):
            view = RecordBatchView(self.read_bytes(pos, view.size), 0)
        computed = view.compute_crc()
        if computed == view.crc:
            return None
        return (
            f"Record is corrupt (stored crc = {view.crc}, computed crc = {computed}) in the batch of "
            f"offsets {view.base_offset}..{view.last_offset} at byte {pos}"
        )

    # ------------------------------------------------------------------ append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        sizes: Sequence[int],
        last_offsets: Sequence[int],
        max_timestamps: Sequence[int],
    ) -> None:
        """Append whole batches whose offsets are assigned, indexed by Kafka's per-batch rule.

        ``sizes``, ``last_offsets`` and ``max_timestamps`` describe the batches of ``records`` in
        order (:mod:`kompakt.log.index_rule`). All or nothing: when a write fails (a full disk
        fails part way through), the ``.log`` and both indexes are cut back to where they were
        before the error propagates, so no partial batch is left for a reader, the cleaner or
        recovery to find, and the next append writes at the same position.
        """
        n = len(records)
        if n == 0:
            return
        if self._pending_resize is not None:
            self.resize_indexes(self._pending_resize)
        largest_offset = last_offsets[-1]
        if not self.can_convert_to_relative_offset(largest_offset):
            raise InvalidOffsetError(
                f"Detected offset overflow at offset {largest_offset} in segment {self.log_path}"
            )
        position = self._size
        max_timestamp = self._max_timestamp_so_far
        if max_timestamp is None:
            max_timestamp = self.max_timestamp_so_far
        assert self._offset_of_max_timestamp_so_far is not None
        plan = plan_index_entries(
            position,
            sizes,
            last_offsets,
            max_timestamps,
            interval=self.index_interval_bytes,
            bytes_since_last_entry=self._bytes_since_last_index_entry,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=self._offset_of_max_timestamp_so_far,
        )
        counts = None
        if plan.offsets:
            self._check_indexes()
            offset_index, time_index = self.offset_index_raw, self.time_index_raw
            counts = (offset_index.entries, time_index.entries)
            # The roll check keeps a free slot before each append, but one append of many batches
            # can plan several entries: those past a full index are left out (lookups then scan
            # further) rather than failing every retry of the append, as Kafka's would.
            room = min(offset_index.max_entries - counts[0], time_index.max_entries - 1 - counts[1])
            if len(plan.offsets) > room:
                keep = max(room, 0)
                del plan.offsets[keep:], plan.positions[keep:]
                del plan.timestamps[keep:], plan.timestamp_offsets[keep:]
        try:
            self._ops.pwrite(self._file(), records, position)
            if plan.offsets:
                offset_index.append_many(plan.offsets, plan.positions)
                time_index.maybe_append_many(plan.timestamps, plan.timestamp_offsets)
        except BaseException:
            self._undo_append(position, counts)
            raise
        self._size = position + n
        if position == 0:
            # Kafka 4.1 loads the rolling timestamp from the first batch (loadFirstBatchTimestamp).
            self._rolling_based_timestamp = max_timestamps[0]
        self._bytes_since_last_index_entry = plan.bytes_since_last_entry
        self._max_timestamp_so_far = plan.max_timestamp
        self._offset_of_max_timestamp_so_far = plan.offset_of_max_timestamp

    def _undo_append(self, position: int, index_counts: tuple[int, int] | None) -> None:
        """Cut the files back after a failed append (best effort: the error being handled wins).

        The in-memory size never moved, so a cut that fails too leaves only bytes past the logical
        end, which the next append overwrites and a roll or close trims (:meth:`_trim_log_file`).
        """
        try:
            self._ops.ftruncate(self._file(), position)
            if self._preallocated_bytes:
                self._ops.ftruncate(self._file(), self._preallocated_bytes)
        except OSError as exc:
            log.warning(
                "Could not cut %s back to %d bytes after a failed append: %s",
                self.log_path,
                position,
                exc,
            )
        if index_counts is not None:
            try:
                self.offset_index_raw.truncate_entries_to(index_counts[0])
                self.time_index_raw.truncate_entries_to(index_counts[1])
            except OSError as exc:
                log.warning(
                    "Could not cut the indexes of %s back after a failed append: %s", self.log_path, exc
                )

    def append_batches(self, records: bytes | bytearray | memoryview) -> int:
        """Append already-offset batches (tests, tools), reading their facts from the headers."""
        views = [RecordBatchView(records, p) for p in batch_positions(records)]
        self.append(
            records,
            [v.size for v in views],
            [v.last_offset for v in views],
            [v.max_timestamp for v in views],
        )
        return len(records)

    # ------------------------------------------------------------------ read

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> tuple[int, bytes] | None:
        """Whole batches from the first one whose last offset >= ``start_offset``: ``(position, bytes)``.

        None when the segment holds no such batch (the caller moves on to the next segment). The
        first batch is returned whole even if larger than ``max_size`` when ``min_one_message``.
        """
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log_path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        limit_position = self._size if max_position is None else min(max_position, self._size)
        adjusted = max(max_size, found.size) if min_one_message else max_size
        end = min(limit_position, found.position + adjusted)
        if end <= found.position:
            return found.position, b""
        data = self.read_bytes(found.position, end - found.position)
        whole = self._whole_batches_end(found.position, data)
        return found.position, data if whole == len(data) else data[:whole]

    def read_slice(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> tuple[int, FileSlice | None] | None:
        """:meth:`read` without reading: the same whole batches as a :class:`FileSlice` (None if empty).

        The end of the range is found by walking batch headers from the offset index entry at or
        before the byte limit, so only a few small reads happen whatever the size of the range.
        """
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log_path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        limit_position = self._size if max_position is None else min(max_position, self._size)
        adjusted = max(max_size, found.size) if min_one_message else max_size
        end = self._whole_batches_end_in_file(
            found.position, found.size, min(limit_position, found.position + adjusted)
        )
        if end <= found.position:
            return found.position, None
        return found.position, FileSlice(self._file(), found.position, end - found.position)

    def _whole_batches_end_in_file(self, start: int, first_size: int, limit: int) -> int:
        """End of the whole batches from ``start`` (a batch of ``first_size``) that fit ``limit``."""
        if start + first_size > limit:
            return start
        anchor = self.offset_index.floor_position(limit)
        pos = anchor if anchor > start + first_size else start + first_size
        fd = self._file()
        window = b""
        window_start = pos
        while pos + LOG_OVERHEAD <= limit:
            offset_in_window = pos - window_start
            if offset_in_window < 0 or offset_in_window + LOG_OVERHEAD > len(window):
                window = nowait.pread(fd, min(_HEADER_WINDOW, limit - pos), pos)
                window_start, offset_in_window = pos, 0
                if len(window) < LOG_OVERHEAD:
                    break
            size = int.from_bytes(window[offset_in_window + 8 : offset_in_window + 12], "big", signed=True)
            size += LOG_OVERHEAD
            if size < BATCH_OVERHEAD or pos + size > limit:
                break
            pos += size
        return pos

    def _whole_batches_end(self, start: int, data: bytes) -> int:
        """Length of the longest prefix of ``data`` made of whole batches (index-assisted)."""
        anchor = self.offset_index.floor_position(start + len(data))
        cursor = anchor - start if anchor > start else 0
        end = cursor
        pos = cursor
        while pos + LOG_OVERHEAD <= len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
            if size < BATCH_OVERHEAD or pos + size > len(data):
                break
            pos += size
            end = pos
        return end

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` at or after start."""
        ts_offset = self.time_index.lookup(timestamp)[1]
        position = self.offset_index.lookup(max(ts_offset, starting_offset))[1]
        for _pos, view in self.iter_batches(position):
            if view.max_timestamp >= timestamp and view.last_offset >= starting_offset:
                return _first_record_at_or_after(view, timestamp, starting_offset)
        return None

    # ------------------------------------------------------------------ recovery and truncation

    def validate(self, start_position: int = 0, expected_min_offset: int | None = None) -> ValidationResult:
        """Walk every batch: framing, magic, CRC, offsets increasing and inside this segment."""
        file_size = self.log_path.stat().st_size if self._preallocated_bytes == 0 else self._size
        self._size = file_size
        prev_next = self.base_offset if expected_min_offset is None else expected_min_offset
        pos = start_position
        next_offset: int | None = None
        while pos < file_size:
            header = self.read_bytes(pos, BATCH_OVERHEAD)
            if len(header) < BATCH_OVERHEAD:
                return ValidationResult(pos, file_size, f"partial batch header at byte {pos}", next_offset)
            view = RecordBatchView(header, 0)
            size = view.size
            if size < BATCH_OVERHEAD or pos + size > file_size:
                return ValidationResult(
                    pos, file_size, f"batch of {size} bytes at byte {pos} does not fit", next_offset
                )
            batch = RecordBatchView(self.read_bytes(pos, size), 0)
            try:
                batch.validate()
            except CorruptRecordError as exc:
                return ValidationResult(pos, file_size, f"{exc} (file byte {pos})", next_offset)
            if batch.base_offset < prev_next or not self.can_convert_to_relative_offset(batch.last_offset):
                return ValidationResult(
                    pos,
                    file_size,
                    f"batch offsets {batch.base_offset}..{batch.last_offset} out of order at byte {pos}",
                    next_offset,
                )
            prev_next = batch.next_offset
            next_offset = prev_next
            pos += size
        return ValidationResult(pos, file_size, None, next_offset)

    def rebuild_indexes(self) -> ValidationResult:
        """Recreate ``.index`` and ``.timeindex`` from the valid batches (Kafka's per-batch rule)."""
        was_preallocated = self.offset_index_raw.is_preallocated
        self.offset_index_raw.reset()
        self.time_index_raw.reset()
        self._max_timestamp_so_far = NO_TIMESTAMP
        self._offset_of_max_timestamp_so_far = self.base_offset
        result = self.validate()
        self._bytes_since_last_index_entry = 0
        sizes: list[int] = []
        last_offsets: list[int] = []
        max_timestamps: list[int] = []
        position = 0
        for pos, view in self.iter_batches(0, result.valid_bytes, headers_only=True):
            sizes.append(view.size)
            last_offsets.append(view.last_offset)
            max_timestamps.append(view.max_timestamp)
            if len(sizes) == _REBUILD_BATCHES:
                self._index_rebuilt(position, sizes, last_offsets, max_timestamps)
                position = pos + view.size
                sizes, last_offsets, max_timestamps = [], [], []
        self._index_rebuilt(position, sizes, last_offsets, max_timestamps)
        # Like Kafka's recover, the count restarts for the appends that follow (a fresh object).
        self._bytes_since_last_index_entry = 0
        if not was_preallocated:
            self.offset_index_raw.trim_to_valid_size()
            self.time_index_raw.trim_to_valid_size()
        return result

    def _index_rebuilt(
        self, position: int, sizes: list[int], last_offsets: list[int], max_timestamps: list[int]
    ) -> None:
        """Index one run of rebuilt batches starting at ``position`` (the append rule, no log write)."""
        plan = plan_index_entries(
            position,
            sizes,
            last_offsets,
            max_timestamps,
            interval=self.index_interval_bytes,
            bytes_since_last_entry=self._bytes_since_last_index_entry,
            max_timestamp=self.max_timestamp_so_far,
            offset_of_max_timestamp=self.offset_of_max_timestamp_so_far,
        )
        self.offset_index_raw.append_many(plan.offsets, plan.positions)
        self.time_index_raw.maybe_append_many(plan.timestamps, plan.timestamp_offsets, skip_full_check=True)
        self._bytes_since_last_index_entry = plan.bytes_since_last_entry
        self._max_timestamp_so_far = plan.max_timestamp
        self._offset_of_max_timestamp_so_far = plan.offset_of_max_timestamp

    def recover(self) -> int:
        """Rebuild the indexes and truncate after the last valid batch; return bytes truncated."""
        result = self.rebuild_indexes()
        truncated = result.file_size - result.valid_bytes
        if truncated > 0:
            self._truncate_file(result.valid_bytes)
            self.txn_index.truncate_to(
                result.next_offset if result.next_offset is not None else self.base_offset
            )
        return truncated

    def truncate_at(self, position: int, next_offset: int, now_ms: int) -> int:
        """Cut the ``.log`` at ``position``, the end of its last valid batch (``next_offset`` after
        it), found by :meth:`validate` or :meth:`validate_tail`; return the bytes cut.

        Unlike :meth:`truncate_to` this needs no readable batch at the cut (the bytes there are the
        invalid ones). Index entries for offsets from ``next_offset`` go first, so the indexes never
        point past the shortened file.
        """
        removed = self._size - position
        if removed <= 0:
            return 0
        self.offset_index.truncate_to(next_offset)
        self.time_index.truncate_to(next_offset)
        self.txn_index.truncate_to(next_offset)
        self._truncate_file(position)
        if position == 0:
            self.created_ms = now_ms
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._reload_max_timestamp()
        return removed

    def _truncate_file(self, size: int) -> None:
        self._ops.ftruncate(self._file(), size)
        self._size = size
        self._preallocated_bytes = 0

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return bytes removed."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        removed = self._size - found.position
        self._truncate_file(found.position)
        if self._size == 0:
            self.created_ms = now_ms
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._reload_max_timestamp()
        return removed

    def _reload_max_timestamp(self) -> None:
        ts, offset = self.time_index.last_entry()
        position = self.offset_index.lookup(offset)[1]
        for _pos, view in self.iter_batches(position, headers_only=True):
            if view.max_timestamp > ts:
                ts, offset = view.max_timestamp, view.last_offset
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = ts, offset

    # ------------------------------------------------------------------ lifecycle

    def on_become_inactive(self) -> None:
        """Write the final time-index entry and trim every preallocated file (on roll)."""
        self._pending_resize = None
        ts = self.max_timestamp_so_far
        if ts >= 0:
            self.time_index.maybe_append(ts, self.offset_of_max_timestamp_so_far, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_log_file()

    def _trim_log_file(self) -> None:
        """Kafka's ``FileRecords.trim``: cut the ``.log`` to its logical size on roll and close.

        That removes a preallocated tail, and also any bytes a failed write left past the end
        that could not be cut at the time, before the segment becomes immutable.
        """
        fd = self._fd
        if fd is None:
            if not self._preallocated_bytes:
                return  # no descriptor: nothing was written through this object
            fd = self._file()
        if os.fstat(fd).st_size > self._size:
            self._truncate_file(self._size)
        self._preallocated_bytes = 0

    def flush_handles(self) -> list[int]:
        """Duplicated descriptors of every file :meth:`flush` would fsync, taken under the log lock.

        :meth:`PartitionLog.flush` fsyncs them after releasing the lock (Kafka's ``UnifiedLog.flush``
        flushes outside the lock too). A duplicate keeps its inode open, so a segment that is rolled,
        closed, renamed to ``.deleted`` or deleted meanwhile is still synced, harmlessly, and never
        a reused descriptor number of another file. The caller closes them.
        """
        handles: list[int] = []
        try:
            if self._fd is not None:
                handles.append(os.dup(self._fd))
            for index in (self._offset_index, self._time_index):
                fd = index.dup_handle() if index is not None else None
                if fd is not None:
                    handles.append(fd)
            with contextlib.suppress(FileNotFoundError):  # no aborted transactions: no file
                handles.append(os.open(self.txn_index.path, os.O_RDONLY))
        except BaseException:
            for fd in handles:
                os.close(fd)
            raise
        return handles

    def flush(self) -> None:
        if self._fd is not None:
            self._ops.fsync(self._fd)
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Final time-index entry, trim, release descriptors. The segment can be read again later."""
        self._pending_resize = None
        offset_index = self._offset_index
        if (offset_index is not None and offset_index.is_loaded) or self._max_timestamp_so_far is not None:
            self.on_become_inactive()
        else:
            self._trim_log_file()
        self.close_handlers()

    def close_handlers(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._offset_index is not None:
            self._offset_index.close_handler()
        if self._time_index is not None:
            self._time_index.close_handler()

    def _resolve_size(self) -> None:
        """Fix a lazily known size before the file moves away (a missing file counts as empty)."""
        if self._known_size is None:
            try:
                self._known_size = os.stat(self._file_path("log")).st_size
            except FileNotFoundError:
                self._known_size = 0

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every existing file of the segment from ``old_suffix`` to ``new_suffix``."""
        if self._suffix != old_suffix:
            raise ValueError(f"segment {self.log_path} has suffix {self._suffix!r}, not {old_suffix!r}")

        def renamed(path: Path) -> Path:
            name = path.name[: len(path.name) - len(old_suffix)] if old_suffix else path.name
            return path.with_name(name + new_suffix)

        self._resolve_size()
        new_log = renamed(self.log_path)
        if self.log_path.exists():
            self._ops.rename(self.log_path, new_log)
        self._log_path = new_log
        self.offset_index_raw.rename_to(renamed(self.offset_index_raw.path))
        self.time_index_raw.rename_to(renamed(self.time_index_raw.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))
        self._suffix = new_suffix

    def delete_files(self) -> None:
        """Physically remove the files (after the ``.deleted`` delay)."""
        self._resolve_size()
        self.close_handlers()
        if self.log_path.exists():
            self._ops.unlink(self.log_path)
        self.offset_index_raw.delete_if_exists()
        self.time_index_raw.delete_if_exists()
        self.txn_index.delete_if_exists()

    def __repr__(self) -> str:
        name = segment_file_name(self.base_offset, "log", self._suffix)
        return f"LogSegment(base_offset={self.base_offset}, size={self._known_size}, path={name})"


def batch_positions(buf: bytes | bytearray | memoryview) -> list[int]:
    positions = []
    pos = 0
    while pos + LOG_OVERHEAD <= len(buf):
        size = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
        if size < BATCH_OVERHEAD or pos + size > len(buf):
            raise CorruptRecordError(f"partial or malformed batch at byte {pos} of an append")
        positions.append(pos)
        pos += size
    if pos != len(buf):
        raise CorruptRecordError(f"{len(buf) - pos} trailing bytes after the last batch of an append")
    return positions


def _first_record_at_or_after(view: RecordBatchView, timestamp: int, starting_offset: int) -> tuple[int, int]:
    """Kafka's ListOffsets answer inside one batch: the first record with ts >= target."""
    if view.timestamp_type == TimestampType.LOG_APPEND_TIME or view.records_count == 0:
        return max(view.base_offset, starting_offset), view.max_timestamp
    for record in decode_records(view):
        if record.timestamp >= timestamp and record.offset >= starting_offset:
            return record.offset, record.timestamp
    return max(view.base_offset, starting_offset), view.max_timestamp
