"""Restoring a backup through the Kafka protocol, to any cluster, and its dry run.

Everything that can be checked is checked before the first record is produced (the dry run,
``validate-restore``, runs exactly these checks and writes nothing):

* the backup is complete and every file it would use matches its sha256 (a corrupted or
  truncated file fails here, listing every bad file);
* the target cluster answers; each target topic either exists with at least the source's partition
  count **and the source's cleanup policy** (restoring a compacted topic into a ``delete`` topic,
  or the reverse, silently changes what survives, so it is refused unless
  ``allow_policy_mismatch``), or is created with the source's partition count and its original
  topic configs (validated by the broker first with CreateTopics ``validate_only``);
* consumer groups to restore are not active on the target.

Records are produced to the same partition number with their key, value (null stays null, empty
stays empty), headers and timestamp; the target assigns new offsets. With
``record_original_offsets`` each record carries its original offset in the header
``kompakt.original.offset`` (decimal ASCII). A single idempotent producer keeps each partition's
order: kompakt's own (:mod:`kompakt.backup.wire`), which produces the stored batches themselves
(:func:`kompakt.backup.batches.for_produce`; those the backup compressed as the source had them,
uncompressed: :func:`kompakt.backup.reader.as_restored`), or confluent-kafka's, record by record, for a
target that needs TLS or SASL. Committed group offsets from the snapshot are translated: an
offset ``C`` maps to the new offset of the first restored record whose original offset is
``>= C`` (so a consumer resumes at the same record), or to the end of the restored partition when
there is none.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kompakt.backup import wire
from kompakt.backup.batches import HEADER_ORIGINAL_OFFSET, HEADER_OSO, ProduceBatch, for_produce
from kompakt.backup.config import OSO_OFFSET_HEADERS, RestoreConfig
from kompakt.backup.erasure import FilterCounts, PartitionFilter
from kompakt.backup.errors import BackupError
from kompakt.backup.kafka import KAFKA, KAFKA_ADMIN, Client
from kompakt.backup.manifest import PartitionEntry
from kompakt.backup.progress import NoProgress, PartitionProgress, Progress
from kompakt.backup.reader import ORIGINAL_THREADS, RestoreSource, as_restored, policy_set
from kompakt.backup.storage import Storage
from kompakt.cleaner.throttler import Throttler
from kompakt.clock import SystemClock
from kompakt.records.batch import RecordBatchView
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression
from kompakt.records.record import Record, decode_records

ORIGINAL_OFFSET_HEADER = "kompakt.original.offset"
CODECS_BY_NAME = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
PROGRESS_EVERY_S = 0.25


@dataclass
class TopicPlan:
    source: str
    target: str
    partitions: int
    action: str
    """``create`` (with ``configs``) or ``existing``."""
    configs: dict[str, str]
    cleanup_policy: str
    records: int
    files: int
    bytes: int

    def row(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "action": self.action,
            "partitions": self.partitions,
            "cleanup_policy": self.cleanup_policy,
            "records": self.records,
            "files": self.files,
            "bytes": self.bytes,
            "configs": ",".join(f"{k}={v}" for k, v in sorted(self.configs.items())),
        }


@dataclass
class RestorePlan:
    """What a restore would do, and every problem that stops it."""

    backup_id: str
    target: str
    topics: list[TopicPlan] = field(default_factory=list)
    groups: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_problems(self) -> None:
        if self.problems:
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            raise BackupError(f"restore refused: {self.problems[0]}{more}")

    def to_json(self) -> dict[str, Any]:
        return {
            "backup_id": self.backup_id,
            "target": self.target,
            "ok": self.ok,
            "topics": [t.row() for t in self.topics],
            "consumer_groups": sorted(self.groups),
            "problems": self.problems,
            "notes": self.notes,
        }


def plan_topics(config: RestoreConfig, source: RestoreSource, plan: RestorePlan) -> None:
    """The backup-side part of a plan: targets, sizes, filters, file checks."""
    for topic in source.topics:
        entries = source.partitions(topic.name)
        files = [f for e in entries for f in source.files(e)]
        mapped = [config.target_partition(e.partition) for e in entries]
        plan.topics.append(
            TopicPlan(
                source=topic.name,
                target=config.target_topic(topic.name),
                partitions=max([topic.partitions, *(m + 1 for m in mapped)]),
                action="create",
                configs=dict(topic.configs),
                cleanup_policy=topic.cleanup_policy,
                records=sum(f.records for f in files),
                files=len(files),
                bytes=sum(f.size for f in files),
            )
        )
    targets = [t.target for t in plan.topics]
    duplicates = sorted({t for t in targets if targets.count(t) > 1})
    if duplicates:
        plan.problems.append(f"several topics map to {', '.join(duplicates)}")
    record_filter = source.record_filter
    if record_filter.window_start is not None or record_filter.window_end is not None:
        plan.notes.append(
            f"time window {record_filter.window_start} .. {record_filter.window_end} (epoch ms, inclusive)"
        )
    if config.erasure.active:
        plan.notes.append(f"erasure of {len(config.erasure.keys)} key(s), on_match={config.erasure.on_match}")
    if source.source_partitions is not None:
        plan.notes.append(f"only source partitions {sorted(source.source_partitions)}")
    if config.partition_mapping:
        moves = ", ".join(f"{k}->{v}" for k, v in sorted(config.partition_mapping.items()))
        plan.notes.append(f"partition mapping {moves}")
    plan.notes.extend(config.notes)
    plan.problems.extend(source.verify_all())
    if config.consumer_groups in ("snapshot", "manual"):
        chosen = {t.name for t in source.topics}
        for group, topics in source.manifest.consumer_groups.items():
            if config.group_names is not None and group not in config.group_names:
                continue
            kept = {
                t: {
                    p: o
                    for p, o in parts.items()
                    if source.source_partitions is None or int(p) in source.source_partitions
                }
                for t, parts in topics.items()
                if t in chosen
            }
            kept = {t: parts for t, parts in kept.items() if parts}
            if kept:
                plan.groups[group] = kept
        if config.group_names is not None:
            missing = sorted(config.group_names - set(source.manifest.consumer_groups))
            if missing:
                plan.notes.append(f"consumer group(s) not in the backup's snapshot: {', '.join(missing)}")
        if config.consumer_groups == "manual":
            plan.notes.append(
                "consumer_group_strategy manual: translated offsets are reported, not committed"
            )


def _check_target(client: Client, config: RestoreConfig, source: RestoreSource, plan: RestorePlan) -> None:
    """The cluster-side part: reachable, topics compatible or creatable, groups idle."""
    existing = client.topics()
    present = [t for t in plan.topics if t.target in existing]
    target_configs = client.topic_configs([t.target for t in present])
    to_create = []
    for tplan in plan.topics:
        if tplan.target in existing:
            tplan.action = "existing"
            if existing[tplan.target] < tplan.partitions:
                plan.problems.append(
                    f"topic {tplan.target!r} has {existing[tplan.target]} partitions, "
                    f"the backup has {tplan.partitions}"
                )
            target_policy = target_configs.get(tplan.target, ({}, {}))[1].get("cleanup.policy", "delete")
            if policy_set(target_policy) != policy_set(tplan.cleanup_policy):
                message = (
                    f"topic {tplan.target!r} has cleanup.policy={target_policy}, "
                    f"the source topic {tplan.source!r} had {tplan.cleanup_policy}"
                )
                if config.allow_policy_mismatch:
                    plan.notes.append(message + " (allowed by allow_policy_mismatch)")
                else:
                    plan.problems.append(message)
        elif not config.create_topics:
            plan.problems.append(f"topic {tplan.target!r} does not exist and restore.create_topics is false")
        else:
            to_create.append(tplan)
    if to_create:
        rf = config.default_replication_factor
        new_topics = [KAFKA_ADMIN.NewTopic(t.target, t.partitions, rf, config=t.configs) for t in to_create]
        futures = client.admin.create_topics(new_topics, validate_only=True, request_timeout=client.timeout_s)
        for name, future in futures.items():
            try:
                future.result(timeout=client.timeout_s * 2)
            except KAFKA.KafkaException as exc:
                error = exc.args[0]
                plan.problems.append(
                    f"cannot create topic {name!r}: {error.str() if hasattr(error, 'str') else error}"
                )
    if plan.groups and config.consumer_groups == "snapshot":
        listing = client.result(
            client.admin.list_consumer_groups(request_timeout=client.timeout_s), "list groups"
        )
        active = {
            g.group_id for g in listing.valid if str(getattr(g.state, "name", "")) not in ("EMPTY", "DEAD")
        }
        for group in sorted(set(plan.groups) & active):
            plan.problems.append(
                f"consumer group {group!r} is active on the target; stop its consumers first"
            )


def plan_restore(
    config: RestoreConfig, *, storage: Storage | None = None
) -> tuple[RestorePlan, RestoreSource]:
    """Everything a protocol restore checks, without writing (``validate-restore``)."""
    if config.bootstrap_servers is None:
        raise BackupError(
            "plan_restore needs target.bootstrap_servers (use the offline restore for data_dir)"
        )
    source = RestoreSource.open(config, storage)
    plan = RestorePlan(config.backup_id, config.bootstrap_servers)
    plan_topics(config, source, plan)
    client = Client(config.bootstrap_servers, config.timeout_s, config.client_config)
    _check_target(client, config, source, plan)
    return plan, source


@dataclass
class RestoreTotals:
    """What a restore did, whichever path it took (protocol or offline)."""

    plan: RestorePlan
    partitions: list[dict[str, Any]]
    counts: FilterCounts
    records: int
    bytes: int
    seconds: float

    def summary(self) -> dict[str, Any]:
        return {
            "backup_id": self.plan.backup_id,
            "target": self.plan.target,
            "records": self.records,
            "bytes": self.bytes,
            "erased": self.counts.erased,
            "tombstoned": self.counts.tombstoned,
            "outside_window": self.counts.outside_window,
            "seconds": round(self.seconds, 3),
            "mb_per_s": round(self.bytes / 1e6 / self.seconds, 2) if self.seconds > 0 else None,
        }


@dataclass
class RestoreResult(RestoreTotals):
    """A restore through the protocol, which also restores consumer-group offsets."""

    groups: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "groups": len(self.groups)}


class _Deliveries:
    """Delivery reports: the first error, and the new offsets of the group-offset anchors."""

    def __init__(self) -> None:
        self.error: str | None = None
        self.anchors: dict[tuple[str, int, int], int] = {}

    def on_delivery(self, error: Any, msg: Any) -> None:
        if error is not None and self.error is None:
            self.error = f"{msg.topic()}-{msg.partition()}: {error.str() if hasattr(error, 'str') else error}"

    def on_anchor(self, topic: str, partition: int, original: int, error: Any, msg: Any) -> None:
        if error is not None:
            self.on_delivery(error, msg)
        else:
            self.anchors[(topic, partition, original)] = msg.offset()


@dataclass
class _Produced:
    """What the produce phase did, whichever producer did it."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: FilterCounts = field(default_factory=FilterCounts)
    records: int = 0
    bytes: int = 0
    anchor_of: dict[tuple[str, int, int], int] = field(default_factory=dict)
    """(source topic, partition, committed offset) -> original offset of the first restored record
    at or after it."""
    anchors: dict[tuple[str, int, int], int] = field(default_factory=dict)
    """(source topic, partition, original offset) -> the offset that record got on the target."""

    def add_partition(
        self, tplan: TopicPlan, entry: PartitionEntry, target: int, bar: PartitionProgress
    ) -> None:
        self.records += bar.records
        self.bytes += bar.bytes
        self.rows.append(
            {
                "topic": tplan.target,
                "partition": target,
                "source": f"{tplan.source}-{entry.partition}",
                "records": bar.records,
                "bytes": bar.bytes,
            }
        )


def run_restore(
    config: RestoreConfig, *, storage: Storage | None = None, progress: Progress | None = None
) -> RestoreResult:
    """Check everything (as ``validate-restore`` does), then create topics and produce.

    A target reached in plaintext gets the stored batches through kompakt's own Produce
    (:func:`_produce_batches`); one that needs TLS or SASL gets every record through a
    confluent-kafka producer (:func:`_produce_records`)."""
    started = time.monotonic()
    reporter = progress or NoProgress()
    plan, source = plan_restore(config, storage=storage)
    plan.raise_if_problems()
    client = Client(config.bootstrap_servers or "", config.timeout_s, config.client_config)
    _create_topics(client, config, plan, reporter)
    group_offsets = _committed_by_partition(plan)
    if wire.plaintext(config.client_config):
        produced = _produce_batches(config, plan, source, reporter, group_offsets)
    else:
        produced = _produce_records(client, config, plan, source, reporter, group_offsets)
    committing = config.consumer_groups == "snapshot"
    groups = {}
    if plan.groups:
        groups = _restore_groups(
            client, config, plan, produced.anchors, group_offsets, produced.anchor_of, commit=committing
        )
    result = RestoreResult(
        plan,
        produced.rows,
        produced.counts,
        produced.records,
        produced.bytes,
        time.monotonic() - started,
        groups=groups,
    )
    write_offset_report(config, result, committed=committing)
    return result


def _header_mask(config: RestoreConfig) -> int:
    return (HEADER_ORIGINAL_OFFSET if config.record_original_offsets else 0) | (
        HEADER_OSO if config.oso_offset_headers else 0
    )


def _produce_batches(
    config: RestoreConfig,
    plan: RestorePlan,
    source: RestoreSource,
    reporter: Progress,
    group_offsets: dict[GroupKey, set[int]],
) -> _Produced:
    """The stored batches, each produced as it is where the target takes it (see
    :func:`kompakt.backup.batches.for_produce`), partition after partition. Only a time window or an
    erasure filter decodes records: those batches are rebuilt from the records they keep."""
    produced = _Produced()
    limits = _RateLimits(config)
    headers = _header_mask(config)
    codec = None if config.producer_compression is None else CODECS_BY_NAME[config.producer_compression]
    session = wire.open_session(
        config.bootstrap_servers or "",
        config.timeout_s,
        acks=config.produce_acks,
        timeout_ms=config.produce_timeout_ms,
    )
    states = [(t, e) for t in plan.topics for e in source.partitions(t.source)]
    bars = [PartitionProgress(t.target, e.partition, e.records) for t, e in states]
    # The batches the backup compressed go out as the source had them, uncompressed (the
    # broker has nothing to decompress), unless the restore names a codec of its own.
    pool = None if codec is not None else ThreadPoolExecutor(ORIGINAL_THREADS, thread_name_prefix="restore")
    reporter.begin(bars)
    try:
        for (tplan, entry), bar in zip(states, bars, strict=True):
            target = config.target_partition(entry.partition)
            pending = sorted(group_offsets.get((tplan.source, entry.partition), set()))
            part_filter = source.record_filter.for_partition()
            producer = wire.PartitionProducer(session, tplan.target, target, max(30.0, config.timeout_s * 3))
            last_report = time.monotonic()
            for file, _data, views in source.iter_batches(entry, verified=True):
                batches = as_restored(views, pool, file.path) if pool is not None else ((v, v) for v in views)
                for stored, view in batches:
                    if source.record_filter.active:
                        out = _filtered(view, part_filter, producer, session, headers, entry.partition, codec)
                        if out is None:
                            limits.after_batch(stored.size, 0)
                            continue
                    else:
                        given = view.buf if view is not stored and isinstance(view.buf, bytearray) else None
                        out = for_produce(
                            view.raw if given is None else given,  # an original batch: patched in place
                            producer_id=session.producer_id,
                            producer_epoch=session.producer_epoch,
                            sequence=producer.next_sequence(view.records_count),
                            headers=headers,
                            partition=entry.partition,
                            compression=codec,
                        )
                    on_done = None
                    if pending and pending[0] <= stored.last_offset:  # (view's header is the Produce's now)
                        on_done = _anchor(produced, tplan.source, entry.partition, out, pending)
                    producer.send(out.data, out.records, on_done)
                    limits.after_batch(stored.size, out.records)
                    bar.records += out.records
                    bar.bytes += len(out.data)
                    bar.done = bar.records
                    now = time.monotonic()
                    if now - last_report >= PROGRESS_EVERY_S:
                        last_report = now
                        reporter.update(bar)
            producer.close()
            reporter.update(bar)
            produced.counts.erased += part_filter.counts.erased
            produced.counts.tombstoned += part_filter.counts.tombstoned
            produced.counts.outside_window += part_filter.counts.outside_window
            produced.add_partition(tplan, entry, target, bar)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        session.close()
        reporter.end()
    return produced


def _filtered(
    view: RecordBatchView,
    part_filter: PartitionFilter,
    producer: wire.PartitionProducer,
    session: wire.ProducerSession,
    headers: int,
    partition: int,
    codec: Compression | None,
) -> ProduceBatch | None:
    """A batch through the time window and the erasure filter: unchanged batches go as they are,
    others are rebuilt from the records they keep (None when they keep none)."""
    records, changed = part_filter.apply(decode_records(view))
    if not records:
        return None
    if not changed:
        return for_produce(
            view.raw,
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
            sequence=producer.next_sequence(view.records_count),
            headers=headers,
            partition=partition,
            compression=codec,
        )
    kept = build_batch(
        [SimpleRecord(r.key, r.value, r.timestamp, r.headers, r.offset - view.base_offset) for r in records],
        base_offset=view.base_offset,
        compression=Compression(view.compression) if codec is None else codec,
    )
    return for_produce(
        memoryview(kept),
        producer_id=session.producer_id,
        producer_epoch=session.producer_epoch,
        sequence=producer.next_sequence(len(records)),
        headers=headers,
        partition=partition,
        compression=codec,
    )


def _anchor(
    produced: _Produced, topic: str, partition: int, out: ProduceBatch, pending: list[int]
) -> Callable[[int], None] | None:
    """Match the committed offsets ``pending`` (ascending) that this batch answers: the first
    record at or after each. Returns what records their new offsets once the batch is written."""
    import numpy as np

    originals = (
        out.originals
        if out.originals is not None
        else np.arange(out.base_original, out.base_original + out.records, dtype=np.int64)
    )
    if not len(originals):
        return None
    ordinals: dict[int, int] = {}
    while pending and pending[0] <= int(originals[-1]):
        committed = pending.pop(0)
        ordinal = int(np.searchsorted(originals, committed))
        original = int(originals[ordinal])
        produced.anchor_of[(topic, partition, committed)] = original
        ordinals[original] = ordinal

    def done(base_offset: int) -> None:
        if base_offset >= 0:
            for original, ordinal in ordinals.items():
                produced.anchors[(topic, partition, original)] = base_offset + ordinal

    return done if ordinals else None


def _produce_records(
    client: Client,
    config: RestoreConfig,
    plan: RestorePlan,
    source: RestoreSource,
    reporter: Progress,
    group_offsets: dict[GroupKey, set[int]],
) -> _Produced:
    """Every record through one confluent-kafka producer (a target that needs TLS or SASL)."""
    produced = _Produced()
    deliveries = _Deliveries()
    producer = KAFKA.Producer(client.config(**_producer_settings(config, deliveries)))
    limits = _RateLimits(config)
    anchor_of = produced.anchor_of
    states = [(t, e) for t in plan.topics for e in source.partitions(t.source)]
    bars = [PartitionProgress(t.target, e.partition, e.records) for t, e in states]
    reporter.begin(bars)
    try:
        for (tplan, entry), bar in zip(states, bars, strict=True):
            pending = sorted(group_offsets.get((tplan.source, entry.partition), set()))
            part_filter = source.record_filter.for_partition()
            last_report = time.monotonic()
            produce = producer.produce
            target_partition = config.target_partition(entry.partition)
            for _file, _data, batches in source.iter_batches(entry, verified=True):
                for batch in batches:
                    records = decode_records(batch)
                    if source.record_filter.active:
                        records, _changed = part_filter.apply(records)
                    for record in records:
                        kwargs = _produce_kwargs(config, tplan, entry.partition, record)
                        if pending and pending[0] <= record.offset:
                            # The first restored record at or after a committed offset: its new
                            # offset is where that group resumes.
                            while pending and pending[0] <= record.offset:
                                anchor_of[(tplan.source, entry.partition, pending.pop(0))] = record.offset
                            kwargs["on_delivery"] = functools.partial(
                                deliveries.on_anchor, tplan.source, entry.partition, record.offset
                            )
                        while True:
                            try:
                                produce(tplan.target, **kwargs)
                                break
                            except BufferError:
                                producer.poll(0.05)
                        size = (len(record.key) if record.key else 0) + (
                            len(record.value) if record.value else 0
                        )
                        bar.records += 1
                        bar.bytes += size
                    limits.after_batch(len(batch.raw), len(records))
                    bar.done = bar.records
                    producer.poll(0)
                    if deliveries.error is not None:
                        raise BackupError(f"produce failed: {deliveries.error}")
                    now = time.monotonic()
                    if now - last_report >= PROGRESS_EVERY_S:
                        last_report = now
                        reporter.update(bar)
            reporter.update(bar)
            produced.counts.erased += part_filter.counts.erased
            produced.counts.tombstoned += part_filter.counts.tombstoned
            produced.counts.outside_window += part_filter.counts.outside_window
            produced.add_partition(tplan, entry, target_partition, bar)
        remaining = producer.flush(max(30.0, client.timeout_s * 3))
        if remaining:
            raise BackupError(f"{remaining} record(s) were not acknowledged by {client.bootstrap}")
        if deliveries.error is not None:
            raise BackupError(f"produce failed: {deliveries.error}")
    finally:
        reporter.end()
    produced.anchors = deliveries.anchors
    return produced


def _producer_settings(config: RestoreConfig, deliveries: _Deliveries) -> dict[str, Any]:
    """One producer for the whole restore. Idempotent with acks=all by default (OSO's
    ``produce_acks: -1``); acks 0 or 1 cannot be idempotent, so order is kept with one request
    in flight instead."""
    settings: dict[str, Any] = {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1024 * 1024,
        "message.max.bytes": 8 * 1024 * 1024,
        "queue.buffering.max.kbytes": 256 * 1024,
        "compression.type": config.producer_compression or "none",
        "on_delivery": deliveries.on_delivery,
    }
    if config.produce_acks != -1:
        settings.update(
            {
                "enable.idempotence": False,
                "acks": str(config.produce_acks),
                "max.in.flight.requests.per.connection": 1,
            }
        )
    if config.produce_batch_size is not None:
        settings["batch.num.messages"] = config.produce_batch_size
    if config.produce_timeout_ms is not None:
        settings["request.timeout.ms"] = config.produce_timeout_ms
    return settings


class _RateLimits:
    """OSO's ``rate_limit_bytes_per_sec`` (on the backup's batch bytes) and
    ``rate_limit_records_per_sec``, with the cleaner's throttler on the system clock, applied
    after each batch is handed to the producer."""

    def __init__(self, config: RestoreConfig) -> None:
        clock = SystemClock()
        by_bytes, by_records = config.rate_limit_bytes_per_sec, config.rate_limit_records_per_sec
        self.bytes = None if by_bytes is None else Throttler(by_bytes, clock, time.sleep)
        self.records = None if by_records is None else Throttler(by_records, clock, time.sleep)

    def after_batch(self, size: int, count: int) -> None:
        if self.bytes is not None:
            self.bytes.maybe_throttle(size)
        if self.records is not None:
            self.records.maybe_throttle(count)


def _oso_headers(offset: int, timestamp: int, partition: int) -> list[tuple[str, bytes | None]]:
    """OSO kafka-backup's original-position headers, binary little-endian as OSO writes them."""
    return [
        (OSO_OFFSET_HEADERS[0], offset.to_bytes(8, "little", signed=True)),
        (OSO_OFFSET_HEADERS[1], timestamp.to_bytes(8, "little", signed=True)),
        (OSO_OFFSET_HEADERS[2], partition.to_bytes(4, "little", signed=True)),
    ]


def write_offset_report(config: RestoreConfig, result: RestoreResult, *, committed: bool) -> None:
    """OSO's ``offset_report``: what went where, and each group's translated offsets, as JSON."""
    if config.offset_report is None:
        return
    path = Path(config.offset_report)
    report = {
        "backup_id": result.plan.backup_id,
        "target": result.plan.target,
        "partitions": result.partitions,
        "consumer_groups": result.groups,
        "consumer_offsets_committed": committed,
    }
    try:
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BackupError(f"cannot write restore.offset_report {path}: {exc.strerror or exc}") from None


def _create_topics(client: Client, config: RestoreConfig, plan: RestorePlan, reporter: Progress) -> None:
    """Create the plan's missing topics with their original partition counts and configs."""
    to_create = [t for t in plan.topics if t.action == "create"]
    if not to_create:
        return
    rf = config.default_replication_factor
    new_topics = [KAFKA_ADMIN.NewTopic(t.target, t.partitions, rf, config=t.configs) for t in to_create]
    for name, future in client.admin.create_topics(new_topics, request_timeout=client.timeout_s).items():
        client.result(future, f"cannot create topic {name!r}")
    reporter.message(f"created {len(to_create)} topic(s) with their original configs")


def _produce_kwargs(
    config: RestoreConfig, tplan: TopicPlan, partition: int, record: Record
) -> dict[str, Any]:
    """The producer's arguments for one restored record of source ``partition``: its headers,
    plus the original position when ``record_original_offsets`` or OSO's
    ``include_original_offset_header`` asks for it, and its target partition."""
    headers: list[tuple[str, bytes | None]] | None = list(record.headers) or None
    if config.record_original_offsets:
        headers = (headers or []) + [(ORIGINAL_OFFSET_HEADER, str(record.offset).encode())]
    if config.oso_offset_headers:
        headers = (headers or []) + _oso_headers(record.offset, record.timestamp, partition)
    kwargs: dict[str, Any] = {
        "key": record.key,
        "value": record.value,
        "partition": config.target_partition(partition),
        "timestamp": record.timestamp if record.timestamp >= 0 else 0,
    }
    if headers:
        kwargs["headers"] = headers
    return kwargs


GroupKey = tuple[str, int]


def _committed_by_partition(plan: RestorePlan) -> dict[GroupKey, set[int]]:
    """Every committed source offset per source partition (the anchors to translate)."""
    out: dict[GroupKey, set[int]] = {}
    for topics in plan.groups.values():
        for topic, partitions in topics.items():
            for partition, offset in partitions.items():
                out.setdefault((topic, int(partition)), set()).add(int(offset))
    return out


def _restore_groups(
    client: Client,
    config: RestoreConfig,
    plan: RestorePlan,
    anchors: dict[tuple[str, int, int], int],
    offsets: dict[GroupKey, set[int]],
    anchor_of: dict[tuple[str, int, int], int],
    *,
    commit: bool = True,
) -> dict[str, dict[str, dict[str, int]]]:
    """Each snapshot group's offsets translated onto the target partitions; committed unless
    ``commit`` is false (OSO's ``manual`` strategy: reported only)."""
    consumer = KAFKA.Consumer(client.config(**{"group.id": "kompakt-restore-watermarks"}))
    ends: dict[tuple[str, int], int] = {}
    target_of = {t.source: t.target for t in plan.topics}
    try:
        for topic, partition in offsets:
            target = target_of[topic]
            _low, high = consumer.get_watermark_offsets(
                KAFKA.TopicPartition(target, config.target_partition(partition)), timeout=client.timeout_s
            )
            ends[(topic, partition)] = int(high)
    finally:
        consumer.close()
    restored: dict[str, dict[str, dict[str, int]]] = {}
    requests = []
    for group, topics in sorted(plan.groups.items()):
        tps = []
        for topic, partitions in topics.items():
            for partition_text, committed in partitions.items():
                partition = int(partition_text)
                anchor = anchor_of.get((topic, partition, int(committed)))
                new = anchors.get((topic, partition, anchor)) if anchor is not None else None
                if new is None:
                    new = ends[(topic, partition)]
                moved = config.target_partition(partition)
                tps.append(KAFKA.TopicPartition(target_of[topic], moved, new))
                restored.setdefault(group, {}).setdefault(target_of[topic], {})[str(moved)] = new
        requests.append(KAFKA.ConsumerGroupTopicPartitions(group, tps))
    if not commit:
        return restored
    for request in requests:
        futures = client.admin.alter_consumer_group_offsets([request], request_timeout=client.timeout_s)
        for group, future in futures.items():
            client.result(future, f"cannot commit the offsets of group {group!r}")
    return restored
