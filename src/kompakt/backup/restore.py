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
order. Committed group offsets from the snapshot are translated: an offset ``C`` maps to the new
offset of the first restored record whose original offset is ``>= C`` (so a consumer resumes at
the same record), or to the end of the restored partition when there is none.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

from kompakt.backup.config import RestoreConfig
from kompakt.backup.erasure import FilterCounts
from kompakt.backup.errors import BackupError
from kompakt.backup.kafka import KAFKA, KAFKA_ADMIN, Client
from kompakt.backup.progress import NoProgress, PartitionProgress, Progress
from kompakt.backup.reader import RestoreSource, policy_set
from kompakt.backup.storage import Storage
from kompakt.records.record import decode_records

ORIGINAL_OFFSET_HEADER = "kompakt.original.offset"
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
        plan.topics.append(
            TopicPlan(
                source=topic.name,
                target=config.target_topic(topic.name),
                partitions=topic.partitions,
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
    plan.problems.extend(source.verify_all())
    if config.consumer_groups == "snapshot":
        chosen = {t.name for t in source.topics}
        for group, topics in source.manifest.consumer_groups.items():
            kept = {t: p for t, p in topics.items() if t in chosen}
            if kept:
                plan.groups[group] = kept


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
        new_topics = [KAFKA_ADMIN.NewTopic(t.target, t.partitions, -1, config=t.configs) for t in to_create]
        futures = client.admin.create_topics(new_topics, validate_only=True, request_timeout=client.timeout_s)
        for name, future in futures.items():
            try:
                future.result(timeout=client.timeout_s * 2)
            except KAFKA.KafkaException as exc:
                error = exc.args[0]
                plan.problems.append(
                    f"cannot create topic {name!r}: {error.str() if hasattr(error, 'str') else error}"
                )
    if plan.groups:
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


def run_restore(
    config: RestoreConfig, *, storage: Storage | None = None, progress: Progress | None = None
) -> RestoreResult:
    """Check everything (as ``validate-restore`` does), then create topics and produce."""
    started = time.monotonic()
    reporter = progress or NoProgress()
    plan, source = plan_restore(config, storage=storage)
    plan.raise_if_problems()
    client = Client(config.bootstrap_servers or "", config.timeout_s, config.client_config)
    to_create = [t for t in plan.topics if t.action == "create"]
    if to_create:
        new_topics = [KAFKA_ADMIN.NewTopic(t.target, t.partitions, -1, config=t.configs) for t in to_create]
        for name, future in client.admin.create_topics(new_topics, request_timeout=client.timeout_s).items():
            client.result(future, f"cannot create topic {name!r}")
        reporter.message(f"created {len(to_create)} topic(s) with their original configs")
    deliveries = _Deliveries()
    producer = KAFKA.Producer(
        client.config(
            **{
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 20,
                "batch.size": 1024 * 1024,
                "message.max.bytes": 8 * 1024 * 1024,
                "queue.buffering.max.kbytes": 256 * 1024,
                "compression.type": config.producer_compression,
                "on_delivery": deliveries.on_delivery,
            }
        )
    )
    counts = FilterCounts()
    rows: list[dict[str, Any]] = []
    total_records = total_bytes = 0
    group_offsets = _committed_by_partition(plan)
    anchor_of: dict[tuple[str, int, int], int] = {}
    states = [(t, e) for t in plan.topics for e in source.partitions(t.source)]
    bars = [PartitionProgress(t.target, e.partition, e.records) for t, e in states]
    reporter.begin(bars)
    try:
        for (tplan, entry), bar in zip(states, bars, strict=True):
            pending = sorted(group_offsets.get((tplan.source, entry.partition), set()))
            part_filter = source.record_filter.for_partition()
            last_report = time.monotonic()
            produce = producer.produce
            for _file, _data, batches in source.iter_batches(entry):
                for batch in batches:
                    records = decode_records(batch)
                    if source.record_filter.active:
                        records, _changed = part_filter.apply(records)
                    for record in records:
                        headers: list[tuple[str, bytes | None]] | None = list(record.headers) or None
                        if config.record_original_offsets:
                            headers = (headers or []) + [
                                (ORIGINAL_OFFSET_HEADER, str(record.offset).encode())
                            ]
                        kwargs: dict[str, Any] = {
                            "key": record.key,
                            "value": record.value,
                            "partition": entry.partition,
                            "timestamp": record.timestamp if record.timestamp >= 0 else 0,
                        }
                        if headers:
                            kwargs["headers"] = headers
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
                    bar.done = bar.records
                    producer.poll(0)
                    if deliveries.error is not None:
                        raise BackupError(f"produce failed: {deliveries.error}")
                    now = time.monotonic()
                    if now - last_report >= PROGRESS_EVERY_S:
                        last_report = now
                        reporter.update(bar)
            reporter.update(bar)
            counts.erased += part_filter.counts.erased
            counts.tombstoned += part_filter.counts.tombstoned
            counts.outside_window += part_filter.counts.outside_window
            total_records += bar.records
            total_bytes += bar.bytes
            rows.append(
                {
                    "topic": tplan.target,
                    "partition": entry.partition,
                    "records": bar.records,
                    "bytes": bar.bytes,
                }
            )
        remaining = producer.flush(max(30.0, client.timeout_s * 3))
        if remaining:
            raise BackupError(f"{remaining} record(s) were not acknowledged by {client.bootstrap}")
        if deliveries.error is not None:
            raise BackupError(f"produce failed: {deliveries.error}")
    finally:
        reporter.end()
    groups = _restore_groups(client, plan, deliveries, group_offsets, anchor_of) if plan.groups else {}
    return RestoreResult(
        plan, rows, counts, total_records, total_bytes, time.monotonic() - started, groups=groups
    )


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
    plan: RestorePlan,
    deliveries: _Deliveries,
    offsets: dict[GroupKey, set[int]],
    anchor_of: dict[tuple[str, int, int], int],
) -> dict[str, dict[str, dict[str, int]]]:
    """Commit each snapshot group's translated offsets on the target topics."""
    consumer = KAFKA.Consumer(client.config(**{"group.id": "kompakt-restore-watermarks"}))
    ends: dict[tuple[str, int], int] = {}
    target_of = {t.source: t.target for t in plan.topics}
    try:
        for topic, partition in offsets:
            target = target_of[topic]
            _low, high = consumer.get_watermark_offsets(
                KAFKA.TopicPartition(target, partition), timeout=client.timeout_s
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
                new = deliveries.anchors.get((topic, partition, anchor)) if anchor is not None else None
                if new is None:
                    new = ends[(topic, partition)]
                tps.append(KAFKA.TopicPartition(target_of[topic], partition, new))
                restored.setdefault(group, {}).setdefault(target_of[topic], {})[partition_text] = new
        requests.append(KAFKA.ConsumerGroupTopicPartitions(group, tps))
    for request in requests:
        futures = client.admin.alter_consumer_group_offsets([request], request_timeout=client.timeout_s)
        for group, future in futures.items():
            client.result(future, f"cannot commit the offsets of group {group!r}")
    return restored
