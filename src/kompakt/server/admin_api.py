"""The admin operations of a running broker, as plain synchronous functions returning JSON data.

This is the sans-IO core of the admin HTTP endpoint (``admin_http.py`` only parses HTTP and runs
these in worker threads) and of the in-process pytest fixture (``kompakt.testing``), so both show
the same numbers and do the same things. Every method may block (segment metadata is read under
the partition lock, a clean rewrites segments) and must not run on the event loop.

Failures are :class:`AdminApiError` with an HTTP status: 404 for an unknown topic or partition,
400 for a bad argument, 409 when the broker's state forbids the operation (the clock is not
manual, the topic is not compacted).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kompakt.broker.context import Broker
from kompakt.cleaner.adapter import LogView
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.planning import cleanable_offsets, log_to_clean
from kompakt.cleaner.readers import PartitionReaders
from kompakt.cleaner.stats import combine_passes
from kompakt.clock import Clock, FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.records.record import decode_records
from kompakt.server.request_metrics import RequestMetrics

if TYPE_CHECKING:
    from kompakt.cleaner.cleaner import CleanResult
    from kompakt.table.partition import LiveTable
    from kompakt.table.store import TableStore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class AdminApiError(Exception):
    """An admin operation refused: ``status`` is the HTTP status, the message is for people."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as stored in a partition's segments (tombstones have ``value is None``)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def is_tombstone(self) -> bool:
        return self.key is not None and self.value is None


class HasBroker(Protocol):
    """Where the admin API finds the broker (a started :class:`~kompakt.server.app.BrokerApp`)."""

    @property
    def broker(self) -> Broker | None: ...


def _clean_stats(results: Sequence[CleanResult], seconds: float) -> dict[str, Any]:
    """A compact-now's statistics: its passes combined (a later pass reads again what an earlier
    one wrote, so a sum would count those records twice), describing the log before and after."""
    stats = combine_passes([r.stats for r in results]) if results else None
    return {
        "passes": len(results),
        "end_offset": results[-1].end_offset if results else None,
        "bytes_read": stats.bytes_read if stats else 0,
        "bytes_written": stats.bytes_written if stats else 0,
        "records_read": stats.messages_read if stats else 0,
        "records_written": stats.messages_written if stats else 0,
        "tombstones_removed": stats.tombstones_removed if stats else 0,
        "invalid_records": stats.invalid_messages_read if stats else 0,
        "markers_removed": stats.markers_removed if stats else 0,
        "aborted_records_removed": stats.aborted_records_removed if stats else 0,
        "seconds": round(seconds, 6),
    }


class AdminApi:
    """Admin operations over one broker. Thread-safe; every method may block."""

    def __init__(
        self,
        broker: Broker,
        clock: Clock,
        *,
        request_metrics: RequestMetrics | None = None,
        log_dir: str = "",
    ) -> None:
        self.broker = broker
        self.clock = clock
        self.request_metrics = request_metrics
        self.log_dir = log_dir
        self._background: set[threading.Thread] = set()
        self._background_lock = threading.Lock()
        self._metrics_lock = threading.Lock()
        self._metrics_text: Callable[[], bytes] | None = None
        #: Called with ``(log, "before")`` and ``(log, "after")`` around each compact-now of a
        #: partition (the log map keeps a sample of records from both sides); errors are logged.
        self.compact_hooks: list[Callable[[PartitionLog, str], None]] = []
        self._tables: TableStore | None = None
        self._tables_lock = threading.Lock()
        #: The Kafka listeners as the server bound them (set by the app once it listens):
        #: name, security protocol, bound and advertised address each.
        self.kafka_listeners: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ lookups

    @property
    def cleaner(self) -> LogCleaner | None:
        return self.broker.cleaner

    @property
    def manual_clock(self) -> FakeClock | None:
        return self.clock if isinstance(self.clock, FakeClock) else None

    def partition_logs(self, topic: str | None, partition: int | None = None) -> list[PartitionLog]:
        """The logs of ``topic`` (all topics when None), one partition when given; 404 if unknown."""
        logs = self.broker.logs.logs()
        if topic is None:
            return [logs[tp] for tp in sorted(logs)]
        meta = self.broker.logs.topics().get(topic)
        if meta is None:
            raise AdminApiError(404, f"unknown topic {topic!r}")
        wanted = range(meta.partitions) if partition is None else [partition]
        found = []
        for p in wanted:
            partition_log = logs.get((topic, p))
            if partition_log is None:
                raise AdminApiError(404, f"unknown partition {topic}-{p} (the topic has {meta.partitions})")
            found.append(partition_log)
        return found

    # ------------------------------------------------------------------ partitions

    def partitions(self, topic: str | None = None) -> dict[str, Any]:
        """Every partition (or every partition of ``topic``) with offsets, sizes, segments and
        cleaning state, as ``{"now_ms", "partitions": [...]}``."""
        now_ms = self.clock.now_ms()
        logs = self.partition_logs(topic)
        checkpoints: dict[TopicPartition, int] = {}
        uncleanable: dict[TopicPartition, str] = {}
        last_cleans: dict[TopicPartition, Any] = {}
        cleaner = self.cleaner
        if cleaner is not None:
            checkpoints = cleaner.manager.all_cleaner_checkpoints()
            uncleanable = cleaner.manager.uncleanable()
            last_cleans = cleaner.metrics.per_partition()
        out = []
        for partition_log in logs:
            tp = (partition_log.topic, partition_log.partition)
            out.append(
                self._partition_info(
                    partition_log, now_ms, checkpoints.get(tp), uncleanable.get(tp), last_cleans.get(tp)
                )
            )
        compiling = cleaner is not None and cleaner.kernels_compiling
        return {"now_ms": now_ms, "kernels_compiling": compiling, "partitions": out}

    def _partition_info(
        self,
        partition_log: PartitionLog,
        now_ms: int,
        checkpoint: int | None,
        uncleanable_reason: str | None,
        last_clean: Any,
    ) -> dict[str, Any]:
        view = LogView(partition_log)
        segments = view.segment_infos()
        config = partition_log.config
        tp = (partition_log.topic, partition_log.partition)
        info: dict[str, Any] = {
            "topic": partition_log.topic,
            "partition": partition_log.partition,
            "log_start_offset": partition_log.log_start_offset,
            "log_end_offset": partition_log.log_end_offset,
            "high_watermark": partition_log.high_watermark,
            "last_stable_offset": partition_log.last_stable_offset,
            "size_bytes": sum(s.size_bytes for s in segments),
            "segment_count": len(segments),
            "cleanup_policy": sorted(config.cleanup_policy),
            "min_cleanable_dirty_ratio": config.min_cleanable_dirty_ratio,
            "first_dirty_offset": None,
            "first_uncleanable_offset": None,
            "clean_bytes": None,
            "cleanable_bytes": None,
            "dirty_ratio": None,
            "cleaning_state": "idle",
            "uncleanable": uncleanable_reason is not None,
            "uncleanable_reason": uncleanable_reason,
            "last_clean": dataclasses.asdict(last_clean) if last_clean is not None else None,
            "segments": [
                {
                    "base_offset": s.base_offset,
                    "next_offset": s.next_offset,
                    "size_bytes": s.size_bytes,
                    "largest_timestamp_ms": s.largest_timestamp_ms,
                    "active": i == len(segments) - 1,
                }
                for i, s in enumerate(segments)
            ],
        }
        cleaner = self.cleaner
        if cleaner is not None:
            state = cleaner.manager.cleaning_state(tp)
            if state is not None:
                info["cleaning_state"] = str(state)
        if config.compact and segments:
            offsets = cleanable_offsets(view, checkpoint, now_ms, segments)
            ltc = log_to_clean(
                view,
                offsets.first_dirty_offset,
                offsets.first_uncleanable_dirty_offset,
                now_ms,
                segments=segments,
            )
            info.update(
                first_dirty_offset=ltc.first_dirty_offset,
                first_uncleanable_offset=ltc.first_uncleanable_offset,
                clean_bytes=ltc.clean_bytes,
                cleanable_bytes=ltc.cleanable_bytes,
                dirty_ratio=ltc.cleanable_ratio,
            )
        return info

    # ------------------------------------------------------------------ explain

    def explain(self, topic: str, partition: int | None = None) -> dict[str, Any]:
        """The explain report of each partition of ``topic``, live: ``{"now_ms", "partitions": [...]}``."""
        logs = self.partition_logs(topic, partition)
        now_ms = self.clock.now_ms()
        reports = [explain_live(self.broker, lg, self.cleaner, now_ms) for lg in logs]
        return {"now_ms": now_ms, "partitions": reports}

    # ------------------------------------------------------------------ readers

    def readers(self, topic: str | None = None) -> dict[str, Any]:
        """The reader hold and the unread-tombstone report of every compacted partition (or of
        ``topic``'s): for each group with a committed offset there, how many stamped tombstones it
        has not read, the first one's offset and when it may be removed."""
        from kompakt.inspect.explain_report import iso_ms  # numpy: not on the start path

        now_ms = self.clock.now_ms()
        cleaner = self.cleaner
        out = []
        for partition_log in self.partition_logs(topic):
            config = partition_log.config
            if not config.compact or cleaner is None:
                continue
            readers, hold, risks = cleaner.reader_report(partition_log)
            out.append(
                {
                    "topic": partition_log.topic,
                    "partition": partition_log.partition,
                    "retain_for_groups": list(config.kompakt_tombstone_retain_for_groups),
                    "max_hold_ms": config.kompakt_tombstone_max_hold_ms,
                    "hold_offset": hold.offset if hold is not None else None,
                    "holders": [{"group": g, "offset": o} for g, o in sorted(readers.holding.items())],
                    "groups": [
                        {
                            **risk.to_dict(),
                            "seconds_until_removal": (
                                max(0.0, (risk.removal_ms - now_ms) / 1000.0)
                                if risk.removal_ms is not None
                                else None
                            ),
                            "detail": risk.sentence(
                                partition_log.topic, partition_log.partition, iso_ms(risk.removal_ms)
                            ),
                        }
                        for risk in risks
                    ],
                }
            )
        return {"now_ms": now_ms, "partitions": out}

    # ------------------------------------------------------------------ roll, compact, retry

    def roll(self, topic: str, partition: int | None = None) -> dict[str, Any]:
        """Roll the active segment of each partition (no-op for an empty active segment)."""
        now_ms = self.clock.now_ms()
        rolled = []
        for partition_log in self.partition_logs(topic, partition):
            before = partition_log.active_segment.base_offset
            after = partition_log.roll(now_ms).base_offset
            rolled.append(
                {
                    "topic": partition_log.topic,
                    "partition": partition_log.partition,
                    "rolled": after != before,
                    "active_base_offset": after,
                }
            )
        if self.cleaner is not None:
            self.cleaner.wake()
        return {"now_ms": now_ms, "partitions": rolled}

    def _compactable(self, topic: str, partition: int | None) -> tuple[LogCleaner, list[PartitionLog]]:
        logs = self.partition_logs(topic, partition)
        cleaner = self.cleaner
        if cleaner is None:
            raise AdminApiError(409, "this broker runs no log cleaner")
        for partition_log in logs:
            if not partition_log.config.compact:
                policy = ",".join(sorted(partition_log.config.cleanup_policy)) or '""'
                raise AdminApiError(
                    409, f"topic {topic!r} has cleanup.policy={policy}; only compacted topics are cleaned"
                )
        return cleaner, logs

    def compact(self, topic: str, partition: int | None = None) -> dict[str, Any]:
        """Compact each partition now from its log start, in this thread; the clean statistics."""
        cleaner, logs = self._compactable(topic, partition)
        return {"topic": topic, "partitions": [self._compact_one(cleaner, lg) for lg in logs]}

    def _compact_one(self, cleaner: LogCleaner, partition_log: PartitionLog) -> dict[str, Any]:
        self._run_compact_hooks(partition_log, "before")
        started = self.clock.monotonic_ms()
        try:
            results = cleaner.compact_now(partition_log, from_start=True)
        except TimeoutError as exc:
            raise AdminApiError(409, f"{partition_log.name} is busy: {exc}") from exc
        seconds = (self.clock.monotonic_ms() - started) / 1000
        self._run_compact_hooks(partition_log, "after")
        return {"partition": partition_log.partition, **_clean_stats(results, seconds)}

    def _run_compact_hooks(self, partition_log: PartitionLog, phase: str) -> None:
        for hook in list(self.compact_hooks):
            try:
                hook(partition_log, phase)
            except Exception:
                log.exception("compact hook %r (%s) failed for %s", hook, phase, partition_log.name)

    def compact_in_background(self, topic: str, partition: int | None = None) -> dict[str, Any]:
        """Start compacting each partition in a worker thread; returns at once (HTTP 202)."""
        cleaner, logs = self._compactable(topic, partition)

        def run() -> None:
            try:
                for partition_log in logs:
                    self._compact_one(cleaner, partition_log)
            except Exception:
                log.exception("background compaction of %s failed", topic)
            finally:
                with self._background_lock:
                    self._background.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=f"kompakt-compact-now-{topic}", daemon=True)
        with self._background_lock:
            self._background.add(thread)
        thread.start()
        return {"topic": topic, "partitions": [lg.partition for lg in logs], "status": "started"}

    def wait_background(self, timeout_s: float = 30.0) -> None:
        """Join the background compactions (called before the broker closes its logs)."""
        with self._background_lock:
            threads = list(self._background)
        for thread in threads:
            thread.join(timeout_s)

    def retry(self, topic: str, partition: int) -> dict[str, Any]:
        """Clear the uncleanable mark of one partition so the next cleaner pass tries it again."""
        self.partition_logs(topic, partition)
        cleaner = self.cleaner
        if cleaner is None:
            raise AdminApiError(409, "this broker runs no log cleaner")
        reason = cleaner.manager.uncleanable().get((topic, partition))
        cleared = cleaner.retry_uncleanable((topic, partition))
        return {"topic": topic, "partition": partition, "cleared": cleared, "previous_reason": reason}

    # ------------------------------------------------------------------ clock

    def _require_manual(self) -> FakeClock:
        clock = self.manual_clock
        if clock is None:
            raise AdminApiError(
                409, "the broker runs on the system clock; start it with `kompakt serve --clock manual`"
            )
        return clock

    def listeners(self) -> dict[str, Any]:
        """The broker's Kafka listeners: what each binds, speaks and advertises."""
        return {"listeners": list(self.kafka_listeners)}

    def clock_show(self) -> dict[str, Any]:
        clock = self._require_manual()
        return {"mode": "manual", "now_ms": clock.now_ms()}

    def clock_advance(self, ms: int) -> dict[str, Any]:
        """Move the manual clock forward by ``ms`` and wake the cleaner so it sees the new time."""
        clock = self._require_manual()
        if ms < 0:
            raise AdminApiError(400, f"the clock never goes backwards (asked to advance by {ms} ms)")
        now_ms = clock.advance(ms)
        if self.cleaner is not None:
            self.cleaner.wake()
        return {"mode": "manual", "now_ms": now_ms, "advanced_ms": ms}

    # ------------------------------------------------------------------ records (tests)

    def records(self, topic: str, partition: int = 0, *, include_control: bool = False) -> list[StoredRecord]:
        """Every record in the partition's segments, tombstones and aborted data included, in
        offset order; transaction markers only with ``include_control``."""
        (partition_log,) = self.partition_logs(topic, partition)
        out: list[StoredRecord] = []
        with partition_log.lock:
            for segment in partition_log.segments.values():
                for _, batch in segment.iter_batches():
                    if batch.is_control and not include_control:
                        continue
                    out.extend(
                        StoredRecord(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                        for r in decode_records(batch)
                    )
        return out

    # ------------------------------------------------------------------ tables

    @property
    def tables(self) -> TableStore:
        """The live tables (created with the first lookup: they bring the native kernels)."""
        with self._tables_lock:
            if self._tables is None:
                from kompakt.table.store import TableStore

                def checkpoints() -> dict[TopicPartition, int]:
                    cleaner = self.cleaner
                    return dict(cleaner.manager.all_cleaner_checkpoints()) if cleaner is not None else {}

                self._tables = TableStore(checkpoints)
            return self._tables

    def refresh_tables(self) -> None:
        """Catch every table in use up with its log (a no-op until the first lookup)."""
        if self._tables is not None:
            self._tables.refresh_all(self.broker.logs.logs())

    def _live_tables(self, topic: str, partition: int | None = None) -> list[LiveTable]:
        store = self.tables
        return [store.table(lg) for lg in self.partition_logs(topic, partition)]

    def table_lookup(
        self,
        topic: str,
        key: bytes,
        *,
        partition: int | None = None,
        partitioner: str = "murmur2",
        as_of_ms: int | None = None,
    ) -> dict[str, Any]:
        """The latest record of ``key`` in ``topic``; ``found`` is false when absent or tombstoned."""
        from kompakt.table import service
        from kompakt.table.views import ArgumentError

        tables = self._live_tables(topic)
        try:
            return service.lookup(
                topic,
                tables,
                key,
                partition=partition,
                partitioner=partitioner,
                partition_count=len(tables),
                as_of_ms=as_of_ms,
            )
        except ArgumentError as exc:
            raise AdminApiError(400, str(exc)) from None
        except LookupError as exc:
            raise AdminApiError(404, f"{topic}: {exc}") from None

    def table_scan(
        self,
        topic: str,
        *,
        partition: int | None = None,
        prefix: bytes = b"",
        include_tombstones: bool = False,
        from_partition: int = 0,
        from_offset: int = 0,
        limit: int = 1000,
        as_of_ms: int | None = None,
    ) -> dict[str, Any]:
        """One page of the latest record per key (see :func:`kompakt.table.service.scan_page`)."""
        from kompakt.table import service
        from kompakt.table.views import ArgumentError

        try:
            return service.scan_page(
                topic,
                self._live_tables(topic, partition),
                prefix=prefix,
                include_tombstones=include_tombstones,
                from_partition=from_partition,
                from_offset=from_offset,
                limit=limit,
                as_of_ms=as_of_ms,
            )
        except ArgumentError as exc:
            raise AdminApiError(400, str(exc)) from None

    def table_counts(self, topic: str, partition: int | None = None) -> dict[str, Any]:
        """Live keys and tombstones per partition, and the memory of the index."""
        from kompakt.table import service

        return service.counts(topic, self._live_tables(topic, partition))

    # ------------------------------------------------------------------ metrics

    def metrics_text(self) -> bytes:
        """The Prometheus text exposition of every metric.

        prometheus_client and the collector load on the first scrape, not at broker start.
        """
        with self._metrics_lock:
            if self._metrics_text is None:
                from kompakt.server.admin_metrics import exposition

                self._metrics_text = exposition(self)
        return self._metrics_text()


def explain_live(
    broker: Broker, partition_log: PartitionLog, cleaner: LogCleaner | None, now_ms: int
) -> dict[str, Any]:
    """The explain engine's report for a live log, as JSON data.

    The engine reads segment files; the log's lock is held meanwhile so that a roll, a retention
    delete or a cleaner swap cannot remove a file under it (appends wait for the few milliseconds
    a report takes). The cleaner checkpoint and any uncleanable mark come from the running cleaner,
    the configs from the topic's overrides on the live broker config.
    """
    tp = (partition_log.topic, partition_log.partition)
    checkpoint = cleaner.manager.all_cleaner_checkpoints().get(tp) if cleaner is not None else None
    reason = cleaner.manager.uncleanable().get(tp) if cleaner is not None else None
    meta = broker.logs.topics().get(partition_log.topic)
    overrides = dict(meta.configs) if meta is not None else {}
    # The explain engine counts keys with the native kernels: load them on first use only.
    from kompakt.inspect.explain import ConfigInput, PartitionSource, SegmentSource, explain_partition

    configs = ConfigInput(
        overrides=overrides,
        override_origins=dict.fromkeys(overrides, "topic config"),
        broker=broker.broker_config,
        broker_origin="broker config",
    )
    with partition_log.lock:
        source = PartitionSource(
            topic=partition_log.topic,
            partition=partition_log.partition,
            segments=tuple(
                SegmentSource(seg.base_offset, seg.log_path, seg.size, seg.created_ms)
                for seg in partition_log.segments.values()
            ),
            log_start_offset=partition_log.log_start_offset,
            cleaner_checkpoint=checkpoint,
            uncleanable_reason=reason,
            readers=readers_of(partition_log, cleaner),
        )
        return explain_partition(source, configs, now_ms).to_dict()


def readers_of(partition_log: PartitionLog, cleaner: LogCleaner | None) -> PartitionReaders | None:
    """The live reader positions of a partition (None without a cleaner: explain then assumes
    the named groups have read nothing, as offline)."""
    if cleaner is None:
        return None
    config = partition_log.config
    return cleaner.positions(
        partition_log.topic, partition_log.partition, config.kompakt_tombstone_retain_for_groups
    )
