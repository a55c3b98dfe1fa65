"""Where tombstones wait: the earliest delete horizon still to be acted on, per log.

Kafka removes a stamped tombstone (or transaction marker) only at a later clean, and a later
clean only happens when new dirty data arrives, so a topic whose deletes have stopped keeps its
expired tombstones forever (a KIP-534 delete horizon is only acted on by a later ``Cleaner.doClean``). kompakt
makes such a log eligible once the earliest horizon in it has passed. This module finds that horizon.

Only batches that still hold something the horizon governs count: control batches with their
marker record, and data batches with at least one tombstone. (A batch keeps its horizon bit after
its tombstones are removed, as in Kafka; counting such batches would make the log eligible again
after every clean.) Headers are scanned natively; records are parsed only for the few batches
with the horizon bit set. Results are cached per segment file (path, inode, size): a non-active
segment's bytes never change, and a clean replaces it with a new file.

Beyond the earliest horizon, each segment's :class:`StampedFacts` keep every stamped batch's
horizon and last offset (the reader hold of :mod:`kompakt.cleaner.readers` delays a held batch's
removal to the end of the maximum hold, so the cleaner's eligibility needs the offsets too) and
every stamped tombstone's offset (the unread-tombstone report counts them per group).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kompakt.cleaner.dedupe import decompressed_spans
from kompakt.cleaner.segment_reader import ReadBuffer, iter_chunks
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.records.batch import ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON
from kompakt.records.native import I64Array
from kompakt.records.scan import Spans, scan_records

_EMPTY = np.empty(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class StampedFacts:
    """What a segment's stamped batches still hold, in offset order.

    ``batch_horizon``/``batch_last`` describe each batch that still holds something its horizon
    governs (a marker, or at least one tombstone); ``tomb_offset``/``tomb_horizon``/``tomb_batch_last``
    describe each tombstone in those batches (the unread-tombstone report counts them).
    """

    batch_horizon: I64Array
    batch_last: I64Array
    tomb_offset: I64Array
    tomb_horizon: I64Array
    tomb_batch_last: I64Array

    @classmethod
    def concat(cls, parts: list[StampedFacts]) -> StampedFacts:
        if not parts:
            return cls(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY)
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls.__slots__))

    @property
    def earliest_horizon(self) -> int | None:
        return int(self.batch_horizon.min()) if len(self.batch_horizon) else None


def segment_stamped_facts(segment: LogSegment, buffer: ReadBuffer) -> StampedFacts:
    """The stamped batches and tombstones of one segment. Headers are scanned natively; the
    records of every uncompressed stamped batch of a chunk are parsed in one kernel call
    (compressed ones are decompressed batch by batch, as the cleaner does)."""
    parts: list[StampedFacts] = []
    for chunk in iter_chunks(segment.log_path, 0, segment.size, buffer, verify_crc=False):
        table = chunk.table
        stamped = np.flatnonzero(((table.attributes & ATTR_DELETE_HORIZON) != 0) & (table.records_count > 0))
        if len(stamped) == 0:
            continue
        attrs = table.attributes[stamped]
        control = (attrs & ATTR_CONTROL) != 0
        governs = control.copy()
        offsets: list[I64Array] = []
        owners: list[I64Array] = []
        data = stamped[~control]
        compressed = (table.attributes[data] & ATTR_COMPRESSION_MASK) != 0
        raw = data[~compressed]
        if len(raw):
            records = scan_records(chunk.buf, *Spans.of_batches(table, raw).arrays())
            tomb = records.value_len[: len(records)] < 0
            offsets.append(records.offset[: len(records)][tomb])
            owners.append(raw[records.batch[: len(records)][tomb]])
        for i in data[compressed].tolist():
            buf, spans = decompressed_spans(chunk.buf, table, i, i + 1)
            records = scan_records(buf, *spans.arrays())
            tomb = records.value_len[: len(records)] < 0
            offsets.append(records.offset[: len(records)][tomb])
            owners.append(np.full(int(tomb.sum()), i, dtype=np.int64))
        tomb_offset = np.concatenate(offsets) if offsets else _EMPTY
        owner = np.concatenate(owners) if owners else _EMPTY
        order = np.argsort(tomb_offset, kind="stable")
        tomb_offset, owner = tomb_offset[order], owner[order]
        governs |= np.isin(stamped, owner)
        batches = stamped[governs]
        parts.append(
            StampedFacts(
                table.base_timestamp[batches].astype(np.int64),
                table.last_offset[batches].astype(np.int64),
                tomb_offset.astype(np.int64),
                table.base_timestamp[owner].astype(np.int64),
                table.last_offset[owner].astype(np.int64),
            )
        )
    return StampedFacts.concat(parts)


class HorizonTracker:
    """Caches each non-active segment's :class:`StampedFacts`; thread-safe."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Path, int, int], StampedFacts] = {}
        self._lock = threading.Lock()
        self._buffer = ReadBuffer(1 << 20)

    def stamped_facts(self, log: PartitionLog) -> StampedFacts:
        """The stamped batches and tombstones of ``log``'s non-active segments, in offset order."""
        with log.lock:
            segments = log.segments.values()[:-1]
        parts: list[StampedFacts] = []
        live: set[tuple[Path, int, int]] = set()
        for segment in segments:
            try:
                inode = segment.log_path.stat().st_ino  # a cleaned segment is a new file
            except FileNotFoundError:
                continue  # replaced by a concurrent clean; the next pass sees the new one
            key = (segment.log_path, inode, segment.size)
            live.add(key)
            with self._lock:
                facts = self._cache.get(key)
                if facts is None:
                    try:
                        facts = segment_stamped_facts(segment, self._buffer)
                    except FileNotFoundError:
                        continue  # replaced by a concurrent clean; the next pass sees the new one
                    self._cache[key] = facts
            parts.append(facts)
        with self._lock:
            for key in [k for k in self._cache if k[0].parent == log.directory and k not in live]:
                del self._cache[key]
        return StampedFacts.concat(parts)

    def earliest_horizon(self, log: PartitionLog) -> int | None:
        """The earliest governing horizon in ``log``'s non-active segments, or None."""
        return self.stamped_facts(log).earliest_horizon
