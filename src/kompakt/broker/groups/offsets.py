"""Committed consumer offsets: the narrow store interface and an in-memory implementation.

The coordinator decides *whether* a commit is allowed (generation and member checks); the store only
keeps what was committed. Keeping the interface this small is what lets the lead swap the in-memory
store for one backed by ``__consumer_offsets`` without touching the coordinator.

What a persistent implementation must do (Kafka's behaviour):

* ``commit`` appends an offset-commit record to the compacted topic ``__consumer_offsets``, partition
  chosen by the group id's hash modulo ``offsets.topic.num.partitions``: key schema v1
  ``(group, topic, partition)``, value schema v3 ``(offset, leader_epoch, metadata, commit_timestamp)``
  (v1 when an explicit expire timestamp must be kept). It returns only once the record is durable
  enough for ``acks=-1`` semantics; the in-memory map is updated after the append.
* ``delete_group`` and ``expire`` append tombstones (null value) for every removed key, so compaction
  eventually forgets them.
* On startup the store replays the topic from the log start offset into the same map (later records
  win, tombstones delete) before the broker answers OffsetFetch; ``groups`` then reports every group
  that still has offsets, so ListGroups/DescribeGroups show them after a restart.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed position, as OffsetFetch returns it."""

    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int
    #: An explicit expiry from OffsetCommit v2–v4 ``retention_time``; ``None`` uses the broker's retention.
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMemberRecord:
    """One member in a GroupMetadataValue (the schema's MemberMetadata)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """GroupMetadataValue: what Kafka persists about a classic group after each rebalance."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[GroupMemberRecord, ...] = field(default_factory=tuple)


class OffsetStore(Protocol):
    """Where committed offsets live. Implementations must be thread-safe."""

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
        """Store (or replace) the committed offset of one partition for ``group``."""
        ...

    def commit_batch(self, group: str, entries: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        """Store several partitions of one group at once (one OffsetCommit request, one append)."""
        ...

    def fetch(
        self, group: str, topic: str | None = None, partition: int | None = None
    ) -> dict[tuple[str, int], CommittedOffset]:
        """The group's committed offsets, optionally narrowed to one topic or one partition."""
        ...

    def delete_group(self, group: str) -> int:
        """Forget every offset of ``group``; return how many were removed."""
        ...

    def delete_offsets(self, group: str, partitions: Collection[tuple[str, int]]) -> int:
        """Forget ``group``'s offsets of these partitions (OffsetDelete); return how many existed."""
        ...

    def expire(self, now_ms: int, retention_ms: int, keep_groups: Collection[str] = ()) -> int:
        """Drop offsets older than their retention, except for ``keep_groups`` (groups with members)."""
        ...

    def groups(self) -> set[str]:
        """Every group that has at least one committed offset."""
        ...

    def store_group_metadata(self, group: str, record: GroupMetadataRecord | None) -> None:
        """Persist a group's membership after a rebalance; ``None`` forgets it."""
        ...

    def all_group_metadata(self) -> dict[str, GroupMetadataRecord]:
        """Every stored group's metadata (what the coordinator restores at startup)."""
        ...

    def append_group_records(self, group: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append a consumer group's (KIP-848) ``(key, value)`` records as one batch; None is a tombstone."""
        ...

    def consumer_group_records(self) -> dict[str, list[tuple[bytes, bytes]]]:
        """The live consumer-group records per group (latest value per key, tombstoned keys gone)."""
        ...


def select_offsets(
    offsets: Mapping[tuple[str, int], CommittedOffset], topic: str | None, partition: int | None
) -> dict[tuple[str, int], CommittedOffset]:
    """The committed offsets of one topic and/or partition (``None`` matches every one)."""
    return {
        key: value
        for key, value in offsets.items()
        if (topic is None or key[0] == topic) and (partition is None or key[1] == partition)
    }


class InMemoryOffsetStore:
    """A dict per group; lost on restart. Thread-safe (commits may come from handler threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._group_metadata: dict[str, GroupMetadataRecord] = {}
        self._consumer_records: dict[str, dict[bytes, bytes]] = {}

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
        entry = CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts)
        with self._lock:
            self._offsets.setdefault(group, {})[(topic, partition)] = entry

    def commit_batch(self, group: str, entries: Sequence[tuple[str, int, CommittedOffset]]) -> None:
        with self._lock:
            offsets = self._offsets.setdefault(group, {})
            for topic, partition, entry in entries:
                offsets[(topic, partition)] = entry

    def fetch(
        self, group: str, topic: str | None = None, partition: int | None = None
    ) -> dict[tuple[str, int], CommittedOffset]:
        with self._lock:
            return select_offsets(self._offsets.get(group, {}), topic, partition)

    def delete_group(self, group: str) -> int:
        with self._lock:
            self._group_metadata.pop(group, None)
            return len(self._offsets.pop(group, {}))

    def delete_offsets(self, group: str, partitions: Collection[tuple[str, int]]) -> int:
        with self._lock:
            offsets = self._offsets.get(group, {})
            removed = sum(1 for key in set(partitions) if offsets.pop(key, None) is not None)
            if not offsets:
                self._offsets.pop(group, None)
            return removed

    def expire(self, now_ms: int, retention_ms: int, keep_groups: Collection[str] = ()) -> int:
        removed = 0
        with self._lock:
            for group in [g for g in self._offsets if g not in keep_groups]:
                offsets = self._offsets[group]
                for key, entry in list(offsets.items()):
                    deadline = entry.expire_timestamp_ms
                    if deadline is None:
                        deadline = entry.commit_timestamp_ms + retention_ms
                    if now_ms >= deadline:
                        del offsets[key]
                        removed += 1
                if not offsets:
                    del self._offsets[group]
        return removed

    def groups(self) -> set[str]:
        with self._lock:
            return set(self._offsets)

    def store_group_metadata(self, group: str, record: GroupMetadataRecord | None) -> None:
        with self._lock:
            if record is None:
                self._group_metadata.pop(group, None)
            else:
                self._group_metadata[group] = record

    def all_group_metadata(self) -> dict[str, GroupMetadataRecord]:
        with self._lock:
            return dict(self._group_metadata)

    def append_group_records(self, group: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        with self._lock:
            apply_consumer_records(self._consumer_records, group, records)

    def consumer_group_records(self) -> dict[str, list[tuple[bytes, bytes]]]:
        with self._lock:
            return {g: list(r.items()) for g, r in self._consumer_records.items()}


def apply_consumer_records(
    view: dict[str, dict[bytes, bytes]], group: str, records: Sequence[tuple[bytes, bytes | None]]
) -> None:
    """Fold records into a compacted view (latest value per key; a tombstone removes the key)."""
    keyed = view.setdefault(group, {})
    for key, value in records:
        if value is None:
            keyed.pop(key, None)
        else:
            keyed.pop(key, None)  # re-insert at the end: the view keeps the log's order
            keyed[key] = value
    if not keyed:
        del view[group]
