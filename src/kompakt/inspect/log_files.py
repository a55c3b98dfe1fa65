"""Read-only inspection of log files: find partitions under a path, dump batches, verify files.

These helpers back ``kompakt log dump`` and ``kompakt log verify``. They never open a directory
through :class:`~kompakt.log.manager.LogManager`: that takes the ``.lock``, writes
``meta.properties`` and may run recovery, and a tool pointed at a live broker's directory (or at a
damaged one, the very case ``verify`` exists for) must change nothing. Everything here reads files
and returns plain values; printing is the CLI's business.

A path may name a segment file (``00000000000000000000.log``), a partition directory
(``<topic>-<partition>``) or a data directory holding partition directories; kompakt's and Apache
Kafka's layouts are the same. Legacy message sets (magic 0 and 1, written by Kafka before 0.11)
are read through :mod:`kompakt.records.legacy`.

A Kafka 4 directory also holds KRaft's metadata log, ``__cluster_metadata-0``: its segments are
ordinary batches (dump and verify read them; ``dump`` decodes its records with
:func:`metadata_payload`, and reads its ``<offset>-<epoch>.checkpoint`` snapshots), but it is not a
topic: no configs, never cleaned, so the tools about topics take :func:`topic_partitions`. Verify
also reads what the metadata log says (:mod:`kompakt.log.cluster_metadata`): a partition directory
it does not assign to this node is one Kafka moves aside as ``-stray`` at its next start.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from kompakt.errors import CorruptCheckpointError, CorruptRecordError, KompaktError, LogDirectoryError
from kompakt.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from kompakt.log.cluster_metadata import METADATA_TOPIC, list_snapshots, read_cluster_metadata
from kompakt.log.cluster_metadata_records import (
    MetadataRecordError,
    decode_control_record,
    decode_metadata_record,
)
from kompakt.log.files import (
    SegmentExtension,
    parse_partition_dir_name,
    partition_dir_suffix,
    segment_file_name,
)
from kompakt.records.batch import BATCH_OVERHEAD, LOG_OVERHEAD, RecordBatchView
from kompakt.records.compression import Compression
from kompakt.records.control import control_type_of
from kompakt.records.legacy import iter_legacy_messages, iter_legacy_records
from kompakt.records.record import decode_records

INT32_MAX: Final = 2**31 - 1
_SEGMENT_RE: Final = re.compile(r"[0-9]{20}\.log")
_SNAPSHOT_RE: Final = re.compile(r"([0-9]{20})-[0-9]{10}\.checkpoint")
_DATA_DIR_MARKERS: Final = (
    "meta.properties",
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    "kompakt-topics.json",
)
_MIN_LEGACY_ENTRY: Final = LOG_OVERHEAD + 14


# --------------------------------------------------------------------------------------------
# Finding partitions


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One ``.log`` file of a partition, by base offset."""

    base_offset: int
    path: Path

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size

    def sibling(self, extension: SegmentExtension) -> Path:
        """The segment's ``index`` / ``timeindex`` / ``txnindex`` file (may not exist)."""
        return self.path.with_name(segment_file_name(self.base_offset, extension))


@dataclass(frozen=True, slots=True)
class PartitionDir:
    """A ``<topic>-<partition>`` directory and its segments in offset order."""

    topic: str
    partition: int
    path: Path
    segments: tuple[SegmentFile, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class LogTarget:
    """What a command-line path resolved to.

    ``data_dir`` is the directory holding the offset checkpoints (None for a lone segment file
    outside a data directory); ``segment`` is set when the path named one ``.log`` file.
    """

    kind: str  # "segment", "partition" or "data"
    path: Path
    data_dir: Path | None
    partitions: tuple[PartitionDir, ...]
    segment: SegmentFile | None = None


def list_segments(directory: Path) -> tuple[SegmentFile, ...]:
    """The ``<20 digits>.log`` files of a partition directory (temporary suffixes excluded)."""
    segments = [
        SegmentFile(int(entry.name[:20]), Path(entry.path))
        for entry in os.scandir(directory)
        if entry.is_file() and _SEGMENT_RE.fullmatch(entry.name)
    ]
    return tuple(sorted(segments, key=lambda s: s.base_offset))


def _partition_dir(path: Path) -> PartitionDir | None:
    """The partition in ``path``, or None when the name is not ``<topic>-<n>`` or it is marked."""
    if partition_dir_suffix(path.name) is not None:
        return None
    try:
        topic, partition = parse_partition_dir_name(path.name)
    except LogDirectoryError:
        return None
    return PartitionDir(topic, partition, path, list_segments(path))


def _looks_like_data_dir(path: Path) -> bool:
    return any((path / marker).exists() for marker in _DATA_DIR_MARKERS)


def resolve_target(path: Path, *, snapshots: bool = False) -> LogTarget:
    """Resolve a segment file, partition directory or data directory; raise LogDirectoryError.

    With ``snapshots`` a KRaft snapshot file (``<offset>-<epoch>.checkpoint``, record batches like a
    segment's) is taken as a segment too, for ``dump``; its batches restart at offset 0, so the
    segment checks of ``verify`` do not apply to it.
    """
    path = path.expanduser()
    if not path.exists():
        raise LogDirectoryError(f"{path} does not exist")
    path = path.resolve()
    if path.is_file():
        snapshot = _SNAPSHOT_RE.fullmatch(path.name) if snapshots else None
        if not _SEGMENT_RE.fullmatch(path.name) and snapshot is None:
            raise LogDirectoryError(f"{path} is not a log segment (expected a <20-digit offset>.log file)")
        segment = SegmentFile(int(path.name[:20]), path)
        part = _partition_dir(path.parent)
        if part is None:
            part = PartitionDir("?", -1, path.parent, (segment,))
            return LogTarget("segment", path, None, (part,), segment)
        data_dir = path.parent.parent if _looks_like_data_dir(path.parent.parent) else None
        return LogTarget("segment", path, data_dir, (part,), segment)
    if not path.is_dir():
        raise LogDirectoryError(f"{path} is neither a file nor a directory")
    if list_segments(path):
        part = _partition_dir(path)
        if part is None:
            raise LogDirectoryError(f"{path} holds .log files but is not named <topic>-<partition>")
        data_dir = path.parent if _looks_like_data_dir(path.parent) else None
        return LogTarget("partition", path, data_dir, (part,))
    partitions = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.is_dir():
            part = _partition_dir(Path(entry.path))
            if part is not None and (part.segments or (part.path / "partition.metadata").exists()):
                partitions.append(part)
    if partitions or _looks_like_data_dir(path):
        partitions.sort(key=lambda p: (p.topic, p.partition))
        return LogTarget("data", path, path, tuple(partitions))
    part = _partition_dir(path)
    if part is not None:
        return LogTarget("partition", path, None, (part,))
    raise LogDirectoryError(
        f"{path} is not a log directory (no <topic>-<partition> directories, no .log segments)"
    )


def is_metadata_log(partition: PartitionDir) -> bool:
    """KRaft's metadata log (``__cluster_metadata-0``), which a Kafka 4 node keeps beside the topics."""
    return partition.topic == METADATA_TOPIC


def topic_partitions(target: LogTarget) -> tuple[PartitionDir, ...]:
    """The partitions of topics under ``target``: all but KRaft's metadata log. Its records are the
    cluster's metadata, kept by snapshots rather than the cleaner, and it has no topic configs, so
    ``explain``, ``compact`` and the tables have nothing to say about it (Kafka's LogManager does
    not load it either)."""
    return tuple(p for p in target.partitions if not is_metadata_log(p))


def is_empty_internal(topic: str, size_bytes: int) -> bool:
    """An internal topic's partition (``__consumer_offsets``, ``__transaction_state``) without a
    byte of data: Kafka creates 50 ``__consumer_offsets`` partitions at the first group, and a
    listing of them is noise the tables leave out (the JSON keeps them)."""
    return topic.startswith("__") and size_bytes == 0


def read_segment_bytes(path: Path, size: int | None = None) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The first ``size`` bytes of a segment file (all of it by default) as a uint8 array."""
    count = -1 if size is None else size
    data: np.ndarray[Any, np.dtype[np.uint8]] = np.fromfile(path, dtype=np.uint8, count=count)
    return data


# --------------------------------------------------------------------------------------------
# Dump


CODEC_NAMES: Final = {int(c): c.name.lower() for c in Compression}


@dataclass(frozen=True, slots=True)
class RecordInfo:
    """One record as a tool shows it; ``key``/``value`` None means null (not empty)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """One batch (or legacy message) as Kafka's dump tool shows it."""

    segment: Path
    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    count: int
    crc: int
    crc_valid: bool
    codec: str
    timestamp_type: str | None
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    control_type: str | None
    delete_horizon_ms: int | None
    records: tuple[RecordInfo, ...] | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SegmentTail:
    """Bytes after the last whole batch: a torn write, zero padding, or garbage."""

    segment: Path
    position: int
    length: int
    all_zero: bool
    declared_size: int | None
    reason: str


def _control_name(view: RecordBatchView) -> str | None:
    if not view.is_control:
        return None
    try:
        kind = control_type_of(view)
    except (KompaktError, ValueError) as exc:
        return f"unreadable ({exc})"
    if kind is None:
        return "empty"
    return kind.name if hasattr(kind, "name") else str(kind)


def _v2_info(path: Path, view: RecordBatchView, with_records: bool) -> BatchInfo:
    crc_valid = view.compute_crc() == view.crc
    records: tuple[RecordInfo, ...] | None = None
    error = None
    if with_records:
        try:
            records = tuple(
                RecordInfo(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_records(view)
            )
        except KompaktError as exc:
            error = str(exc)
            records = ()
    return BatchInfo(
        segment=path,
        position=view.position,
        size=view.size,
        magic=view.magic,
        base_offset=view.base_offset,
        last_offset=view.last_offset,
        count=view.records_count,
        crc=view.crc,
        crc_valid=crc_valid,
        codec=CODEC_NAMES.get(view.compression, str(view.compression)),
        timestamp_type=view.timestamp_type.name,
        base_timestamp=view.base_timestamp,
        max_timestamp=view.max_timestamp,
        producer_id=view.producer_id,
        producer_epoch=view.producer_epoch,
        base_sequence=view.base_sequence,
        partition_leader_epoch=view.partition_leader_epoch,
        is_transactional=view.is_transactional,
        is_control=view.is_control,
        control_type=_control_name(view) if crc_valid else None,
        delete_horizon_ms=view.delete_horizon_ms,
        records=records,
        error=error,
    )


def _legacy_infos(path: Path, buf: bytes, pos: int, with_records: bool) -> Iterator[BatchInfo]:
    for message in iter_legacy_messages(buf, pos):
        records: tuple[RecordInfo, ...] | None = None
        error = None
        offset_first = message.offset
        if with_records or message.compression:
            try:
                inner = list(
                    iter_legacy_records(
                        buf, message.position, message.position + message.size, verify_crc=False
                    )
                )
            except KompaktError as exc:
                inner, error = [], str(exc)
            if inner:
                offset_first = inner[0].offset
            if with_records:
                records = tuple(RecordInfo(r.offset, r.timestamp, r.key, r.value) for r in inner)
            count = len(inner) if not error else 0
        else:
            count = 1
        ts_type = message.timestamp_type
        yield BatchInfo(
            segment=path,
            position=message.position,
            size=message.size,
            magic=message.magic,
            base_offset=offset_first,
            last_offset=message.offset,
            count=count,
            crc=message.crc,
            crc_valid=message.is_valid,
            codec=CODEC_NAMES.get(message.compression, str(message.compression)),
            timestamp_type=None if ts_type is None else ts_type.name,
            base_timestamp=message.timestamp,
            max_timestamp=message.timestamp,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            partition_leader_epoch=-1,
            is_transactional=False,
            is_control=False,
            control_type=None,
            delete_horizon_ms=None,
            records=records,
            error=error,
        )


def iter_segment(
    path: Path, *, with_records: bool = False, buf: bytes | None = None
) -> Iterator[BatchInfo | SegmentTail]:
    """Every batch of a segment file in order, then a :class:`SegmentTail` if bytes are left over.

    v2 batches and legacy v0/v1 messages may alternate (a log upgraded in place). Iteration stops at
    the first entry whose framing is broken; the tail says where and why.
    """
    data = path.read_bytes() if buf is None else buf
    end = len(data)
    pos = 0
    while pos < end:
        if pos + LOG_OVERHEAD > end:
            yield _tail(path, data, pos, None, "partial batch header")
            return
        declared = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD
        magic = data[pos + 16] if pos + 16 < end else -1
        if magic in (0, 1):
            if declared < _MIN_LEGACY_ENTRY or pos + declared > end:
                reason = (
                    "legacy message runs past the end of the file"
                    if declared >= _MIN_LEGACY_ENTRY
                    else (f"legacy message size {declared} is below the minimum")
                )
                yield _tail(path, data, pos, declared, reason)
                return
            last = pos
            for info in _legacy_infos(path, data, pos, with_records):
                yield info
                last = info.position + info.size
                next_magic = data[last + 16] if last + 16 < end else -1
                if next_magic not in (0, 1):
                    break
            if last == pos:  # malformed key/value framing inside the first message
                yield _tail(path, data, pos, declared, "malformed legacy message")
                return
            pos = last
            continue
        if declared < BATCH_OVERHEAD:
            yield _tail(
                path, data, pos, declared, f"batch size {declared} is below the {BATCH_OVERHEAD}-byte header"
            )
            return
        if pos + declared > end:
            yield _tail(
                path, data, pos, declared, f"batch of {declared} bytes runs past the end of the file ({end})"
            )
            return
        if magic != 2:
            yield _tail(path, data, pos, declared, f"unsupported magic {magic}")
            return
        yield _v2_info(path, RecordBatchView(data, pos), with_records)
        pos += declared


def metadata_payload(record: RecordInfo, *, is_control: bool) -> dict[str, Any] | str | None:
    """A record of KRaft's metadata log as Kafka's dump tool prints it with
    ``--cluster-metadata-decoder``: ``{"type", "version", "data"}`` (a control record's
    ``{"type", "data"}``), None for a control record that has no KRaft schema (a transaction
    marker), or one line saying why the bytes do not decode (the dump goes on, as Kafka's does)."""
    if is_control:
        if record.key is None or len(record.key) < 4:
            return None
        try:
            return decode_control_record(int.from_bytes(record.key[2:4], "big"), record.value)
        except MetadataRecordError as exc:
            return f"Error at {record.offset}, skipping. {exc}"
    if record.value is None:
        return f"Error at {record.offset}, skipping. a metadata record without a value"
    try:
        decoded = decode_metadata_record(record.value)
    except MetadataRecordError as exc:
        return f"Error at {record.offset}, skipping. {exc}"
    if decoded.data is None:
        return f"Error at {record.offset}, skipping. {decoded.type_name} version {decoded.version} is unknown"
    return {"type": decoded.type_name, "version": decoded.version, "data": decoded.data}


def _tail(path: Path, data: bytes, pos: int, declared: int | None, reason: str) -> SegmentTail:
    rest = data[pos:]
    return SegmentTail(path, pos, len(rest), not any(rest), declared, reason)


# --------------------------------------------------------------------------------------------
# Verify


@dataclass(frozen=True, slots=True)
class Defect:
    """One thing wrong with the files: where exactly, and what."""

    file: Path
    message: str
    position: int | None = None
    offset: int | None = None

    def describe(self) -> str:
        where = str(self.file)
        if self.position is not None:
            where += f" at byte {self.position}"
        if self.offset is not None:
            where += f" (offset {self.offset})"
        return f"{where}: {self.message}"


@dataclass(slots=True)
class PartitionCheck:
    """What verifying one partition found; ``log_end_offset`` feeds the checkpoint checks."""

    partition: PartitionDir
    batches: int = 0
    records: int = 0
    bytes: int = 0
    log_end_offset: int = 0
    defects: list[Defect] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Everything ``verify`` checked, and every defect found."""

    target: LogTarget
    partitions: tuple[PartitionCheck, ...]
    checkpoint_defects: tuple[Defect, ...]
    checked_files: int
    metadata_defects: tuple[Defect, ...] = ()
    """Damaged metadata snapshots, and partition directories the metadata log does not assign to
    this node (Kafka renames them ``-stray`` and never serves them)."""
    notes: tuple[str, ...] = ()
    """What reading the metadata log skipped (records of a newer Kafka, say): not defects."""

    @property
    def defects(self) -> tuple[Defect, ...]:
        return (
            tuple(d for p in self.partitions for d in p.defects)
            + self.checkpoint_defects
            + self.metadata_defects
        )

    @property
    def ok(self) -> bool:
        return not self.defects


@dataclass(frozen=True, slots=True)
class _Batch:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def _verify_segment(
    part: PartitionCheck, segment: SegmentFile, prev_next: int | None
) -> tuple[list[_Batch], int | None]:
    """Check framing, CRCs and offsets of one segment; return its batches and the next offset."""
    batches: list[_Batch] = []
    data = segment.path.read_bytes()
    part.bytes += len(data)
    for item in iter_segment(segment.path, buf=data):
        if isinstance(item, SegmentTail):
            if item.all_zero:
                continue  # preallocated space of an active segment, not data
            part.defects.append(
                Defect(
                    segment.path,
                    f"truncated or malformed batch: {item.reason} ({item.length} bytes left)",
                    item.position,
                )
            )
            break
        if not item.crc_valid:
            part.defects.append(
                Defect(
                    segment.path, f"CRC mismatch (stored {item.crc:#010x})", item.position, item.base_offset
                )
            )
        if item.last_offset < item.base_offset:
            part.defects.append(
                Defect(
                    segment.path,
                    f"last offset {item.last_offset} below base offset",
                    item.position,
                    item.base_offset,
                )
            )
        if item.base_offset < segment.base_offset or item.last_offset - segment.base_offset > INT32_MAX:
            part.defects.append(
                Defect(
                    segment.path,
                    f"offsets {item.base_offset}..{item.last_offset} are outside the segment's range "
                    f"[{segment.base_offset}, {segment.base_offset + INT32_MAX}]",
                    item.position,
                    item.base_offset,
                )
            )
        if prev_next is not None and item.base_offset < prev_next:
            part.defects.append(
                Defect(
                    segment.path,
                    f"offsets not increasing: batch starts at {item.base_offset}, previous batch ended at "
                    f"{prev_next - 1}",
                    item.position,
                    item.base_offset,
                )
            )
        prev_next = item.last_offset + 1
        part.batches += 1
        part.records += item.count
        batches.append(_Batch(item.position, item.base_offset, item.last_offset, item.max_timestamp))
    return batches, prev_next


def _index_entries(
    path: Path, width: int, dtype: np.dtype[Any]
) -> tuple[np.ndarray[Any, Any] | None, str | None]:
    raw = path.read_bytes()
    if len(raw) % width:
        return None, f"size {len(raw)} is not a multiple of {width}"
    table = np.frombuffer(raw, dtype=dtype)
    nonzero = np.flatnonzero(np.any(table.view(np.uint8).reshape(len(table), width) != 0, axis=1))
    return table[: int(nonzero[-1]) + 1 if len(nonzero) else 0], None


_OFFSET_DTYPE: Final = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
_TIME_DTYPE: Final = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])


def _verify_offset_index(part: PartitionCheck, segment: SegmentFile, batches: list[_Batch]) -> None:
    path = segment.sibling("index")
    if not path.exists():
        return
    table, error = _index_entries(path, 8, _OFFSET_DTYPE)
    if table is None:
        part.defects.append(Defect(path, f"corrupt offset index: {error}"))
        return
    by_position = {b.position: i for i, b in enumerate(batches)}
    last_offset = batches[-1].last_offset if batches else segment.base_offset - 1
    prev: tuple[int, int] | None = None
    for slot, (relative, position) in enumerate(table.tolist()):
        offset = segment.base_offset + int(relative)
        where = f"entry {slot} (offset {offset} -> byte {position})"
        if prev is not None and (offset <= prev[0] or position <= prev[1]):
            part.defects.append(
                Defect(path, f"{where}: entries are not strictly increasing", position, offset)
            )
        prev = (offset, int(position))
        index = by_position.get(int(position))
        if index is None:
            part.defects.append(
                Defect(
                    path,
                    f"{where}: does not point at the start of a batch in {segment.path.name}",
                    position,
                    offset,
                )
            )
            continue
        batch = batches[index]
        if offset < batch.base_offset or offset > last_offset:
            part.defects.append(
                Defect(
                    path,
                    f"{where}: the batch there holds offsets {batch.base_offset}..{batch.last_offset}",
                    position,
                    offset,
                )
            )


def _verify_time_index(part: PartitionCheck, segment: SegmentFile, batches: list[_Batch]) -> None:
    path = segment.sibling("timeindex")
    if not path.exists():
        return
    table, error = _index_entries(path, 12, _TIME_DTYPE)
    if table is None:
        part.defects.append(Defect(path, f"corrupt time index: {error}"))
        return
    lasts = np.array([b.last_offset for b in batches], dtype=np.int64)
    running_max = (
        np.maximum.accumulate(np.array([b.max_timestamp for b in batches], dtype=np.int64))
        if batches
        else lasts
    )
    prev: tuple[int, int] | None = None
    for slot, (timestamp, relative) in enumerate(table.tolist()):
        offset = segment.base_offset + int(relative)
        where = f"entry {slot} (timestamp {timestamp} -> offset {offset})"
        if prev is not None and (timestamp <= prev[0] or offset < prev[1]):
            part.defects.append(
                Defect(
                    path, f"{where}: timestamps must increase and offsets must not decrease", offset=offset
                )
            )
        prev = (int(timestamp), offset)
        i = int(np.searchsorted(lasts, offset, side="left"))
        if i >= len(batches) or offset < batches[i].base_offset:
            part.defects.append(
                Defect(path, f"{where}: no batch of {segment.path.name} holds that offset", offset=offset)
            )
            continue
        if timestamp > int(running_max[i]):
            part.defects.append(
                Defect(
                    path,
                    f"{where}: the largest timestamp up to that batch is {int(running_max[i])}",
                    batches[i].position,
                    offset,
                )
            )


def verify_partition(partition: PartitionDir, only: SegmentFile | None = None) -> PartitionCheck:
    """Verify every segment (or just ``only``) of a partition, its indexes and its epoch file."""
    check = PartitionCheck(partition)
    prev_next: int | None = None
    segments = (only,) if only is not None else partition.segments
    for segment in segments:
        batches, prev_next = _verify_segment(check, segment, prev_next)
        _verify_offset_index(check, segment, batches)
        _verify_time_index(check, segment, batches)
    if partition.segments:
        check.log_end_offset = prev_next if prev_next is not None else partition.segments[-1].base_offset
    if only is None:
        _verify_epochs(check)
    return check


def _verify_epochs(check: PartitionCheck) -> None:
    path = check.partition.path / LEADER_EPOCH_CHECKPOINT_FILE
    if not path.exists():
        return
    try:
        entries = LeaderEpochCheckpointFile(path).read()
    except CorruptCheckpointError as exc:
        check.defects.append(Defect(path, str(exc)))
        return
    for prev, entry in zip(entries, entries[1:], strict=False):
        if entry.epoch <= prev.epoch or entry.start_offset < prev.start_offset:
            check.defects.append(
                Defect(
                    path,
                    f"epoch {entry.epoch} at offset {entry.start_offset} does not follow epoch "
                    f"{prev.epoch} at offset {prev.start_offset}",
                    offset=entry.start_offset,
                )
            )
    for entry in entries:
        if entry.start_offset > check.log_end_offset:
            check.defects.append(
                Defect(
                    path,
                    f"epoch {entry.epoch} starts at {entry.start_offset}, beyond the log end offset "
                    f"{check.log_end_offset}",
                    offset=entry.start_offset,
                )
            )


_CHECKPOINT_RULES: Final = (
    (RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, "recovery point"),
    (LOG_START_OFFSET_CHECKPOINT_FILE, "log start offset"),
    (REPLICATION_OFFSET_CHECKPOINT_FILE, "high watermark"),
    (CLEANER_OFFSET_CHECKPOINT_FILE, "cleaner checkpoint"),
)


def verify_checkpoints(data_dir: Path, partitions: dict[tuple[str, int], PartitionCheck]) -> list[Defect]:
    """Each offset checkpoint parses, and every entry of a checked partition is within [0, LEO]."""
    defects: list[Defect] = []
    for name, what in _CHECKPOINT_RULES:
        path = data_dir / name
        if not path.exists():
            continue
        try:
            entries = OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as exc:
            defects.append(Defect(path, str(exc)))
            continue
        for (topic, partition), offset in sorted(entries.items()):
            check = partitions.get((topic, partition))
            if check is None:
                continue
            leo = check.log_end_offset
            if offset < 0:
                defects.append(
                    Defect(path, f"{what} of {topic}-{partition} is negative ({offset})", offset=offset)
                )
            elif offset > leo:
                defects.append(
                    Defect(
                        path,
                        f"{what} of {topic}-{partition} is {offset}, beyond the log end offset {leo}",
                        offset=offset,
                    )
                )
            elif name == LOG_START_OFFSET_CHECKPOINT_FILE and check.partition.segments:
                first = check.partition.segments[0].base_offset
                if offset < first:
                    defects.append(
                        Defect(
                            path,
                            f"log start offset of {topic}-{partition} is {offset}, below the first "
                            f"segment's base offset {first}",
                            offset=offset,
                        )
                    )
    return defects


def verify_target(target: LogTarget) -> VerifyReport:
    """Verify everything ``target`` covers; the checkpoints only for a partition or data directory,
    and, on a Kafka 4 directory, the metadata log's snapshots and what it assigns to this node."""
    checks = tuple(verify_partition(p, target.segment) for p in target.partitions)
    checkpoint_defects: list[Defect] = []
    metadata_defects: list[Defect] = []
    notes: tuple[str, ...] = ()
    files = sum(len(c.partition.segments) if target.segment is None else 1 for c in checks)
    if target.data_dir is not None and target.segment is None:
        by_tp = {(c.partition.topic, c.partition.partition): c for c in checks}
        checkpoint_defects = verify_checkpoints(target.data_dir, by_tp)
        metadata = read_cluster_metadata(target.data_dir)
        if metadata is not None:
            notes = tuple(f"metadata log: {p}" for p in metadata.problems)
            for part in target.partitions:
                if is_metadata_log(part):
                    snapshot_defects, checked = _verify_snapshots(part.path)
                    metadata_defects += snapshot_defects
                    files += checked
                    continue
                reason = metadata.stray_reason_of(part.path, part.topic, part.partition)
                if reason is not None:
                    metadata_defects.append(
                        Defect(
                            part.path,
                            f"not in the metadata log: {reason}; Kafka renames the directory "
                            "-stray at its next start and never serves it",
                        )
                    )
    return VerifyReport(target, checks, tuple(checkpoint_defects), files, tuple(metadata_defects), notes)


def _verify_snapshots(directory: Path) -> tuple[list[Defect], int]:
    """The framing and CRC of every batch of the metadata log's ``.checkpoint`` snapshots."""
    defects: list[Defect] = []
    snapshots = list_snapshots(directory)
    for snapshot in snapshots:
        for item in iter_segment(snapshot.path):
            if isinstance(item, SegmentTail):
                if not item.all_zero:
                    defects.append(
                        Defect(snapshot.path, f"truncated or malformed batch: {item.reason}", item.position)
                    )
            elif not item.crc_valid:
                defects.append(
                    Defect(snapshot.path, f"CRC mismatch (stored {item.crc:#010x})", item.position)
                )
    return defects, len(snapshots)


def log_end_offset(partition: PartitionDir) -> int:
    """The next offset after the last whole batch of the last non-empty segment (headers only)."""
    for segment in reversed(partition.segments):
        last: int | None = None
        for item in iter_segment(segment.path):
            if isinstance(item, BatchInfo):
                last = item.last_offset
        if last is not None:
            return last + 1
    return partition.segments[-1].base_offset if partition.segments else 0


__all__ = [
    "BatchInfo",
    "CorruptRecordError",
    "Defect",
    "LogTarget",
    "PartitionCheck",
    "PartitionDir",
    "RecordInfo",
    "SegmentFile",
    "SegmentTail",
    "VerifyReport",
    "is_empty_internal",
    "is_metadata_log",
    "iter_segment",
    "list_segments",
    "metadata_payload",
    "log_end_offset",
    "read_segment_bytes",
    "resolve_target",
    "topic_partitions",
    "verify_partition",
    "verify_target",
]
