"""``kompakt log repair``: the cut crash recovery makes, applied by an operator to flushed data.

Recovery cuts a log at its first invalid batch only above the recovery point (bytes that were
never fsynced, see :mod:`kompakt.log.recovery`). Below it the data was promised durable, so a
damaged batch there keeps the partition offline until an operator decides. This module is what
the operator runs: the same cut (Kafka's ``LogLoader.recoverLog``: truncate after the last valid
batch, drop every later segment) with the same quarantine (:mod:`kompakt.log.quarantine`), over
the whole log rather than from the recovery point.

:func:`plan_repair` only reads: it validates every segment (framing, CRC, offsets) through
read-only descriptors and says what :func:`execute_repair` would move. :func:`execute_repair`
first finishes interrupted swaps and drops temporary files (recovery's first steps, which can
change what the cut is), plans again, applies the plan, and clamps the partition's offset
checkpoints to the new log end offset (a recovery point or high watermark beyond the end of the
log would be a lie ``kompakt log verify`` reports). The caller holds the data directory's lock.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kompakt.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kompakt.log.config import LogConfig
from kompakt.log.files import (
    CLEANED_FILE_SUFFIX,
    DEFAULT_FILE_OPS,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    FileOps,
    parse_partition_dir_name,
)
from kompakt.log.quarantine import Cut, QuarantineMove, apply_cut, plan_cut
from kompakt.log.recovery import find_first_cut, open_segments, remove_temp_files_and_complete_swaps
from kompakt.log.segment import LogSegment

_CANONICAL_LOG_LEN: Final = 24  # "<20 digits>.log"
_TEMP_SUFFIXES: Final = (SWAP_FILE_SUFFIX, CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX)
#: Checkpoints whose entry for a repaired partition must not lie beyond its new log end offset.
CLAMPED_CHECKPOINTS: Final = (
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
)


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """What repairing one partition directory does (or did, from :func:`execute_repair`).

    ``cut`` is None when every batch is valid. ``log_end_offset`` is the log end offset after the
    cut. ``pending_files`` are interrupted-swap and temporary files that recovery (and
    ``execute_repair``) deals with before cutting: while there are any, a dry run's plan is for
    the files as they are, and the executed one may differ.
    """

    directory: Path
    cut: Cut | None
    moves: tuple[QuarantineMove, ...]
    log_end_offset: int
    pending_files: tuple[str, ...] = ()

    @property
    def bytes_moved(self) -> int:
        return sum(m.bytes for m in self.moves if m.target is not None)


def _log_segments(directory: Path, config: LogConfig) -> list[LogSegment]:
    names = sorted(
        name
        for name in os.listdir(directory)
        if len(name) == _CANONICAL_LOG_LEN and name.endswith(".log") and name[:20].isdigit()
    )
    return [
        LogSegment(
            directory,
            int(name[:20]),
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
        )
        for name in names
    ]


def _log_end_offset(segments: list[LogSegment], cut: Cut | None) -> int:
    if cut is not None:
        return cut.cut_offset
    if not segments:
        return 0
    active = segments[-1]
    with active.reading_only():
        return active.read_next_offset()


def plan_repair(directory: Path, config: LogConfig) -> RepairPlan:
    """Validate every segment of ``directory`` and plan the cut; reads files, changes nothing."""
    segments = _log_segments(directory, config)
    moves: tuple[QuarantineMove, ...] = ()
    try:
        cut = find_first_cut(segments, LogSegment.validate)
        if cut is not None:
            moves = tuple(plan_cut(cut))
        end = _log_end_offset(segments, cut)
    finally:
        for segment in segments:
            segment.close_handlers()
    return RepairPlan(directory, cut, moves, end, _pending_files(directory))


def _pending_files(directory: Path) -> tuple[str, ...]:
    return tuple(sorted(n for n in os.listdir(directory) if n.endswith(_TEMP_SUFFIXES)))


def execute_repair(
    directory: Path,
    config: LogConfig,
    *,
    topic_partition: str,
    now_ms: int,
    data_dir: Path | None,
    file_ops: FileOps = DEFAULT_FILE_OPS,
) -> RepairPlan:
    """Finish swaps, cut the log as :func:`plan_repair` plans it, clamp checkpoints; return the plan."""
    pending = _pending_files(directory)
    if pending:
        remove_temp_files_and_complete_swaps(directory, config, now_ms, file_ops)
        # Indexes a swap left behind without their log are orphans; open_segments deletes them.
        for segment in open_segments(directory, config, now_ms, random.Random(0), file_ops):
            segment.close_handlers()
    plan = plan_repair(directory, config)
    if plan.cut is None:
        return RepairPlan(directory, None, (), plan.log_end_offset, pending)
    segments = _log_segments(directory, config)
    by_base = {s.base_offset: s for s in segments}
    cut = plan.cut
    live = Cut(
        by_base[cut.segment.base_offset],
        cut.position,
        cut.cut_offset,
        cut.reason,
        tuple(by_base[s.base_offset] for s in cut.later),
    )
    try:
        moves = apply_cut(live, None, topic_partition=topic_partition, now_ms=now_ms, file_ops=file_ops)
    finally:
        for segment in segments:
            segment.close_handlers()
    if data_dir is not None:
        clamp_checkpoints(data_dir, parse_partition_dir_name(directory.name), plan.log_end_offset)
    return RepairPlan(directory, cut, tuple(moves), plan.log_end_offset, pending)


def clamp_checkpoints(data_dir: Path, tp: tuple[str, int], log_end_offset: int) -> None:
    """Lower ``tp``'s entry in each offset checkpoint of ``data_dir`` to at most ``log_end_offset``."""
    for name in CLAMPED_CHECKPOINTS:
        path = data_dir / name
        if not path.exists():
            continue
        checkpoint = OffsetCheckpointFile(path)
        entries = checkpoint.read()
        if entries.get(tp, -1) > log_end_offset:
            entries[tp] = log_end_offset
            checkpoint.write(entries)


__all__ = ["CLAMPED_CHECKPOINTS", "RepairPlan", "clamp_checkpoints", "execute_repair", "plan_repair"]
