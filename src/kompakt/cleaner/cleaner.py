"""Cleaning one log: build the offset map, rewrite the segment groups, swap them in (Kafka's
``Cleaner.doClean``, ``Cleaner.cleanSegments`` and ``UnifiedLog.replaceSegments``).

A :class:`Cleaner` belongs to one cleaner thread and owns that thread's offset map, read buffer
and kernel workspace, so memory is allocated once, as Kafka allocates its dedupe buffer once. It
reads the clock once per clean and passes ``now_ms`` down, so a clean is a function of the log,
the two offsets and that instant.

Crash safety comes from the order of file operations: the new segment is written completely as
``.cleaned`` files and fsynced before :meth:`PartitionLog.replace_segments` renames it to
``.swap``, retires the old segments as ``.deleted`` and renames the swap into place; the loader
finishes or rolls back any interrupted state (``LogLoader.removeTempFilesAndCollectSwapFiles``). An abort
deletes the ``.cleaned`` files and leaves the checkpoint where it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kompakt.cleaner.dedupe import CleanerIo, build_offset_map
from kompakt.cleaner.grouping import GroupingInput, group_segments_by_size
from kompakt.cleaner.offset_map import OffsetMap
from kompakt.cleaner.pipeline import DEFAULT_WORKERS, ChunkPipeline, Source
from kompakt.cleaner.readers import ReaderPositions, partition_hold
from kompakt.cleaner.rewrite import FilterContext, copy_preparer, write_chunk
from kompakt.cleaner.segment_reader import DEFAULT_CHUNK_BYTES, ReadBuffer
from kompakt.cleaner.stats import CleanerStats
from kompakt.cleaner.throttler import Throttler
from kompakt.cleaner.transactions import TransactionTracker
from kompakt.clock import Clock
from kompakt.log.files import CLEANED_FILE_SUFFIX
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.records.native import Workspace

logger = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one clean did: the next dirty offset (the checkpoint value) and its statistics."""

    end_offset: int
    stats: CleanerStats


class Cleaner:
    """The algorithm of one cleaning pass over one log. Not thread-safe: one per cleaner thread."""

    def __init__(
        self,
        thread_id: int,
        offset_map: OffsetMap,
        clock: Clock,
        *,
        throttler: Throttler | None = None,
        check_abort: Callable[[str, int], None] | None = None,
        read_buffer_bytes: int = DEFAULT_CHUNK_BYTES,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        readers: ReaderPositions | None = None,
        workers: int = DEFAULT_WORKERS,
        huge_pages: bool = True,
    ) -> None:
        """``workers``: threads that read ahead and do the per-chunk native work of both passes
        (:mod:`kompakt.cleaner.pipeline`); 0 does everything in the calling thread.
        ``huge_pages``: its buffers in 2 MiB pages, as a cleaner thread that cleans many times
        wants them; a process that cleans once is faster with base pages
        (:mod:`kompakt.records.memory`; the offset map has the same choice)."""
        self.thread_id = thread_id
        self.offset_map = offset_map
        self.clock = clock
        self.throttler = throttler
        self._check_abort = check_abort
        self.read_buffer = ReadBuffer(read_buffer_bytes, huge_pages=huge_pages)
        self.pipeline = ChunkPipeline(read_buffer_bytes, workers, huge_pages=huge_pages)
        self.workspace = Workspace(huge_pages=huge_pages)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        #: Where the readers a tombstone must wait for are (None: nothing holds, as in Kafka).
        self.readers = readers

    def _io(self, log: PartitionLog) -> CleanerIo:
        check = self._check_abort
        if check is None:
            return CleanerIo(self.read_buffer, self.throttler, pipeline=self.pipeline)
        return CleanerIo(
            self.read_buffer, self.throttler, lambda: check(log.topic, log.partition), self.pipeline
        )

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        first_uncleanable_offset: int,
        now_ms: int | None = None,
    ) -> CleanResult:
        """Clean ``log`` with the dirty section ``[first_dirty_offset, first_uncleanable_offset)``.

        ``first_uncleanable_offset`` must be a segment base offset (selection rounds it down).
        Returns the next dirty offset, ``latest_offset + 1`` of the map, as ``Cleaner.doClean`` returns.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        stats = CleanerStats(self.clock)
        io = self._io(log)
        build_offset_map(log, first_dirty_offset, first_uncleanable_offset, self.offset_map, stats, io)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        config = log.config
        tracker = TransactionTracker()
        ctx = FilterContext(
            offset_map=self.offset_map,
            now_ms=now,
            delete_retention_ms=config.delete_retention_ms,
            upper_bound_offset=first_uncleanable_offset,
            # Producer expiration follows the clock, not the horizon time a test may pass as
            # ``now_ms``: Kafka snapshots the producer state as it is
            # (``LogCleanerTest.testCommitMarkerRetentionWithEmptyBatch``, ``testCleanEmptyControlBatch``,
            # ``testAbortedTransactionSpanningSegments``, ``testEmptyBatchRemovalWithSequenceReuse``,
            # ``testAbortMarkerRetentionWithEmptyBatch``).
            active_producers=log.active_producers(self.clock.now_ms(), self.producer_id_expiration_ms),
            tracker=tracker,
            stats=stats,
            workspace=self.workspace,
            hold=partition_hold(self.readers, log.topic, log.partition, config)[1],
        )
        for group in self.group_segments(log, end_offset, first_uncleanable_offset):
            self.clean_segments(log, group, ctx, io)
        stats.all_done()
        return CleanResult(end_offset, stats)

    @staticmethod
    def group_segments(
        log: PartitionLog, end_offset: int, first_uncleanable_offset: int
    ) -> list[list[LogSegment]]:
        """``Cleaner.groupSegmentsBySize`` over every segment below ``end_offset``, from the log start."""
        segments = [s for s in log.segments.values(None, end_offset) if s.base_offset < end_offset]
        inputs = [
            GroupingInput(
                s,
                s.base_offset,
                s.size,
                s.offset_index.entries * 8,
                s.time_index.entries * 12,
            )
            for s in segments
        ]
        config = log.config
        return group_segments_by_size(
            inputs, config.segment_size, config.segment_index_bytes, first_uncleanable_offset
        )

    def clean_segments(
        self, log: PartitionLog, group: list[LogSegment], ctx: FilterContext, io: CleanerIo
    ) -> None:
        """Rewrite ``group`` into one ``.cleaned`` segment and swap it in (``Cleaner.cleanSegments``)."""
        dest = log.create_segment(group[0].base_offset)
        try:
            self._copy_group(log, group, dest, ctx, io)
            dest.on_become_inactive()
            dest.flush()
            dest.set_mtime(group[-1].last_modified_ms)
            io.check_abort()
            log.replace_segments([dest], group)
        except BaseException:
            # Only a segment that never left its .cleaned name is ours to delete; once renamed to
            # .swap it is part of the log and the loader completes the swap (``LogLoader.load``).
            if dest.suffix == CLEANED_FILE_SUFFIX:
                dest.close_handlers()
                dest.delete_files()
            raise

    def _copy_group(
        self, log: PartitionLog, group: list[LogSegment], dest: LogSegment, ctx: FilterContext, io: CleanerIo
    ) -> None:
        """``Cleaner.cleanInto`` for each segment of ``group`` in turn, in one walk (chunks of the
        next segment are read and filtered ahead while this one is written). Entering a segment
        gives the tracker the transactions aborted in it; leaving it indexes the aborted
        transactions the rewrite kept."""
        uppers = [s.base_offset for s in group[1:]] + [self._next_base(log, group[-1])]
        sources = [Source(s.log_path, 0, s.size) for s in group]
        entered = -1

        def move_to(k: int) -> None:
            nonlocal entered
            while entered < k:
                if entered >= 0:
                    for txn in ctx.reindex:
                        dest.txn_index.append(txn)
                entered += 1
                segment = group[entered]
                ctx.tracker.add_aborted(
                    log.collect_aborted_transactions(segment.base_offset, uppers[entered])
                )
                ctx.reindex.clear()

        for item in io.walk(sources, copy_preparer(ctx)):
            k = max(entered, 0)
            while sources[k] is not item.source:
                k += 1
            move_to(k)
            write_chunk(item, dest, ctx, io)
        move_to(len(group) - 1)
        for txn in ctx.reindex:
            dest.txn_index.append(txn)
        ctx.reindex.clear()

    @staticmethod
    def _next_base(log: PartitionLog, segment: LogSegment) -> int:
        following = log.segments.higher(segment.base_offset)
        return following.base_offset if following is not None else log.log_end_offset
