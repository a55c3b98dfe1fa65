"""One partition's log: its segments, offsets, appends, reads, rolls, truncation, deletion and swaps.

Offsets (Kafka's names): ``log_start_offset`` (first readable offset; persisted by the manager in
``log-start-offset-checkpoint``), ``log_end_offset`` (next offset to assign), ``high_watermark``
(= LEO after every append on this single-node broker), ``last_stable_offset`` (= HW unless an
open transaction pins it at its first offset), ``recovery_point`` (everything below it is fsynced).

The directory layout is that of :mod:`kompakt.log.segment`; loading and crash recovery live in
:mod:`kompakt.log.recovery`, roll rules in :mod:`kompakt.log.roll`, retention in
:mod:`kompakt.log.retention`, idempotence in :mod:`kompakt.log.producer_state`.

Producer state is rebuilt lazily from batch headers the first time it is needed (an append, the
LSO, the cleaner's question about active producers), so opening thousands of cleanly shut down
logs reads no ``.log`` file beyond each active segment's tail.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kompakt.clock import Clock
from kompakt.errors import InvalidOffsetError, InvalidRecordError, OffsetOutOfRangeError
from kompakt.log import nowait
from kompakt.log.config import LogConfig
from kompakt.log.files import CLEANED_FILE_SUFFIX, DEFAULT_FILE_OPS, FileOps
from kompakt.log.producer_state import (
    SNAPSHOT_SUFFIX,
    AppendOrigin,
    CorruptSnapshotError,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from kompakt.log.recovery import load_partition_dir
from kompakt.log.retention import deletable_count, passes_for
from kompakt.log.roll import random_roll_jitter_ms, roll_reason
from kompakt.log.segment import FileSlice, LogSegment, batch_positions
from kompakt.log.segments import LogSegments, ManualScheduler, Scheduler, delete_later, swap_in
from kompakt.log.txn_index import AbortedTxn
from kompakt.records.batch import (
    RecordBatchView,
    iter_batches,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
)

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
MAX_TIMESTAMP: Final = -3
LEADER_EPOCH: Final = 0
"""The one leader epoch a kompakt partition has (it has one replica and never changes leader):
what Metadata and OffsetForLeaderEpoch report and what every appended batch carries."""
#: While a partition's appends keep failing, at most one log line per this interval (injected
#: clock) says so, with the count of failures not reported in between.
WRITE_ERROR_LOG_INTERVAL_MS: Final = 60_000
_DISK_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the file system is out of space (or the quota is used up)."""
    return isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Result of one append: the offsets assigned and what the produce response needs."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int


@dataclass(frozen=True, slots=True)
class FetchResult:
    """Whole batches for one fetch plus the offsets every fetch response carries."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


@dataclass(frozen=True, slots=True)
class SliceFetchResult:
    """:class:`FetchResult` whose batches stay in the segment file (``b""`` when there are none)."""

    records: FileSlice | bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


#: Producer snapshots kept per partition (the newest few: one per recent roll, and the close's).
SNAPSHOTS_KEPT: Final = 3

#: Ranges smaller than this are read into memory: for them a copy is cheaper than a descriptor.
ZERO_COPY_MIN_BYTES: Final = 64 * 1024


class PartitionLog:
    """The log of one topic-partition.

    Thread-safety: one re-entrant lock per log (``self.lock``) serializes append, read, roll,
    truncation, segment deletion and ``replace_segments``; the cleaner takes it around its swap.
    Segment objects handed out (``segments``) must only be used under that lock, except that
    readers may keep reading a replaced segment until its delayed physical delete.
    """

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        *,
        scheduler: Scheduler | None = None,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        rng: random.Random | None = None,
        file_ops: FileOps = DEFAULT_FILE_OPS,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self.scheduler: Scheduler = scheduler if scheduler is not None else ManualScheduler(clock)
        self.lock = threading.RLock()
        self._rng = rng or random.Random()  # noqa: S311 - roll jitter, not security
        self._ops = file_ops
        directory.mkdir(parents=True, exist_ok=True)
        now_ms = clock.now_ms()
        loaded = load_partition_dir(
            directory,
            config,
            topic_partition=self.name,
            now_ms=now_ms,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            rng=self._rng,
            file_ops=file_ops,
        )
        self.segments: LogSegments = loaded.segments
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._high_watermark = loaded.log_end_offset
        self.recovery_point = loaded.recovery_point
        self.truncated_on_load = loaded.truncated_bytes
        self._last_flush_ms = now_ms
        self._producer_state: ProducerStateManager | None = None
        self._closed = False
        #: Truncations so far: a flush that raced one must not advance the recovery point.
        self._truncations = 0
        #: Bumped whenever records below the log end go away without a truncation: a segment swap
        #: (a clean), a segment deletion, a log start offset move. Readers that keep facts derived
        #: from the records (the table index) compare it, and ``truncation_count``, to know when
        #: to re-read the log.
        self.history_version = 0
        self._appends_written = 0
        self._write_error: str | None = None
        self._write_error_logged_ms: int | None = None
        self._write_errors_unlogged = 0
        self._write_error_reported = False

    # ------------------------------------------------------------------ offsets

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def truncation_count(self) -> int:
        """Truncations since the log was opened: offsets below the log end may now hold other records."""
        return self._truncations

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        with self.lock:
            first_unstable = self.producer_state.first_unstable_offset()
            hw = self._high_watermark
            return hw if first_unstable is None else min(first_unstable, hw)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    @property
    def size_bytes(self) -> int:
        with self.lock:
            return self.segments.size_bytes()

    def number_of_segments(self) -> int:
        return len(self.segments)

    def update_config(self, config: LogConfig) -> None:
        """New topic configs; they take effect at the next roll, retention pass or clean."""
        self.config = config

    # ------------------------------------------------------------------ producer state

    @property
    def producer_state(self) -> ProducerStateManager:
        """Built on first use from the newest usable ``.snapshot`` plus the batch headers after it."""
        with self.lock:
            if self._producer_state is None:
                state = ProducerStateManager(self.name)
                start, entries = self._load_snapshot()
                state.rebuild(
                    (
                        view
                        for segment in self.segments.values(start)
                        for _pos, view in segment.iter_batches(headers_only=True)
                        if view.next_offset > start
                    ),
                    entries,
                )
                self._producer_state = state
            return self._producer_state

    # ------------------------------------------------------------------ producer snapshots

    def _snapshot_files(self) -> dict[int, Path]:
        """Snapshot offset -> file, from a listing of the directory."""
        found: dict[int, Path] = {}
        for name in os.listdir(self.directory):
            canonical = len(name) == 20 + len(SNAPSHOT_SUFFIX) and name[:20].isdigit()
            if canonical and name.endswith(SNAPSHOT_SUFFIX):
                found[int(name[:20])] = self.directory / name
        return found

    def _load_snapshot(self) -> tuple[int, list[ProducerEntry]]:
        """``(offset, entries)`` of the newest valid snapshot at or below the LEO, else ``(0, [])``.

        Snapshots above the log end offset (the log was cut after they were taken) and corrupt
        ones are deleted, as Kafka's ``truncateAndReload`` / ``loadFromSnapshot`` do: they are
        derived from the log, which is the source of truth, and rebuilt from it.
        """
        files = self._snapshot_files()
        for offset in sorted(files, reverse=True):
            path = files[offset]
            if offset > self._log_end_offset:
                self._ops.unlink(path)
                continue
            try:
                return offset, decode_snapshot(path.read_bytes())
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("Producer snapshot %s is unusable (%s); rebuilding from the log", path, exc)
                self._ops.unlink(path)
        return 0, []

    def take_producer_snapshot(self, offset: int | None = None, *, sync: bool = False) -> Path | None:
        """Write ``<offset>.snapshot`` (default the LEO) when the producer state is in memory.

        Kafka's ``takeSnapshot``: written to a ``.tmp`` file and renamed (a torn write leaves no
        snapshot, and a corrupt one fails its CRC and is ignored), then all but the newest
        :data:`SNAPSHOTS_KEPT` are deleted. As Kafka's, it writes nothing unless the offset is past
        the newest snapshot (``lastMapOffset > lastSnapOffset``, both 0 for a new log): an empty
        log gets no snapshot, and a close right after a roll does not rewrite the roll's.
        """
        with self.lock:
            state = self._producer_state
            if state is None:
                return None
            at = self._log_end_offset if offset is None else offset
            if at <= max(self._snapshot_files(), default=0):
                return None
            path = self.directory / f"{at:020d}{SNAPSHOT_SUFFIX}"
            data = encode_snapshot(state.producers.values())
            tmp = path.with_name(path.name + ".tmp")
            fd = self._ops.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                self._ops.pwrite(fd, data, 0)
                if sync:
                    self._ops.fsync(fd)
            finally:
                os.close(fd)
            self._ops.rename(tmp, path)
            files = self._snapshot_files()
            for old in sorted(files)[:-SNAPSHOTS_KEPT]:
                self._ops.unlink(files[old])
            return path

    def _delete_snapshots_above(self, offset: int) -> None:
        for at, path in self._snapshot_files().items():
            if at > offset:
                self._ops.unlink(path)

    def active_producers(self, now_ms: int, expiration_ms: int) -> dict[int, tuple[int | None, int]]:
        with self.lock:
            return self.producer_state.active_producers(now_ms, expiration_ms)

    # ------------------------------------------------------------------ append

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        log_append_time_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version_2: bool = False,
        in_place: bool = False,
        leader_epoch: int = LEADER_EPOCH,
    ) -> AppendInfo:
        """Append one validated v2 batch as the leader: assign offsets, roll if needed, write.

        Every batch gets the leader's epoch as its partition leader epoch, whatever the producer
        put there (Kafka's ``LogValidator`` does the same; the Java producer sends -1, librdkafka
        0): consumers take a record's epoch from it to validate their position after a reset,
        and a leader's files then read as Kafka's do.

        A retried idempotent batch raises DuplicateSequenceError carrying its original offsets
        and appends nothing; out-of-order and fenced producers raise before anything is written.
        ``transaction_version_2`` applies that producer's first-sequence rule
        (:meth:`ProducerStateManager.check`). ``in_place`` (a writable ``batch`` the caller is done
        with: a Produce frame) sets the offsets in ``batch`` itself rather than in a copy: the copy
        was the one pass over every produced byte left in the broker's own code.
        """
        if not assign_offsets:
            return self.append_with_offsets(batch)
        buf: bytearray | memoryview
        if in_place and isinstance(batch, memoryview) and not batch.readonly and batch.c_contiguous:
            buf = batch.cast("B") if batch.format != "B" else batch
        else:
            buf = bytearray(batch)
        positions = batch_positions(buf)
        views = [RecordBatchView(buf, p) for p in positions]
        if len(views) != 1 and any(v.producer_id >= 0 for v in views):
            raise InvalidRecordError("an idempotent or transactional append must hold exactly one batch")
        with self.lock:
            state = self.producer_state
            for view in views:
                state.check(view, origin, transaction_version_2=transaction_version_2)
            next_offset = self._log_end_offset
            for pos, view in zip(positions, views, strict=True):
                set_base_offset(buf, pos, next_offset)
                set_partition_leader_epoch(buf, pos, leader_epoch)
                if log_append_time_ms is not None:
                    set_max_timestamp_log_append(buf, pos, log_append_time_ms)
                next_offset = view.next_offset
            return self._append_locked(buf, views, leader=True, log_append_time_ms=log_append_time_ms)

    def append_with_offsets(self, raw: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches whose offsets are already set (follower, restore, tests); gaps allowed."""
        buf = bytes(raw)
        views = [RecordBatchView(buf, p) for p in batch_positions(buf)]
        with self.lock:
            expected = self._log_end_offset
            for view in views:
                if view.base_offset < expected:
                    raise InvalidOffsetError(
                        f"Unexpected offset in append to {self.name}. "
                        f"First offset {view.base_offset} is less "
                        f"than the next offset {expected}."
                    )
                expected = view.next_offset
            return self._append_locked(buf, views, leader=False, log_append_time_ms=None)

    append_as_follower = append_with_offsets

    def _append_locked(
        self,
        buf: bytes | bytearray | memoryview,
        views: Sequence[RecordBatchView],
        *,
        leader: bool,
        log_append_time_ms: int | None,
    ) -> AppendInfo:
        if not views:
            end = self._log_end_offset
            return AppendInfo(end, end - 1, -1, -1, -1, self._log_start_offset, 0)
        now_ms = self.clock.now_ms()
        state = self.producer_state
        max_ts, offset_of_max = -1, views[0].last_offset
        # A leader append is one request: roll once (Kafka's rule). Follower/restore appends roll
        # per batch. Either way the segment indexes every batch by Kafka's per-batch rule.
        groups = [list(views)] if leader else [[v] for v in views]
        try:
            for group in groups:
                first, last = group[0], group[-1]
                sizes = [view.size for view in group]
                last_offsets = [view.last_offset for view in group]
                max_timestamps = [view.max_timestamp for view in group]
                group_max_ts, group_offset_of_max = -1, last_offsets[0]
                for ts, view_last in zip(max_timestamps, last_offsets, strict=True):
                    if ts > group_max_ts:
                        group_max_ts, group_offset_of_max = ts, view_last
                start, end = first.position, last.position + sizes[-1]
                self._maybe_roll(end - start, group_max_ts, first.base_offset, last_offsets[-1], now_ms)
                self.segments.active.append(memoryview(buf)[start:end], sizes, last_offsets, max_timestamps)
                if group_max_ts > max_ts:
                    max_ts, offset_of_max = group_max_ts, group_offset_of_max
                for view in group:
                    self._update_producer_state(state, view)
                self._log_end_offset = last_offsets[-1] + 1
        except OSError as exc:
            self._write_failed(exc, now_ms)
            raise
        self._appends_written += 1
        if self._write_error is not None:
            self._write_recovered(now_ms)
        self._high_watermark = self._log_end_offset
        self._maybe_flush(now_ms)
        return AppendInfo(
            first_offset=views[0].base_offset,
            last_offset=views[-1].last_offset,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max,
            log_append_time_ms=-1 if log_append_time_ms is None else log_append_time_ms,
            log_start_offset=self._log_start_offset,
            record_count=sum(v.records_count for v in views),
        )

    # ------------------------------------------------------------------ write failures

    @property
    def appends_written(self) -> int:
        """Appends that succeeded since the log was opened (the cleaner compares two readings to
        learn that writes succeed again after a full disk)."""
        return self._appends_written

    @property
    def write_error(self) -> str | None:
        """The error of the last append when it failed; None once an append succeeds again."""
        return self._write_error

    def _write_failed(self, exc: OSError, now_ms: int) -> None:
        """Report a failed append: one log line per partition per ``WRITE_ERROR_LOG_INTERVAL_MS``.

        The segment has already cut its files back (:meth:`LogSegment.append`), so nothing of the
        failed batch remains. A full disk is an expected condition (no traceback); any other
        I/O error gets its traceback once per interval.
        """
        self._write_error = f"{type(exc).__name__}: {exc}"
        last = self._write_error_logged_ms
        if last is not None and now_ms - last < WRITE_ERROR_LOG_INTERVAL_MS:
            self._write_errors_unlogged += 1
            return
        more = self._write_errors_unlogged
        suffix = f" ({more} more failed appends since the last report)" if more else ""
        if is_disk_full(exc):
            log.error("Appends to %s fail: the disk is full (%s)%s", self.name, exc, suffix)
        else:
            log.error("Appends to %s fail: %s%s", self.name, exc, suffix, exc_info=exc)
        self._write_error_logged_ms = now_ms
        self._write_errors_unlogged = 0
        self._write_error_reported = True

    def _write_recovered(self, now_ms: int) -> None:
        if self._write_error_reported:
            more = self._write_errors_unlogged
            suffix = f" ({more} failed appends were not reported)" if more else ""
            log.info("Appends to %s succeed again%s", self.name, suffix)
        self._write_error = None
        self._write_errors_unlogged = 0
        self._write_error_reported = False

    def _update_producer_state(self, state: ProducerStateManager, view: RecordBatchView) -> None:
        completed = state.update(view)
        if completed is not None and completed.is_aborted:
            lso = state.last_stable_offset_after(completed, view.next_offset)
            self.segments.active.txn_index.append(
                AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
            )

    # ------------------------------------------------------------------ roll

    def _maybe_roll(self, size: int, max_ts: int, first_offset: int, last_offset: int, now_ms: int) -> None:
        reason = roll_reason(
            self.segments.active,
            self.config,
            message_size=size,
            max_timestamp_in_messages=max_ts,
            max_offset_in_messages=last_offset,
            now_ms=now_ms,
        )
        if reason is not None:
            log.debug("Rolling %s: %s", self.name, reason)
            self._roll_locked(max(first_offset, self._log_end_offset), now_ms)

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Force a new active segment at the LEO (a no-op when the active segment is empty)."""
        with self.lock:
            active = self.segments.active
            if active.size == 0:
                return active
            return self._roll_locked(self._log_end_offset, self.clock.now_ms() if now_ms is None else now_ms)

    def _roll_locked(self, new_offset: int, now_ms: int) -> LogSegment:
        active = self.segments.active
        if new_offset < active.base_offset:
            raise InvalidOffsetError(
                f"Trying to roll a new log segment for {self.name} with start offset {new_offset} lower than "
                f"start offset of the active segment {active.base_offset}"
            )
        if new_offset == active.base_offset:
            if active.size != 0:
                raise InvalidOffsetError(f"Trying to roll a new segment at {new_offset} over a non-empty one")
            self.segments.remove(active.base_offset)
            active.delete_files()
        else:
            active.on_become_inactive()
        segment = self._new_segment(new_offset, now_ms)
        self.segments.add(segment)
        # Kafka's roll: a snapshot at the new segment's base offset, so recovery starts there.
        self.take_producer_snapshot(new_offset)
        self.scheduler.schedule(0, lambda: self.flush(new_offset), f"flush-log {self.name}")
        return segment

    # ------------------------------------------------------------------ read

    def _out_of_range(self, offset: int, *, below: bool) -> OffsetOutOfRangeError:
        if below:
            return OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.name}, but we only have log "
                f"segments starting from offset: {self._log_start_offset}."
            )
        return OffsetOutOfRangeError(
            f"Received request for offset {offset} for partition {self.name}, but we only have log "
            f"segments upto {self._log_end_offset}."
        )

    def replay_batches(self, chunk_bytes: int = 1 << 20) -> Iterator[RecordBatchView]:
        """Every batch from the log start to the end offset seen at the call, in order.

        What a coordinator reads to load its state topic (Kafka's ``CoordinatorLoaderImpl`` and
        ``TransactionStateManager.loadTransactionMetadata``): reads of ``chunk_bytes`` whole batches,
        each from the end of the last, until the end offset or a read that brings nothing new.
        """
        offset = self.log_start_offset
        end = self.log_end_offset
        while offset < end:
            data = self.read(offset, chunk_bytes, max_offset=end).records
            progressed = False
            for batch in iter_batches(data):
                if batch.next_offset <= offset:
                    continue
                progressed = True
                offset = batch.next_offset
                yield batch
            if not progressed:
                break

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        read_committed: bool = False,
    ) -> FetchResult:
        """Whole batches from the first one whose last offset >= ``offset`` (Kafka's ``LogSegment.read``)."""
        with self.lock:
            hw = self._high_watermark
            lso = self.last_stable_offset
            bound = (lso if read_committed else hw) if max_offset is None else max_offset
            records = self._read_locked(offset, max_bytes, bound, min_one_message)
            aborted = self.collect_aborted_transactions(offset, bound) if read_committed else None
            return FetchResult(records, hw, self._log_start_offset, lso, aborted)

    def read_slice(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_message: bool = True,
        read_committed: bool = False,
    ) -> SliceFetchResult:
        """:meth:`read` for sending from the file: large ranges come back as a :class:`FileSlice`.

        The same batches as :meth:`read`; ranges under :data:`ZERO_COPY_MIN_BYTES`, and any range
        when no descriptor is left to duplicate, are returned as bytes.

        In :func:`~kompakt.log.nowait.cached_only` mode (a Fetch tried on the event loop) a lock
        held by an append, like a page not cached, raises :class:`~kompakt.log.nowait.WouldBlock`.
        """
        lock = self.lock
        if not nowait.active():
            lock.acquire()
        elif not lock.acquire(blocking=False):
            raise nowait.WouldBlock(f"{self.name} is locked by a writer")
        try:
            hw = self._high_watermark
            lso = self.last_stable_offset
            bound = lso if read_committed else hw
            records = self._read_slice_locked(offset, max_bytes, bound, min_one_message)
            try:
                aborted = self.collect_aborted_transactions(offset, bound) if read_committed else None
            except BaseException:
                if isinstance(records, FileSlice):
                    records.close()
                raise
            return SliceFetchResult(records, hw, self._log_start_offset, lso, aborted)
        finally:
            lock.release()

    def _read_slice_locked(
        self, offset: int, max_bytes: int, max_offset: int, min_one_message: bool
    ) -> FileSlice | bytes:
        segment = self._first_segment_to_read(offset, max_offset)
        if segment is None:
            return b""
        if max_offset < self._log_end_offset or max_bytes < ZERO_COPY_MIN_BYTES:
            return self._read_locked(offset, max_bytes, max_offset, min_one_message)
        while segment is not None:
            try:
                result = segment.read_slice(offset, max_bytes, None, min_one_message)
            except OSError as exc:  # out of descriptors: serve a copy instead
                log.debug("zero-copy read of %s failed (%s); copying", self.name, exc)
                return self._read_locked(offset, max_bytes, max_offset, min_one_message)
            if result is not None:
                records = result[1]
                if records is None:
                    return b""
                if records.size < ZERO_COPY_MIN_BYTES:
                    try:
                        return bytes(records)
                    finally:
                        records.close()
                return records
            segment = self.segments.higher(segment.base_offset)
        return b""

    def _first_segment_to_read(self, offset: int, max_offset: int) -> LogSegment | None:
        """The segment holding ``offset`` (None when nothing is readable); raises when out of range."""
        if offset < self._log_start_offset:
            raise self._out_of_range(offset, below=True)
        leo = self._log_end_offset
        if offset > leo:
            raise self._out_of_range(offset, below=False)
        if offset == max_offset or max_offset < offset <= leo:
            return None
        segment = self.segments.floor(offset)
        if segment is None:
            raise self._out_of_range(offset, below=False)
        return segment

    def _read_locked(self, offset: int, max_bytes: int, max_offset: int, min_one_message: bool) -> bytes:
        if offset < self._log_start_offset:
            raise self._out_of_range(offset, below=True)
        leo = self._log_end_offset
        if offset > leo:
            raise self._out_of_range(offset, below=False)
        if offset == max_offset or max_offset < offset <= leo:
            return b""
        segment = self.segments.floor(offset)
        if segment is None:
            raise self._out_of_range(offset, below=False)
        # Reading up to the LEO (the usual case) needs no position lookup for the bound.
        max_segment = None if max_offset >= leo else self.segments.floor(max_offset)
        while segment is not None:
            max_position: int | None = None
            if max_segment is segment:
                found = segment.translate_offset(max_offset)
                max_position = found.position if found is not None else segment.size
            result = segment.read(offset, max_bytes, max_position, min_one_message)
            if result is not None:
                return result[1]
            if max_segment is segment:
                break
            segment = self.segments.higher(segment.base_offset)
        return b""

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> tuple[AbortedTxn, ...]:
        """Aborted transactions overlapping [start, upper bound), from the ``.txnindex`` files."""
        with self.lock:
            found: list[AbortedTxn] = []
            for segment in self.segments.values(max(start_offset, self._log_start_offset)):
                txns, complete = segment.txn_index.collect_aborted(start_offset, upper_bound_offset)
                found.extend(txns)
                if complete:
                    break
            return tuple(found)

    def offset_for_timestamp(self, timestamp: int, *, read_committed: bool = False) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)``; -2 earliest, -1 latest, -3 the max timestamp."""
        with self.lock:
            if timestamp == EARLIEST_TIMESTAMP:
                return self._log_start_offset, -1
            if timestamp == LATEST_TIMESTAMP:
                return (self.last_stable_offset if read_committed else self._high_watermark), -1
            segments = self.segments.values()
            if timestamp == MAX_TIMESTAMP:
                best = max(segments, key=lambda s: s.max_timestamp_so_far)
                if best.max_timestamp_so_far < 0:
                    return None
                return best.find_offset_by_timestamp(best.max_timestamp_so_far, self._log_start_offset)
            for segment in segments:
                if segment.largest_timestamp >= timestamp:
                    return segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
            return None

    # ------------------------------------------------------------------ truncation and start offset

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at or after ``target_offset`` (replication-style truncation)."""
        if target_offset < 0:
            raise InvalidOffsetError(
                f"Cannot truncate partition {self.name} to a negative offset ({target_offset})."
            )
        with self.lock:
            if target_offset >= self._log_end_offset:
                return False
            first = self.segments.first
            if first is not None and first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            self._truncations += 1
            now_ms = self.clock.now_ms()
            doomed = [s for s in self.segments.values() if s.base_offset > target_offset]
            self._remove_and_delete(doomed)
            active = self.segments.active
            active.truncate_to(target_offset, now_ms)
            active.resize_indexes(self.config.segment_index_bytes)
            self._log_end_offset = target_offset
            self._high_watermark = min(self._high_watermark, target_offset)
            self.recovery_point = min(self.recovery_point, target_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self._producer_state = None
            self._delete_snapshots_above(target_offset)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and restart the log empty at ``new_offset``."""
        with self.lock:
            self._truncations += 1
            now_ms = self.clock.now_ms()
            old = self.segments.values()
            for segment in old:
                self.segments.remove(segment.base_offset)
            self._rename_and_schedule_delete(old)
            self.segments.add(self._new_segment(new_offset, now_ms))
            self._log_start_offset = self._log_end_offset = self._high_watermark = new_offset
            self.recovery_point = new_offset
            self._delete_snapshots_above(-1)
            self._producer_state = ProducerStateManager(self.name)

    def increment_log_start_offset(self, new_offset: int) -> bool:
        """DeleteRecords: raise the log start offset (never above the HW); segments go later."""
        with self.lock:
            if new_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_offset} of partition {self.name} "
                    "since it "
                    f"is larger than the high watermark {self._high_watermark}"
                )
            if new_offset <= self._log_start_offset:
                return False
            self._log_start_offset = new_offset
            self.history_version += 1
            return True

    # ------------------------------------------------------------------ deletion and swaps

    def delete_old_segments(self, now_ms: int, include_retention: bool = True) -> int:
        """Kafka's ``deleteOldSegments``: the passes the policy allows; return segments deleted."""
        deleted = 0
        with self.lock:
            for pass_name in passes_for(self.config, include_retention):
                segments = self.segments.values()
                count = deletable_count(
                    pass_name,
                    segments,
                    self.config,
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self._log_end_offset,
                    high_watermark=self._high_watermark,
                    now_ms=now_ms,
                )
                if count == 0:
                    continue
                if count == len(self.segments):
                    self._roll_locked(self._log_end_offset, now_ms)
                doomed = segments[:count]
                log.info("Deleting %d segment(s) of %s by the %s pass", count, self.name, pass_name)
                self._remove_and_delete(doomed)
                first = self.segments.first
                assert first is not None
                self._log_start_offset = max(self._log_start_offset, first.base_offset)
                self.history_version += 1
                deleted += count
        return deleted

    def _remove_and_delete(self, doomed: Sequence[LogSegment]) -> None:
        for segment in doomed:
            self.segments.remove(segment.base_offset)
        self._rename_and_schedule_delete(doomed)

    def _rename_and_schedule_delete(self, doomed: Sequence[LogSegment]) -> None:
        delete_later(doomed, self.scheduler, self.config.file_delete_delay_ms, self.name)

    def create_segment(self, base_offset: int, suffix: str = CLEANED_FILE_SUFFIX) -> LogSegment:
        """A new empty segment file set (``X.*.cleaned`` by default) for the cleaner to fill."""
        return LogSegment.create_for(
            self.directory,
            base_offset,
            self.config,
            now_ms=self.clock.now_ms(),
            suffix=suffix,
            file_ops=self._ops,
        )

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """A new active segment with a fresh roll jitter."""
        jitter = random_roll_jitter_ms(self.config, self._rng)
        return LogSegment.create_for(
            self.directory, base_offset, self.config, now_ms=now_ms, roll_jitter_ms=jitter, file_ops=self._ops
        )

    def replace_segments(
        self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]
    ) -> None:
        """Swap cleaned segments in, crash-safely, in Kafka's exact order (``LocalLog.replaceSegments``)."""
        with self.lock:
            swap_in(
                self.segments,
                new_segments,
                old_segments,
                lambda doomed: self._rename_and_schedule_delete(doomed),
            )
            self.history_version += 1
            self._ops.fsync_dir(self.directory)

    # ------------------------------------------------------------------ durability and lifecycle

    def _maybe_flush(self, now_ms: int) -> None:
        if (
            self._log_end_offset - self.recovery_point >= self.config.flush_messages
            or now_ms - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()

    def flush_if_due(self, now_ms: int) -> None:
        """The ``flush.ms`` check, for a periodic task (the fsync happens outside the lock)."""
        with self.lock:
            due = (
                now_ms - self._last_flush_ms >= self.config.flush_ms
                and self.recovery_point < self._log_end_offset
            )
        if due:
            self.flush()

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to_offset`` (default LEO); move the recovery point.

        Kafka's ``UnifiedLog.flush``: what to sync is chosen under the lock, the fsyncs run without
        it (a rolled 1 GiB segment takes a second or more), and the lock is taken again only to
        mark the offsets flushed, so appends, reads and rolls go on meanwhile. A segment deleted
        or swapped out during the fsync is synced through its duplicated descriptors and does no
        harm; a truncation during the fsync cancels the advance (its offsets are gone).
        """
        with self.lock:
            if self._closed:
                return
            target = self._log_end_offset if up_to_offset is None else min(up_to_offset, self._log_end_offset)
            if target <= self.recovery_point:
                return
            handles = [
                fd
                for segment in self.segments.values(self.recovery_point, target)
                for fd in segment.flush_handles()
            ]
            truncations = self._truncations
        try:
            for fd in handles:
                self._ops.fsync(fd)
            self._ops.fsync_dir(self.directory)
        finally:
            for fd in handles:
                os.close(fd)
        with self.lock:
            if self._truncations == truncations and target > self.recovery_point:
                self.recovery_point = target
                self._last_flush_ms = self.clock.now_ms()

    def close(self) -> None:
        """Flush, write final time-index entries, trim preallocated files, release descriptors."""
        with self.lock:
            if self._closed:
                return
            self.flush()
            try:
                self.take_producer_snapshot(sync=True)  # Kafka's close: recovery need not rescan
            except OSError as exc:
                log.warning("Could not write the producer snapshot of %s: %s", self.name, exc)
            for segment in self.segments.values():
                segment.close()
            self._closed = True

    def close_without_flush(self) -> None:
        """Release descriptors only (tests that simulate a crash)."""
        with self.lock:
            for segment in self.segments.values():
                segment.close_handlers()
            self._closed = True

    def delete(self) -> None:
        """Close and forget every segment (the manager removes the directory)."""
        with self.lock:
            for segment in self.segments.values():
                segment.close_handlers()
            self.segments.clear()
            self._closed = True

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.name}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self._log_end_offset}, segments={len(self.segments)})"
        )
