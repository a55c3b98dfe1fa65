"""Copying topics from a running cluster into a backup (snapshot, continuous, incremental).

One run:

1. check the storage is writable and the cluster reachable, select the topics (a literal name
   that does not exist is an error before anything is written), read their configs;
2. load the manifest of ``backup_id`` if there is one: each partition resumes at its
   ``end_offset`` (the offset store), so a later run copies only new records and a run after an
   interruption continues where the last committed file ended;
3. read the watermarks; snapshot mode stops each partition at the high watermark seen now,
   continuous mode keeps polling until ``stop`` is set (Ctrl-C in the CLI);
4. read the partitions, ``max_concurrent_partitions`` of them at a time, and store their batches
   at the original offsets; offsets the source no longer has become gaps;
5. commit each segment file, then the manifest; at the end mark the run and the backup complete.

Reading is kompakt's own ``read_committed`` Fetch (:mod:`kompakt.backup.wire`): the batches are
stored as the source holds them, checked (CRC-32C) and scanned natively but never decoded record by
record (:mod:`kompakt.backup.batches`), each partition by one of ``max_concurrent_partitions``
threads with its own connection to the leader. A segment file is written as it grows (into a
temporary file beside it, where the storage is a directory) and renamed into place when it is
committed, so the writes overlap the reads instead of following them. A source that needs TLS or
SASL is read by a confluent-kafka consumer instead, which rebuilds the batches from the records it
returns.

While it runs, a backup registers as a reader (``backup.register_reader``, on by default): it
commits the position it has stored for each compacted partition as the group
``kompakt-backup-<backup_id>`` (a plain commit, no membership), first at its start and then after
every segment file, and deletes the group when the run ends, whatever the outcome. A kompakt
broker holds tombstone and marker removal for such a group (``kompakt.broker.readers``, bounded by
``kompakt.tombstone.max.hold.ms``), so a backup never misses a delete that was in the log when it
read past its start; on another cluster the group is only a committed offset, removed at the end.

A failure or an interrupt first commits what was consumed (every consumed record is a complete
record), then leaves the manifest ``incomplete``: never a backup that claims more than it holds.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from kompakt.backup import wire
from kompakt.backup.batches import fetch_end, ingest
from kompakt.backup.config import BackupConfig
from kompakt.backup.errors import BackupError
from kompakt.backup.kafka import KAFKA, Client
from kompakt.backup.manifest import (
    STATUS_COMPLETE,
    STATUS_INCOMPLETE,
    FileEntry,
    Manifest,
    PartitionEntry,
    RunEntry,
    TopicEntry,
    load_manifest,
    manifest_key,
    save_manifest,
)
from kompakt.backup.progress import NoProgress, PartitionProgress, Progress
from kompakt.backup.segment import CODECS, BatchSegment, SegmentBuilder, segment_path
from kompakt.backup.storage import StagedObject, Storage
from kompakt.clock import Clock, SystemClock
from kompakt.lazy_import import LazyModule
from kompakt.records.batch import TimestampType

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyModule("numpy", globals(), "np")

TopicPartition = tuple[str, int]
CONSUME_BATCH = 10_000
PROGRESS_EVERY_S = 0.25
PARTITION_EOF = -191  # KafkaError._PARTITION_EOF
#: kompakt.broker.readers.BACKUP_READER_PREFIX (backup does not import the broker: it works
#: against any Kafka-compatible cluster).
BACKUP_GROUP_PREFIX = "kompakt-backup-"
#: zstd's level when ``compression_level`` is not set: its fastest level that still entropy-codes.
#: zstd's own default (3) took 2-8x the time of level 1 on the benchmark's values for a few per
#: cent of space, and the codec's time is most of a compressed backup's.
DEFAULT_LEVELS = {"zstd": 1}
FETCH_MAX_BYTES = 64 * 1024 * 1024
#: What one Fetch asks of each partition. 4 MiB was tried (the answers' buffers are used again
#: sooner, so fewer new pages): the client used 4 % less CPU per MB, the broker 15 % more (four
#: times the requests), and the rates were the same within the noise (bench, 2026-12-05).
PARTITION_FETCH_MAX_BYTES = 16 * 1024 * 1024
#: Room above ``fetch_max_bytes`` for an answer's first batches, each allowed past the limits.
RESPONSE_HEADROOM_BYTES = 32 * 1024 * 1024


@dataclass
class _PartitionRun:
    """One partition during a run: where it is, where it stops, what is not yet committed."""

    entry: PartitionEntry
    builder: SegmentBuilder | BatchSegment
    progress: PartitionProgress
    next_offset: int
    """The next offset expected from the consumer (everything below is handled)."""
    target: int | None
    """Snapshot: stop here (the high watermark at start); None in continuous mode."""
    pending_gaps: list[tuple[int, int]] = field(default_factory=list)
    done: bool = False
    failed: bool = False
    retention_ms: int | None = None
    """``delete.retention.ms`` of a compacted topic (its tombstone batches get a horizon)."""
    fetch_offset: int = -1
    """The fast path's next Fetch position: after the last whole batch read (>= ``next_offset``)."""
    partition_max_bytes: int = PARTITION_FETCH_MAX_BYTES


@dataclass
class BackupResult:
    manifest: Manifest
    run: RunEntry
    partitions: list[dict[str, Any]]
    seconds: float

    @property
    def source_bytes(self) -> int:
        """Key and value bytes read from the source in this run (what the rate is measured on:
        the stored bytes are compressed, so a rate of them says how well zstd did, not how fast
        the backup read)."""
        return sum(int(p.get("bytes", 0)) for p in self.partitions)

    def summary(self) -> dict[str, Any]:
        read = self.source_bytes
        return {
            "backup_id": self.manifest.backup_id,
            "run": self.run.run,
            "status": self.manifest.status,
            "records": self.run.records,
            "bytes": self.run.bytes,
            "source_bytes": read,
            "seconds": round(self.seconds, 3),
            "mb_per_s": round(read / 1e6 / self.seconds, 2) if self.seconds > 0 else None,
        }


#: Commit errors of a coordinator that is moving or loading: worth another try.
_RETRIABLE_COMMIT = frozenset(
    {
        KAFKA.KafkaError.NOT_COORDINATOR,
        KAFKA.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KAFKA.KafkaError.COORDINATOR_NOT_AVAILABLE,
        KAFKA.KafkaError.REQUEST_TIMED_OUT,
    }
)
_COMMIT_BACKOFF_S = 0.1


class BackupRun:
    """Everything one ``kompakt backup`` run needs; :meth:`run` does it."""

    def __init__(
        self,
        config: BackupConfig,
        *,
        storage: Storage | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.storage = storage if storage is not None else config.storage.open()
        self.progress = progress or NoProgress()
        self.stop = stop or threading.Event()
        self.clock = clock or SystemClock()
        self.client = Client(config.bootstrap_servers, config.timeout_s, config.client_config)
        self.codec = CODECS[config.compression]
        self.level = (
            config.compression_level
            if config.compression_level is not None
            else DEFAULT_LEVELS.get(config.compression)
        )
        self.fast = wire.plaintext(config.client_config)
        """Read with kompakt's own Fetch (a source that needs TLS or SASL is read by a consumer)."""
        self._lock = threading.RLock()
        """Held while the manifest, the run's totals or the reader registration change."""
        self._registered: set[TopicPartition] = set()
        self._consumer_handle: Any = None

    # ------------------------------------------------------------------ setup

    def _select_topics(self, available: dict[str, int]) -> dict[str, int]:
        selection = self.config.topics
        missing = [t for t in selection.literal_names() if t not in available]
        if missing:
            raise BackupError(
                f"topic(s) {', '.join(map(repr, missing))} do not exist at {self.client.bootstrap}"
            )
        chosen = {t: n for t, n in available.items() if selection.matches(t)}
        if not chosen:
            raise BackupError(f"no topic at {self.client.bootstrap} matches source.topics")
        return dict(sorted(chosen.items()))

    def _open_manifest(self, now_ms: int) -> Manifest:
        if self.storage.exists(manifest_key(self.config.backup_id)):
            return load_manifest(self.storage, self.config.backup_id)
        return Manifest(
            backup_id=self.config.backup_id,
            created_ms=now_ms,
            updated_ms=now_ms,
            status=STATUS_INCOMPLETE,
            source={
                "bootstrap_servers": self.config.bootstrap_servers,
                **({"cluster_id": self.config.source_cluster_id} if self.config.source_cluster_id else {}),
            },
            compression=self.config.compression,
        )

    @property
    def reader_group(self) -> str:
        """The group the run registers as a reader under (``kompakt.broker.readers``'s prefix)."""
        return f"{BACKUP_GROUP_PREFIX}{self.config.backup_id}"

    def _consumer(self) -> Any:
        return KAFKA.Consumer(
            self.client.config(
                **{
                    "group.id": self.reader_group,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                    "fetch.max.bytes": self.config.fetch_max_bytes or 64 * 1024 * 1024,
                    "max.partition.fetch.bytes": min(
                        16 * 1024 * 1024, self.config.fetch_max_bytes or 16 * 1024 * 1024
                    ),
                    "queued.max.messages.kbytes": 256 * 1024,
                    "fetch.wait.max.ms": 100,
                    "check.crcs": False,
                }
            )
        )

    # ------------------------------------------------------------------ the reader registration

    def _register(
        self, consumer: Any, states: Mapping[TopicPartition, _PartitionRun], manifest: Manifest
    ) -> None:
        """Commit the stored position of every compacted partition (the broker holds from there)."""
        if not self.config.register_reader:
            return
        offsets = [
            KAFKA.TopicPartition(t, p, state.entry.end_offset)
            for (t, p), state in states.items()
            if "compact" in manifest.topics[t].cleanup_policy
        ]
        if offsets:
            try:
                self._commit(consumer, offsets)
            except KAFKA.KafkaException as exc:
                raise self.client.fail("cannot register the backup as a reader", exc) from None
            self._registered = {(t.topic, t.partition) for t in offsets}

    def _commit(self, consumer: Any, offsets: list[Any]) -> None:
        """A synchronous commit, tried again while the group's coordinator moves or loads (a
        broker of a multi-broker cluster stopped, ``__consumer_offsets`` just created): the commit
        fails with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, librdkafka looks the
        coordinator up again, and the next try reaches it. Gives up after ``timeout_s``."""
        deadline = self.clock.monotonic_ms() + self.client.timeout_s * 1000
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KAFKA.KafkaException as exc:
                error = exc.args[0] if exc.args else None
                code = error.code() if isinstance(error, KAFKA.KafkaError) else None
                if code not in _RETRIABLE_COMMIT or self.clock.monotonic_ms() >= deadline:
                    raise
            time.sleep(_COMMIT_BACKOFF_S)

    def _advance_registration(self, consumer: Any, state: _PartitionRun) -> None:
        entry = state.entry
        if (entry.topic, entry.partition) not in self._registered:
            return
        try:
            self._commit(consumer, [KAFKA.TopicPartition(entry.topic, entry.partition, entry.end_offset)])
        except KAFKA.KafkaException as exc:
            # The data is safe in the backup; the broker only holds from the older position.
            self.progress.message(
                f"could not advance the reader position of {entry.topic}-{entry.partition}: {exc}"
            )

    def _unregister(self) -> None:
        """Delete the reader group: the run is over, it holds nothing any more."""
        if not self._registered:
            return
        self._registered = set()
        try:
            futures = self.client.admin.delete_consumer_groups(
                [self.reader_group], request_timeout=self.client.timeout_s
            )
            for future in futures.values():
                future.result(timeout=self.client.timeout_s)
        except Exception as exc:  # noqa: BLE001 - the backup itself succeeded or failed already
            self.progress.message(
                f"could not delete the reader group {self.reader_group} (it stops holding after "
                f"kompakt.tombstone.max.hold.ms, or delete it yourself): {exc}"
            )

    # ------------------------------------------------------------------ commits

    def _commit_file(
        self, manifest: Manifest, state: _PartitionRun, run: RunEntry, *, save: bool = True
    ) -> None:
        """Write the partition's open segment, then record it (and the gaps before it).

        The file is written (and fsynced) outside the lock, so partitions read by different
        threads write in parallel; only the manifest's update and save are serialized. A partition
        is only ever committed by the thread that reads it (or by the main thread once they stop).

        ``save=False`` records the file in the manifest without saving it: the next save, by any
        thread, writes it (a snapshot partition's last file, which the end of the run saves
        anyway; until then a run that stops reads that partition's tail again)."""
        entry = state.entry
        if state.failed:
            # Its open segment was lost with a failed write: record nothing past the last file.
            if isinstance(state.builder, BatchSegment):
                state.builder.discard()
            return
        if state.builder.empty and not state.pending_gaps and entry.end_offset >= state.next_offset:
            return  # nothing new since its last commit (a manifest save is two fsyncs under the lock)
        file = None
        if not state.builder.empty:
            built = state.builder.finish()
            path = segment_path(entry.topic, entry.partition, built.first_offset)
            try:
                self.storage.put(f"{manifest.backup_id}/{path}", built.data)
            except BaseException:
                state.failed = True
                built.discard()
                raise
            file = FileEntry(
                path=path,
                first_offset=built.first_offset,
                last_offset=built.last_offset,
                records=built.records,
                tombstones=built.tombstones,
                size=built.size,
                sha256=built.sha256,
                min_timestamp=built.min_timestamp,
                max_timestamp=built.max_timestamp,
                run=run.run,
            )
        with self._lock:
            if file is not None:
                entry.files.append(file)
                entry.records += file.records
                entry.tombstones += file.tombstones
                entry.bytes += file.size
                run.records += file.records
                run.bytes += file.size
            for first, last in state.pending_gaps:
                entry.add_gap(first, last)
            state.pending_gaps.clear()
            entry.end_offset = max(entry.end_offset, state.next_offset)
            run.ranges[f"{entry.topic}-{entry.partition}"][1] = entry.end_offset
            if not save:
                return
            self._save(manifest)
            if self._consumer_handle is not None:
                self._advance_registration(self._consumer_handle, state)

    def _save(self, manifest: Manifest) -> None:
        manifest.updated_ms = self.clock.now_ms()
        save_manifest(self.storage, manifest)

    # ------------------------------------------------------------------ the run

    def run(self) -> BackupResult:
        started = time.monotonic()
        if self.fast:
            # The native scans (numba, 0.2 s to import) load while the cluster is asked for
            # topics, configs and offsets, not when the first answer arrives.
            threading.Thread(
                target=importlib.import_module, args=("kompakt.records.scan",), daemon=True
            ).start()
        self.storage.check_writable()
        topics = self._select_topics(self.client.topics())
        configs = self.client.topic_configs(list(topics))
        now_ms = self.clock.now_ms()
        manifest = self._open_manifest(now_ms)
        if manifest.runs and manifest.runs[-1].status != STATUS_COMPLETE:
            self.progress.message(f"resuming after incomplete run {manifest.runs[-1].run}")
        mode = "continuous" if self.config.continuous else "snapshot"
        run = RunEntry(len(manifest.runs) + 1, now_ms, None, mode, "running")
        manifest.runs.append(run)
        manifest.status = STATUS_INCOMPLETE
        manifest.compression = self.config.compression
        for name, count in topics.items():
            overrides, effective = configs.get(name, ({}, {}))
            manifest.topics[name] = TopicEntry(
                name=name,
                partitions=count,
                configs=overrides,
                cleanup_policy=effective.get("cleanup.policy", "delete"),
                delete_retention_ms=int(effective.get("delete.retention.ms", "86400000")),
            )
        marks = self.client.watermarks([(name, p) for name, count in topics.items() for p in range(count)])
        consumer = self._consumer()
        states: dict[TopicPartition, _PartitionRun] = {}
        try:
            for name, count in topics.items():
                topic = manifest.topics[name]
                horizon_ms = topic.delete_retention_ms if "compact" in topic.cleanup_policy else None
                for partition in range(count):
                    states[(name, partition)] = self._plan_partition(
                        manifest, marks[(name, partition)], topic, partition, horizon_ms, run
                    )
            if self.config.consumer_group_snapshot:
                groups = self.client.group_offsets(set(topics))
                manifest.consumer_groups = {
                    g: o for g, o in groups.items() if not g.startswith(BACKUP_GROUP_PREFIX)
                }
                manifest.consumer_groups_ms = self.clock.now_ms()
            self._register(consumer, states, manifest)
            self._consumer_handle = consumer
            self._save(manifest)
            self.progress.begin([s.progress for s in states.values()])
            if self.fast:
                self._fetch_all(manifest, states, run)
            else:
                self._consume(manifest, consumer, states, run)
        except BaseException as exc:
            self._consumer_handle = None
            self._fail(manifest, states, run, exc)
            self._unregister()
            raise
        finally:
            self._consumer_handle = None
            consumer.close()
            self.progress.end()
        try:
            for state in states.values():
                self._finish_partition(state)
            run.status = STATUS_COMPLETE
            run.finished_ms = self.clock.now_ms()
            manifest.status = STATUS_COMPLETE
            for state in states.values():
                self._commit_file(manifest, state, run)
            self._save(manifest)
        finally:
            self._unregister()
        rows = [
            {
                "partition": s.progress.name,
                "records": s.progress.records,
                "bytes": s.progress.bytes,
                "end_offset": s.entry.end_offset,
                "gaps": len(s.entry.gaps),
                "gap_offsets": s.entry.gap_offsets,
            }
            for s in states.values()
        ]
        return BackupResult(manifest, run, rows, time.monotonic() - started)

    def _plan_partition(
        self,
        manifest: Manifest,
        marks: tuple[int, int],
        topic: TopicEntry,
        partition: int,
        horizon_ms: int | None,
        run: RunEntry,
    ) -> _PartitionRun:
        low, high = marks
        entry = manifest.partitions.get((topic.name, partition))
        pending: list[tuple[int, int]] = []
        if entry is None:
            start = low if self.config.start_offset == "earliest" else high
            entry = PartitionEntry(topic.name, partition, start, start, low)
            manifest.partitions[(topic.name, partition)] = entry
        start = entry.end_offset
        if start < low:
            # Retention (or DeleteRecords) removed offsets since the last run: an honest gap.
            pending.append((start, low - 1))
            self.progress.message(
                f"{topic.name}-{partition}: offsets {start}..{low - 1} are gone at the source"
            )
            start = low
        if start > high:
            raise BackupError(
                f"{topic.name}-{partition}: the backup already holds offsets up to {start} but the source "
                f"ends at {high} (was the topic re-created? use a new backup_id)"
            )
        entry.log_start_offset = low
        run.ranges[f"{topic.name}-{partition}"] = [start, start]
        target = None if self.config.continuous else high
        builder: SegmentBuilder | BatchSegment
        if self.fast:
            builder = BatchSegment(
                self.codec, self.level, self._stager(manifest.backup_id, topic.name, partition)
            )
        else:
            builder = SegmentBuilder(self.codec, self.level, self.config.batch_max_bytes, horizon_ms)
        progress = PartitionProgress(topic.name, partition, (high - start) if target is not None else None)
        state = _PartitionRun(entry, builder, progress, start, target, pending, retention_ms=horizon_ms)
        state.fetch_offset = start
        state.done = target is not None and start >= target
        return state

    def _stager(self, backup_id: str, topic: str, partition: int) -> Callable[[int], StagedObject] | None:
        """How a partition's segments are written as they grow, where the storage can do it (a
        directory; an S3 object is put whole)."""
        stage = getattr(self.storage, "stage", None)
        if stage is None:
            return None
        return lambda first: cast(StagedObject, stage(f"{backup_id}/{segment_path(topic, partition, first)}"))

    def _consume(
        self, manifest: Manifest, consumer: Any, states: dict[TopicPartition, _PartitionRun], run: RunEntry
    ) -> None:
        todo = [tp for tp, s in states.items() if not s.done]
        if not todo:
            return
        consumer.assign([KAFKA.TopicPartition(t, p, states[(t, p)].next_offset) for t, p in todo])
        remaining = len(todo)
        poll_s = self.config.poll_interval_ms / 1000
        last_progress = time.monotonic()
        last_checkpoint = time.monotonic()
        while remaining and not self.stop.is_set():
            messages = consumer.consume(CONSUME_BATCH, timeout=min(poll_s, 0.5))
            consumed_ms = self.clock.now_ms()
            touched: set[TopicPartition] = set()
            for msg in messages:
                tp = (msg.topic(), msg.partition())
                state = states[tp]
                error = msg.error()
                if error is not None:
                    remaining -= self._on_partition_end(tp, state, error, msg.offset())
                    continue
                ended, added = self._on_record(manifest, run, state, msg, consumed_ms)
                remaining -= ended
                if added:
                    touched.add(tp)
            now = time.monotonic()
            if self.config.continuous and now - last_checkpoint >= self.config.checkpoint_interval_ms / 1000:
                for state in states.values():
                    if not state.builder.empty:
                        self._commit_file(manifest, state, run)
                last_checkpoint = now
            if now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                for tp in touched:
                    state = states[tp]
                    state.progress.done = state.next_offset - run.ranges[f"{tp[0]}-{tp[1]}"][0]
                    self.progress.update(state.progress)
        for state in states.values():
            state.progress.done = state.next_offset - run.ranges[state.progress.name][0]
            self.progress.update(state.progress)

    # ------------------------------------------------------------------ the fast path (own Fetch)

    def _fetch_all(
        self, manifest: Manifest, states: dict[TopicPartition, _PartitionRun], run: RunEntry
    ) -> None:
        """Read every partition that is not done, ``max_concurrent_partitions`` at a time: each
        worker thread owns a share of the partitions and its own connections, and fetches its
        share together from each leader. The first error stops every worker and is raised here,
        after each worker has left its partitions consistent (what it stored is committable)."""
        todo = [s for s in states.values() if not s.done]
        if not todo:
            return
        cluster = wire.Cluster(
            self.config.bootstrap_servers,
            self.client.timeout_s,
            max_response_bytes=self._fetch_max_bytes() + RESPONSE_HEADROOM_BYTES,
        )
        cluster.refresh({s.entry.topic for s in todo})
        workers = max(1, min(self.config.max_concurrent_partitions, len(todo)))
        shares = [todo[i::workers] for i in range(workers)]
        abort = threading.Event()
        errors: list[BaseException] = []

        def work(share: list[_PartitionRun]) -> None:
            try:
                self._fetch_share(cluster, share, manifest, run, abort)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread below
                errors.append(exc)
                abort.set()

        threads = [
            threading.Thread(target=work, args=(share,), name=f"kompakt-backup-{n}", daemon=True)
            for n, share in enumerate(shares)
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except BaseException:
            abort.set()  # Ctrl-C: let each worker finish its current batch, then commit
            for thread in threads:
                thread.join()
            raise
        if errors:
            raise errors[0]

    def _fetch_max_bytes(self) -> int:
        return self.config.fetch_max_bytes or FETCH_MAX_BYTES

    def _fetch_share(
        self,
        cluster: wire.Cluster,
        share: list[_PartitionRun],
        manifest: Manifest,
        run: RunEntry,
        abort: threading.Event,
    ) -> None:
        fetchers: dict[wire.Address, wire.Fetcher] = {}
        poll_ms = min(self.config.poll_interval_ms, 500) if self.config.continuous else 100
        last_progress = last_checkpoint = time.monotonic()
        retry_until: float | None = None
        try:
            while not (self.stop.is_set() or abort.is_set()):
                active = [s for s in share if not s.done]
                if not active:
                    return
                retriable = self._fetch_round(cluster, fetchers, active, manifest, run, poll_ms)
                for state in active:
                    if state.done:  # its last file is written here, beside the others' reads
                        self._finish_partition(state)
                        # Saved with the others' at the end of the run (or by an earlier save):
                        # four partitions ending together made four saves in a row, two fsyncs each.
                        self._commit_file(manifest, state, run, save=False)
                now = time.monotonic()
                if retriable is not None:
                    # The leader moved (or is being elected): look again, within the timeout.
                    retry_until = retry_until or now + self.client.timeout_s
                    if now >= retry_until:
                        raise BackupError(
                            f"cannot read {retriable} at {self.client.bootstrap}: no leader answered in time"
                        )
                    for fetcher in fetchers.values():
                        wire.close_fetcher(fetcher)
                    fetchers.clear()
                    time.sleep(wire.BACKOFF_S)
                    cluster.refresh({s.entry.topic for s in active})
                    continue
                retry_until = None
                if (
                    self.config.continuous
                    and now - last_checkpoint >= self.config.checkpoint_interval_ms / 1000
                ):
                    for state in share:
                        if not state.builder.empty:
                            self._commit_file(manifest, state, run)
                    last_checkpoint = now
                if now - last_progress >= PROGRESS_EVERY_S:
                    last_progress = now
                    for state in share:
                        self._report(state, run)
        finally:
            for fetcher in fetchers.values():
                wire.close_fetcher(fetcher)
            for state in share:
                self._report(state, run)

    def _fetch_round(
        self,
        cluster: wire.Cluster,
        fetchers: dict[wire.Address, wire.Fetcher],
        active: list[_PartitionRun],
        manifest: Manifest,
        run: RunEntry,
        poll_ms: int,
    ) -> str | None:
        """One Fetch from each leader of ``active``; the name of a partition without a leader
        that answers, if there is one."""
        by_leader: dict[wire.Address, list[_PartitionRun]] = {}
        retriable = None
        for state in active:
            leader = cluster.leader(state.entry.topic, state.entry.partition)
            if leader is None:
                retriable = state.progress.name
            else:
                by_leader.setdefault(leader, []).append(state)
        for address, states in by_leader.items():
            fetcher = fetchers.get(address)
            if fetcher is None:
                fetcher = fetchers[address] = wire.open_fetcher(cluster, address)
            retriable = self._fetch_once(fetcher, states, manifest, run, poll_ms) or retriable
        return retriable

    def _report(self, state: _PartitionRun, run: RunEntry) -> None:
        state.progress.done = state.next_offset - run.ranges[state.progress.name][0]
        with self._lock:
            self.progress.update(state.progress)

    def _fetch_once(
        self,
        fetcher: wire.Fetcher,
        states: list[_PartitionRun],
        manifest: Manifest,
        run: RunEntry,
        poll_ms: int,
    ) -> str | None:
        """One Fetch answer for ``states`` from their leader; returns the name of a partition
        whose leader answered a retriable error (the caller looks the leader up again), else None.

        The next Fetch is sent before this answer is stored, from the positions its batch headers
        give, so the broker reads and sends the next answer while this one is checked, compressed,
        hashed and written. A partition whose position changed otherwise (a gap after retention,
        a larger fetch size) has its part of the early answer dropped and is fetched again."""
        by_tp = {(s.entry.topic, s.entry.partition): s for s in states}
        sent = fetcher.inflight
        fetcher.inflight = None
        if sent is not None and not set(by_tp) <= set(sent[1]):
            wire.receive_fetch(fetcher, sent[0], poll_ms)  # for other partitions: dropped
            sent = None
        if sent is None:
            sent = self._send_fetch(fetcher, {tp: s.fetch_offset for tp, s in by_tp.items()}, by_tp, poll_ms)
        correlation, positions = sent
        answer = wire.receive_fetch(fetcher, correlation, poll_ms)
        consumed_ms = self.clock.now_ms()
        valid = [
            part
            for part in answer
            if (state := by_tp.get((part.topic, part.partition))) is not None
            and not state.done
            and positions.get((part.topic, part.partition)) == state.fetch_offset
        ]
        if all(part.error == "none" for part in valid):
            ahead = {tp: s.fetch_offset for tp, s in by_tp.items() if not s.done}
            for part in valid:
                end = fetch_end(part.records)
                if end >= 0:
                    ahead[(part.topic, part.partition)] = end
            ahead = {
                tp: o for tp, o in ahead.items() if by_tp[tp].target is None or o < (by_tp[tp].target or 0)
            }
            if ahead:
                fetcher.inflight = self._send_fetch(fetcher, ahead, by_tp, poll_ms)
                wire.receive_ahead(fetcher, fetcher.inflight[0], poll_ms)
        retriable = None
        for part in valid:
            state = by_tp[(part.topic, part.partition)]
            name = f"{part.topic}-{part.partition}"
            if part.error in wire.RETRIABLE:
                retriable = name
                continue
            if part.error == "offset_out_of_range" and 0 <= state.fetch_offset < part.log_start_offset:
                # Retention (or DeleteRecords) removed offsets while we read: they are a gap.
                self.progress.message(
                    f"{name}: offsets {state.next_offset}..{part.log_start_offset - 1} are gone at the source"
                )
                state.fetch_offset = part.log_start_offset
                continue
            if part.error != "none":
                raise BackupError(f"cannot read {name} at {self.client.bootstrap}: {part.error.upper()}")
            self._store(manifest, run, state, part, consumed_ms, name)
        return retriable

    def _send_fetch(
        self,
        fetcher: wire.Fetcher,
        positions: dict[TopicPartition, int],
        by_tp: dict[TopicPartition, _PartitionRun],
        poll_ms: int,
    ) -> tuple[int, dict[TopicPartition, int]]:
        correlation = wire.send_fetch(
            fetcher,
            positions,
            max_wait_ms=poll_ms,
            max_bytes=self._fetch_max_bytes(),
            partition_max_bytes={tp: by_tp[tp].partition_max_bytes for tp in positions},
        )
        return correlation, positions

    def _store(
        self,
        manifest: Manifest,
        run: RunEntry,
        state: _PartitionRun,
        part: wire.FetchPartition,
        consumed_ms: int,
        name: str,
    ) -> None:
        """Add one partition's part of a Fetch answer to its segment (see :func:`ingest`)."""
        chunk = ingest(
            part.records,
            next_offset=state.next_offset,
            target=state.target,
            aborted=part.aborted,
            retention_ms=state.retention_ms,
            consumed_ms=consumed_ms,
            batch_max_bytes=self.config.batch_max_bytes,
            where=name,
        )
        if chunk.fetch_end < 0:
            if part.records:
                # Only part of a batch fits the partition's fetch size (a Kafka before KIP-74
                # truncates instead of sending the first batch whole): ask for more.
                state.partition_max_bytes *= 2
                if state.partition_max_bytes > 8 * self._fetch_max_bytes():
                    raise BackupError(f"{name}: a batch at offset {state.fetch_offset} does not fit a fetch")
                return
            self._at_end(state, part, name)
            return
        records_max = self.config.segment_max_records
        for batch in chunk.batches:
            offsets = batch.offsets
            first = int(offsets[0])
            if first > state.next_offset:
                state.pending_gaps.append((state.next_offset, first - 1))
            last = int(offsets[-1])
            if last - first + 1 != len(offsets):  # holes inside (a compacted batch)
                holes = np.flatnonzero(np.diff(offsets) > 1)
                state.pending_gaps.extend(
                    (int(offsets[h]) + 1, int(offsets[h + 1]) - 1) for h in holes.tolist()
                )
            segment = state.builder
            assert isinstance(segment, BatchSegment)
            try:
                segment.add(batch)
            except BaseException:
                state.failed = True  # the staged file may hold part of the batch: commit none of it
                raise
            state.next_offset = last + 1
            state.progress.records += batch.records
            state.progress.bytes += batch.key_value_bytes
            if state.builder.size >= self.config.segment_max_bytes or (
                records_max is not None and state.builder.record_count >= records_max
            ):
                self._commit_file(manifest, state, run)
        state.fetch_offset = max(state.fetch_offset, chunk.fetch_end)
        if state.target is not None and (chunk.reached_target or state.fetch_offset >= state.target):
            state.done = True

    def _at_end(self, state: _PartitionRun, part: wire.FetchPartition, name: str) -> None:
        """A Fetch found nothing at the partition's position: a snapshot partition ends there.

        Below the target, what is left is either held by an open transaction (read_committed stops
        at the last stable offset: the run ends at it, and the next run continues from there) or
        was removed by the source's cleaner (a gap)."""
        if state.target is None:
            return
        stable = part.last_stable_offset if part.last_stable_offset >= 0 else part.high_watermark
        if stable < state.target:
            self.progress.message(
                f"{name}: readable data ends at {max(stable, state.fetch_offset)}, before the "
                f"high watermark {state.target} (an open transaction?)"
            )
            state.target = max(stable, state.next_offset)
        state.done = True

    def _on_partition_end(self, tp: TopicPartition, state: _PartitionRun, error: Any, offset: int) -> int:
        """A consumer event instead of a record: end of the partition (1 if that finishes a
        snapshot partition, else 0), or a read error, which fails the run."""
        if error.code() != PARTITION_EOF:
            raise self.client.fail(f"cannot read {tp[0]}-{tp[1]}", KAFKA.KafkaException(error))
        if state.target is None or state.done:
            return 0
        if 0 <= offset < state.target:
            # read_committed stops at an open transaction (the LSO): end there.
            self.progress.message(
                f"{tp[0]}-{tp[1]}: readable data ends at {offset}, before the "
                f"high watermark {state.target} (an open transaction?)"
            )
            state.target = max(offset, state.next_offset)
        state.done = True
        return 1

    def _on_record(
        self, manifest: Manifest, run: RunEntry, state: _PartitionRun, msg: Any, consumed_ms: int
    ) -> tuple[int, bool]:
        """Add one consumed record to its partition's segment: ``(finished, added)``, where
        ``finished`` is 1 when the record completes a snapshot partition; a full segment is
        committed at once."""
        offset = msg.offset()
        if state.done or offset < state.next_offset:
            return 0, False
        if state.target is not None and offset >= state.target:
            state.done = True
            return 1, False
        if offset > state.next_offset:
            state.pending_gaps.append((state.next_offset, offset - 1))
        ts_type, timestamp = msg.timestamp()
        key, value = msg.key(), msg.value()
        builder = state.builder
        assert isinstance(builder, SegmentBuilder)
        builder.add(
            offset,
            timestamp,
            TimestampType.LOG_APPEND_TIME
            if ts_type == KAFKA.TIMESTAMP_LOG_APPEND_TIME
            else TimestampType.CREATE_TIME,
            key,
            value,
            msg.headers() or (),
            consumed_ms,
        )
        state.next_offset = offset + 1
        state.progress.records += 1
        state.progress.bytes += (len(key) if key else 0) + (len(value) if value else 0)
        finished = 0
        if state.target is not None and state.next_offset >= state.target:
            state.done = True
            finished = 1
        records_max = self.config.segment_max_records
        if state.builder.size >= self.config.segment_max_bytes or (
            records_max is not None and state.builder.record_count >= records_max
        ):
            self._commit_file(manifest, state, run)
        return finished, True

    def _finish_partition(self, state: _PartitionRun) -> None:
        """A snapshot partition that reached its target: the offsets after its last record are gaps."""
        if state.target is not None and state.next_offset < state.target:
            state.pending_gaps.append((state.next_offset, state.target - 1))
            state.next_offset = state.target

    def _fail(
        self,
        manifest: Manifest,
        states: dict[TopicPartition, _PartitionRun],
        run: RunEntry,
        exc: BaseException,
    ) -> None:
        """Commit what was consumed (so a re-run resumes there), and mark the run incomplete."""
        run.status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        run.error = str(exc) or type(exc).__name__
        run.finished_ms = self.clock.now_ms()
        manifest.status = STATUS_INCOMPLETE
        try:
            for state in states.values():
                self._commit_file(manifest, state, run)
            self._save(manifest)
        except Exception as second:  # noqa: BLE001 - the first error is the one to report
            self.progress.message(f"could not record the failed run: {second}")


def run_backup(
    config: BackupConfig,
    *,
    storage: Storage | None = None,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    clock: Clock | None = None,
) -> BackupResult:
    """Run one backup of ``config`` (see the module docstring)."""
    return BackupRun(config, storage=storage, progress=progress, stop=stop, clock=clock).run()
