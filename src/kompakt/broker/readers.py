"""The reader positions the log cleaner waits for, from the broker's consumer groups.

The cleaner's reader hold (:mod:`kompakt.cleaner.readers`) must not import the group coordinator,
so the server injects this provider. It reads the committed offsets of ``__consumer_offsets``
(the coordinator's thread-safe offset manager) and asks the coordinator whether a named group
exists:

* every group with a committed offset on the partition is reported (the unread-tombstone report);
* a group named in ``kompakt.tombstone.retain.for.groups`` holds from its committed offset, or from
  offset 0 when it exists (a live classic or KIP-848 group, or one with offsets elsewhere) but has
  committed nothing on this partition. A group removed by DeleteGroups, or forgotten after its
  offsets expired (``GroupCoordinator.expire_offsets``), holds nothing;
* a group whose id starts with :data:`BACKUP_READER_PREFIX` is a kompakt backup job registered as
  a reader (:mod:`kompakt.backup.backup` commits its position there while it runs and deletes the
  group when it ends): it holds the partitions it has a committed offset on, named or not.
"""

from __future__ import annotations

from collections.abc import Collection

from kompakt.broker.groups.coordinator import GroupCoordinator
from kompakt.cleaner.readers import PartitionReaders

#: Group ids of kompakt backup jobs registered as readers (``kompakt-backup-<backup id>``, the
#: group id :mod:`kompakt.backup.backup` has always consumed under).
BACKUP_READER_PREFIX = "kompakt-backup-"


class GroupReaderPositions:
    """:class:`~kompakt.cleaner.readers.ReaderPositions` over the broker's committed offsets.

    Thread-safe: the offset manager locks; the coordinator is only asked dictionary membership
    (atomic in CPython), which at worst answers as of a moment earlier.
    """

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._offsets = coordinator.offsets
        self._coordinator = coordinator

    def _exists(self, group: str, with_offsets: Collection[str]) -> bool:
        return group in with_offsets or self._coordinator.exists(group)

    def positions(self, topic: str, partition: int, named: Collection[str]) -> PartitionReaders:
        with_offsets = self._offsets.groups()
        committed: dict[str, int] = {}
        for group in with_offsets:
            entry = self._offsets.fetch(group, topic, partition).get((topic, partition))
            if entry is not None and entry.offset >= 0:
                committed[group] = entry.offset
        holding = {g: o for g, o in committed.items() if g.startswith(BACKUP_READER_PREFIX)}
        for group in named:
            if group in committed:
                holding[group] = committed[group]
            elif self._exists(group, with_offsets):
                holding[group] = 0
        return PartitionReaders(committed, holding)
