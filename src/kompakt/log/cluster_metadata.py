"""Kafka 4's cluster metadata, read offline from the metadata log in a log directory.

A KRaft node keeps the cluster's topics, partitions and configs in the metadata log, the partition
``__cluster_metadata-0`` of its log directory: ``<offset>-<epoch>.checkpoint`` snapshots (each the
whole state up to, not including, ``offset``, as record batches between a SnapshotHeader and a
SnapshotFooter control record) and ordinary ``.log`` segments with the records since. Nothing else
in the directory says which configs a topic has, so an offline tool that does not read this log
explains and compacts every topic of a Kafka 4 directory with Kafka's defaults
(``cleanup.policy=delete``, 1 GiB segments), ``__consumer_offsets`` included.

:func:`read_cluster_metadata` replays it as Kafka's metadata loader does: the newest readable
snapshot, then every record of the log at or after the snapshot's offset, in order. It applies
``TopicRecord``, ``PartitionRecord``, ``PartitionChangeRecord`` (replicas), ``ConfigRecord`` (TOPIC
and BROKER resources; a null value removes the config) and ``RemoveTopicRecord`` (the topic, its
partitions and its configs), and Kafka's metadata transactions (records between a
``BeginTransactionRecord`` and an ``AbortTransactionRecord`` are dropped, as the loader drops
them). Every other record type is read past.

Damage never stops the reader and never guesses: a record whose bytes do not parse, a record type
or version Kafka 4.1 does not have, a torn or CRC-failing batch, a snapshot without its footer are
each reported in :attr:`ClusterMetadata.problems` and skipped (a damaged snapshot falls back to the
previous one); what could be read is returned. Only the files are read, with no lock, so a running
node's directory may be read too (a record the quorum has not committed yet may then be included;
the offline tools read stopped directories).

This module is in the log layer because the offline tools (``kompakt.inspect``, ``kompakt.table``,
the CLI) and the cleaner's offline entry point (:mod:`kompakt.cleaner.offline`) all read it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kompakt.config.tables import TOPIC_CONFIGS
from kompakt.errors import KompaktError
from kompakt.log.cluster_metadata_records import (
    METADATA_RECORDS,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    MetadataRecordError,
    decode_metadata_record,
    metadata_record_type,
)
from kompakt.log.metadata_files import read_meta_properties, read_partition_metadata, uuid_to_kafka
from kompakt.records.batch import RecordBatchView, iter_batches
from kompakt.records.record import decode_records

#: KRaft's metadata topic (Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME``); one partition, 0.
METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_PARTITION_DIR: Final = f"{METADATA_TOPIC}-0"

#: Where a value read from the metadata log says it came from (the offline tools show it).
TOPIC_ORIGIN: Final = "metadata log"
CLUSTER_DEFAULT_ORIGIN: Final = "metadata log (cluster default)"

_SNAPSHOT_RE: Final = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")
_SEGMENT_RE: Final = re.compile(r"[0-9]{20}\.log")

_TOPIC_RECORD: Final = 2
_PARTITION_RECORD: Final = 3
_CONFIG_RECORD: Final = 4
_PARTITION_CHANGE_RECORD: Final = 5
_REMOVE_TOPIC_RECORD: Final = 9
_BEGIN_TRANSACTION: Final = 23
_END_TRANSACTION: Final = 24
_ABORT_TRANSACTION: Final = 25
_APPLIED: Final = frozenset(
    {
        _TOPIC_RECORD,
        _PARTITION_RECORD,
        _CONFIG_RECORD,
        _PARTITION_CHANGE_RECORD,
        _REMOVE_TOPIC_RECORD,
        _BEGIN_TRANSACTION,
        _END_TRANSACTION,
        _ABORT_TRANSACTION,
    }
)
#: SnapshotFooter, the control record a complete snapshot ends with.
_SNAPSHOT_FOOTER: Final = 4
#: At most this many problems are listed one by one; the rest are counted.
_MAX_PROBLEMS: Final = 20


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A ``<end offset>-<epoch>.checkpoint`` file: the state before ``end_offset``."""

    end_offset: int
    epoch: int
    path: Path


@dataclass(frozen=True, slots=True)
class MetadataTopic:
    """One topic as the metadata log has it."""

    name: str
    topic_id: str
    """Kafka's 22-character form, as ``partition.metadata`` and Kafka's tools print it."""
    replicas: Mapping[int, tuple[int, ...]]
    """Partition id -> the brokers that hold a replica, in preferred order."""
    configs: Mapping[str, str]
    """The topic's own overrides (``kafka-configs --entity-type topics``), nothing inherited."""

    @property
    def partitions(self) -> int:
        return len(self.replicas)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """The cluster's topics and config overrides, from one node's metadata log."""

    directory: Path
    topics: Mapping[str, MetadataTopic]
    broker_configs: Mapping[str, Mapping[str, str]]
    """BROKER resource name -> overrides: ``""`` is the cluster default
    (``--entity-default``), ``"1"`` broker 1's own."""
    snapshot: SnapshotFile | None
    end_offset: int
    """The offset after the last record read (the snapshot's end when the log adds nothing)."""
    node_id: int | None
    """This directory's node (``meta.properties``), whose own broker overrides apply here."""
    deleted_topics: Mapping[str, str] = field(default_factory=dict)
    """Topic id -> name of the topics a ``RemoveTopicRecord`` removed."""
    problems: tuple[str, ...] = ()

    def topic_by_id(self, topic_id: str) -> MetadataTopic | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """``topic``'s own overrides that kompakt defines (every Kafka 4.1 topic config except
        the internal ones, such as ``internal.segment.bytes``: :meth:`ignored_topic_configs`)."""
        meta = self.topics.get(topic)
        if meta is None:
            return {}
        return {k: v for k, v in meta.configs.items() if k in TOPIC_CONFIGS}

    def ignored_topic_configs(self) -> dict[str, list[str]]:
        """Topic -> the names of its overrides that are not topic configs kompakt defines."""
        ignored = {
            name: sorted(k for k in meta.configs if k not in TOPIC_CONFIGS)
            for name, meta in self.topics.items()
        }
        return {name: names for name, names in ignored.items() if names}

    def stray_reason(self, topic: str, partition: int, topic_id: str | None) -> str | None:
        """Why Kafka would not load the partition directory ``topic-partition`` (whose
        ``partition.metadata`` holds ``topic_id``) and rename it ``-stray`` at its next start,
        or None when the metadata log assigns it to this node (Kafka's
        ``LogManager.isStrayKraftReplica``)."""
        meta = self.topics.get(topic)
        if meta is None:
            if topic_id is not None and topic_id in self.deleted_topics:
                return f"topic {topic!r} was deleted (the metadata log removed topic id {topic_id})"
            return f"topic {topic!r} is not in the metadata log (never created on this cluster, or deleted)"
        if topic_id is None:
            return f"{topic}-{partition} has no partition.metadata (no topic id)"
        if topic_id != meta.topic_id:
            return (
                f"{topic}-{partition} holds topic id {topic_id}, the metadata log's {topic!r} is "
                f"{meta.topic_id} (an earlier topic of the same name)"
            )
        replicas = meta.replicas.get(partition)
        if replicas is None:
            return f"topic {topic!r} has {meta.partitions} partitions in the metadata log, not {partition}"
        if self.node_id is not None and self.node_id not in replicas:
            return (
                f"{topic}-{partition} is assigned to brokers {list(replicas)}, "
                f"not to this node ({self.node_id})"
            )
        return None

    def stray_reason_of(self, directory: Path, topic: str, partition: int) -> str | None:
        """:meth:`stray_reason` for a partition directory, reading its ``partition.metadata``."""
        try:
            topic_id = read_partition_metadata(directory)
        except KompaktError as exc:
            return f"{topic}-{partition}: {exc}"
        return self.stray_reason(topic, partition, None if topic_id is None else uuid_to_kafka(topic_id))

    def broker_layers(self) -> list[tuple[str, Mapping[str, str]]]:
        """The broker-level overrides that apply to this node, lowest precedence first, each with
        its origin: the cluster default, then this broker's own (Kafka's
        ``DYNAMIC_DEFAULT_BROKER_CONFIG`` < ``DYNAMIC_BROKER_CONFIG``)."""
        layers: list[tuple[str, Mapping[str, str]]] = [
            (CLUSTER_DEFAULT_ORIGIN, self.broker_configs.get("", {}))
        ]
        if self.node_id is not None:
            layers.append(
                (f"metadata log (broker {self.node_id})", self.broker_configs.get(str(self.node_id), {}))
            )
        return layers

    def broker_overrides(self) -> dict[str, tuple[str, str]]:
        """Every broker-level override that applies to this node: ``name -> (value, origin)``."""
        values: dict[str, tuple[str, str]] = {}
        for origin, configs in self.broker_layers():
            for name, value in configs.items():
                values[name] = (value, origin)
        return values


def metadata_dir(data_dir: Path) -> Path | None:
    """``data_dir``'s ``__cluster_metadata-0`` when it has one (a KRaft node's log directory)."""
    path = data_dir / METADATA_PARTITION_DIR
    return path if path.is_dir() else None


def list_snapshots(directory: Path) -> list[SnapshotFile]:
    """The snapshots of a metadata log directory, oldest first (``.checkpoint.part`` and
    ``.checkpoint.deleted`` files, unfinished or retired, are not snapshots)."""
    found = []
    for entry in os.scandir(directory):
        match = _SNAPSHOT_RE.fullmatch(entry.name)
        if match and entry.is_file():
            found.append(SnapshotFile(int(match[1]), int(match[2]), Path(entry.path)))
    return sorted(found, key=lambda s: (s.end_offset, s.epoch))


class _State:
    """The image being built: topics by id, configs by resource, and the problems met."""

    def __init__(self) -> None:
        self.topics: dict[str, dict[str, Any]] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.deleted: dict[str, str] = {}
        self.problems: list[str] = []
        self.dropped_problems = 0
        self.unknown_types: dict[int, int] = {}
        self.transaction: list[tuple[int, dict[str, Any]]] | None = None

    def problem(self, message: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(message)
        else:
            self.dropped_problems += 1

    def record(self, where: str, value: bytes | None) -> None:
        """Apply (or, inside a metadata transaction, hold) one record's value."""
        if value is None:
            self.problem(f"{where}: a record without a value")
            return
        try:
            api_key, _version = metadata_record_type(value)
            if api_key not in _APPLIED and api_key in METADATA_RECORDS:
                return  # a known type this image does not need (NoOp, broker registrations...)
            decoded = decode_metadata_record(value)
        except MetadataRecordError as exc:
            self.problem(f"{where}: unreadable record ({exc}); skipped")
            return
        if decoded.data is None:
            if decoded.type_name.startswith("UNKNOWN_RECORD_TYPE"):
                self.unknown_types[decoded.api_key] = self.unknown_types.get(decoded.api_key, 0) + 1
            elif decoded.api_key in _APPLIED:
                self.problem(
                    f"{where}: {decoded.type_name} version {decoded.version} is newer than "
                    "Kafka 4.1's; skipped"
                )
            return
        key = decoded.api_key
        if key == _BEGIN_TRANSACTION:
            if self.transaction is not None:
                self.problem(f"{where}: a metadata transaction begins inside another; the first is dropped")
            self.transaction = []
            return
        if key == _END_TRANSACTION:
            held, self.transaction = self.transaction or [], None
            for api_key, data in held:
                self.apply(api_key, data)
            return
        if key == _ABORT_TRANSACTION:
            self.transaction = None
            return
        if key not in _APPLIED:
            return
        if self.transaction is not None:
            self.transaction.append((key, decoded.data))
        else:
            self.apply(key, decoded.data)

    def apply(self, key: int, data: dict[str, Any]) -> None:
        if key == _TOPIC_RECORD:
            self.topics[data["topicId"]] = {"name": data["name"], "replicas": {}}
        elif key == _PARTITION_RECORD:
            topic = self.topics.get(data["topicId"])
            if topic is None:
                self.problem(f"PartitionRecord for unknown topic id {data['topicId']}; skipped")
                return
            topic["replicas"][data["partitionId"]] = tuple(data["replicas"])
        elif key == _PARTITION_CHANGE_RECORD:
            topic = self.topics.get(data["topicId"])
            if topic is not None and data["replicas"] is not None:
                topic["replicas"][data["partitionId"]] = tuple(data["replicas"])
        elif key == _REMOVE_TOPIC_RECORD:
            topic = self.topics.pop(data["topicId"], None)
            if topic is not None:
                self.deleted[data["topicId"]] = topic["name"]
                self.configs.pop((RESOURCE_TOPIC, topic["name"]), None)
        elif key == _CONFIG_RECORD:
            if data["resourceType"] not in (RESOURCE_TOPIC, RESOURCE_BROKER):
                return
            resource = (data["resourceType"], data["resourceName"])
            if data["value"] is None:
                self.configs.get(resource, {}).pop(data["name"], None)
            else:
                self.configs.setdefault(resource, {})[data["name"]] = data["value"]

    def finish(self) -> list[str]:
        problems = list(self.problems)
        if self.dropped_problems:
            problems.append(f"and {self.dropped_problems} more problems")
        for api_key, count in sorted(self.unknown_types.items()):
            problems.append(f"{count} records of type {api_key}, unknown to Kafka 4.1, skipped")
        if self.transaction is not None:
            problems.append(
                "the log ends inside a metadata transaction: its "
                f"{len(self.transaction)} records are not applied"
            )
        return problems


def _batches(path: Path, state: _State) -> Iterator[RecordBatchView]:
    """The whole, valid v2 batches of one file; the first damaged one ends the file (reported)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        state.problem(f"{path.name}: cannot read ({exc.strerror or exc})")
        return
    end = 0
    for view in iter_batches(data):
        if view.magic != 2:
            state.problem(
                f"{path.name} byte {view.position}: batch of magic {view.magic}; the rest is skipped"
            )
            return
        if view.compute_crc() != view.crc:
            state.problem(f"{path.name} byte {view.position}: CRC mismatch; the rest is skipped")
            return
        end = view.position + view.size
        yield view
    if end < len(data) and any(data[end:]):
        state.problem(f"{path.name} byte {end}: {len(data) - end} bytes that are not a whole batch; skipped")


def _control_type(key: bytes | None) -> int | None:
    """The type in a control record's key (int16 version, int16 type)."""
    if key is None or len(key) < 4:
        return None
    return int.from_bytes(key[2:4], "big")


def _read_snapshot(snapshot: SnapshotFile, state: _State) -> bool:
    """Apply a snapshot; False (and the state untouched) when it is not whole: a damaged batch or
    no SnapshotFooter. A record inside it that cannot be applied is reported, as in the log."""
    trial = _State()
    damage = _State()
    complete = False
    for view in _batches(snapshot.path, damage):
        try:
            records = decode_records(view)
        except KompaktError as exc:
            damage.problem(f"{snapshot.path.name} byte {view.position}: {exc}")
            break
        if view.is_control:
            complete = complete or any(_control_type(r.key) == _SNAPSHOT_FOOTER for r in records)
            continue
        for record in records:
            trial.record(f"{snapshot.path.name} offset {record.offset}", record.value)
    if damage.problems or not complete:
        reason = "; ".join(damage.problems[:2]) or "no SnapshotFooter (an unfinished snapshot)"
        state.problem(f"snapshot {snapshot.path.name} is not usable ({reason}); an older one is read instead")
        return False
    state.topics, state.configs, state.deleted = trial.topics, trial.configs, trial.deleted
    state.unknown_types = trial.unknown_types
    for problem in trial.problems:
        state.problem(problem)
    return True


def _read_log(directory: Path, start: int, state: _State) -> int:
    """Apply every record at or after ``start``; return the offset after the last one read."""
    segments = sorted(
        (int(e.name[:20]), Path(e.path)) for e in os.scandir(directory) if _SEGMENT_RE.fullmatch(e.name)
    )
    if not segments:
        return start
    if segments[0][0] > start:
        state.problem(
            f"the metadata log starts at offset {segments[0][0]}, after the snapshot's {start}: "
            "the records in between are missing"
        )
    end = start
    for index, (_base, path) in enumerate(segments):
        if index + 1 < len(segments) and segments[index + 1][0] <= start:
            continue  # wholly before the snapshot
        for view in _batches(path, state):
            if view.last_offset < start:
                continue
            end = max(end, view.last_offset + 1)
            if view.is_control:
                continue
            try:
                records = decode_records(view)
            except KompaktError as exc:
                state.problem(f"{path.name} byte {view.position}: {exc}; batch skipped")
                continue
            for record in records:
                if record.offset >= start:
                    state.record(f"offset {record.offset}", record.value)
    return end


def read_cluster_metadata(data_dir: Path) -> ClusterMetadata | None:
    """The cluster metadata of a Kafka 4 log directory, or None when it has no metadata log
    (a kompakt directory, a Kafka directory of ZooKeeper days, one of several ``log.dirs``)."""
    directory = metadata_dir(data_dir)
    if directory is None:
        return None
    state = _State()
    used: SnapshotFile | None = None
    for snapshot in reversed(list_snapshots(directory)):
        if _read_snapshot(snapshot, state):
            used = snapshot
            break
    start = used.end_offset if used is not None else 0
    end = _read_log(directory, start, state)
    node_id: int | None = None
    try:
        meta = read_meta_properties(data_dir)
    except KompaktError as exc:
        state.problem(f"meta.properties: {exc}")
        meta = None
    if meta is not None:
        node_id = meta.node_id
    topics = {
        t["name"]: MetadataTopic(
            t["name"],
            topic_id,
            dict(sorted(t["replicas"].items())),
            dict(sorted(state.configs.get((RESOURCE_TOPIC, t["name"]), {}).items())),
        )
        for topic_id, t in state.topics.items()
    }
    brokers = {
        name: dict(sorted(values.items()))
        for (kind, name), values in state.configs.items()
        if kind == RESOURCE_BROKER and values
    }
    return ClusterMetadata(
        directory=directory,
        topics=dict(sorted(topics.items())),
        broker_configs=brokers,
        snapshot=used,
        end_offset=end,
        node_id=node_id,
        deleted_topics=dict(state.deleted),
        problems=tuple(state.finish()),
    )


__all__ = [
    "CLUSTER_DEFAULT_ORIGIN",
    "METADATA_PARTITION_DIR",
    "METADATA_TOPIC",
    "TOPIC_ORIGIN",
    "ClusterMetadata",
    "MetadataTopic",
    "SnapshotFile",
    "list_snapshots",
    "metadata_dir",
    "read_cluster_metadata",
]
