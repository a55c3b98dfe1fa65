"""Quarantine: the bytes a recovery cuts off a log are moved beside it, never deleted.

When a log is cut at its first invalid batch (crash recovery above the recovery point, or
``kompakt log repair``), Kafka's ``LogLoader.recoverLog`` truncates the segment and deletes every
later segment. kompakt does the same to the log, but keeps the discarded bytes in the partition
directory:

* the tail of the cut segment, from the first invalid byte, is copied to
  ``<base>.log.corrupt-<cut offset>`` and the segment is then truncated;
* every later segment's files are renamed ``<name>.corrupt-<cut offset>`` (the ``.log`` first).

The cut offset is the log end offset after the cut: the first offset the log no longer holds. A
name that is taken by other bytes gets ``.1``, ``.2``... appended; nothing is ever overwritten.
The copy holds exactly the bytes cut (a batch may well end in zero bytes, so none are trimmed);
runs of zeros are written as holes, so the preallocated space of a segment costs no disk. Only
bytes that provably hold no data are not kept: a tail that is all zero (preallocated space, blocks
a file system zero-filled after a power cut: no batch has a zero length field; the count is
logged), an all-zero or empty later segment, and a later segment's indexes when its ``.log`` is.

Nothing in kompakt treats a quarantine file as part of a log: the name does not end in a segment
extension or a temporary suffix, the loader leaves such files alone with one info line per
directory, and retention, the cleaner, backup, dump and explain only look at ``<20 digits>.log``
files. ``kompakt log verify`` lists them; only an operator removes them.

Crash safety, in this order: later segments are renamed (each ``.log`` before its indexes, so an
interrupted rename leaves at worst an orphaned index, which the loader deletes as derived data),
the directory is fsynced, the tail copy is written to a ``.tmp`` name, fsynced and renamed, the
directory is fsynced, and only then is the segment truncated. A crash anywhere leaves the first
invalid batch in place, so the next load finds the same cut and finishes the job; a tail copy
already there with the same bytes is reused, so a second run neither fails nor quarantines twice.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kompakt.log.files import (
    DEFAULT_FILE_OPS,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    FileOps,
)
from kompakt.log.segment import LogSegment
from kompakt.log.segments import LogSegments

log = logging.getLogger(__name__)

QUARANTINE_MARK: Final = ".corrupt-"
_QUARANTINE_NAME: Final = re.compile(
    r"(?P<source>[0-9]{20}\.(?:log|index|timeindex|txnindex))\.corrupt-(?P<cut>[0-9]+)(?:\.(?P<n>[0-9]+))?"
)
_CHUNK: Final = 1 << 20
_INDEX_EXTENSIONS: Final = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)


def is_quarantine_name(name: str) -> bool:
    return QUARANTINE_MARK in name and _QUARANTINE_NAME.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class QuarantineFile:
    """A quarantine file found in a partition directory."""

    path: Path
    size: int
    #: The log end offset the log was cut to when the bytes were moved here.
    cut_offset: int
    #: The file the bytes came from (``00000000000000000000.log``).
    source: str


def list_quarantine_files(directory: Path) -> list[QuarantineFile]:
    """The quarantine files of a partition directory, by source name, cut offset and copy number."""
    found: list[tuple[str, int, int, QuarantineFile]] = []
    for entry in os.scandir(directory):
        match = _QUARANTINE_NAME.fullmatch(entry.name)
        if match is None or not entry.is_file():
            continue
        cut = int(match["cut"])
        found.append(
            (
                match["source"],
                cut,
                int(match["n"] or 0),
                QuarantineFile(Path(entry.path), entry.stat().st_size, cut, match["source"]),
            )
        )
    return [item[3] for item in sorted(found, key=lambda item: item[:3])]


@dataclass(frozen=True, slots=True)
class Cut:
    """Where a log is cut: ``segment`` keeps its first ``position`` bytes, ``later`` segments go.

    ``cut_offset`` is the offset after the last batch kept (the new log end offset); ``reason``
    says what is wrong with the bytes at ``position``.
    """

    segment: LogSegment
    position: int
    cut_offset: int
    reason: str
    later: tuple[LogSegment, ...] = ()


@dataclass(frozen=True, slots=True)
class QuarantineMove:
    """One thing a cut moves aside (or would): a segment's tail, or one file of a later segment.

    ``target`` is None when the bytes provably hold no data and are dropped (an all-zero tail, an
    empty or all-zero later segment and its indexes). ``action`` is ``copy`` (the tail, then the
    segment is truncated), ``rename`` or ``delete``; ``bytes`` counts the bytes moved or dropped
    and ``first_offset`` is the first offset they would hold.
    """

    source: Path
    target: Path | None
    action: str
    position: int
    bytes: int
    first_offset: int


def _data_ranges(fd: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The ranges of ``[start, end)`` that may hold non-zero bytes: holes (``SEEK_HOLE``) are skipped."""
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole up to the end of the file
                return
            yield pos, end  # the file system cannot tell: read everything
            return
        if data >= end:
            return
        try:
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        except OSError:
            hole = end
        yield data, hole
        pos = hole


def _nonzero_chunks(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """``(position, bytes)`` of every chunk of ``[start, end)`` of ``fd`` that is not all zero."""
    for lo, hi in _data_ranges(fd, start, end):
        pos = lo
        while pos < hi:
            chunk = os.pread(fd, min(_CHUNK, hi - pos), pos)
            if not chunk:
                return
            if chunk.count(0) != len(chunk):
                yield pos, chunk
            pos += len(chunk)


def _all_zero(fd: int, start: int, end: int) -> bool:
    return next(_nonzero_chunks(fd, start, end), None) is None


def _same_bytes(path: Path, fd: int, start: int, end: int) -> bool:
    """Whether file ``path`` holds exactly bytes ``[start, end)`` of ``fd``."""
    try:
        if path.stat().st_size != end - start:
            return False
        with path.open("rb") as existing:
            pos = start
            while pos < end:
                want = os.pread(fd, min(_CHUNK, end - pos), pos)
                if not want or existing.read(len(want)) != want:
                    return False
                pos += len(want)
    except OSError:
        return False
    return True


def _free_names(directory: Path, names: list[str], cut_offset: int) -> list[Path]:
    """Quarantine paths for ``names`` with one copy number that none of them has taken yet."""
    n = 0
    while True:
        suffix = f"{QUARANTINE_MARK}{cut_offset}" + (f".{n}" if n else "")
        paths = [directory / (name + suffix) for name in names]
        if not any(p.exists() for p in paths):
            return paths
        n += 1


def _segment_files(segment: LogSegment) -> list[Path]:
    """The segment's existing files, ``.log`` first."""
    paths = [segment.log_path]
    paths += [segment.log_path.with_name(segment.log_path.name[:20] + ext) for ext in _INDEX_EXTENSIONS]
    return [p for p in paths if p.exists()]


def _is_all_zero(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return _all_zero(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _plan_segment(segment: LogSegment, cut_offset: int) -> list[QuarantineMove]:
    """The files of a later segment: renamed into quarantine, or deleted when its log holds no data."""
    files = _segment_files(segment)
    if not files or files[0] != segment.log_path:
        return []
    size = files[0].stat().st_size
    if size == 0 or _is_all_zero(segment.log_path):
        return [QuarantineMove(p, None, "delete", 0, p.stat().st_size, segment.base_offset) for p in files]
    targets = _free_names(segment.directory, [p.name for p in files], cut_offset)
    return [
        QuarantineMove(p, t, "rename", 0, p.stat().st_size, segment.base_offset)
        for p, t in zip(files, targets, strict=True)
    ]


def _plan_tail(cut: Cut) -> list[QuarantineMove]:
    """The cut segment's bytes from ``cut.position``: copied whole, or dropped when all zero."""
    segment = cut.segment
    size = segment.log_path.stat().st_size
    if size <= cut.position:
        return []
    tail = size - cut.position
    fd = os.open(segment.log_path, os.O_RDONLY)
    try:
        if _all_zero(fd, cut.position, size):
            return [QuarantineMove(segment.log_path, None, "delete", cut.position, tail, cut.cut_offset)]
        name = segment.log_path.name
        n = 0
        while True:
            suffix = f"{QUARANTINE_MARK}{cut.cut_offset}" + (f".{n}" if n else "")
            target = segment.directory / (name + suffix)
            if not target.exists() or _same_bytes(target, fd, cut.position, size):
                break
            n += 1
        return [QuarantineMove(segment.log_path, target, "copy", cut.position, tail, cut.cut_offset)]
    finally:
        os.close(fd)


def plan_cut(cut: Cut) -> list[QuarantineMove]:
    """What :func:`apply_cut` would move, in the order it moves it (reads files, changes nothing)."""
    moves: list[QuarantineMove] = []
    for other in reversed(cut.later):
        moves += _plan_segment(other, cut.cut_offset)
    return moves + _plan_tail(cut)


def apply_cut(
    cut: Cut,
    segments: LogSegments | None,
    *,
    topic_partition: str,
    now_ms: int,
    file_ops: FileOps = DEFAULT_FILE_OPS,
) -> list[QuarantineMove]:
    """Cut the log at ``cut``, quarantining what it removes; return what was moved.

    ``segments`` (the log's segment map, when the caller has one) loses the later segments. One
    warning is logged per quarantined tail and per later segment, naming the files, the offsets
    and the bytes.
    """
    segment = cut.segment
    done: list[QuarantineMove] = []
    for other in reversed(cut.later):
        other.close_handlers()
        moves = _plan_segment(other, cut.cut_offset)
        for move in moves:
            if move.target is None:
                file_ops.unlink(move.source)
            else:
                file_ops.rename(move.source, move.target)
        if segments is not None:
            segments.remove(other.base_offset)
        if moves and moves[0].target is not None:
            log.warning(
                "Partition %s: moved segment %s (offsets from %d, %d bytes) and its indexes to quarantine "
                "as %s, after cutting the log at offset %d",
                topic_partition,
                other.log_path,
                other.base_offset,
                moves[0].bytes,
                moves[0].target.name,
                cut.cut_offset,
            )
        elif moves:
            log.warning(
                "Partition %s: deleted segment %s after cutting the log at offset %d: its %d bytes are "
                "all zero",
                topic_partition,
                other.log_path,
                cut.cut_offset,
                moves[0].bytes,
            )
        done += moves
    if cut.later:
        file_ops.fsync_dir(segment.directory)
    tail = _plan_tail(cut)
    for move in tail:
        if move.target is not None and not move.target.exists():
            _copy_range(move, file_ops)
            file_ops.fsync_dir(segment.directory)
    if segment.truncate_at(cut.position, cut.cut_offset, now_ms):
        segment.flush()
    for move in tail:
        _log_tail(move, cut, topic_partition)
    return done + tail


def _log_tail(move: QuarantineMove, cut: Cut, topic_partition: str) -> None:
    if move.target is None:
        log.warning(
            "Partition %s: truncated %s at byte %d (offset %d; %s): the %d bytes cut are all zero",
            topic_partition,
            move.source,
            cut.position,
            cut.cut_offset,
            cut.reason,
            move.bytes,
        )
        return
    log.warning(
        "Partition %s: moved %d bytes from byte %d of %s (offsets from %d on; %s) to quarantine as %s; "
        "the log now ends at offset %d",
        topic_partition,
        move.bytes,
        cut.position,
        move.source,
        cut.cut_offset,
        cut.reason,
        move.target.name,
        cut.cut_offset,
    )


def _copy_range(move: QuarantineMove, file_ops: FileOps) -> None:
    """Copy ``move``'s bytes to ``move.target`` through a fsynced ``.tmp`` file and a rename.

    The file is first sized to the whole range and only non-zero chunks are written, so zero runs
    become holes: the copy reads back byte for byte as the range, at the disk cost of its data.
    """
    assert move.target is not None
    tmp = move.target.with_name(move.target.name + ".tmp")
    source = os.open(move.source, os.O_RDONLY)
    try:
        fd = file_ops.open_fd(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        try:
            file_ops.ftruncate(fd, move.bytes)
            end = move.position + move.bytes
            for pos, chunk in _nonzero_chunks(source, move.position, end):
                file_ops.pwrite(fd, chunk, pos - move.position)
            file_ops.fsync(fd)
        finally:
            os.close(fd)
    finally:
        os.close(source)
    file_ops.rename(tmp, move.target)
