"""One partition as a table: look up a key, scan the latest records, count, answer ``--as-of``.

The answer is what a ``read_committed`` consumer replaying the partition from its log start ends
with: per key the record with the highest offset, tombstoned keys absent, aborted transactions
and control batches ignored, nothing at or past the last stable offset. The index
(:class:`~kompakt.table.index.KeyIndex`) only names the offset of each key's latest record; every
answer is read back from the log and its key compared, so a digest collision or a record the
cleaner removed after the index saw it can never yield a wrong value.

:class:`PartitionTable` holds what live and offline tables share; :class:`LiveTable` follows a
:class:`~kompakt.log.partition_log.PartitionLog` (``kompakt.table.offline`` has the one over
files on disk).
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np

from kompakt.cleaner.segment_reader import ReadBuffer
from kompakt.errors import CorruptRecordError, OffsetOutOfRangeError
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import FileSlice
from kompakt.log.txn_index import AbortedTxn
from kompakt.records.batch import ATTR_CONTROL
from kompakt.records.native import I64Array, U8Array
from kompakt.records.scan import BatchTable, StopReason, scan_batches
from kompakt.table.build import Chunk, IncrementalBuilder, OneShotBuilder, OneShotResult
from kompakt.table.index import IndexEntry, IndexStats, KeyIndex, expected_keys
from kompakt.table.records import (
    CHUNK_BYTES,
    RecordRun,
    TableRecord,
    key_prefix_mask,
    record_at,
    record_runs,
    row_record,
)

SECTION_CLEAN: Final = "clean"
SECTION_DIRTY: Final = "dirty"
SECTION_ACTIVE: Final = "active"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a record lives: its segment, its batch's file position, and the log section."""

    segment_base_offset: int
    position: int
    batch_base_offset: int
    batch_last_offset: int
    batch_size: int
    section: str


@dataclass(frozen=True, slots=True)
class Lookup:
    """A key's latest record (a tombstone has ``value is None``) and where it lives; ``record`` is
    None when the table has no record of the key at all."""

    record: TableRecord | None
    location: Location | None

    @property
    def found(self) -> bool:
        """True when the key has a live value (tombstoned and unknown keys are absent)."""
        return self.record is not None and self.record.value is not None


@dataclass(frozen=True, slots=True)
class Counts:
    """Live keys and tombstones of one partition, with the index's memory."""

    partition: int
    live_keys: int
    tombstones: int
    index_bytes: int
    bytes_per_key: float | None
    indexed_to_offset: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "live_keys": self.live_keys,
            "tombstones": self.tombstones,
            "index_bytes": self.index_bytes,
            "bytes_per_key": None if self.bytes_per_key is None else round(self.bytes_per_key, 2),
            "indexed_to_offset": self.indexed_to_offset,
        }


@dataclass(frozen=True, slots=True)
class AsOfInfo:
    """How an ``--as-of`` answer was cut and whether it may be incomplete (and why)."""

    as_of_ms: int
    cut_offset: int
    last_stable_offset: int
    complete: bool
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "as_of_ms": self.as_of_ms,
            "cut_offset": self.cut_offset,
            "last_stable_offset": self.last_stable_offset,
            "complete": self.complete,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class CleanFacts:
    """What says whether a clean may have removed values: the cleaner's checkpoint (first dirty
    offset) and the newest modification time of the segments below it (a cleaned segment keeps
    the modification time of the last segment it replaced, which was written after every record
    in it: Kafka's ``Cleaner.cleanSegments``)."""

    log_start_offset: int
    first_dirty_offset: int | None
    cleaned_until_ms: int | None


def completeness(as_of_ms: int, facts: CleanFacts) -> tuple[bool, str | None]:
    """Whether an answer as of ``as_of_ms`` may miss values a clean or a deletion removed.

    A clean removes a record only when a later record of its key exists; it may thereby remove a
    value that was current at ``as_of_ms`` only if it ran over records stamped after that time.
    Records are stamped no later than they are written (log append time, or producers' clocks
    that agree with the broker's), and all of the cleaned section was written by
    ``cleaned_until_ms``, so a time at or after it is answered exactly.
    """
    if facts.log_start_offset > 0:
        return False, (
            f"records below offset {facts.log_start_offset} were deleted (retention or DeleteRecords); "
            "values current then may be missing"
        )
    dirty = facts.first_dirty_offset
    if dirty is None or dirty <= facts.log_start_offset:
        return True, None
    until = facts.cleaned_until_ms
    if until is not None and as_of_ms >= until:
        return True, None
    return False, (
        f"the log is cleaned up to offset {dirty} (records written until {iso_ms(until)}); "
        "a clean keeps only the latest record of each key there, so a value current at "
        f"{iso_ms(as_of_ms)} may have been removed"
    )


def iso_ms(ms: int | None) -> str:
    """Epoch milliseconds as ISO-8601 UTC (``-`` for none)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_scan(table: BatchTable, where: str) -> None:
    """Refuse batches the scan could not walk (bad size or magic: not whole v2 batches)."""
    if table.stop_reason in (StopReason.BAD_SIZE, StopReason.BAD_MAGIC):
        what = (
            "a batch size below the header"
            if table.stop_reason == StopReason.BAD_SIZE
            else ("a batch that is not RecordBatch v2 (the table reads magic 2 only)")
        )
        raise CorruptRecordError(f"{where} holds {what} at byte {table.stop_position} of the read")


class PartitionTable(ABC):
    """What live and offline tables share: the index, lookups, scans and counts.

    Subclasses say where the batches come from (a live log, segment files, a backup's blobs).
    """

    topic: str
    partition: int

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._index = KeyIndex()
        self._indexed_to = 0
        #: Guards the index: catching up mutates it in place (the kernels run without the GIL).
        self._lock = threading.RLock()
        #: The last ``as_of`` answer (pages of a scan ask for the same time again and again).
        self._as_of_cache: tuple[int, tuple[int, ...] | None, KeyIndex, AsOfInfo] | None = None

    # ------------------------------------------------------------------ where batches come from

    def refresh(self) -> None:
        """Bring the index up to date with the log (a no-op offline)."""
        return  # offline sources do not grow: their index is built once

    @abstractmethod
    def _chunks_from(self, offset: int) -> Iterator[Chunk]:
        """Whole batches from the one holding ``offset`` to the end of what is indexed."""

    @abstractmethod
    def _batch_at(self, offset: int) -> tuple[U8Array, Location] | None:
        """The batch holding ``offset`` (None when no batch holds it any more)."""

    @abstractmethod
    def log_start_offset(self) -> int:
        """The first offset the source still holds."""

    @abstractmethod
    def clean_facts(self) -> CleanFacts:
        """What the source says about its cleaning (for ``as_of``'s completeness verdict)."""

    def _one_shot(self) -> OneShotBuilder:
        """A builder reading this partition from its log start (for ``as_of``)."""
        return OneShotBuilder(
            lambda: self._chunks_from(self.log_start_offset()), start_offset=self.log_start_offset()
        )

    # ------------------------------------------------------------------ answers

    @property
    def stats(self) -> IndexStats:
        return self._index.stats

    def counts(self) -> Counts:
        with self._lock:
            self.refresh()
            stats = self._index.stats
        return Counts(
            self.partition,
            stats.live_keys,
            stats.tombstones,
            stats.memory_bytes,
            stats.bytes_per_key,
            self._indexed_to,
        )

    def lookup(self, key: bytes) -> Lookup:
        """The latest record of ``key``, read from the log and checked against the key."""
        with self._lock:
            self.refresh()
            entry = self._index.get(key)
        return self._read_entry(key, entry)

    def get(self, key: bytes) -> TableRecord | None:
        """The latest live value of ``key`` (None when absent or tombstoned)."""
        found = self.lookup(key)
        return found.record if found.found else None

    def _read_entry(self, key: bytes, entry: IndexEntry | None) -> Lookup:
        if entry is None:
            return Lookup(None, None)
        located = self._batch_at(entry.offset)
        if located is None:  # removed since it was indexed: only a tombstone past its horizon
            return Lookup(None, None)
        buf, location = located
        table = scan_batches(buf)
        check_scan(table, f"{self.topic}-{self.partition}")
        record = record_at(buf, table, entry.offset, self.partition)
        if record is None or record.key != key:  # removed since, or a digest collision
            return Lookup(None, None)
        return Lookup(record, location)

    def scan(
        self,
        *,
        prefix: bytes = b"",
        include_tombstones: bool = False,
        from_offset: int = 0,
        index: KeyIndex | None = None,
        end_offset: int | None = None,
    ) -> Iterator[TableRecord]:
        """The latest record of every key (with ``prefix``), in offset order from ``from_offset``."""
        for run, rows in self.scan_runs(
            prefix=prefix,
            include_tombstones=include_tombstones,
            from_offset=from_offset,
            index=index,
            end_offset=end_offset,
        ):
            for row in rows.tolist():
                yield row_record(run, row, self.partition)

    def scan_runs(
        self,
        *,
        prefix: bytes = b"",
        include_tombstones: bool = False,
        from_offset: int = 0,
        index: KeyIndex | None = None,
        end_offset: int | None = None,
    ) -> Iterator[tuple[RecordRun, I64Array]]:
        """:meth:`scan` as runs of record columns and the rows of each that are latest (for the
        columnar export: no Python object per record). A run is valid until the next one."""
        if index is None:
            with self._lock:
                self.refresh()
                index = self._index
                end = self._indexed_to
        else:
            end = end_offset if end_offset is not None else np.iinfo(np.int64).max
        start = max(from_offset, self.log_start_offset())
        if start >= end:
            return
        for buf, table in self._chunks_from(start):
            if len(table) == 0:
                continue
            data = (table.attributes & ATTR_CONTROL) == 0
            for run in record_runs(buf, table, data):
                with self._lock:
                    mask = index.latest_mask(run.hi, run.lo, run.offset, run.key_len, include_tombstones)
                mask &= (run.offset >= start) & (run.offset < end)
                if prefix:
                    mask &= key_prefix_mask(run, prefix)
                rows = np.flatnonzero(mask)
                if len(rows):
                    yield run, rows
            if int(table.last_offset[-1]) + 1 >= end:
                return

    def as_of(self, as_of_ms: int) -> tuple[KeyIndex, AsOfInfo]:
        """An index of the table as of a time, and how complete it is (see :func:`completeness`).

        The cut is the first record stamped after ``as_of_ms``: the answer is the state of a
        consumer that had read the log up to there (for CreateTime records out of order, a
        later record stamped before the cut is not part of it).
        """
        version = self._version()
        cached = self._as_of_cache
        if cached is not None and cached[0] == as_of_ms and cached[1] == version:
            return cached[2], cached[3]
        facts = self.clean_facts()
        index, result = self._one_shot().build(KeyIndex, as_of_ms=as_of_ms)
        complete, reason = completeness(as_of_ms, facts)
        cut = result.cut_offset if result.cut_offset is not None else result.end_offset
        info = AsOfInfo(as_of_ms, cut, result.last_stable_offset, complete, reason)
        # Appends only add records past the cut, which change nothing once a cut was found.
        self._as_of_cache = (as_of_ms, version if result.cut_offset is not None else None, index, info)
        return index, info

    def _version(self) -> tuple[int, ...]:
        """Changes whenever an answer as of a fixed time could change (offline: never)."""
        return ()

    def lookup_as_of(self, key: bytes, as_of_ms: int) -> tuple[Lookup, AsOfInfo]:
        index, info = self.as_of(as_of_ms)
        return self._read_entry(key, index.get(key)), info


class LiveTable(PartitionTable):
    """A table following a live log: each answer first reads what was appended since the last.

    The produce path does no work for the table: the index catches up when it is asked (and when
    the server's background task asks). A truncation makes it rebuild before answering; a clean,
    a retention delete or a log start move leave every lookup and scan right (they read the
    record back) but may leave the counts high, so the next ``counts`` rebuilds first.
    """

    def __init__(
        self,
        log: PartitionLog,
        *,
        first_dirty_offset: Callable[[], int | None] = lambda: None,
    ) -> None:
        super().__init__(log.topic, log.partition)
        self.log = log
        self._first_dirty = first_dirty_offset
        self._truncations = -1
        self._history = -1
        self.rebuilds = 0
        self.records_read = 0
        self._buffer = ReadBuffer()

    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def refresh(self) -> None:
        with self._lock:
            log = self.log
            if log.truncation_count != self._truncations:
                self._rebuild()
            target = log.last_stable_offset
            if target > self._indexed_to:
                self._catch_up(target)

    def counts(self) -> Counts:
        with self._lock:
            if self.log.history_version != self._history:
                self._rebuild()
            return super().counts()

    def _rebuild(self) -> None:
        log = self.log
        self._truncations = log.truncation_count
        self._history = log.history_version
        previous = self._index.stats.keys if self.rebuilds else None
        span = log.log_end_offset - log.log_start_offset
        guess = expected_keys(span, log.size_bytes)
        self._index = KeyIndex(guess if previous is None else min(span, int(previous * 1.1) + 1024))
        self._indexed_to = log.log_start_offset
        self.rebuilds += 1
        self._catch_up(log.last_stable_offset)
        self._index.fit()

    def _fetch(self, offset: int, read_committed: bool) -> tuple[U8Array, tuple[AbortedTxn, ...]] | None:
        """Whole batches from ``offset`` (up to the LSO or the high watermark), read into the
        table's reused buffer: fresh memory costs more to touch than the records cost to parse.
        None past the end; raises OffsetOutOfRangeError below the log start."""
        fetched = self.log.read_slice(offset, CHUNK_BYTES, read_committed=read_committed)
        records = fetched.records
        aborted = fetched.aborted_transactions or ()
        if isinstance(records, FileSlice):
            try:
                self._buffer.ensure(records.size)
                view = self._buffer.buf[: records.size]
                got = os.preadv(records.fileno(), [view.data], records.position)
            finally:
                records.close()
            if got != len(view):
                raise CorruptRecordError(
                    f"{self.log.name}: read {got} of {len(view)} bytes at {records.position}"
                )
            return view, aborted
        if not records:
            return None
        return np.frombuffer(records, dtype=np.uint8), aborted

    def _catch_up(self, target: int) -> None:
        builder = IncrementalBuilder(
            self._index, growth=4.0 if self._indexed_to <= self.log.log_start_offset else 1.25
        )
        pos = max(self._indexed_to, self.log.log_start_offset)
        while pos < target:
            try:
                fetched = self._fetch(pos, read_committed=True)
            except OffsetOutOfRangeError:
                pos = self.log.log_start_offset  # a retention delete moved the start meanwhile
                if pos >= target:
                    break
                continue
            if fetched is None:
                break
            buf, aborted = fetched
            table = scan_batches(buf)
            check_scan(table, self.log.name)
            if len(table) == 0:
                break
            builder.apply_fetch(buf, table, aborted, pos, target)
            pos = int(table.last_offset[-1]) + 1
        self.records_read += builder.records_read
        self._indexed_to = max(self._indexed_to, target)

    def _chunks_from(self, offset: int) -> Iterator[Chunk]:
        pos = offset
        buffer = ReadBuffer()
        while True:
            try:
                fetched = self.log.read_slice(pos, CHUNK_BYTES)
            except OffsetOutOfRangeError:
                return
            records = fetched.records
            if isinstance(records, FileSlice):
                try:
                    buffer.ensure(records.size)
                    buf = buffer.buf[: records.size]
                    os.preadv(records.fileno(), [buf.data], records.position)
                finally:
                    records.close()
            elif records:
                buf = np.frombuffer(records, dtype=np.uint8)
            else:
                return
            table = scan_batches(buf)
            check_scan(table, self.log.name)
            if len(table) == 0:
                return
            yield buf, table
            pos = int(table.last_offset[-1]) + 1

    def _batch_at(self, offset: int) -> tuple[U8Array, Location] | None:
        log = self.log
        first_dirty = self._first_dirty()
        with log.lock:
            if offset < log.log_start_offset or offset >= log.log_end_offset:
                return None
            segment = log.segments.floor(offset)
            if segment is None:
                return None
            found = segment.translate_offset(offset)
            if found is None or found.base_offset > offset:
                return None
            data = segment.read_bytes(found.position, found.size)
            active = segment is log.segments.active
        if active:
            section = SECTION_ACTIVE
        elif first_dirty is not None and offset < first_dirty:
            section = SECTION_CLEAN
        else:
            section = SECTION_DIRTY
        location = Location(
            segment.base_offset, found.position, found.base_offset, found.last_offset, found.size, section
        )
        return np.frombuffer(data, dtype=np.uint8), location

    def clean_facts(self) -> CleanFacts:
        log = self.log
        dirty = self._first_dirty()
        with log.lock:
            start = log.log_start_offset
            cleaned = [s for s in log.segments.values() if dirty is not None and s.base_offset < dirty]
            until = max((s.last_modified_ms for s in cleaned), default=None)
        return CleanFacts(start, dirty, until)

    def as_of(self, as_of_ms: int) -> tuple[KeyIndex, AsOfInfo]:
        with self._lock:
            return super().as_of(as_of_ms)

    def _version(self) -> tuple[int, ...]:
        return (self.log.truncation_count, self.log.history_version)


def one_shot_result_json(result: OneShotResult) -> dict[str, object]:
    return {
        "end_offset": result.end_offset,
        "last_stable_offset": result.last_stable_offset,
        "records_read": result.records_read,
        "passes": result.passes,
    }
