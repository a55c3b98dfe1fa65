"""Tables over log directories on disk: a kompakt data directory or an Apache Kafka log directory.

Read-only, like the other offline tools (``kompakt.inspect.log_files``): no lock is taken and nothing
is written, so a live broker's directory may be read too. The segment files and their sizes are
taken when the table opens; a batch still being written at the end of the last segment (a torn
tail, as crash recovery would cut it) ends the log there. The partition's log start comes from
``log-start-offset-checkpoint`` and the first dirty offset from ``cleaner-offset-checkpoint`` when
the data directory has them (Kafka's and kompakt's files are the same).

There is no broker to compute the last stable offset or the aborted transactions, so the index is
built by :class:`~kompakt.table.build.OneShotBuilder`, which decides transactions by their markers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kompakt.cleaner.segment_reader import ReadBuffer
from kompakt.errors import CorruptCheckpointError, CorruptRecordError, LogDirectoryError
from kompakt.inspect.log_files import PartitionDir, resolve_target, topic_partitions
from kompakt.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kompakt.log.cluster_metadata import read_cluster_metadata
from kompakt.records.batch import LOG_OVERHEAD
from kompakt.records.native import U8Array
from kompakt.records.scan import StopReason, scan_batches
from kompakt.table.build import Chunk, OneShotBuilder, OneShotResult
from kompakt.table.index import KeyIndex, expected_keys
from kompakt.table.partition import (
    SECTION_ACTIVE,
    SECTION_CLEAN,
    SECTION_DIRTY,
    CleanFacts,
    Location,
    PartitionTable,
)

_INDEX_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])


@dataclass(frozen=True, slots=True)
class _Segment:
    base_offset: int
    path: Path
    size: int
    mtime_ms: int


def _checkpoint(path: Path, tp: tuple[str, int]) -> int | None:
    """One entry of an offset checkpoint file; an unreadable file counts as absent (as the broker)."""
    try:
        return OffsetCheckpointFile(path).read().get(tp)
    except (CorruptCheckpointError, OSError):
        return None


def index_floor_position(path: Path, base_offset: int, offset: int) -> int:
    """Byte position of the last ``.index`` entry at or before ``offset`` (0 without a usable index).

    The index is only a hint: the caller walks batch headers from there. Kafka and kompakt
    preallocate index files (zeros after the last entry), so only the prefix of strictly
    increasing entries is used, found by bisection in the mapped file: a lookup touches a few
    pages, not the whole 10 MiB file.
    """
    if offset <= base_offset:
        return 0
    try:
        raw = np.memmap(path, dtype=_INDEX_ENTRY, mode="r")
    except (OSError, ValueError):
        return 0
    rel = raw["relative_offset"]
    n = len(rel)
    if n == 0:
        return 0
    # entries after the first have relative offsets > 0; the preallocated tail is all zeros
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        if int(rel[mid]) > 0:
            lo = mid + 1
        else:
            hi = mid
    valid = rel[:lo]
    i = int(np.searchsorted(valid, offset - base_offset, side="right")) - 1
    return int(raw["position"][i]) if i >= 0 else 0


def _max_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


class OfflineTable(PartitionTable):
    """One partition directory read as a table (built when it opens)."""

    def __init__(self, partition_dir: PartitionDir, data_dir: Path | None) -> None:
        super().__init__(partition_dir.topic, partition_dir.partition)
        self.directory = partition_dir.path
        segments = []
        for seg in partition_dir.segments:
            stat = seg.path.stat()
            segments.append(_Segment(seg.base_offset, seg.path, stat.st_size, stat.st_mtime_ns // 1_000_000))
        self._segments: Sequence[_Segment] = tuple(segments)
        tp = (partition_dir.topic, partition_dir.partition)
        start = _checkpoint(data_dir / LOG_START_OFFSET_CHECKPOINT_FILE, tp) if data_dir else None
        first = self._segments[0].base_offset if self._segments else 0
        self._log_start = max(first, start) if start is not None else first
        self._first_dirty = _checkpoint(data_dir / CLEANER_OFFSET_CHECKPOINT_FILE, tp) if data_dir else None
        self._buffer = ReadBuffer()
        self.torn_tail: tuple[Path, int] | None = None
        index, result = OneShotBuilder(
            lambda: self._chunks_from(self._log_start), start_offset=self._log_start
        ).build(lambda: KeyIndex(self._expected_keys()))
        self._index = index
        self._indexed_to = result.last_stable_offset
        self.build: OneShotResult = result

    def log_start_offset(self) -> int:
        return self._log_start

    def _expected_keys(self) -> int:
        """What to size the build for: the offsets the segments span (the last segment's share
        estimated from the bytes per offset of the others), capped by :func:`expected_keys`."""
        segs = self._segments
        total = sum(s.size for s in segs)
        if len(segs) < 2:
            return expected_keys(1 << 62, total)
        before = segs[-1].base_offset - segs[0].base_offset
        bytes_before = total - segs[-1].size
        span = before + (segs[-1].size * before // bytes_before if bytes_before > 0 else 0)
        return expected_keys(span, total)

    @property
    def first_dirty_offset(self) -> int | None:
        return self._first_dirty

    def clean_facts(self) -> CleanFacts:
        """The cleaner checkpoint when the data directory has one; without it (a partition directory
        copied alone), the end of the last offset gap stands in: records were removed below it."""
        dirty = _max_known(self._first_dirty, self.build.removed_below or None)
        until = max(
            (s.mtime_ms for s in self._segments if dirty is not None and s.base_offset < dirty), default=None
        )
        return CleanFacts(self._log_start, dirty, until)

    def _segment_index(self, offset: int) -> int:
        bases = [s.base_offset for s in self._segments]
        return max(0, int(np.searchsorted(bases, offset, side="right")) - 1)

    def _chunks_from(self, offset: int) -> Iterator[Chunk]:
        if not self._segments:
            return
        first = self._segment_index(offset)
        for i in range(first, len(self._segments)):
            seg = self._segments[i]
            position = (
                index_floor_position(seg.path.with_suffix(".index"), seg.base_offset, offset)
                if i == first
                else 0
            )
            yield from self._segment_chunks(seg, position, last=i == len(self._segments) - 1)

    def _segment_chunks(self, seg: _Segment, position: int, *, last: bool) -> Iterator[Chunk]:
        """Whole batches of one segment from ``position``, in chunks of the reused buffer (each
        chunk is valid until the next one is read)."""
        buffer = self._buffer
        try:
            fd = os.open(seg.path, os.O_RDONLY)
        except FileNotFoundError:
            raise LogDirectoryError(
                f"{seg.path} disappeared while it was read (a clean or a deletion)"
            ) from None
        try:
            pos = position
            while pos < seg.size:
                want = min(len(buffer.buf), seg.size - pos)
                view = buffer.buf[:want]
                got = os.preadv(fd, [view.data], pos)
                view = view[:got]
                table = scan_batches(view)
                if len(table):
                    yield view, table
                    pos += int(table.position[-1] + table.size[-1])
                    if table.stop_reason in (StopReason.BAD_SIZE, StopReason.BAD_MAGIC):
                        self._refuse(seg, pos, table.stop_reason)
                    continue
                if table.stop_reason != StopReason.PARTIAL:
                    self._refuse(seg, pos, table.stop_reason)
                declared = (
                    int.from_bytes(bytes(view[8:12]), "big", signed=True) + LOG_OVERHEAD
                    if len(view) >= LOG_OVERHEAD
                    else None
                )
                if declared is not None and len(view) < declared <= seg.size - pos:
                    buffer.ensure(declared)  # one batch larger than the buffer: read it whole
                    continue
                if last:  # a torn tail, as crash recovery would cut it: the log ends here
                    self.torn_tail = (seg.path, pos)
                    return
                self._refuse(seg, pos, StopReason.PARTIAL)
        finally:
            os.close(fd)
            buffer.restore()

    @staticmethod
    def _refuse(seg: _Segment, pos: int, reason: StopReason) -> None:
        what = {
            StopReason.PARTIAL: "a batch that runs past the end of the segment",
            StopReason.BAD_SIZE: "a batch size below the 61-byte header",
            StopReason.BAD_MAGIC: "a batch that is not RecordBatch v2 (the table reads magic 2 only)",
        }.get(reason, "an unreadable batch")
        raise CorruptRecordError(f"{seg.path} holds {what} at byte {pos}")

    def _batch_at(self, offset: int) -> tuple[U8Array, Location] | None:
        if offset < self._log_start or not self._segments:
            return None
        i = self._segment_index(offset)
        seg = self._segments[i]
        position = index_floor_position(seg.path.with_suffix(".index"), seg.base_offset, offset)
        with open(seg.path, "rb") as f:
            while position < seg.size:
                f.seek(position)
                header = f.read(LOG_OVERHEAD)
                if len(header) < LOG_OVERHEAD:
                    return None
                base = int.from_bytes(header[:8], "big", signed=True)
                size = int.from_bytes(header[8:12], "big", signed=True) + LOG_OVERHEAD
                if size <= LOG_OVERHEAD or position + size > seg.size:
                    return None
                data = header + f.read(size - LOG_OVERHEAD)
                buf = np.frombuffer(data, dtype=np.uint8)
                table = scan_batches(buf)
                if len(table) != 1:
                    raise CorruptRecordError(f"{seg.path} holds an unreadable batch at byte {position}")
                last_offset = int(table.last_offset[0])
                if last_offset >= offset:
                    if base > offset:
                        return None
                    section = self._section(i, offset)
                    return buf, Location(seg.base_offset, position, base, last_offset, size, section)
                position += size
        return None

    def _section(self, segment_index: int, offset: int) -> str:
        if segment_index == len(self._segments) - 1:
            return SECTION_ACTIVE
        dirty = _max_known(self._first_dirty, self.build.removed_below or None)
        if dirty is not None and offset < dirty:
            return SECTION_CLEAN
        return SECTION_DIRTY


def open_tables(path: Path, topic: str | None = None) -> list[OfflineTable]:
    """The tables of every partition under ``path`` (a partition or data directory), or of ``topic``.

    KRaft's metadata log (``__cluster_metadata-0``) is not a topic and has no table."""
    target = resolve_target(path)
    parts = [p for p in topic_partitions(target) if topic is None or p.topic == topic]
    if not parts:
        what = f"no partition of topic {topic!r}" if topic else "no partition"
        raise LogDirectoryError(f"{path} holds {what}")
    return [OfflineTable(p, target.data_dir) for p in parts]


def cluster_notes(path: Path, topic: str, tables: Sequence[PartitionTable]) -> list[str]:
    """What a Kafka 4 directory's metadata log says about reading ``topic``'s tables from it.

    One broker's directory holds only the partitions assigned to it, so a count, scan or export
    of it is a part of the topic unless it says so; files of a deleted topic, or ones Kafka moves
    aside as strays, are not what the cluster serves; and a topic whose ``cleanup.policy`` has no
    ``compact`` keeps every record retention has not removed, not one per key. Nothing for a
    directory without a metadata log."""
    data_dir = resolve_target(path).data_dir
    metadata = None if data_dir is None else read_cluster_metadata(data_dir)
    if data_dir is None or metadata is None:
        return []
    target = resolve_target(data_dir)
    notes: list[str] = []
    meta = metadata.topics.get(topic)
    if meta is None:
        return [
            f"topic {topic!r} is not in the metadata log of {data_dir} (deleted, or never "
            "created on this cluster): Kafka does not serve these files"
        ]
    by_partition = {p.partition: p for p in target.partitions if p.topic == topic}
    for table in tables:
        part = by_partition.get(table.partition)
        reason = None if part is None else metadata.stray_reason_of(part.path, topic, table.partition)
        if reason is not None:
            notes.append(f"{topic}-{table.partition}: {reason}; Kafka does not serve it")
    here = {p.partition for p in target.partitions if p.topic == topic}
    missing = sorted(set(meta.replicas) - here)
    if missing:
        elsewhere = sorted({b for p in missing for b in meta.replicas[p]})
        notes.append(
            f"{data_dir} holds partitions {sorted(here & set(meta.replicas))} of topic {topic!r}, "
            f"whose partitions {missing} are on broker(s) {elsewhere}: the answer covers only the "
            "partitions here"
        )
    policy = meta.configs.get("cleanup.policy")
    origin = "its own override in the metadata log"
    if policy is None:
        value = metadata.broker_overrides().get("log.cleanup.policy")
        policy, origin = (value[0], value[1]) if value is not None else (None, "")
    if policy is not None and "compact" not in {p.strip() for p in policy.split(",")}:
        notes.append(
            f"topic {topic!r} has cleanup.policy={policy} ({origin}): it is not "
            "compacted, so its table is the latest value per key of what retention has kept"
        )
    return notes
