"""Committed offsets kept in the compacted internal topic ``__consumer_offsets``, as Kafka does.

Layout (Kafka's, so the directory is readable by Kafka's tools and vice versa):

* Partition of a group: ``Utils.abs(group.hashCode()) % partitions``, with Java's ``String.hashCode``
  over UTF-16 code units and ``Utils.abs`` mapping ``Integer.MIN_VALUE`` to 0.
* Offset commit: key = int16 version 1 then OffsetCommitKey ``(group string, topic string,
  partition int32)``; value = int16 version 3 then OffsetCommitValue ``(offset int64, leader_epoch
  int32, metadata string, commit_timestamp int64)``, or version 1 ``(offset, metadata,
  commit_timestamp, expire_timestamp int64)`` when an explicit expiry (OffsetCommit v2–4
  ``retention_time``) must be kept, which is what Kafka writes in that case.
* Group metadata: key = int16 version 2 then ``(group string)``; value = int16 version 3 then
  GroupMetadataValue (see :class:`GroupMetadataRecord`).
* KIP-848 consumer groups: key types 3–8 and 16, encoded in
  :mod:`kompakt.broker.groups.consumer_records`; the store keeps their latest value per key
  (:meth:`TopicOffsetStore.consumer_group_records`) for the consumer-group coordinator to replay.
* Strings are classic (non-flexible) encodings: int16 length then UTF-8; a null string has length
  -1; bytes are int32 length then data. Every version used here is non-flexible.

Removal writes a tombstone (null value) for the key, so the cleaner eventually drops both the old
values and the tombstone. :meth:`TopicOffsetStore.load` replays every partition from its log start
offset (latest record per key wins, tombstones delete), so offsets survive restarts.

Thread-safety and blocking: one lock covers "append to the log, then update the map", so the map
and the log always agree on the order of changes. Appends are small (one batch of a few hundred
bytes per commit request) and do not fsync (``flush.messages`` governs that, as for any topic);
this is the same durability as an ``acks=-1`` produce on a single broker, cheap enough to run on
the event loop, which is where the coordinator calls :meth:`commit`.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kompakt.broker.groups import consumer_records
from kompakt.broker.groups.offsets import CommittedOffset, apply_consumer_records, select_offsets
from kompakt.broker.groups.offsets import GroupMemberRecord as GroupMemberRecord
from kompakt.broker.groups.offsets import GroupMetadataRecord as GroupMetadataRecord
from kompakt.broker.schema_reader import SchemaReader
from kompakt.clock import Clock
from kompakt.errors import KompaktError, TopicExistsError
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.log.producer_state import AppendOrigin
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, control_type_of
from kompakt.records.record import decode_records

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's ``offsets.topic.segment.bytes`` default (100 MiB).
OFFSETS_TOPIC_SEGMENT_BYTES = 104_857_600
OFFSETS_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES),
    "compression.type": "producer",
}

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_READ_CHUNK = 1 << 20


class OffsetsTopicFormatError(KompaktError):
    """A ``__consumer_offsets`` key or value that does not parse as any known schema version."""


# ----------------------------------------------------------------------------------------------
# Partitioning


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ...`` over UTF-16 units, as a signed int32."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` (``abs(MIN_VALUE)`` is 0 there)."""
    h = java_string_hashcode(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ----------------------------------------------------------------------------------------------
# Classic encodings


def _string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def _nullable_string(value: str | None) -> bytes:
    return _I16.pack(-1) if value is None else _string(value)


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Version 1 key of an offset commit."""
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(group) + _string(topic) + _I32.pack(partition)


def encode_group_metadata_key(group: str) -> bytes:
    """Version 2 key of a group's metadata."""
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group)


def encode_offset_commit_value(entry: CommittedOffset) -> bytes:
    """Version 3, or version 1 when the entry carries an explicit expire timestamp (Kafka's choice).

    The value's metadata is a non-nullable string; a null metadata is stored as "" as Kafka does.
    """
    metadata = _string(entry.metadata or "")
    if entry.expire_timestamp_ms is not None:
        return (
            _I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
            + _I64.pack(entry.offset)
            + metadata
            + _I64.pack(entry.commit_timestamp_ms)
            + _I64.pack(entry.expire_timestamp_ms)
        )
    return (
        _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _I64.pack(entry.offset)
        + _I32.pack(entry.leader_epoch)
        + metadata
        + _I64.pack(entry.commit_timestamp_ms)
    )


def decode_offset_commit_value(data: bytes) -> CommittedOffset:
    """Parse value versions 0–3 (version 4 is flexible and never written by kompakt)."""
    reader = SchemaReader(data, OffsetsTopicFormatError)
    version = reader.i16()
    if not 0 <= version <= 3:
        raise OffsetsTopicFormatError(f"unsupported OffsetCommitValue version {version}")
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.classic_string()
    commit_ts = reader.i64()
    expire_ts = reader.i64() if version == 1 else None
    if expire_ts is not None and expire_ts < 0:
        expire_ts = None
    return CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts)


def encode_group_metadata_value(record: GroupMetadataRecord) -> bytes:
    """Version 3 of GroupMetadataValue."""
    parts = [
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(record.protocol_type),
        _I32.pack(record.generation),
        _nullable_string(record.protocol),
        _nullable_string(record.leader),
        _I64.pack(record.current_state_timestamp_ms),
        _I32.pack(len(record.members)),
    ]
    for member in record.members:
        parts += [
            _string(member.member_id),
            _nullable_string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _I32.pack(member.rebalance_timeout_ms),
            _I32.pack(member.session_timeout_ms),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


def decode_group_metadata_value(data: bytes) -> GroupMetadataRecord:
    """Parse GroupMetadataValue versions 0–3."""
    reader = SchemaReader(data, OffsetsTopicFormatError)
    version = reader.i16()
    if not 0 <= version <= 3:
        raise OffsetsTopicFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = reader.classic_string()
    generation = reader.i32()
    protocol = reader.nullable_classic_string()
    leader = reader.nullable_classic_string()
    state_ts = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.i32()):
        member_id = reader.classic_string()
        instance_id = reader.nullable_classic_string() if version >= 3 else None
        client_id = reader.classic_string()
        client_host = reader.classic_string()
        session_timeout = reader.i32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, reader.i32()
        members.append(
            GroupMemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.int32_bytes(),
                reader.int32_bytes(),
            )
        )
    return GroupMetadataRecord(protocol_type, generation, protocol, leader, state_ts, tuple(members))


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """A decoded offset-commit key."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    """A decoded group-metadata key."""

    group: str


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """Parse a classic record key; None for other record types (consumer groups' are parsed elsewhere)."""
    reader = SchemaReader(data, OffsetsTopicFormatError)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.classic_string(), reader.classic_string(), reader.i32())
    if version == 2:
        return GroupKey(reader.classic_string())
    return None


# ----------------------------------------------------------------------------------------------
# The store


class TopicOffsetStore:
    """An :class:`~kompakt.broker.groups.offsets.OffsetStore` persisted in ``__consumer_offsets``.

    Call :meth:`load` once at startup, before the broker answers OffsetFetch. The topic is created
    on the first write when missing (so a broker that never sees a group has no 50 empty
    partitions); its partition count is then ``offsets.topic.num.partitions``. When the topic
    already exists its own partition count is used, which keeps group placement stable.
    """

    def __init__(self, log_manager: LogManager, clock: Clock, *, num_partitions: int | None = None) -> None:
        self._logs = log_manager
        self._clock = clock
        self._requested_partitions = num_partitions
        self._lock = threading.RLock()
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._group_metadata: dict[str, GroupMetadataRecord] = {}
        #: KIP-848 consumer-group records, compacted: ``group -> key bytes -> value bytes``.
        self._consumer_records: dict[str, dict[bytes, bytes]] = {}
        self._partitions: int | None = None
        #: Transactional offset commits not yet decided, by producer id (KIP-98/KIP-447): they
        #: are in the log but become visible only when the COMMIT marker is written.
        self._pending_txn: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}

    # ---- topic ---------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        """The partition count used to place groups (the topic's, once it exists)."""
        meta = self._logs.topics().get(OFFSETS_TOPIC)
        if meta is not None:
            return meta.partitions
        if self._requested_partitions is not None:
            return self._requested_partitions
        return self._logs.broker_config.offsets_topic_num_partitions

    def _ensure_topic(self) -> int:
        if self._partitions is None:
            meta = self._logs.topics().get(OFFSETS_TOPIC)
            if meta is None:
                try:
                    meta = self._logs.create_topic(OFFSETS_TOPIC, self.num_partitions, OFFSETS_TOPIC_CONFIGS)
                except TopicExistsError:  # a concurrent CreateTopics won the race; use its topic
                    meta = self._logs.topics()[OFFSETS_TOPIC]
            self._partitions = meta.partitions
        return self._partitions

    def partition_of(self, group: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group``'s records."""
        return partition_for(group, self._partitions or self.num_partitions)

    def _append(self, group: str, records: Sequence[SimpleRecord]) -> None:
        """Append one batch for ``group``; caller holds the lock."""
        if not records:
            return
        partitions = self._ensure_topic()
        partition_log = self._logs.get_log(OFFSETS_TOPIC, partition_for(group, partitions))
        partition_log.append(build_batch(records))

    # ---- OffsetStore ---------------------------------------------------------------------

    def commit(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        metadata: str | None,
        leader_epoch: int,
        commit_ts: int,
        expire_ts: int | None = None,
    ) -> None:
        self.commit_batch(
            group, [(topic, partition, CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts))]
        )

    def commit_batch(self, group: str, entries: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        """Commit several partitions of one group as one record batch (one OffsetCommit request).

        Null metadata is stored as "" (the value schema has a non-nullable string, and Kafka
        itself turns a null into ""), in the map as well, so a reload returns what was served.
        """
        normalized = [
            (topic, partition, entry if entry.metadata is not None else _with_metadata(entry, ""))
            for topic, partition, entry in entries
        ]
        records = [
            SimpleRecord(
                encode_offset_commit_key(group, topic, partition),
                encode_offset_commit_value(entry),
                timestamp=entry.commit_timestamp_ms,
            )
            for topic, partition, entry in normalized
        ]
        with self._lock:
            self._append(group, records)
            offsets = self._offsets.setdefault(group, {})
            for topic, partition, entry in normalized:
                offsets[(topic, partition)] = entry

    def fetch(
        self, group: str, topic: str | None = None, partition: int | None = None
    ) -> dict[tuple[str, int], CommittedOffset]:
        with self._lock:
            return select_offsets(self._offsets.get(group, {}), topic, partition)

    def _tombstones(self, group: str, keys: Collection[tuple[str, int]], with_metadata: bool) -> None:
        now_ms = self._clock.now_ms()
        records = [
            SimpleRecord(encode_offset_commit_key(group, topic, partition), None, timestamp=now_ms)
            for topic, partition in sorted(keys)
        ]
        if with_metadata:
            records.append(SimpleRecord(encode_group_metadata_key(group), None, timestamp=now_ms))
        self._append(group, records)

    def delete_group(self, group: str) -> int:
        """Tombstone every offset of ``group`` and its group metadata; return the offsets removed."""
        with self._lock:
            offsets = self._offsets.get(group, {})
            has_metadata = group in self._group_metadata
            if not offsets and not has_metadata:
                return 0
            self._tombstones(group, list(offsets), with_metadata=True)
            self._offsets.pop(group, None)
            self._group_metadata.pop(group, None)
            return len(offsets)

    def delete_offsets(self, group: str, partitions: Collection[tuple[str, int]]) -> int:
        """Tombstone ``group``'s offsets of these partitions (OffsetDelete); return how many existed.

        Kafka writes a tombstone only for a partition that has an offset, and so does this.
        """
        with self._lock:
            offsets = self._offsets.get(group, {})
            gone = sorted(key for key in set(partitions) if key in offsets)
            if not gone:
                return 0
            self._tombstones(group, gone, with_metadata=False)
            for key in gone:
                del offsets[key]
            if not offsets:
                self._offsets.pop(group, None)
            return len(gone)

    def expire(self, now_ms: int, retention_ms: int, keep_groups: Collection[str] = ()) -> int:
        """Tombstone offsets past their expiry (explicit, else commit time + ``retention_ms``)."""
        removed = 0
        with self._lock:
            for group in [g for g in self._offsets if g not in keep_groups]:
                offsets = self._offsets[group]
                expired = []
                for key, entry in offsets.items():
                    deadline = entry.expire_timestamp_ms
                    if deadline is None:
                        deadline = entry.commit_timestamp_ms + retention_ms
                    if now_ms >= deadline:
                        expired.append(key)
                if not expired:
                    continue
                self._tombstones(group, expired, with_metadata=False)
                for key in expired:
                    del offsets[key]
                removed += len(expired)
                if not offsets:
                    del self._offsets[group]
        return removed

    def groups(self) -> set[str]:
        with self._lock:
            return set(self._offsets)

    # ---- group metadata and topic deletion -------------------------------------------------

    def store_group_metadata(self, group: str, record: GroupMetadataRecord | None) -> None:
        """Persist a group's metadata after a rebalance (None writes its tombstone)."""
        value = None if record is None else encode_group_metadata_value(record)
        with self._lock:
            if record is None and group not in self._group_metadata:
                return
            self._append(group, [SimpleRecord(encode_group_metadata_key(group), value, self._clock.now_ms())])
            if record is None:
                self._group_metadata.pop(group, None)
            else:
                self._group_metadata[group] = record

    def group_metadata(self, group: str) -> GroupMetadataRecord | None:
        with self._lock:
            return self._group_metadata.get(group)

    def all_group_metadata(self) -> dict[str, GroupMetadataRecord]:
        with self._lock:
            return dict(self._group_metadata)

    def append_group_records(self, group: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append a consumer group's records as one batch (Kafka writes a heartbeat's records atomically)."""
        now_ms = self._clock.now_ms()
        with self._lock:
            self._append(group, [SimpleRecord(key, value, timestamp=now_ms) for key, value in records])
            apply_consumer_records(self._consumer_records, group, records)

    def consumer_group_records(self) -> dict[str, list[tuple[bytes, bytes]]]:
        with self._lock:
            return {g: list(r.items()) for g, r in self._consumer_records.items()}

    def on_topic_deleted(self, topic: str, partitions: Sequence[int]) -> None:
        """Tombstone every group's offsets for a deleted topic (Kafka does this on deletion).

        Has the ``on_topic_deleted`` hook signature, so the broker can register it directly.
        """
        wanted = set(partitions)
        with self._lock:
            for group in list(self._offsets):
                offsets = self._offsets[group]
                gone = [key for key in offsets if key[0] == topic and key[1] in wanted]
                if not gone:
                    continue
                self._tombstones(group, gone, with_metadata=False)
                for key in gone:
                    del offsets[key]
                if not offsets:
                    del self._offsets[group]

    # ---- transactional offset commits (TxnOffsetCommit) ------------------------------------

    def commit_transactional(
        self,
        group: str,
        producer_id: int,
        producer_epoch: int,
        entries: Sequence[tuple[str, int, CommittedOffset]],
    ) -> None:
        """Append a transactional batch of offset commits; they stay pending until the marker.

        Kafka's ``GroupMetadataManager.storeOffsets`` for a transactional producer: the records
        are ordinary offset-commit records in a batch carrying the producer id, epoch and the
        transactional flag, so the cleaner and a reload treat them like any transactional data.
        """
        normalized = [
            (topic, partition, entry if entry.metadata is not None else _with_metadata(entry, ""))
            for topic, partition, entry in entries
        ]
        records = [
            SimpleRecord(
                encode_offset_commit_key(group, topic, partition),
                encode_offset_commit_value(entry),
                timestamp=entry.commit_timestamp_ms,
            )
            for topic, partition, entry in normalized
        ]
        if not records:
            return
        with self._lock:
            partitions = self._ensure_topic()
            partition_log = self._logs.get_log(OFFSETS_TOPIC, partition_for(group, partitions))
            partition_log.append(
                build_batch(
                    records, producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True
                ),
                origin=AppendOrigin.COORDINATOR,
            )
            pending = self._pending_txn.setdefault(producer_id, {}).setdefault(group, {})
            for topic, partition, entry in normalized:
                pending[(topic, partition)] = entry

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A marker was written to ``__consumer_offsets``-``partition``: apply or drop the pending
        commits of ``producer_id`` for the groups of that partition (``handleTxnCompletion``)."""
        with self._lock:
            self._complete_pending(partition, producer_id, committed)

    def _complete_pending(self, partition: int, producer_id: int, committed: bool) -> None:
        by_group = self._pending_txn.get(producer_id)
        if not by_group:
            return
        for group in [g for g in by_group if self.partition_of(g) == partition]:
            entries = by_group.pop(group)
            if committed:
                self._offsets.setdefault(group, {}).update(entries)
        if not by_group:
            del self._pending_txn[producer_id]

    def has_pending_transactional(self, group: str, topic: str, partition: int) -> bool:
        """Whether an undecided transaction holds an offset for this partition (OffsetFetch
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT then)."""
        with self._lock:
            return any((topic, partition) in groups.get(group, {}) for groups in self._pending_txn.values())

    # ---- startup -----------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the map by replaying every partition of the topic (if it exists yet)."""
        with self._lock:
            self._offsets.clear()
            self._group_metadata.clear()
            self._pending_txn.clear()
            self._consumer_records.clear()
            meta = self._logs.topics().get(OFFSETS_TOPIC)
            if meta is None:
                return
            self._partitions = meta.partitions
            for partition in range(meta.partitions):
                try:
                    partition_log = self._logs.get_log(OFFSETS_TOPIC, partition)
                except KompaktError as exc:
                    log.error("Cannot load %s-%d: %s", OFFSETS_TOPIC, partition, exc)
                    continue
                self._replay(partition_log)

    def _replay(self, partition_log: PartitionLog) -> None:
        for batch in partition_log.replay_batches(_READ_CHUNK):
            if batch.is_control:
                if batch.producer_id >= 0 and batch.records_count:
                    committed = control_type_of(batch) == ControlType.COMMIT
                    self._complete_pending(partition_log.partition, batch.producer_id, committed)
                continue
            for record in decode_records(batch):
                if record.key is None:
                    continue
                if batch.is_transactional:
                    self._apply_transactional(
                        batch.producer_id, record.key, record.value, partition_log.name, record.offset
                    )
                else:
                    self._apply(record.key, record.value, partition_log.name, record.offset)

    def _apply_transactional(
        self, producer_id: int, key_bytes: bytes, value: bytes | None, where: str, offset: int
    ) -> None:
        """An offset commit of a transaction: pending until the replay reaches its marker."""
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey) and value is not None:
                pending = self._pending_txn.setdefault(producer_id, {}).setdefault(key.group, {})
                pending[(key.topic, key.partition)] = decode_offset_commit_value(value)
        except OffsetsTopicFormatError as exc:
            log.warning("Skipping unreadable record at %s offset %d: %s", where, offset, exc)

    def _apply(self, key_bytes: bytes, value: bytes | None, where: str, offset: int) -> None:
        try:
            if (
                len(key_bytes) >= 2
                and _I16.unpack_from(key_bytes)[0] in consumer_records.CONSUMER_GROUP_RECORD_TYPES
            ):
                consumer_key = consumer_records.decode_key(key_bytes)
                if consumer_key is not None:
                    apply_consumer_records(
                        self._consumer_records, consumer_key.group_id, [(key_bytes, value)]
                    )
                return
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if value is None:
                    group_offsets = self._offsets.get(key.group)
                    if group_offsets is not None:
                        group_offsets.pop(tp, None)
                        if not group_offsets:
                            del self._offsets[key.group]
                else:
                    self._offsets.setdefault(key.group, {})[tp] = decode_offset_commit_value(value)
            elif isinstance(key, GroupKey):
                if value is None:
                    self._group_metadata.pop(key.group, None)
                else:
                    self._group_metadata[key.group] = decode_group_metadata_value(value)
        except (OffsetsTopicFormatError, consumer_records.ConsumerRecordFormatError) as exc:
            log.warning("Skipping unreadable record at %s offset %d: %s", where, offset, exc)


def _with_metadata(entry: CommittedOffset, metadata: str) -> CommittedOffset:
    return CommittedOffset(
        entry.offset, entry.leader_epoch, metadata, entry.commit_timestamp_ms, entry.expire_timestamp_ms
    )
