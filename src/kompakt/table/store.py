"""The tables of a running broker: one :class:`~kompakt.table.partition.LiveTable` per partition
that was asked about, created on first use.

Nothing is kept for a partition nobody looks up (``__consumer_offsets`` is compacted too), and
nothing is persisted: a table is rebuilt from the log after a restart, at native speed (see
``docs/design.md`` for the figures behind that choice). A table whose log object changed (the
topic was deleted and created again) is replaced.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from kompakt.log.partition_log import PartitionLog
from kompakt.table.partition import LiveTable

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class TableStore:
    """Live tables by partition. Thread-safe."""

    def __init__(self, checkpoints: Callable[[], Mapping[TopicPartition, int]] = dict) -> None:
        """``checkpoints``: the cleaner's checkpoints (first dirty offsets), for log sections and
        ``--as-of`` completeness."""
        self._checkpoints = checkpoints
        self._tables: dict[TopicPartition, LiveTable] = {}
        self._lock = threading.Lock()

    def table(self, partition_log: PartitionLog) -> LiveTable:
        tp = (partition_log.topic, partition_log.partition)
        with self._lock:
            table = self._tables.get(tp)
            if table is None or table.log is not partition_log:
                table = LiveTable(partition_log, first_dirty_offset=lambda: self._checkpoints().get(tp))
                self._tables[tp] = table
            return table

    def tables(self) -> list[LiveTable]:
        with self._lock:
            return list(self._tables.values())

    def forget(self, live: Mapping[TopicPartition, PartitionLog]) -> None:
        """Drop the tables of partitions that are gone (or were re-created)."""
        with self._lock:
            for tp, table in list(self._tables.items()):
                if live.get(tp) is not table.log:
                    del self._tables[tp]

    def refresh_all(self, live: Mapping[TopicPartition, PartitionLog]) -> None:
        """Catch every table up with its log (a background task keeps lookups short after bursts)."""
        self.forget(live)
        for table in self.tables():
            try:
                table.refresh()
            except Exception:
                log.exception("catching up the table of %s-%d failed", table.topic, table.partition)

    def memory_bytes(self) -> int:
        return sum(t.stats.memory_bytes for t in self.tables())
