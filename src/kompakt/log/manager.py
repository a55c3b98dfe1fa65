"""The log manager: one data directory, its topics, partitions, checkpoints and lifecycle.

Data directory layout (Kafka's, see :mod:`kompakt.log.files`)::

    <data-dir>/
      .lock                               fcntl lock: one process per directory
      meta.properties                     cluster id and node id (written when missing)
      .kafka_cleanshutdown                present only while the directory is closed cleanly
      kompakt-topics.json                 topic ids, partition counts, config overrides, and
                                          the intent of a creation or deletion in progress
      recovery-point-offset-checkpoint    per partition: everything below is fsynced
      log-start-offset-checkpoint         per partition whose log start offset > first base offset
      replication-offset-checkpoint       per partition: the high watermark
      <topic>-<partition>/                one PartitionLog each
      <topic>-<partition>.<hex>-delete/   being removed after file.delete.delay.ms
      __cluster_metadata-0/               a Kafka 4 node's metadata log (KRaft's, not a topic's):
                                          never opened here, as Kafka's LogManager leaves it to
                                          the raft layer (read by kompakt.log.cluster_metadata)

Opening never scans the ``.log`` files of a cleanly shut down directory (indexes are lazy; only
each active segment's tail is checked, and a damaged tail with no intact batch in it is cut, as
:mod:`kompakt.log.recovery` step 8 says); after a crash every partition re-validates from its
recovery point, and what recovery cuts off is quarantined beside the segment
(:mod:`kompakt.log.quarantine`). A partition whose flushed data is damaged (below its recovery
point after a crash; followed by intact batches after a clean shutdown) is listed in
``offline_partitions`` and the others open. Its checkpoint entries are written
back unchanged while it is offline: dropping its recovery point would let the next start treat
the damaged, flushed data as unflushed and cut it without the operator (``kompakt log repair``).

Creating, growing and deleting a topic span ``kompakt-topics.json`` and a directory per
partition. Each records its intent in ``kompakt-topics.json`` before it touches a directory
(:class:`~kompakt.log.topic_store.PendingChange`), and :meth:`LogManager.open` finishes what an
intent names, as Kafka's brokers create or delete the logs its metadata log says they should
have: after a crash at any file operation a topic exists with all its partitions, or not at all.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import random
import shutil
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from kompakt.clock import Clock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import (
    KompaktError,
    LogDirectoryError,
    PartitionOfflineError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kompakt.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kompakt.log.cluster_metadata import METADATA_TOPIC
from kompakt.log.config import LogConfig
from kompakt.log.files import (
    DEFAULT_FILE_OPS,
    DELETE_DIR_SUFFIX,
    FileOps,
    parse_partition_dir_name,
    partition_dir_name,
    partition_dir_suffix,
    rename_durably,
)
from kompakt.log.metadata_files import (
    MetaProperties,
    random_kafka_uuid,
    read_clean_shutdown,
    read_meta_properties,
    read_partition_metadata,
    remove_clean_shutdown,
    uuid_to_kafka,
    write_clean_shutdown,
    write_meta_properties,
    write_partition_metadata,
)
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segments import ManualScheduler, Scheduler
from kompakt.log.topic_store import PendingChange, TopicMetadata, TopicStore, validate_topic_name

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
TopicPartition = tuple[str, int]


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def lock_data_dir(data_dir: Path) -> int:
    """Take the directory's ``.lock`` (one process per data directory); return the descriptor.

    Released by closing the descriptor. Raises LogDirectoryError when another process holds it.
    """
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise LogDirectoryError(
            f"Failed to acquire lock on file .lock in {data_dir}. A Kafka instance in another "
            "process or thread is using this directory."
        ) from None
    return fd


class InvalidPartitionsError(KompaktError):
    """A partition count that is not larger than the current one (Kafka's INVALID_PARTITIONS)."""


class LogManager:
    """All logs of one data directory.

    Thread-safety: topic-level changes (create, delete, add partitions, alter configs) and
    open/close are serialized by one manager lock; each log has its own lock for data operations.
    """

    def __init__(
        self,
        data_dir: str | Path,
        broker_config: BrokerConfig,
        clock: Clock,
        scheduler: Scheduler | None = None,
        *,
        rng: random.Random | None = None,
        file_ops: FileOps = DEFAULT_FILE_OPS,
    ) -> None:
        """``file_ops`` carries every file mutation of the partition logs (a test's fault model)."""
        self.data_dir = Path(data_dir)
        self.broker_config = broker_config
        self.clock = clock
        self.scheduler: Scheduler = scheduler if scheduler is not None else ManualScheduler(clock)
        self._rng = rng or random.Random()  # noqa: S311 - roll jitter, not security
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self.offline_partitions: dict[TopicPartition, str] = {}
        #: Checkpoint entries of offline partitions as read at open, per checkpoint file name.
        self._offline_checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self._file_ops = file_ops
        self._store = TopicStore(self.data_dir, file_ops)
        #: Deleted topics whose partition directories are not all renamed yet: kept in the topic
        #: store (``pending: delete``) until they are, so the next start finishes the deletion.
        self._deleting: dict[str, TopicMetadata] = {}
        self._lock_fd: int | None = None
        self.had_clean_shutdown = False
        self._broker_epoch = 0
        self._config_cache: dict[tuple[tuple[str, str], ...], LogConfig] = {}

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Lock the directory, load topics and every partition directory, drop the clean marker."""
        with self._lock:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._take_lock()
            if read_meta_properties(self.data_dir) is None:
                write_meta_properties(
                    self.data_dir,
                    MetaProperties(
                        cluster_id=uuid_to_kafka(random_kafka_uuid()), node_id=self.broker_config.node_id
                    ),
                )
            epoch = read_clean_shutdown(self.data_dir)
            self.had_clean_shutdown = epoch is not None
            # Kafka's node sends this epoch back to its controller at registration (a clean
            # shutdown keeps it in the eligible leader replicas): writing another at close would
            # make an offline tool's run look like an unclean shutdown of that node.
            self._broker_epoch = epoch if epoch is not None and epoch >= 0 else 0
            recovery_points = self._read_checkpoint(RECOVERY_POINT_OFFSET_CHECKPOINT_FILE)
            start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE)
            stored = self._store.load()
            self._deleting = {n: m for n, m in stored.items() if m.pending is PendingChange.DELETE}
            self._topics = {n: m for n, m in stored.items() if m.pending is not PendingChange.DELETE}
            for entry in sorted(os.scandir(self.data_dir), key=lambda e: e.name):
                if entry.is_dir():
                    self._load_partition_dir(Path(entry.path), recovery_points, start_offsets)
            self._finish_pending_changes(set(stored), recovery_points)
            self._rewrite_checkpoints_above_log_end(recovery_points, start_offsets)
            remove_clean_shutdown(self.data_dir)

    def _finish_pending_changes(
        self, stored: set[str], recovery_points: Mapping[TopicPartition, int]
    ) -> None:
        """Finish the creations and deletions a crash interrupted (the intents in the topic store).

        A pending creation gets its missing partitions, as Kafka's broker creates the logs the
        metadata log assigns it; a pending deletion gets its remaining directories renamed
        ``-delete``. A topic without an intent that lacks a partition directory lost it outside
        kompakt (the creation had finished): the partition is created empty, as Kafka would, and
        the loss is logged as an error when a checkpoint shows the partition once held data.
        Topics the store does not list (directories adopted as found, such as a Kafka broker's,
        which holds only the partitions assigned to it) are never completed.
        """
        for name in sorted(self._deleting):
            log.warning("Finishing the deletion of topic %s, interrupted by a crash", name)
            self._finish_deletion(self._deleting[name])
        changed = False
        for name, meta in sorted(self._topics.items()):
            if name not in stored:
                continue
            missing = [
                p
                for p in range(meta.partitions)
                if (name, p) not in self._logs and (name, p) not in self.offline_partitions
            ]
            if meta.pending is PendingChange.CREATE:
                if missing:
                    log.warning(
                        "Finishing the creation of topic %s, interrupted by a crash: creating partitions %s",
                        name,
                        missing,
                    )
                self._ensure_partition_metadata(meta)
            elif missing:
                lost = [p for p in missing if recovery_points.get((name, p), 0) > 0]
                log.error(
                    "Topic %s has no directory for partitions %s; creating them empty%s",
                    name,
                    missing,
                    f" (partitions {lost} held data before: it is lost)" if lost else "",
                )
            if missing:
                self._create_partitions(meta, missing)
            if meta.pending is not None:
                self._topics[name] = meta.with_pending(None)
                changed = True
        if changed:
            self._save_topics()

    def _ensure_partition_metadata(self, meta: TopicMetadata) -> None:
        """Write ``partition.metadata`` where a crash came between a directory and its file."""
        for partition in range(meta.partitions):
            path = self.data_dir / partition_dir_name(meta.name, partition)
            if path.is_dir() and not (path / "partition.metadata").exists():
                write_partition_metadata(path, meta.topic_id, self._file_ops)

    def _rewrite_checkpoints_above_log_end(
        self, recovery_points: Mapping[TopicPartition, int], start_offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Write the checkpoints now when loading cut a log below its checkpointed offsets.

        A clean start that cut a damaged tail into quarantine leaves the recovery point checkpointed
        beyond the new log end offset until the next periodic write. A crash before that write would
        take the new, unflushed appends at those offsets for flushed data and, finding one torn,
        take the partition offline (``kompakt log repair`` clamps the checkpoints for the same
        reason); ``kompakt log verify`` would report them beyond the log end meanwhile.
        """
        if any(
            partition_log.log_end_offset < max(recovery_points.get(tp, 0), start_offsets.get(tp, 0))
            for tp, partition_log in self._logs.items()
        ):
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            self.checkpoint_high_watermarks()

    def _take_lock(self) -> None:
        self._lock_fd = lock_data_dir(self.data_dir)

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        path = self.data_dir / name
        if not path.exists():
            return {}
        try:
            return OffsetCheckpointFile(path).read()
        except KompaktError as exc:
            log.warning("Ignoring unreadable checkpoint %s: %s", path, exc)
            return {}

    def _load_partition_dir(
        self,
        path: Path,
        recovery_points: Mapping[TopicPartition, int],
        start_offsets: Mapping[TopicPartition, int],
    ) -> None:
        name = path.name
        suffix = partition_dir_suffix(name)
        if suffix == DELETE_DIR_SUFFIX:
            self.scheduler.schedule(0, functools.partial(_remove_tree, path), f"delete-dir {name}")
            return
        if suffix is not None:
            log.info("Skipping directory %s (%s)", path, suffix)
            return
        try:
            topic, partition = parse_partition_dir_name(name)
        except LogDirectoryError:
            log.warning("Skipping directory %s: not a topic-partition directory", path)
            return
        if topic == METADATA_TOPIC:
            return  # KRaft's metadata log: Kafka's LogManager does not load it either
        if topic in self._deleting:
            return  # renamed -delete by _finish_pending_changes, never opened
        meta = self._topics.get(topic)
        if meta is None:
            try:
                topic_id = read_partition_metadata(path) or random_kafka_uuid()
            except KompaktError as exc:
                log.warning("Unreadable partition.metadata in %s: %s", path, exc)
                topic_id = random_kafka_uuid()
            meta = self._topics[topic] = TopicMetadata(topic, topic_id, partition + 1, {})
        elif partition >= meta.partitions:
            self._topics[topic] = TopicMetadata(meta.name, meta.topic_id, partition + 1, dict(meta.configs))
        tp = (topic, partition)
        try:
            self._logs[tp] = self._open_log(
                path,
                topic,
                partition,
                self._config_for(meta.configs),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                had_clean_shutdown=self.had_clean_shutdown,
            )
        except PartitionOfflineError as exc:
            log.error("Partition %s-%d is offline: %s", topic, partition, exc)
            self.offline_partitions[tp] = str(exc)
            self._keep_offline_checkpoints(recovery_points, start_offsets)

    def _keep_offline_checkpoints(
        self, recovery_points: Mapping[TopicPartition, int], start_offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Keep the checkpoints as read, so offline partitions' entries are written back unchanged."""
        if REPLICATION_OFFSET_CHECKPOINT_FILE not in self._offline_checkpoints:
            self._offline_checkpoints[REPLICATION_OFFSET_CHECKPOINT_FILE] = self._read_checkpoint(
                REPLICATION_OFFSET_CHECKPOINT_FILE
            )
            self._offline_checkpoints[RECOVERY_POINT_OFFSET_CHECKPOINT_FILE] = dict(recovery_points)
            self._offline_checkpoints[LOG_START_OFFSET_CHECKPOINT_FILE] = dict(start_offsets)

    def _open_log(
        self,
        path: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        had_clean_shutdown: bool,
    ) -> PartitionLog:
        return PartitionLog(
            path,
            topic,
            partition,
            config,
            self.clock,
            scheduler=self.scheduler,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            rng=self._rng,
            file_ops=self._file_ops,
        )

    def _config_for(self, overrides: Mapping[str, str]) -> LogConfig:
        key = tuple(sorted(overrides.items()))
        config = self._config_cache.get(key)
        if config is None:
            config = self._config_cache[key] = LogConfig.from_overrides(overrides, self.broker_config)
        return config

    def close(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker, unlock."""
        with self._lock:
            if self._lock_fd is None:
                return
            for partition_log in self._logs.values():
                partition_log.close()
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            self.checkpoint_high_watermarks()
            self._logs.clear()
            if not self.offline_partitions:
                write_clean_shutdown(self.data_dir, self._broker_epoch)
            os.close(self._lock_fd)
            self._lock_fd = None

    def close_without_flush(self) -> None:
        """Release every descriptor and the lock, and write nothing: what a crash leaves (tests)."""
        with self._lock:
            if self._lock_fd is None:
                return
            for partition_log in self._logs.values():
                partition_log.close_without_flush()
            self._logs.clear()
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        def start(lg: PartitionLog) -> int | None:
            first = lg.segments.first
            return (
                lg.log_start_offset if first is not None and lg.log_start_offset > first.base_offset else None
            )

        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, start)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT_FILE, lambda lg: lg.high_watermark)

    def _write_checkpoint(self, name: str, value: object) -> None:
        # Under the manager lock: the periodic tasks and DeleteRecords write from different
        # threads, and two writers of one ``<name>.tmp`` could rename each other's half file.
        with self._lock:
            self._write_checkpoint_locked(name, value)

    def _write_checkpoint_locked(self, name: str, value: object) -> None:
        assert callable(value)
        entries: dict[TopicPartition, int] = {}
        kept = self._offline_checkpoints.get(name, {})
        for tp in list(self.offline_partitions):
            if tp in kept:
                entries[tp] = kept[tp]
        for tp, partition_log in list(self._logs.items()):
            offset = value(partition_log)
            if offset is not None:
                entries[tp] = int(offset)
        OffsetCheckpointFile(self.data_dir / name).write(entries)

    # ------------------------------------------------------------------ topics

    def _save_topics(self) -> None:
        """Write the topic store: every live topic and every deletion not finished yet."""
        self._store.save({**self._deleting, **self._topics})

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicMetadata:
        """Validate, record the intent, create each partition directory, clear the intent.

        A failure part way (a full disk) rolls the creation back as far as it can; whatever it
        cannot undo is finished at the next start (see :meth:`_finish_pending_changes`).
        """
        validate_topic_name(name)
        overrides = dict(configs or {})
        self._config_for(overrides)
        if partitions < 1:
            raise InvalidPartitionsError(f"Number of partitions must be larger than 0 (got {partitions}).")
        with self._lock:
            if name in self._topics:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            if name in self._deleting:
                self._finish_deletion(self._deleting[name])
            meta = TopicMetadata(name, random_kafka_uuid(), partitions, overrides, PendingChange.CREATE)
            self._change_partitions(None, meta)
            return self._topics[name]

    def create_partitions(self, name: str, total: int) -> TopicMetadata:
        with self._lock:
            meta = self._topic(name)
            if total <= meta.partitions:
                raise InvalidPartitionsError(
                    f"Topic currently has {meta.partitions} partitions, "
                    f"which is higher than the requested {total}."
                    if total < meta.partitions
                    else f"Topic already has {meta.partitions} partitions."
                )
            grown = TopicMetadata(meta.name, meta.topic_id, total, dict(meta.configs), PendingChange.CREATE)
            self._change_partitions(meta, grown)
            return self._topics[name]

    def _change_partitions(self, before: TopicMetadata | None, after: TopicMetadata) -> None:
        """Go from ``before`` (None: no topic) to ``after``'s partitions, with the intent recorded.

        The order is the recovery's contract: the intent is durable before the first directory
        exists, and cleared only once the last one does.
        """
        self._topics[after.name] = after
        try:
            self._save_topics()
        except BaseException:
            self._restore_topic(before, after.name)
            raise
        first_new = 0 if before is None else before.partitions
        try:
            self._create_partitions(after, range(first_new, after.partitions))
        except BaseException:
            self._roll_back_partitions(before, after, first_new)
            raise
        self._topics[after.name] = after.with_pending(None)
        try:
            self._save_topics()
        except Exception:  # noqa: BLE001 - every partition exists: the change has happened
            log.exception(
                "Could not clear the pending creation of topic %s; the next start clears it", after.name
            )

    def _restore_topic(self, before: TopicMetadata | None, name: str) -> None:
        if before is None:
            self._topics.pop(name, None)
        else:
            self._topics[name] = before

    def _roll_back_partitions(
        self, before: TopicMetadata | None, after: TopicMetadata, first_new: int
    ) -> None:
        """Undo a creation that failed part way: drop the new partitions and the intent.

        The new directories hold no records yet, so they are removed like a deleted topic's. If
        the undo fails too (the disk is failing), a new topic is kept as a deletion to finish
        (at the next store write's start-up, or before the name is created again), so no
        directory of it is left to be adopted as a topic of its own; until some store write
        succeeds, the intent on disk is still the creation, which the next start completes.
        Either way the topic exists whole or not at all. In memory the topic is as it was
        before, which is what the client, told of the failure, expects.
        """
        self._restore_topic(before, after.name)
        try:
            for partition in range(first_new, after.partitions):
                self._remove_partition(after, partition)
            self._save_topics()
        except Exception:  # noqa: BLE001 - the original failure is the one to report
            if before is None:
                self._deleting[after.name] = after.with_pending(PendingChange.DELETE)
            log.exception("Could not roll back the creation of partitions of topic %s", after.name)

    def _create_partitions(self, meta: TopicMetadata, partitions: Iterable[int]) -> None:
        """Create and open each partition's directory, then make the directory entries durable."""
        config = self._config_for(meta.configs)
        created = False
        for partition in partitions:
            path = self.data_dir / partition_dir_name(meta.name, partition)
            self._file_ops.mkdir(path)
            write_partition_metadata(path, meta.topic_id, self._file_ops)
            self._logs[(meta.name, partition)] = self._open_log(
                path,
                meta.name,
                partition,
                config,
                recovery_point=0,
                log_start_offset=0,
                had_clean_shutdown=True,
            )
            created = True
        if created:
            self._file_ops.fsync_dir(self.data_dir)

    def alter_topic_config(self, name: str, overrides: Mapping[str, str]) -> TopicMetadata:
        """Replace the topic's overrides (validated first); logs pick them up at their next roll/pass.

        One atomic write of the topic store is the whole change on disk.
        """
        with self._lock:
            meta = self._topic(name)
            config = self._config_for(overrides)
            new_meta = TopicMetadata(meta.name, meta.topic_id, meta.partitions, dict(overrides))
            self._topics[name] = new_meta
            try:
                self._save_topics()
            except BaseException:
                self._topics[name] = meta
                raise
            for (topic, _p), partition_log in self._logs.items():
                if topic == name:
                    partition_log.update_config(config)
            return new_meta

    def delete_topic(self, name: str) -> None:
        """Record the deletion, rename each partition dir ``<topic>-<p>.<uuid>-delete``, clear it.

        The directories are removed after ``file.delete.delay.ms``. Once the intent is durable
        the topic is gone for every client; a failure after that is finished at the next start.
        """
        with self._lock:
            meta = self._topic(name)
            deleting = meta.with_pending(PendingChange.DELETE)
            del self._topics[name]
            self._deleting[name] = deleting
            try:
                self._save_topics()
            except BaseException:
                del self._deleting[name]
                self._topics[name] = meta
                raise
            self._finish_deletion(deleting)

    def _finish_deletion(self, meta: TopicMetadata) -> None:
        """Rename every remaining partition directory of ``meta`` and drop its intent."""
        for partition in range(meta.partitions):
            self._remove_partition(meta, partition)
        del self._deleting[meta.name]
        self._save_topics()
        # Drop the deleted partitions from the checkpoints now, as Kafka's LogManager.asyncDelete
        # does: a topic re-created under the same name must not inherit the old recovery point,
        # which recovery would take for flushed data of the new log.
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    def _remove_partition(self, meta: TopicMetadata, partition: int) -> None:
        """Close one partition and rename its directory ``-delete``, removed after the delay."""
        tp = (meta.name, partition)
        self.offline_partitions.pop(tp, None)
        partition_log = self._logs.pop(tp, None)
        if partition_log is not None:
            partition_log.delete()
        source = self.data_dir / partition_dir_name(meta.name, partition)
        if not source.exists():
            return
        target = self.data_dir / partition_dir_name(meta.name, partition, DELETE_DIR_SUFFIX)
        rename_durably(source, target, self._file_ops)
        delay = self._config_for(meta.configs).file_delete_delay_ms
        self.scheduler.schedule(delay, functools.partial(_remove_tree, target), f"delete-dir {target.name}")

    def _topic(self, name: str) -> TopicMetadata:
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        return meta

    # ------------------------------------------------------------------ lookups

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        with self._lock:
            partition_log = self._logs.get((topic, partition))
        if partition_log is None:
            reason = self.offline_partitions.get((topic, partition))
            if reason is not None:
                raise PartitionOfflineError(reason)
            raise UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition: {topic}-{partition}"
            )
        return partition_log

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def topics(self) -> dict[str, TopicMetadata]:
        with self._lock:
            return dict(self._topics)

    def set_broker_config(self, broker_config: BrokerConfig) -> None:
        """Apply new broker defaults (a dynamic config change) to every open log.

        Each log's config is re-resolved from its topic overrides on top of the new defaults, as
        Kafka pushes a changed default into every log; it takes effect at the next roll or clean.
        """
        with self._lock:
            self.broker_config = broker_config
            self._config_cache.clear()
            for (topic, _partition), partition_log in self._logs.items():
                meta = self._topics.get(topic)
                partition_log.update_config(self._config_for(meta.configs if meta else {}))

    def topic_config(self, name: str) -> LogConfig:
        with self._lock:
            return self._config_for(self._topic(name).configs)
