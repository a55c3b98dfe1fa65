"""Tables over segment files held as bytes: a kompakt backup's files, or any list of them.

A backup stores each partition as Kafka segment bytes at the records' original offsets (see
``docs/backup-format.md``), so the same builders and scans read it. The files come from a
callable (each call reads them again, from the backup's storage), in offset order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from kompakt.records.native import U8Array
from kompakt.records.scan import scan_batches
from kompakt.table.build import Chunk, OneShotBuilder, OneShotResult
from kompakt.table.index import KeyIndex
from kompakt.table.partition import SECTION_CLEAN, CleanFacts, Location, PartitionTable, check_scan


class BlobTable(PartitionTable):
    """One partition whose batches are in byte strings (built when it opens)."""

    def __init__(
        self, topic: str, partition: int, files: Callable[[], Iterable[bytes]], *, log_start_offset: int = 0
    ) -> None:
        super().__init__(topic, partition)
        self._files = files
        self._log_start = log_start_offset
        index, result = OneShotBuilder(
            lambda: self._chunks_from(log_start_offset), start_offset=log_start_offset
        ).build(KeyIndex)
        self._index = index
        self._indexed_to = result.last_stable_offset
        self.build: OneShotResult = result

    def log_start_offset(self) -> int:
        return self._log_start

    def clean_facts(self) -> CleanFacts:
        """Where offsets are missing, records were removed (a compacted source); the files carry
        no time of their own, so an answer as of a time before the last gap is never called complete."""
        removed = self.build.removed_below
        return CleanFacts(self._log_start, removed or None, None)

    def _chunks_from(self, offset: int) -> Iterator[Chunk]:
        for data in self._files():
            buf = np.frombuffer(data, dtype=np.uint8)
            table = scan_batches(buf)
            check_scan(table, f"{self.topic}-{self.partition}")
            if len(table) and int(table.last_offset[-1]) >= offset:
                yield buf, table

    def _batch_at(self, offset: int) -> tuple[U8Array, Location] | None:
        for buf, table in self._chunks_from(offset):
            i = int(np.searchsorted(table.last_offset, offset, side="left"))
            if i < len(table) and int(table.base_offset[i]) <= offset:
                pos, size = int(table.position[i]), int(table.size[i])
                location = Location(
                    -1, pos, int(table.base_offset[i]), int(table.last_offset[i]), size, SECTION_CLEAN
                )
                return buf[pos : pos + size], location
            return None
        return None
