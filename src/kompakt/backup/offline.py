"""The exact restore: a backup written into a STOPPED kompakt or Apache Kafka data directory.

The protocol can only append records at new offsets. Writing the log files directly reproduces
each partition as the source had it: the same log start offset, every record at its original
offset, the same gaps (compaction and retention holes stay holes, as offset deltas and batch
boundaries, exactly as Kafka's cleaner leaves them), the same log end offset, timestamps and
timestamp types, and tombstones with their delete horizon (see ``docs/backup-format.md`` for how
that horizon is chosen). Batches are appended with :meth:`PartitionLog.append_with_offsets`
unchanged when no filter applies, but for those the backup compressed, which are written as the
source had them, uncompressed; with a time window or erasure they are rebuilt with the remaining
records at the same offsets.

The directory's ``.lock`` is taken through the :class:`LogManager`, so a directory a running
broker holds is refused. A target partition must be empty: this restore never merges into data.

* kompakt directory: missing topics are created with the source's partition count and configs
  (``kompakt-topics.json``); an existing topic must have the source's cleanup policy.
* Kafka directory: Kafka keeps topics in its cluster metadata, not in the log directory, so the
  topic must first be created on the Kafka cluster (same name, partition count, configs) and the
  broker stopped; this restore then fills the empty ``<topic>-<partition>`` directories, keeping
  their ``partition.metadata`` (the topic id Kafka knows). A Kafka 4 directory says which topics
  the cluster has, in its metadata log (:mod:`kompakt.log.cluster_metadata`): a topic it does not
  list, a partition it does not assign to this node, or a directory holding another topic id is
  refused before anything is written, because Kafka would find those files at its next start,
  rename them ``-stray`` and never serve them. Nothing is ever created there, so no kompakt file
  (``kompakt-topics.json``) is left in Kafka's directory.

Consumer-group offsets are not written here: a restore at the original offsets leaves every
offset in the snapshot valid as it is, and the groups can be committed after the broker starts
(the manifest holds them; ``restore`` through the protocol with ``consumer_groups: snapshot``).
"""

from __future__ import annotations

import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kompakt.backup.batches import backup_compressed
from kompakt.backup.config import RestoreConfig
from kompakt.backup.erasure import FilterCounts
from kompakt.backup.errors import BackupError
from kompakt.backup.progress import NoProgress, PartitionProgress, Progress
from kompakt.backup.reader import ORIGINAL_THREADS, RestoreSource, as_restored, policy_set
from kompakt.backup.restore import RestorePlan, RestoreTotals, TopicPlan, plan_topics
from kompakt.backup.storage import Storage
from kompakt.clock import Clock, SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import KompaktError
from kompakt.log.cluster_metadata import ClusterMetadata, read_cluster_metadata
from kompakt.log.files import partition_dir_name
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segments import ManualScheduler
from kompakt.log.topic_store import TopicStore
from kompakt.records.batch import RecordBatchView, TimestampType
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression
from kompakt.records.record import decode_records

FOREVER_MS = 2**62
APPEND_BYTES = 8 * 1024 * 1024
"""Batches given back uncompressed are appended in runs of about this size."""


OfflineResult = RestoreTotals
"""An offline restore's result: the same totals as a protocol restore, without group offsets."""


def _is_empty(log: PartitionLog) -> bool:
    return log.log_end_offset == 0 and log.size_bytes == 0


def _check_kafka(metadata: ClusterMetadata, data_dir: Path, config: RestoreConfig, plan: RestorePlan) -> None:
    """A Kafka 4 directory: every target topic and partition must be one the metadata log assigns
    to this node, with the same topic id in its directory, and the policy must match."""
    for tplan in plan.topics:
        topic = metadata.topics.get(tplan.target)
        if topic is None:
            policy = f", cleanup.policy={tplan.cleanup_policy}" if tplan.cleanup_policy else ""
            plan.problems.append(
                f"topic {tplan.target!r} does not exist in this Kafka cluster (its metadata log "
                f"{metadata.directory} does not list it), and Kafka would discard partition files "
                f"written for it as strays: create it on the cluster first ({tplan.partitions} "
                f"partition{'' if tplan.partitions == 1 else 's'}{policy}) and stop the broker, or "
                "restore through the protocol "
                "(target.bootstrap_servers)"
            )
            continue
        tplan.action = "existing"
        if topic.partitions < tplan.partitions:
            plan.problems.append(
                f"topic {tplan.target!r} has {topic.partitions} partitions in the cluster's metadata "
                f"log, the backup has {tplan.partitions}"
            )
        for partition in range(min(topic.partitions, tplan.partitions)):
            directory = data_dir / partition_dir_name(tplan.target, partition)
            reason = metadata.stray_reason_of(directory, tplan.target, partition)
            if reason is None and not directory.is_dir():
                reason = f"{directory.name} has no directory yet (start the broker once to create it)"
            if reason is not None:
                plan.problems.append(f"{tplan.target}-{partition}: {reason}")
        _check_kafka_policy(metadata, tplan, config, plan)


def _check_kafka_policy(
    metadata: ClusterMetadata, tplan: TopicPlan, config: RestoreConfig, plan: RestorePlan
) -> None:
    """The target's cleanup.policy as the metadata log sets it (its own, else the broker's
    dynamic one) against the source's; with neither, it is the broker's static file, not here."""
    policy = metadata.topic_overrides(tplan.target).get("cleanup.policy")
    origin = "its own config"
    if policy is None:
        found = metadata.broker_overrides().get("log.cleanup.policy")
        policy, origin = (found[0], found[1]) if found is not None else (None, "")
    if policy is None:
        plan.notes.append(
            f"topic {tplan.target!r} takes log.cleanup.policy from the broker's server.properties, "
            f"which is not in the log directory; the source {tplan.source!r} had "
            f"{tplan.cleanup_policy or 'the default'}"
        )
        return
    if policy_set(policy) != policy_set(tplan.cleanup_policy):
        message = (
            f"topic {tplan.target!r} has cleanup.policy={policy} ({origin}, metadata log), "
            f"the source topic {tplan.source!r} had {tplan.cleanup_policy}"
        )
        (plan.notes if config.allow_policy_mismatch else plan.problems).append(message)


def _check_manager(
    manager: LogManager, config: RestoreConfig, plan: RestorePlan, kafka4: bool = False
) -> None:
    topics = manager.topics()
    stored = TopicStore(manager.data_dir).load()  # kompakt's own topics; a Kafka dir has none
    for tplan in plan.topics:
        meta = topics.get(tplan.target)
        if meta is None:
            if kafka4:
                continue  # _check_kafka refused it
            if not config.create_topics:
                plan.problems.append(
                    f"topic {tplan.target!r} is not in {manager.data_dir} and create_topics is false"
                )
            continue
        tplan.action = "existing"
        if meta.partitions < tplan.partitions:
            plan.problems.append(
                f"topic {tplan.target!r} has {meta.partitions} partition directories, "
                f"the backup has {tplan.partitions}"
            )
        if kafka4:
            pass  # the policy was checked against the metadata log
        elif tplan.target in stored:
            target_policy = ",".join(sorted(manager.topic_config(tplan.target).cleanup_policy))
            if policy_set(target_policy) != policy_set(tplan.cleanup_policy):
                message = (
                    f"topic {tplan.target!r} has cleanup.policy={target_policy}, "
                    f"the source topic {tplan.source!r} had {tplan.cleanup_policy}"
                )
                if config.allow_policy_mismatch:
                    plan.notes.append(message)
                else:
                    plan.problems.append(message)
        else:
            plan.notes.append(
                f"topic {tplan.target!r} has no stored configs (a Kafka directory?): its configs live in "
                f"the cluster; the source had {tplan.source!r} with {tplan.configs or 'defaults'}"
            )
        for partition in range(min(meta.partitions, tplan.partitions)):
            try:
                log = manager.get_log(tplan.target, partition)
            except KompaktError as exc:
                plan.problems.append(f"{tplan.target}-{partition}: {exc}")
                continue
            if not _is_empty(log):
                plan.problems.append(
                    f"{tplan.target}-{partition} already holds data (offsets {log.log_start_offset}.."
                    f"{log.log_end_offset}); an exact restore needs an empty partition"
                )


def _rebuild(view: RecordBatchView, records: list[Any]) -> bytes:
    """The filtered records of ``view`` as one batch at the same offsets and attributes.

    The delete horizon is dropped when the filter turned a record into a tombstone, so that new
    tombstone gets a fresh ``delete.retention.ms`` on the target's first clean.
    """
    horizon = view.delete_horizon_ms
    if any(r.value is None and r.key is not None for r in records) and horizon is not None:
        original = {r.offset for r in decode_records(view) if r.value is None}
        if any(r.value is None and r.offset not in original for r in records):
            horizon = None
    return build_batch(
        [SimpleRecord(r.key, r.value, r.timestamp, r.headers, r.offset - view.base_offset) for r in records],
        base_offset=view.base_offset,
        compression=Compression(view.compression),
        timestamp_type=view.timestamp_type,
        delete_horizon_ms=horizon,
        max_timestamp=view.max_timestamp if view.timestamp_type == TimestampType.LOG_APPEND_TIME else None,
    )


def plan_offline(
    config: RestoreConfig, *, storage: Storage | None = None, clock: Clock | None = None
) -> tuple[RestorePlan, RestoreSource]:
    """Every check of an offline restore, writing nothing (the directory is opened and closed)."""
    if config.data_dir is None:
        raise BackupError("an offline restore needs target.data_dir")
    source = RestoreSource.open(config, storage)
    plan = RestorePlan(config.backup_id, str(config.data_dir))
    plan_topics(config, source, plan)
    data_dir = Path(config.data_dir).expanduser()
    if not data_dir.is_dir():
        plan.notes.append(f"{data_dir} does not exist: it will be created as a new kompakt data directory")
        return plan, source
    metadata = read_cluster_metadata(data_dir)
    if metadata is not None:
        _check_kafka(metadata, data_dir, config, plan)
        if plan.problems:
            return plan, source  # refused without opening (or writing) anything in Kafka's directory
    manager = LogManager(data_dir, BrokerConfig(), clock or SystemClock())
    try:
        manager.open()
    except KompaktError as exc:
        raise BackupError(f"cannot open {data_dir}: {exc}") from None
    try:
        _check_manager(manager, config, plan, kafka4=metadata is not None)
    finally:
        manager.close()
    return plan, source


def run_offline_restore(
    config: RestoreConfig,
    *,
    storage: Storage | None = None,
    progress: Progress | None = None,
    clock: Clock | None = None,
) -> OfflineResult:
    """Check everything, then write each partition at its original offsets."""
    started = time.monotonic()
    reporter = progress or NoProgress()
    plan, source = plan_offline(config, storage=storage, clock=clock)
    plan.raise_if_problems()
    data_dir = Path(config.data_dir or "").expanduser()
    manager = LogManager(data_dir, BrokerConfig(), clock or SystemClock())
    try:
        manager.open()
    except KompaktError as exc:
        raise BackupError(f"cannot open {data_dir}: {exc}") from None
    counts = FilterCounts()
    rows: list[dict[str, Any]] = []
    total_records = total_bytes = 0
    kafka4 = read_cluster_metadata(data_dir) is not None
    try:
        _check_manager(manager, config, plan, kafka4=kafka4)  # again, under the lock this time
        plan.raise_if_problems()
        for tplan in plan.topics:
            if tplan.action == "create" and not kafka4:
                try:
                    manager.create_topic(tplan.target, tplan.partitions, tplan.configs)
                except KompaktError as exc:
                    raise BackupError(f"cannot create topic {tplan.target!r}: {exc}") from None
        bars = [
            PartitionProgress(t.target, e.partition, e.records)
            for t in plan.topics
            for e in source.partitions(t.source)
        ]
        reporter.begin(bars)
        index = 0
        with ThreadPoolExecutor(ORIGINAL_THREADS, thread_name_prefix="restore-original") as pool:
            for tplan in plan.topics:
                for entry in source.partitions(tplan.source):
                    bar = bars[index]
                    index += 1
                    row = _restore_partition(manager, source, tplan, entry, bar, counts, reporter, pool)
                    rows.append(row)
                    total_records += bar.records
                    total_bytes += bar.bytes
        if isinstance(manager.scheduler, ManualScheduler):
            manager.scheduler.run_due(FOREVER_MS)  # remove the empty segments the restore replaced
    finally:
        reporter.end()
        manager.close()
    return OfflineResult(plan, rows, counts, total_records, total_bytes, time.monotonic() - started)


def _restore_partition(
    manager: LogManager,
    source: RestoreSource,
    tplan: TopicPlan,
    entry: Any,
    bar: PartitionProgress,
    counts: FilterCounts,
    reporter: Progress,
    pool: Executor,
) -> dict[str, Any]:
    log = manager.get_log(tplan.target, entry.partition)
    if entry.start_offset > 0:
        log.truncate_fully_and_start_at(entry.start_offset)
    part_filter = source.record_filter.for_partition()
    filtering = source.record_filter.active
    for file, data, batches in source.iter_batches(entry, verified=True):
        if not filtering and not any(backup_compressed(b.raw) for b in batches):
            log.append_with_offsets(data)
            bar.records += sum(b.records_count for b in batches)
            bar.bytes += len(data)
        elif not filtering:
            # The batches the backup compressed are written as the source had them, uncompressed,
            # a few MiB at a time while the next ones are decompressed.
            run: list[memoryview] = []
            size = 0
            for _stored, view in as_restored(batches, pool, file.path):
                run.append(view.raw)
                size += view.size
                bar.records += view.records_count
                if size >= APPEND_BYTES:
                    log.append_with_offsets(b"".join(run))
                    bar.bytes += size
                    run, size = [], 0
            if run:
                log.append_with_offsets(b"".join(run))
                bar.bytes += size
        else:
            for _stored, view in as_restored(batches, pool, file.path):
                records, changed = part_filter.apply(decode_records(view))
                if not records:
                    continue
                raw = _rebuild(view, records) if changed else bytes(view.raw)
                log.append_with_offsets(raw)
                bar.records += len(records)
                bar.bytes += len(raw)
        bar.done = bar.records
        reporter.update(bar)
    end = log.log_end_offset
    if end < entry.end_offset:
        # Offsets after the last record that the source had used (transaction markers, aborted
        # records, records outside the window): an empty batch keeps the source's log end offset,
        # as Kafka's cleaner keeps a producer batch's last offset.
        log.append_with_offsets(
            build_batch([], base_offset=end, last_offset_delta=entry.end_offset - 1 - end)
        )
    log.flush()
    counts.erased += part_filter.counts.erased
    counts.tombstoned += part_filter.counts.tombstoned
    counts.outside_window += part_filter.counts.outside_window
    return {
        "topic": tplan.target,
        "partition": entry.partition,
        "records": bar.records,
        "bytes": bar.bytes,
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
    }
