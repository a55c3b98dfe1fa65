"""The log cleaner service: cleaner threads, their shared throttler, metrics and maintenance.

Theory of operation. ``log.cleaner.threads`` threads each own a :class:`Cleaner` (offset map,
buffers). Each iteration of a thread (:meth:`LogCleaner.run_once`):

1. asks the :class:`CleanerManager` for the filthiest eligible compacted log (KIP-354 must-clean
   logs first, then dirty ratio), which marks it IN_PROGRESS and writes any forced checkpoint
   resets;
2. cleans it, and reports the result with ``done_cleaning`` (the checkpoint moves to the clean's
   end offset; after a failure it stays at the first dirty offset and the partition is marked
   uncleanable with the reason — KIP-346 — while the thread goes on with the others);
3. runs compacted-log retention (log-start-offset breach, and time/size retention for
   ``compact,delete``), which in Kafka only the cleaner thread does for compacted logs;
4. rolls the active segment of idle compacted logs whose first record has outlived
   ``max.compaction.lag.ms`` (beyond Kafka, which only rolls on append);
5. sleeps ``log.cleaner.backoff.ms`` if nothing was cleaned (woken early by :meth:`wake`).

A dynamic reconfiguration stops every thread and starts new ones with the new config, which also
revives dead threads (Kafka's behaviour). Time for rules comes from the injected clock, once per
iteration; the backoff wait uses real time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kompakt.cleaner.adapter import LogView
from kompakt.cleaner.manager import CleanerCheckpointFile, CleanerManager
from kompakt.cleaner.metrics import CleanerMetrics, format_clean_log_line
from kompakt.cleaner.planning import SelectionError, TopicPartition, segments_to_force_roll
from kompakt.cleaner.readers import (
    PartitionReaders,
    ReaderPositions,
    ReaderRisk,
    TombstoneHold,
    earliest_removal_ms,
    partition_hold,
    reader_risks,
)
from kompakt.cleaner.stats import combine_passes
from kompakt.cleaner.throttler import Throttler
from kompakt.clock import Clock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import CleaningAbortedError
from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE
from kompakt.log.partition_log import PartitionLog, is_disk_full

if TYPE_CHECKING:
    from kompakt.cleaner.cleaner import Cleaner, CleanResult
    from kompakt.cleaner.horizons import HorizonTracker

logger = logging.getLogger(__name__)
DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024  # kompakt.cleaner.segment_reader.DEFAULT_CHUNK_BYTES

MAX_MAP_BYTES_PER_THREAD = 2**31 - 1
MIN_READ_BUFFER_BYTES = DEFAULT_CHUNK_BYTES
"""Kafka reads through 256 KiB buffers (``log.cleaner.io.buffer.size`` / threads / 2); kompakt's
native scanning amortises its per-chunk Python work over larger reads, so the read buffer is at
least 16 MiB per thread (it still grows to any larger batch, as ``Cleaner.growBuffersOrFail`` does)."""


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The broker configs the cleaner service runs with."""

    enabled: bool
    threads: int
    dedupe_buffer_size: int
    load_factor: float
    io_buffer_size: int
    max_io_bytes_per_second: float
    backoff_ms: int
    producer_id_expiration_ms: int

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> CleanerSettings:
        return cls(
            enabled=config.log_cleaner_enable,
            threads=config.log_cleaner_threads,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            load_factor=config.log_cleaner_io_buffer_load_factor,
            io_buffer_size=config.log_cleaner_io_buffer_size,
            max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
            backoff_ms=config.log_cleaner_backoff_ms,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
        )

    @property
    def map_bytes_per_thread(self) -> int:
        return min(self.dedupe_buffer_size // max(self.threads, 1), MAX_MAP_BYTES_PER_THREAD)


class CleanerThread(threading.Thread):
    """One ``kafka-log-cleaner-thread-<i>``."""

    def __init__(self, service: LogCleaner, thread_id: int) -> None:
        super().__init__(name=f"kafka-log-cleaner-thread-{thread_id}", daemon=True)
        self.service = service
        self.thread_id = thread_id
        self._cleaner: Cleaner | None = None
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()

    def get_cleaner(self) -> Cleaner:
        """This thread's cleaner, built on the first clean: the offset map and the native kernels
        cost memory and load time that an idle broker need not pay."""
        if self._cleaner is None:
            self._cleaner = self.service.new_cleaner(self.thread_id)
        return self._cleaner

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                cleaned = self.service.run_once(self)
                if not cleaned and not self.stop_event.is_set():
                    self.wake_event.wait(self.service.settings.backoff_ms / 1000.0)
                    self.wake_event.clear()
        except BaseException:
            logger.exception("%s died", self.name)
            self.service.metrics.mark_thread_dead(self.thread_id)
            raise


class LogCleaner:
    """The cleaner threads of one data directory, and the operations the broker calls on them."""

    def __init__(
        self,
        config: BrokerConfig,
        logs: Callable[[], Mapping[TopicPartition, PartitionLog]],
        data_dir: Path,
        clock: Clock,
        readers: ReaderPositions | None = None,
        *,
        kernels_ready: Callable[[], object] | None = None,
        kernels_pending: Callable[[], bool] | None = None,
    ) -> None:
        """``kernels_ready`` blocks until the native kernels are compiled (a background compile
        on a fresh install, :class:`kompakt.cleaner.warmup.BackgroundWarmup`); called before
        the first use of the kernels, so a cleaner thread loads them instead of compiling too.
        ``kernels_pending`` says whether that compile is still running, so the tools can tell a
        user why the first compaction waits."""
        #: Where the readers tombstone removal waits for are (the broker's consumer groups and
        #: backups, injected by the server: the cleaner does not import the broker). None: no hold.
        self.readers = readers
        self.settings = CleanerSettings.from_broker(config)
        self._kernels_ready = kernels_ready
        self._kernels_pending = kernels_pending
        self.clock = clock
        self._logs = logs
        self.manager = CleanerManager(
            CleanerCheckpointFile(Path(data_dir) / CLEANER_OFFSET_CHECKPOINT_FILE, clock.now_ms),
            start_ms=clock.now_ms(),
            live_partitions=lambda: list(self._logs().keys()),
        )
        self.throttler = Throttler(
            self.settings.max_io_bytes_per_second, clock, sleep_fn=self._throttle_sleep
        )
        self.metrics = CleanerMetrics(self.manager, logs=self._views, throttler=self.throttler)
        self._threads: list[CleanerThread] = []
        #: Partitions marked uncleanable because the disk was full, with the log's count of
        #: successful appends at that moment: the mark is lifted once that count grows (writes
        #: succeed again), unlike marks for other errors, which wait for an operator or a restart.
        self._disk_full_marks: dict[TopicPartition, int] = {}
        self._disk_full_lock = threading.Lock()
        self._lock = threading.RLock()
        self._on_demand: Cleaner | None = None
        self._horizons: HorizonTracker | None = None
        self._on_demand_lock = threading.Lock()
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    def _throttle_sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _views(self) -> list[LogView]:
        return [LogView(log) for log in self._logs().values()]

    @property
    def kernels_compiling(self) -> bool:
        """Whether the first compile of the native kernels is still running (a clean waits for it)."""
        return self._kernels_pending is not None and self._kernels_pending()

    def new_cleaner(self, thread_id: int) -> Cleaner:
        # The native kernels (numba) load here, with the first cleaner, not at broker startup.
        if self._kernels_ready is not None:
            self._kernels_ready()
        from kompakt.cleaner.cleaner import Cleaner
        from kompakt.cleaner.offset_map import HashedOffsetMap

        s = self.settings
        return Cleaner(
            thread_id,
            HashedOffsetMap(s.map_bytes_per_thread, s.load_factor),
            self.clock,
            throttler=self.throttler,
            check_abort=lambda topic, partition: self.manager.check_cleaning_aborted((topic, partition)),
            read_buffer_bytes=max(s.io_buffer_size // max(s.threads, 1) // 2, MIN_READ_BUFFER_BYTES),
            producer_id_expiration_ms=s.producer_id_expiration_ms,
            readers=self,
        )

    def positions(self, topic: str, partition: int, named: Collection[str]) -> PartitionReaders:
        """:class:`ReaderPositions` for the cleaners: whatever provider is installed now."""
        readers = self.readers
        if readers is None:
            return PartitionReaders()
        return readers.positions(topic, partition, named)

    def reader_report(
        self, log: PartitionLog
    ) -> tuple[PartitionReaders, TombstoneHold | None, list[ReaderRisk]]:
        """The readers of ``log``, its hold, and each group's unread tombstones (the risk report)."""
        if not log.config.compact:
            return PartitionReaders(), None, []
        readers, hold = partition_hold(self, log.topic, log.partition, log.config)
        if not readers.committed:
            return readers, hold, []
        facts = self.horizons.stamped_facts(log)
        risks = reader_risks(facts.tomb_offset, facts.tomb_horizon, facts.tomb_batch_last, readers, hold)
        return readers, hold, risks

    def startup(self) -> None:
        """Start ``log.cleaner.threads`` threads (none when ``log.cleaner.enable=false``)."""
        with self._lock:
            self._stopping.clear()
            if not self.settings.enabled:
                self.metrics.set_threads([])
                return
            self._threads = [CleanerThread(self, i) for i in range(self.settings.threads)]
            self.metrics.set_threads(t.thread_id for t in self._threads)
            for thread in self._threads:
                thread.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads; a clean in progress is abandoned at its next abort check."""
        with self._lock:
            self._stopping.set()
            for thread in self._threads:
                thread.stop_event.set()
                thread.wake_event.set()
            for thread in self._threads:
                thread.join(timeout_s)
            self._threads = []

    def reconfigure(self, config: BrokerConfig) -> None:
        """Apply dynamic cleaner configs: update the throttle rate, restart every thread."""
        new = CleanerSettings.from_broker(config)
        with self._lock:
            if new.max_io_bytes_per_second != self.settings.max_io_bytes_per_second:
                self.throttler.update_rate(new.max_io_bytes_per_second)
            self.shutdown()
            self.settings = new
            self.startup()

    def wake(self) -> None:
        """End the backoff sleep of every thread now (e.g. after compact-now or a config change)."""
        for thread in self._threads:
            thread.wake_event.set()

    @property
    def horizons(self) -> HorizonTracker:
        """Delete-horizon tracking, created on first use (it needs the native kernels)."""
        if self._horizons is None:
            if self._kernels_ready is not None:
                self._kernels_ready()
            from kompakt.cleaner.horizons import HorizonTracker

            self._horizons = HorizonTracker()
        return self._horizons

    @property
    def thread_count(self) -> int:
        return len(self._threads)

    @property
    def dead_thread_count(self) -> int:
        return sum(1 for t in self._threads if not t.is_alive())

    # ------------------------------------------------------------------ one iteration

    def run_once(self, worker: Cleaner | CleanerThread) -> bool:
        """One iteration of a cleaner thread; True if a log was cleaned (so no backoff).

        ``worker`` is a cleaner thread (whose cleaner is built on its first clean) or, in tests
        and tools, a :class:`Cleaner` directly.
        """
        now_ms = self.clock.now_ms()
        self._lift_disk_full_marks()
        views = self._views()
        thread_id = worker.thread_id
        try:
            selection = self.manager.grab_filthiest_compacted_log(
                views, now_ms, delete_horizons=self._delete_horizons(views)
            )
        except SelectionError as exc:
            self.manager.mark_uncleanable(exc.topic_partition, str(exc.__cause__ or exc))
            logger.warning("Marking %s-%s as uncleanable: %s", *exc.topic_partition, exc)
            return False
        self.metrics.record_selection(thread_id, selection.max_compaction_delay_ms)
        chosen = selection.chosen
        cleaned = chosen is not None
        if chosen is not None:
            first_dirty = chosen.first_dirty_offset
            if not (chosen.must_clean or chosen.ratio_eligible):
                # Eligible only for expired tombstones: nothing may be dirty, so re-clean the
                # whole cleanable range from the log start (beyond Kafka, issue 7).
                first_dirty = chosen.log.log_start_offset
            cleaner = worker.get_cleaner() if isinstance(worker, CleanerThread) else worker
            self._clean_chosen(cleaner, chosen.log.log, first_dirty, chosen.first_uncleanable_offset)
        self._maintain(views, now_ms)
        return cleaned

    def _delete_horizons(self, views: list[LogView]) -> dict[TopicPartition, int | None]:
        """Each eligible compacted log's earliest removal time: its earliest governing delete
        horizon, or for a batch the readers hold, the end of the maximum hold (so a held log is
        not re-cleaned in a loop). A log whose files cannot be read is marked uncleanable here
        (it would fail its clean the same way)."""
        horizons: dict[TopicPartition, int | None] = {}
        for view in views:
            tp = (view.topic, view.partition)
            if not view.config.compact or self.manager.is_uncleanable(tp):
                continue
            try:
                facts = self.horizons.stamped_facts(view.log)
                if not len(facts.batch_horizon):
                    horizons[tp] = None  # nothing stamped: no reader to ask
                    continue
                hold = partition_hold(self, view.topic, view.partition, view.config)[1]
                horizons[tp] = earliest_removal_ms(facts.batch_horizon, facts.batch_last, hold)
            except Exception as exc:  # noqa: BLE001 - KIP-346: one bad partition must not stop the thread
                self.manager.mark_uncleanable(tp, f"{type(exc).__name__}: {exc}")
        return horizons

    def _clean_chosen(self, cleaner: Cleaner, log: PartitionLog, first_dirty: int, uncleanable: int) -> None:
        tp = (log.topic, log.partition)
        end_offset = first_dirty
        try:
            result = cleaner.clean(log, first_dirty, uncleanable)
            end_offset = result.end_offset
            self._record(cleaner, log, first_dirty, result)
        except CleaningAbortedError:
            logger.info("Cleaning of %s-%s was aborted", *tp)
        except Exception as exc:  # noqa: BLE001 - KIP-346: one bad partition must not stop the thread
            reason = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "Unexpected exception thrown when cleaning log %s-%s. Marking its partition (%s-%s) "
                "as uncleanable: %s",
                *tp,
                *tp,
                reason,
            )
            self.manager.mark_uncleanable(tp, reason)
            if _caused_by_full_disk(exc):
                with self._disk_full_lock:
                    self._disk_full_marks[tp] = log.appends_written
        finally:
            self.manager.done_cleaning(tp, end_offset)

    def _lift_disk_full_marks(self) -> None:
        """Clear the uncleanable mark of partitions that failed on a full disk once an append to
        them succeeds again (the space is back); other marks stay."""
        with self._disk_full_lock:
            if not self._disk_full_marks:
                return
            logs = self._logs()
            for tp, appends in list(self._disk_full_marks.items()):
                log = logs.get(tp)
                if log is None:
                    del self._disk_full_marks[tp]
                elif log.appends_written > appends and log.write_error is None:
                    del self._disk_full_marks[tp]
                    logger.info("Writes to %s-%s succeed again: cleaning it resumes", *tp)
                    self.manager.clear_uncleanable(tp)

    def _record(self, cleaner: Cleaner, log: PartitionLog, first_dirty: int, result: CleanResult) -> None:
        self.metrics.record_clean(
            cleaner.thread_id,
            (log.topic, log.partition),
            first_dirty,
            result.end_offset,
            result.stats,
            self.clock.now_ms(),
        )
        self._log_clean(cleaner, log, first_dirty, result)

    @staticmethod
    def _log_clean(cleaner: Cleaner, log: PartitionLog, first_dirty: int, result: CleanResult) -> None:
        """Kafka's per-clean INFO message, one per pass (``Cleaner.doClean``)."""
        logger.info(
            "%s",
            format_clean_log_line(
                cleaner.thread_id,
                f"{log.topic}-{log.partition}",
                first_dirty,
                result.end_offset,
                result.stats,
            ),
        )

    def _maintain(self, views: list[LogView], now_ms: int) -> None:
        """Compacted-log retention and forced rolls (steps 3-4 of the loop)."""
        deletable = self.manager.deletable_logs(views)
        try:
            for view in deletable:
                try:
                    view.log.delete_old_segments(now_ms, include_retention=view.config.delete)
                except Exception as exc:  # noqa: BLE001 - marked uncleanable, thread goes on
                    self.manager.mark_uncleanable(
                        (view.topic, view.partition), f"{type(exc).__name__}: {exc}"
                    )
        finally:
            self.manager.done_deleting((v.topic, v.partition) for v in deletable)
        for view in segments_to_force_roll(
            now_ms, [v for v in views if not self.manager.is_uncleanable((v.topic, v.partition))]
        ):
            logger.info(
                "Rolling the active segment of %s-%s: its first record is older than max.compaction.lag.ms",
                view.topic,
                view.partition,
            )
            view.log.roll(now_ms)
        self.manager.prune_uncleanable(list(self._logs().keys()))

    # ------------------------------------------------------------------ operations for the broker

    def abort_cleaning(self, tp: TopicPartition, timeout_s: float | None = 30.0) -> None:
        """Abort any clean of ``tp`` and wait until it has stopped (partition deleted)."""
        self.manager.abort_cleaning(tp, timeout_s)

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = 30.0) -> None:
        self.manager.abort_and_pause_cleaning(tp, timeout_s)

    def resume_cleaning(self, tps: list[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def partition_deleted(self, tp: TopicPartition) -> None:
        """Forget a deleted partition: abort its clean, drop its checkpoint and metrics."""
        try:
            self.manager.abort_cleaning(tp, 30.0)
        finally:
            self.manager.remove_checkpoint(tp)
            self.manager.clear_uncleanable(tp)
            self.metrics.remove_partition(tp)

    def compact_now(
        self, log: PartitionLog, *, from_start: bool = True, timeout_s: float | None = 60.0
    ) -> list[CleanResult]:
        """Clean ``log`` now, whatever its dirty ratio, in the caller's thread.

        With ``from_start`` the whole log is re-cleaned from its start offset, which dedupes the
        dirty part and also removes tombstones and markers whose delete horizon has passed;
        otherwise it starts at the checkpoint. The cleaner threads skip the partition meanwhile.
        """
        from kompakt.cleaner.compact_now import compact_log

        tp = (log.topic, log.partition)
        self.manager.begin_cleaning(tp, timeout_s)
        start = log.log_start_offset
        if not from_start:
            start = self.manager.all_cleaner_checkpoints().get(tp, start)
        end_offset = start
        try:
            with self._on_demand_lock:
                if self._on_demand is None:
                    self._on_demand = self.new_cleaner(-1)
                results = compact_log(self._on_demand, log, start)
            first_dirty = start
            for result in results:
                self._log_clean(self._on_demand, log, first_dirty, result)
                first_dirty = result.end_offset
            if results:
                # One compact-now is one clean to the operator: its record (the partition's last
                # clean, its metrics) describes the passes combined, not only the last pass.
                self.metrics.record_clean(
                    self._on_demand.thread_id,
                    tp,
                    start,
                    results[-1].end_offset,
                    combine_passes([r.stats for r in results]),
                    self.clock.now_ms(),
                )
            end_offset = (
                results[-1].end_offset
                if results
                else self.manager.all_cleaner_checkpoints().get(tp, log.log_start_offset)
            )
            return results
        finally:
            self.manager.done_cleaning(tp, end_offset)

    def retry_uncleanable(self, tp: TopicPartition) -> bool:
        """Clear the uncleanable mark of ``tp`` so the next pass tries it again (beyond Kafka)."""
        cleared = self.manager.clear_uncleanable(tp)
        self.wake()
        return cleared


def _caused_by_full_disk(exc: BaseException) -> bool:
    """Whether ``exc`` or an exception it was raised from says the disk is full."""
    seen: BaseException | None = exc
    while seen is not None:
        if is_disk_full(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
