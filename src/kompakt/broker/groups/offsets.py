"""``OffsetManager``: committed offsets of every group, classic or consumer (Kafka's
``OffsetMetadataManager``).

The manager keeps what ``__consumer_offsets`` says was committed, per group and partition, plus the
offsets of transactions not decided yet (KIP-98/447: a TxnOffsetCommit is in the log at once but
becomes visible only when its producer's COMMIT marker reaches the partition; an ABORT drops it).
Its operations return :class:`~kompakt.broker.groups.result.Result` records: offset commits, and
tombstones for what OffsetDelete, DeleteGroups, expiry and topic deletion remove; only
:meth:`OffsetManager.replay` (and :meth:`OffsetManager.replay_marker`) change the maps, as the
coordinator applies the records it wrote and those it loads at startup.

Whether a commit is allowed (generation, member epoch) is the group's business: the coordinator
asks the group's membership manager before it asks this one to write.

Thread-safe: the cleaner's threads read committed offsets (:mod:`kompakt.broker.readers`) and
TxnOffsetCommit runs in a worker thread, so one lock covers the maps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from kompakt.broker.groups.errors import OffsetMetadataTooLargeError
from kompakt.broker.groups.records.schemas import CommittedOffset, GroupRecord, OffsetCommitKey
from kompakt.broker.groups.result import Producer, Result

#: ``(topic, partition) -> committed offset``.
Offsets = dict[tuple[str, int], CommittedOffset]


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    """One partition of an OffsetCommit or TxnOffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


def select_offsets(
    offsets: Mapping[tuple[str, int], CommittedOffset], topic: str | None, partition: int | None
) -> Offsets:
    """The committed offsets of one topic and/or partition (``None`` matches every one)."""
    return {
        key: value
        for key, value in offsets.items()
        if (topic is None or key[0] == topic) and (partition is None or key[1] == partition)
    }


class OffsetManager:
    """Committed and pending offsets; see the module docstring."""

    def __init__(self, offset_metadata_max_bytes: int) -> None:
        self._max_metadata = offset_metadata_max_bytes
        self._lock = threading.Lock()
        self._offsets: dict[str, Offsets] = {}
        #: ``producer id -> group -> offsets`` of transactions not decided yet.
        self._pending: dict[int, dict[str, Offsets]] = {}

    # ---- reads -------------------------------------------------------------------------------

    def fetch(self, group: str, topic: str | None = None, partition: int | None = None) -> Offsets:
        """The group's committed offsets, optionally narrowed to one topic or one partition."""
        with self._lock:
            return select_offsets(self._offsets.get(group, {}), topic, partition)

    def groups(self) -> set[str]:
        """Every group that has at least one committed offset."""
        with self._lock:
            return set(self._offsets)

    def has_offsets(self, group: str) -> bool:
        with self._lock:
            return group in self._offsets

    def has_pending_transactional(self, group: str, topic: str, partition: int) -> bool:
        """Whether an undecided transaction holds an offset for this partition (OffsetFetch with
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT then)."""
        with self._lock:
            return any((topic, partition) in groups.get(group, {}) for groups in self._pending.values())

    # ---- operations --------------------------------------------------------------------------

    def commit(
        self,
        group: str,
        entries: Sequence[OffsetCommitEntry],
        now_ms: int,
        expire_timestamp_ms: int | None = None,
        producer: Producer | None = None,
    ) -> Result[list[Exception | None]]:
        """Offset-commit records for ``entries``; the value is one error (or None) per entry.

        A null metadata is stored as "" (the value schema has a non-nullable string, and Kafka turns
        a null into "" too), so a reload serves what was served before it.
        """
        errors: list[Exception | None] = []
        records: list[GroupRecord] = []
        for entry in entries:
            if entry.metadata is not None and len(entry.metadata.encode()) > self._max_metadata:
                errors.append(OffsetMetadataTooLargeError(f"metadata of {entry.topic}-{entry.partition}"))
                continue
            committed = CommittedOffset(
                entry.offset, entry.leader_epoch, entry.metadata or "", now_ms, expire_timestamp_ms
            )
            records.append((OffsetCommitKey(group, entry.topic, entry.partition), committed))
            errors.append(None)
        return Result(errors, records, producer=producer)

    def delete(self, group: str, partitions: Collection[tuple[str, int]]) -> Result[int]:
        """OffsetDelete: tombstones for the partitions that have an offset (Kafka writes none for
        the others); the value is how many."""
        with self._lock:
            offsets = self._offsets.get(group, {})
            gone = sorted(key for key in set(partitions) if key in offsets)
        return Result(len(gone), _tombstones(group, gone))

    def delete_all(self, group: str) -> list[GroupRecord]:
        """The tombstones that forget every offset of ``group`` (DeleteGroups)."""
        with self._lock:
            return _tombstones(group, sorted(self._offsets.get(group, {})))

    def expire(self, now_ms: int, retention_ms: int, keep_groups: Collection[str] = ()) -> Result[int]:
        """Tombstones for offsets past their expiry (explicit, else commit time + ``retention_ms``),
        except in ``keep_groups`` (groups with members); the value is how many."""
        records: list[GroupRecord] = []
        with self._lock:
            for group, offsets in self._offsets.items():
                if group in keep_groups:
                    continue
                expired = []
                for key, entry in offsets.items():
                    deadline = entry.expire_timestamp_ms
                    if deadline is None:
                        deadline = entry.commit_timestamp_ms + retention_ms
                    if now_ms >= deadline:
                        expired.append(key)
                records.extend(_tombstones(group, expired))
        return Result(len(records), records)

    def delete_topic(self, topic: str, partitions: Collection[int]) -> Result[None]:
        """Tombstones for every group's offsets of a deleted topic (Kafka removes them too)."""
        wanted = set(partitions)
        records: list[GroupRecord] = []
        with self._lock:
            for group, offsets in self._offsets.items():
                records.extend(
                    _tombstones(group, sorted(k for k in offsets if k[0] == topic and k[1] in wanted))
                )
        return Result(None, records)

    # ---- replay ------------------------------------------------------------------------------

    def replay(
        self, key: OffsetCommitKey, value: CommittedOffset | None, producer_id: int | None = None
    ) -> None:
        """Apply one offset-commit record; in a transactional batch it stays pending until its marker."""
        tp = (key.topic, key.partition)
        with self._lock:
            if producer_id is not None:
                if value is not None:
                    self._pending.setdefault(producer_id, {}).setdefault(key.group, {})[tp] = value
                return
            if value is not None:
                self._offsets.setdefault(key.group, {})[tp] = value
                return
            offsets = self._offsets.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self._offsets[key.group]

    def replay_marker(
        self, partition: int, producer_id: int, committed: bool, partition_of: Callable[[str], int]
    ) -> None:
        """A marker of ``producer_id`` reached ``__consumer_offsets``-``partition``: its pending
        offsets of the groups there become committed, or are dropped (``handleTxnCompletion``)."""
        with self._lock:
            by_group = self._pending.get(producer_id)
            if not by_group:
                return
            for group in [g for g in by_group if partition_of(g) == partition]:
                entries = by_group.pop(group)
                if committed:
                    self._offsets.setdefault(group, {}).update(entries)
            if not by_group:
                del self._pending[producer_id]

    def snapshot(self) -> tuple[dict[str, Offsets], dict[int, dict[str, Offsets]]]:
        """Copies of the maps (tests compare them around an operation to check that only replay
        changes them)."""
        with self._lock:
            return (
                {g: dict(o) for g, o in self._offsets.items()},
                {p: {g: dict(o) for g, o in groups.items()} for p, groups in self._pending.items()},
            )


def _tombstones(group: str, keys: Sequence[tuple[str, int]]) -> list[GroupRecord]:
    return [(OffsetCommitKey(group, topic, partition), None) for topic, partition in keys]


def with_metadata(entry: CommittedOffset, metadata: str) -> CommittedOffset:
    return replace(entry, metadata=metadata)
