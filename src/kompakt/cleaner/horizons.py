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
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from kompakt.cleaner.dedupe import decompressed_spans
from kompakt.cleaner.segment_reader import ReadBuffer, iter_chunks
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.records.batch import ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON
from kompakt.records.scan import Spans, scan_records

_NONE = 2**63 - 1


def segment_earliest_horizon(segment: LogSegment, buffer: ReadBuffer) -> int | None:
    """The earliest horizon among the segment's batches that still hold tombstones or markers."""
    earliest = _NONE
    for chunk in iter_chunks(segment.log_path, 0, segment.size, buffer, verify_crc=False):
        table = chunk.table
        stamped = np.flatnonzero((table.attributes & ATTR_DELETE_HORIZON) != 0)
        for i in stamped.tolist():
            horizon = int(table.base_timestamp[i])
            if horizon >= earliest or int(table.records_count[i]) == 0:
                continue
            if int(table.attributes[i]) & ATTR_CONTROL:
                earliest = horizon
                continue
            if int(table.attributes[i]) & ATTR_COMPRESSION_MASK:
                buf, spans = decompressed_spans(chunk.buf, table, i, i + 1)
            else:
                buf, spans = chunk.buf, Spans.of_batches(table, np.array([i], dtype=np.int64))
            records = scan_records(buf, *spans.arrays())
            if bool((records.value_len[: len(records)] < 0).any()):
                earliest = horizon
    return None if earliest == _NONE else earliest


class HorizonTracker:
    """Caches each non-active segment's earliest horizon; thread-safe."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Path, int, int], int | None] = {}
        self._lock = threading.Lock()
        self._buffer = ReadBuffer(1 << 20)

    def earliest_horizon(self, log: PartitionLog) -> int | None:
        """The earliest governing horizon in ``log``'s non-active segments, or None."""
        with log.lock:
            segments = log.segments.values()[:-1]
        earliest: int | None = None
        live: set[tuple[Path, int, int]] = set()
        for segment in segments:
            try:
                inode = segment.log_path.stat().st_ino  # a cleaned segment is a new file
            except FileNotFoundError:
                continue  # replaced by a concurrent clean; the next pass sees the new one
            key = (segment.log_path, inode, segment.size)
            live.add(key)
            with self._lock:
                if key in self._cache:
                    horizon = self._cache[key]
                else:
                    try:
                        horizon = segment_earliest_horizon(segment, self._buffer)
                    except FileNotFoundError:
                        continue  # replaced by a concurrent clean; the next pass sees the new one
                    self._cache[key] = horizon
            if horizon is not None and (earliest is None or horizon < earliest):
                earliest = horizon
        with self._lock:
            for key in [k for k in self._cache if k[0].parent == log.directory and k not in live]:
                del self._cache[key]
        return earliest
