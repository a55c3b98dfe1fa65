"""Loading a partition directory: finish or undo interrupted swaps, open segments, cut torn tails.

Steps (Kafka's ``LogLoader``, kafka-log-cleaner.md §2.13 and §3.10):

1. Pass 1: delete ``*.deleted``; note every ``*.cleaned`` (``min_cleaned`` = smallest base offset)
   and ``*.swap``; delete ``.swap`` files with base offset >= ``min_cleaned`` (an unfinished
   multi-segment replace); delete every ``.cleaned`` file.
2. Open each remaining ``X.log.swap`` as a segment, recover it, and track ``min_swap`` (its base
   offset) and ``max_swap`` (its next offset).
3. Pass 2: delete every non-swap file whose offset ``o`` is in ``[min_swap, max_swap)``.
4. Pass 3: rename every ``.swap`` file to its final name.
5. Open segments. Index files without a ``.log`` are orphans and are deleted; a missing index is
   rebuilt; other unknown files are logged and left alone. Inactive segments stay lazy: nothing
   is read from their files.
6. Without a clean-shutdown marker, re-validate every segment from the recovery point on. A
   corrupt or torn **tail** (nothing valid after the first bad byte) is truncated to the last
   valid batch and later empty/garbage segments are deleted. Corruption followed by valid data
   is not a crash artefact: the partition goes offline (:class:`PartitionOfflineError` naming the
   file and byte position) and nothing is deleted.
7. With no segments left, create one at the log start offset. The active segment's indexes are
   preallocated on its first append (an idle partition leaves its files as they are).
"""

from __future__ import annotations

import logging
import os
import random
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kompakt.errors import PartitionOfflineError
from kompakt.lazy_import import LazyModule
from kompakt.log.config import LogConfig
from kompakt.log.files import parse_offset_from_name
from kompakt.log.offset_index import DEFAULT_FILE_OPS, FileOps
from kompakt.log.roll import random_roll_jitter_ms
from kompakt.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
)
from kompakt.log.segments import LogSegments
from kompakt.records.batch import BATCH_OVERHEAD, MAGIC_V2, RecordBatchView

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyModule("numpy", globals(), "np")  # loaded on first use, not at broker start

log = logging.getLogger(__name__)

_INDEX_EXTENSIONS = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_KNOWN_FILES = frozenset({"partition.metadata", "leader-epoch-checkpoint"})
_CANONICAL_NAME = re.compile(r"[0-9]{20}\.(?:log|index|timeindex|txnindex)")


@dataclass(slots=True)
class LoadedLog:
    """What loading a directory produced."""

    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    truncated_bytes: int


def _extension(name: str) -> str:
    """``.log`` for ``X.log`` and ``X.log.swap``."""
    parts = name.split(".")
    return "." + parts[1] if len(parts) > 1 else ""


def _list_dir(directory: Path) -> frozenset[str]:
    """The names in ``directory`` (one ``listdir``: no per-file ``stat`` on the open path)."""
    return frozenset(os.listdir(directory))


def remove_temp_files_and_complete_swaps(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    file_ops: FileOps = DEFAULT_FILE_OPS,
    names: Collection[str] | None = None,
) -> bool:
    """Steps 1-4: delete ``.deleted``/``.cleaned`` leftovers and finish or drop ``.swap`` files.

    ``names`` is a fresh listing of ``directory`` when the caller has one. Returns whether any
    file was found to delete or rename (the caller's listing is then stale).
    """
    if names is None:
        names = _list_dir(directory)
    cleaned: list[Path] = []
    swaps: list[Path] = []
    deleted = False
    for name in sorted(names):
        if not name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)):
            continue
        path = directory / name
        if not path.is_file():
            continue
        if name.endswith(DELETED_SUFFIX):
            log.info("Deleting stray temporary file %s", path)
            file_ops.unlink(path)
            deleted = True
        elif name.endswith(CLEANED_SUFFIX):
            cleaned.append(path)
        else:
            swaps.append(path)
    if not cleaned and not swaps:
        return deleted
    offsets_cleaned = [o for o in (parse_offset_from_name(p.name) for p in cleaned) if o is not None]
    min_cleaned = min(offsets_cleaned, default=None)
    kept_swaps: list[Path] = []
    for path in swaps:
        offset = parse_offset_from_name(path.name)
        if min_cleaned is not None and offset is not None and offset >= min_cleaned:
            log.info("Deleting invalid swap file %s (min cleaned offset %d)", path, min_cleaned)
            file_ops.unlink(path)
        else:
            kept_swaps.append(path)
    for path in cleaned:
        log.info("Deleting stray temporary file %s", path)
        file_ops.unlink(path)

    ranges: list[tuple[int, int]] = []
    for path in kept_swaps:
        offset = parse_offset_from_name(path.name)
        if offset is None or _extension(path.name) != LOG_SUFFIX:
            continue
        segment = LogSegment(
            directory,
            offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            created_ms=now_ms,
            suffix=SWAP_SUFFIX,
            file_ops=file_ops,
        )
        log.info(
            "Found log file %s from interrupted swap operation, which is recoverable from .swap files", path
        )
        segment.recover()
        ranges.append((offset, segment.read_next_offset()))
        segment.close()
    if ranges:
        min_swap = min(r[0] for r in ranges)
        max_swap = max(r[1] for r in ranges)
        for path in sorted(directory.iterdir()):
            if not path.is_file() or path.name.endswith(SWAP_SUFFIX):
                continue
            offset = parse_offset_from_name(path.name)
            if offset is not None and min_swap <= offset < max_swap:
                log.info("Deleting segment file %s replaced by a swap", path)
                file_ops.unlink(path)
    for path in kept_swaps:
        target = path.with_name(path.name[: -len(SWAP_SUFFIX)])
        file_ops.rename(path, target)
    return True


def open_segments(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    rng: random.Random,
    file_ops: FileOps = DEFAULT_FILE_OPS,
    names: Collection[str] | None = None,
) -> LogSegments:
    """Step 5: one lazy :class:`LogSegment` per ``.log`` file; orphaned indexes deleted.

    ``names`` is a fresh listing of ``directory`` when the caller has one (a set, for lookups).
    """
    segments = LogSegments()
    if names is None:
        names = _list_dir(directory)
    for name in sorted(names):
        if _CANONICAL_NAME.fullmatch(name):
            # The common case, a plain ``<20 digits>.<extension>`` name, without the general parse.
            offset = int(name[:20])
            ext = name[20:]
        else:
            parsed = parse_offset_from_name(name)
            ext = _extension(name)
            if parsed is None or name != f"{parsed:020d}{ext}":
                if name not in _KNOWN_FILES and not name.endswith((".tmp", ".snapshot")):
                    log.warning("Found unknown file %s in %s; leaving it alone", name, directory)
                continue
            offset = parsed
        prefix = name[: len(name) - len(ext)]
        if ext in _INDEX_EXTENSIONS:
            if prefix + LOG_SUFFIX not in names:
                log.warning(
                    "Found an orphaned index file %s, with no corresponding log file", directory / name
                )
                file_ops.unlink(directory / name)
            continue
        if ext != LOG_SUFFIX:
            if ext != ".snapshot":
                log.warning("Found unknown file %s in %s; leaving it alone", name, directory)
            continue
        segment = LogSegment(
            directory,
            offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=random_roll_jitter_ms(config, rng),
            created_ms=now_ms,
            file_ops=file_ops,
            lazy_size=True,
        )
        if prefix + INDEX_SUFFIX not in names or prefix + TIME_INDEX_SUFFIX not in names:
            log.info("Missing index for segment %s; rebuilding it", segment.log_path)
            segment.rebuild_indexes()
            segment.on_become_inactive()
        segments.add(segment)
    return segments


def _valid_batch_at(data: np.ndarray, q: int, min_offset: int) -> bool:
    raw = data[q : q + BATCH_OVERHEAD].tobytes()
    view = RecordBatchView(raw, 0)
    size = view.size
    if size < BATCH_OVERHEAD or q + size > len(data) or not 0 <= view.base_offset - min_offset < 2**31:
        return False
    return RecordBatchView(data[q : q + size].tobytes(), 0).is_valid()


def has_valid_data_after(segment: LogSegment, position: int, min_offset: int) -> int | None:
    """The position of a valid batch after ``position`` in ``segment`` (an offset-plausible CRC match)."""
    raw = segment.read_bytes(position + 1, segment.size - position - 1)
    if not raw:
        return None
    data = np.frombuffer(raw, dtype=np.uint8)
    if len(data) < BATCH_OVERHEAD:
        return None
    candidates = np.flatnonzero(data[16 : len(data) - BATCH_OVERHEAD + 17] == MAGIC_V2)
    for q in candidates.tolist():
        if _valid_batch_at(data, q, min_offset):
            return position + 1 + q
    return None


def recover_unflushed(segments: LogSegments, recovery_point: int, topic_partition: str, now_ms: int) -> int:
    """Step 6: re-validate from the recovery point; return bytes truncated."""
    unflushed = segments.values(recovery_point)
    truncated = 0
    for i, segment in enumerate(unflushed):
        result = segment.rebuild_indexes()
        if result.error is None:
            continue
        later = unflushed[i + 1 :]
        min_offset = result.next_offset if result.next_offset is not None else segment.base_offset
        beyond = has_valid_data_after(segment, result.valid_bytes, min_offset)
        where = f"{segment.log_path} at byte {result.valid_bytes}"
        if beyond is None:
            for other in later:
                if other.size > 0 and other.validate().valid_bytes > 0:
                    beyond = 0
                    where += f"; valid data follows in {other.log_path}"
                    break
        if beyond is not None:
            raise PartitionOfflineError(
                f"Partition {topic_partition} is offline: corrupt record batch in {where} "
                f"({result.error}) is followed by valid data; refusing to truncate it"
            )
        log.warning(
            "Found invalid bytes at the end of %s (%s); truncating %d bytes to the last valid batch",
            segment.log_path,
            result.error,
            result.file_size - result.valid_bytes,
        )
        truncated += segment.recover()
        for other in later:
            log.warning("Deleting segment %s after a truncated tail", other.log_path)
            segments.remove(other.base_offset)
            truncated += other.size
            other.delete_files()
        break
    return truncated


def load_partition_dir(
    directory: Path,
    config: LogConfig,
    *,
    topic_partition: str,
    now_ms: int,
    log_start_offset: int = 0,
    recovery_point: int = 0,
    had_clean_shutdown: bool = False,
    rng: random.Random | None = None,
    file_ops: FileOps = DEFAULT_FILE_OPS,
) -> LoadedLog:
    """Run every load step for one partition directory and return its segments and offsets."""
    rng = rng or random.Random()  # noqa: S311 - jitter, not security
    names = _list_dir(directory)
    if remove_temp_files_and_complete_swaps(directory, config, now_ms, file_ops, names):
        names = _list_dir(directory)
    segments = open_segments(directory, config, now_ms, rng, file_ops, names)
    truncated = 0
    if not had_clean_shutdown and not segments.is_empty():
        truncated = recover_unflushed(segments, recovery_point, topic_partition, now_ms)
    if segments.is_empty():
        segments.add(
            LogSegment.create_for(
                directory,
                log_start_offset,
                config,
                now_ms=now_ms,
                roll_jitter_ms=random_roll_jitter_ms(config, rng),
                file_ops=file_ops,
            )
        )
    active = segments.active
    log_end_offset = active.read_next_offset()
    active.resize_indexes_on_first_append(config.segment_index_bytes)
    first = segments.first
    assert first is not None
    start = max(log_start_offset, first.base_offset)
    if start > log_end_offset:
        start = log_end_offset
    point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
    for segment in segments:
        segment.close_handlers()  # descriptors reopen on first use; thousands of idle logs hold none
    return LoadedLog(segments, start, point, log_end_offset, truncated)
