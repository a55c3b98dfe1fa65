"""Readers that must see a delete: the tombstone hold and the unread-tombstone report.

Kafka removes a tombstone (or a removable transaction marker) at the first clean after its KIP-534
delete horizon (``Cleaner.shouldRetainRecord``, ``CleanedTransactionMetadata``), whether or not its
readers have read it: a consumer group that lags longer than ``delete.retention.ms`` misses the
delete and keeps the deleted value forever. kompakt owns both the cleaner and
``__consumer_offsets``, so it can wait for them (beyond Kafka):

* ``kompakt.tombstone.retain.for.groups`` names the groups a topic's deletes must reach. A batch
  whose horizon has passed keeps its tombstones and markers while some holder has not committed an
  offset past the batch's last offset, and at most ``kompakt.tombstone.max.hold.ms`` past the
  horizon (:class:`TombstoneHold`). The decision is per batch, as the delete horizon is: a batch
  that straddles a holder's position keeps all of its tombstones until the holder passes it.
* Holders are the named groups that exist (a group with no committed offset on the partition
  holds from offset 0; a deleted group, or one whose offsets expired and that the coordinator
  forgot, does not hold), plus readers registered by the broker (kompakt's backup jobs hold the
  partitions they copy from the position they have reached).
* For every group with a committed offset on a compacted partition, named or not,
  :func:`reader_risks` counts the stamped tombstones at or above its position and the time the
  first of them may go: "group G has not read N tombstones that will be removed at T".

The cleaner does not know about groups: the server injects a :class:`ReaderPositions` provider.
Everything here is pure (numpy over offset and horizon arrays); time comes in as ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kompakt.config.defs import LONG_MAX
from kompakt.log.config import LogConfig

if TYPE_CHECKING:
    # numpy loads on first use, not on the broker's start path (tests/server/test_startup_imports.py).
    from kompakt.records.native import BoolArray, I64Array


@dataclass(frozen=True, slots=True)
class PartitionReaders:
    """Where the readers of one partition are.

    ``committed`` holds every consumer group with a committed offset on the partition (the
    report covers them all). ``holding`` holds the readers whose position holds tombstone
    removal: the named groups that exist (offset 0 when they have none on this partition) and the
    registered readers (backups). Offsets are "next offset to read", as Kafka commits them.
    """

    committed: Mapping[str, int] = field(default_factory=dict)
    holding: Mapping[str, int] = field(default_factory=dict)


class ReaderPositions(Protocol):
    """The reader positions the cleaner waits for, provided by the broker (the cleaner layer
    cannot import the group coordinator). Implementations must be thread-safe: cleaner threads,
    compact-now and metric scrapes call them concurrently."""

    def positions(self, topic: str, partition: int, named: Collection[str]) -> PartitionReaders:
        """The readers of ``topic``-``partition``; ``named`` are the topic's
        ``kompakt.tombstone.retain.for.groups``."""
        ...


class NoReaders:
    """No reader positions known and nothing holds (Kafka's behaviour)."""

    def positions(self, topic: str, partition: int, named: Collection[str]) -> PartitionReaders:
        return PartitionReaders()


class AssumeUnread:
    """Offline: group offsets are unknown, so every named group is taken to have read nothing
    (holds from offset 0), bounded by the maximum hold. Safe for ``kompakt log compact`` on a
    stopped broker's directory: it never removes a delete a named group may not have read."""

    def positions(self, topic: str, partition: int, named: Collection[str]) -> PartitionReaders:
        return PartitionReaders(holding=dict.fromkeys(named, 0))


class FixedPositions:
    """Positions given up front, ``{(topic, partition): {group: offset}}``: tests and offline
    tools that read offsets from a cluster. A named group absent from a partition holds from 0
    when it exists (it appears on any partition, or in ``known``), and not at all otherwise;
    ``registered`` readers (backups) hold where they are."""

    def __init__(
        self,
        offsets: Mapping[tuple[str, int], Mapping[str, int]],
        registered: Mapping[tuple[str, int], Mapping[str, int]] | None = None,
        known: Collection[str] | None = None,
    ) -> None:
        self._offsets = {tp: dict(groups) for tp, groups in offsets.items()}
        self._registered = {tp: dict(r) for tp, r in (registered or {}).items()}
        self._known = {g for groups in self._offsets.values() for g in groups} | set(known or ())

    def positions(self, topic: str, partition: int, named: Collection[str]) -> PartitionReaders:
        committed = self._offsets.get((topic, partition), {})
        holding = {g: committed.get(g, 0) for g in named if g in self._known}
        holding.update(self._registered.get((topic, partition), {}))
        return PartitionReaders(dict(committed), holding)


@dataclass(frozen=True, slots=True)
class TombstoneHold:
    """The hold on one partition for one clean: batches ending at or above ``offset`` keep their
    tombstones and markers past the delete horizon, for at most ``max_hold_ms`` more."""

    offset: int
    max_hold_ms: int
    holders: tuple[tuple[str, int], ...] = ()

    def held(self, horizon: I64Array, last_offset: I64Array, now_ms: int) -> BoolArray:
        """Per batch: the horizon has passed, a holder has not read past the batch, and the
        maximum hold has not run out (``now - max_hold < horizon``, which cannot overflow)."""
        return (horizon <= now_ms) & (last_offset >= self.offset) & (now_ms - self.max_hold_ms < horizon)

    def removal_ms(self, horizon: I64Array, last_offset: I64Array) -> I64Array:
        """Per batch: the earliest instant its tombstones may go while the holders stay where they are."""
        import numpy as np

        # Saturating: a maximum hold near Long.MAX means "never", not an overflowed negative time.
        held_until = np.minimum(horizon, np.int64(LONG_MAX - self.max_hold_ms)) + np.int64(self.max_hold_ms)
        return np.where(last_offset >= self.offset, held_until, horizon)


def hold_for(config: LogConfig, readers: PartitionReaders) -> TombstoneHold | None:
    """The hold of a partition, or None when nothing holds (no holder, or not compacted)."""
    if not config.compact or not readers.holding:
        return None
    holders = tuple(sorted(readers.holding.items()))
    return TombstoneHold(min(o for _, o in holders), config.kompakt_tombstone_max_hold_ms, holders)


def partition_hold(
    provider: ReaderPositions | None, topic: str, partition: int, config: LogConfig
) -> tuple[PartitionReaders, TombstoneHold | None]:
    """Ask ``provider`` for the readers of a partition and derive its hold."""
    if provider is None or not config.compact:
        return PartitionReaders(), None
    readers = provider.positions(topic, partition, config.kompakt_tombstone_retain_for_groups)
    return readers, hold_for(config, readers)


def earliest_removal_ms(horizon: I64Array, last_offset: I64Array, hold: TombstoneHold | None) -> int | None:
    """The earliest instant any of these stamped batches may lose its tombstones or marker."""
    if len(horizon) == 0:
        return None
    times = horizon if hold is None else hold.removal_ms(horizon, last_offset)
    return int(times.min())


@dataclass(frozen=True, slots=True)
class ReaderRisk:
    """One group's exposure on one partition: the stamped tombstones at or above its committed
    offset, and when the first of them may be removed."""

    group: str
    committed_offset: int
    unread: int
    first_offset: int | None
    removal_ms: int | None
    holds: bool

    def sentence(self, topic: str, partition: int, iso: str | None) -> str:
        """The risk as one line of text (``iso`` is :attr:`removal_ms` formatted by the caller)."""
        where = f"{topic}-{partition}"
        if not self.unread:
            return f"group {self.group} has read every tombstone scheduled for removal on {where}"
        held = " (it holds them, up to kompakt.tombstone.max.hold.ms)" if self.holds else ""
        return (
            f"group {self.group} has not read {self.unread} tombstones of {where} that will be "
            f"removed at {iso} (first at offset {self.first_offset}); it must catch up by {iso}{held}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "committed_offset": self.committed_offset,
            "unread_tombstones": self.unread,
            "first_unread_offset": self.first_offset,
            "removal_ms": self.removal_ms,
            "holds": self.holds,
        }


def reader_risks(
    tomb_offsets: I64Array,
    tomb_horizons: I64Array,
    tomb_batch_last: I64Array,
    readers: PartitionReaders,
    hold: TombstoneHold | None,
) -> list[ReaderRisk]:
    """Each group's unread stamped tombstones (arrays in offset order: each tombstone's offset,
    its batch's horizon and its batch's last offset). A tombstone at offset O is unread by a
    group at committed offset C when ``O >= C``. Vectorised: one ``searchsorted`` per group and a
    suffix minimum of the removal times, so the cost is the arrays' length plus log n per group."""
    import numpy as np

    n = len(tomb_offsets)
    if n:
        times = tomb_horizons if hold is None else hold.removal_ms(tomb_horizons, tomb_batch_last)
        suffix_min = np.minimum.accumulate(times[::-1])[::-1]
    risks = []
    for group, committed in sorted(readers.committed.items()):
        start = int(np.searchsorted(tomb_offsets, committed, side="left")) if n else 0
        unread = n - start
        risks.append(
            ReaderRisk(
                group=group,
                committed_offset=committed,
                unread=unread,
                first_offset=int(tomb_offsets[start]) if unread else None,
                removal_ms=int(suffix_min[start]) if unread else None,
                holds=group in readers.holding,
            )
        )
    return risks
