"""Builders and observables for the cleaner's acceptance scenarios (ports of Kafka's ``LogCleanerTest``).

A scenario builds a log with :func:`lct_log`, appends ``(k,v)`` records, transactional batches
and markers with :func:`append_kv`, :func:`txn`, :func:`idem` and :func:`marker`, rolls, and calls
:func:`clean` with ``first_dirty_offset = d`` and the uncleanable bound = the active segment's
base offset (the LSO/HW bound is bypassed, as in Kafka's unit tests). The observables ``K``,
``O``, ``B``, ``BB`` and ``S`` are exactly those of the reference's harness conventions.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kompakt.cleaner.cleaner import Cleaner, CleanResult
from kompakt.cleaner.dedupe import CleanerIo, build_offset_map
from kompakt.cleaner.offset_map import SLOT_BYTES, ExactOffsetMap, HashedOffsetMap, OffsetMap
from kompakt.cleaner.rewrite import FilterContext
from kompakt.cleaner.segment_reader import ReadBuffer
from kompakt.cleaner.stats import CleanerStats
from kompakt.cleaner.transactions import TransactionTracker
from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.files import FileOps, OsFileOps
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.log.segments import ManualScheduler
from kompakt.log.txn_index import AbortedTxn
from kompakt.records.batch import Compression, RecordBatchView
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch
from kompakt.records.native import Workspace
from kompakt.records.record import Record, decode_records

DAY_MS = 86_400_000
MAX_LONG = 2**63 - 1
LARGE = MAX_LONG - DAY_MS - 1
UNBOUNDED = 2**31 - 1
LOAD_FACTOR = 0.75
IO_BUFFER = 64 * 1024

LCT: dict[str, Any] = {
    "cleanup_policy": frozenset({"compact"}),
    "internal_segment_bytes": 1024,
    "segment_index_bytes": 1024,
}


class NoSyncFileOps(OsFileOps):
    """The real file operations minus fsync: the tests observe files, never durability, and
    skipping the syncs keeps the crash and property tests fast on a busy machine."""

    def fsync(self, fd: int) -> None:
        pass

    def fsync_dir(self, path: Path) -> None:
        pass


FAST_OPS = NoSyncFileOps()

# Continuing base sequence per (log directory, producer id), as the reference's T[p]/I[p] require.
_SEQUENCES: dict[tuple[str, int], int] = {}


def config(base: dict[str, Any] | None = None, **overrides: Any) -> LogConfig:
    fields = dict(LCT if base is None else base)
    fields.update(overrides)
    return dataclasses.replace(LogConfig.defaults(), **fields)


def lct_log(
    tmp_path: Path,
    clock: FakeClock,
    *,
    base: dict[str, Any] | None = None,
    file_ops: FileOps = FAST_OPS,
    name: str = "t-0",
    **overrides: Any,
) -> PartitionLog:
    """A fresh log with the LCT config (``base={}`` starts from all defaults) plus ``overrides``."""
    return open_log(tmp_path / name, clock, config(base, **overrides), file_ops=file_ops)


def open_log(
    directory: Path,
    clock: FakeClock,
    cfg: LogConfig,
    *,
    had_clean_shutdown: bool = True,
    log_start_offset: int = 0,
    file_ops: FileOps = FAST_OPS,
) -> PartitionLog:
    return PartitionLog(
        directory,
        "t",
        0,
        cfg,
        clock,
        scheduler=ManualScheduler(clock),
        had_clean_shutdown=had_clean_shutdown,
        log_start_offset=log_start_offset,
        rng=random.Random(0),
        file_ops=file_ops,
    )


def reopen(log: PartitionLog, *, clean_shutdown: bool = True, file_ops: FileOps = FAST_OPS) -> PartitionLog:
    """Close ``log`` (or just drop its descriptors, as a crash would) and load the directory again."""
    start = log.log_start_offset
    if clean_shutdown:
        log.close()
    else:
        log.close_without_flush()
    assert isinstance(log.clock, FakeClock)
    return open_log(
        log.directory,
        log.clock,
        log.config,
        had_clean_shutdown=clean_shutdown,
        log_start_offset=start,
        file_ops=file_ops,
    )


def _b(x: int | str | bytes | None) -> bytes | None:
    if x is None or isinstance(x, bytes):
        return x
    return str(x).encode()


def kv_batch(
    k: int | str | bytes | None,
    v: int | str | bytes | None,
    *,
    timestamp: int = -1,
    compression: Compression = Compression.NONE,
) -> bytes:
    return build_batch([SimpleRecord(_b(k), _b(v), timestamp)], compression=compression)


def append_kv(
    log: PartitionLog,
    k: int | str | bytes | None,
    v: int | str | bytes | None,
    *,
    timestamp: int = -1,
    compression: Compression = Compression.NONE,
) -> int:
    """``(k,v)``: a one-record plain batch appended as the leader; returns its offset."""
    return log.append(kv_batch(k, v, timestamp=timestamp, compression=compression)).first_offset


def append_at(
    log: PartitionLog, offset: int, k: int | str | bytes | None, v: int | str | bytes | None
) -> None:
    """A follower append of ``(k,v)`` at ``offset``."""
    log.append_with_offsets(build_batch([SimpleRecord(_b(k), _b(v), -1)], base_offset=offset))


def producer_batch(
    log: PartitionLog,
    pid: int,
    keys: tuple[int | str | bytes, ...],
    *,
    transactional: bool,
    epoch: int = 0,
    seq: int | None = None,
    values: tuple[int | str | bytes | None, ...] | None = None,
    compression: Compression = Compression.NONE,
) -> bytes:
    """The bytes of ``T[p](keys)`` / ``I[p](keys)`` (value = key unless given), advancing the sequence."""
    slot = (str(log.directory), pid)
    base_seq = _SEQUENCES.get(slot, 0) if seq is None else seq
    _SEQUENCES[slot] = base_seq + len(keys)
    now = log.clock.now_ms()
    vals = keys if values is None else values
    records = [SimpleRecord(_b(k), _b(v), now) for k, v in zip(keys, vals, strict=True)]
    return build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=base_seq,
        is_transactional=transactional,
        compression=compression,
    )


def txn(log: PartitionLog, pid: int, *keys: int | str | bytes, **kwargs: Any) -> tuple[int, int]:
    """``T[p](k1,k2,...)`` appended as the leader; returns ``(first, last)`` offsets."""
    info = log.append(producer_batch(log, pid, keys, transactional=True, **kwargs))
    return info.first_offset, info.last_offset


def idem(log: PartitionLog, pid: int, *keys: int | str | bytes, **kwargs: Any) -> tuple[int, int]:
    """``I[p](k1,k2,...)``: idempotent, non-transactional."""
    info = log.append(producer_batch(log, pid, keys, transactional=False, **kwargs))
    return info.first_offset, info.last_offset


def marker(
    log: PartitionLog, pid: int, control: ControlType, *, epoch: int = 0, coordinator_epoch: int = 0
) -> int:
    """``C[p]`` / ``A[p]`` written by the coordinator at the current time; returns its offset."""
    raw = build_control_batch(
        control,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=log.clock.now_ms(),
    )
    return log.append(raw).first_offset


def commit(log: PartitionLog, pid: int) -> int:
    return marker(log, pid, ControlType.COMMIT)


def abort(log: PartitionLog, pid: int) -> int:
    return marker(log, pid, ControlType.ABORT)


def roll(log: PartitionLog) -> None:
    log.roll()


# ---------------------------------------------------------------------------- observables


def batches(log: PartitionLog) -> Iterator[tuple[RecordBatchView, list[Record]]]:
    """Every batch of the log in order with its decoded records (views copied, so safe to keep)."""
    for segment in log.segments.values():
        for _pos, view in segment.iter_batches():
            own = RecordBatchView(bytes(view.raw))
            yield own, decode_records(own)


def K(log: PartitionLog) -> list[int]:
    return [
        int(r.key)
        for v, recs in batches(log)
        if not v.is_control
        for r in recs
        if r.key is not None and r.value is not None
    ]


def O(log: PartitionLog) -> list[int]:  # noqa: E743 - the reference's name
    return [r.offset for _v, recs in batches(log) for r in recs if r.key is not None and r.value is not None]


def B(log: PartitionLog) -> list[int]:
    return [v.last_offset for v, _recs in batches(log)]


def BB(log: PartitionLog) -> list[int]:
    return [v.base_offset for v, _recs in batches(log)]


def S(log: PartitionLog) -> dict[int, int]:
    out: dict[int, int] = {}
    for v, _recs in batches(log):
        if v.producer_id >= 0 and not v.is_control:
            out[v.producer_id] = v.last_sequence
    return out


def aborted_index(log: PartitionLog) -> list[tuple[int, int, int]]:
    """``(pid, first, last)`` of every aborted transaction in the ``.txnindex`` files."""
    txns: list[AbortedTxn] = list(log.collect_aborted_transactions(0, log.log_end_offset + 1))
    return [(t.producer_id, t.first_offset, t.last_offset) for t in txns]


def all_records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _v, recs in batches(log) for r in recs]


def segment_record_counts(log: PartitionLog) -> list[int]:
    return [sum(len(decode_records(v)) for _p, v in s.iter_batches()) for s in log.segments.values()]


def log_bytes(log: PartitionLog) -> list[tuple[int, bytes]]:
    """``(base offset, .log bytes)`` per segment."""
    return [(s.base_offset, s.read_bytes(0, s.size)) for s in log.segments.values()]


# ---------------------------------------------------------------------------- cleaning


def make_map(map_slots: int | None = None, *, hashed: bool = False) -> OffsetMap:
    slots = UNBOUNDED if map_slots is None else map_slots
    if hashed:
        return HashedOffsetMap(slots * SLOT_BYTES, LOAD_FACTOR)
    return ExactOffsetMap(slots, LOAD_FACTOR)


def cleaner(
    log: PartitionLog,
    map_slots: int | None = None,
    *,
    hashed: bool = False,
    check_abort: Callable[[str, int], None] | None = None,
    io_buffer: int = IO_BUFFER,
) -> Cleaner:
    assert isinstance(log.clock, FakeClock)
    return Cleaner(
        0, make_map(map_slots, hashed=hashed), log.clock, check_abort=check_abort, read_buffer_bytes=io_buffer
    )


def clean_result(
    log: PartitionLog,
    d: int,
    now: int | None = None,
    map_slots: int | None = None,
    *,
    uncleanable: int | None = None,
    hashed: bool = False,
    check_abort: Callable[[str, int], None] | None = None,
    io_buffer: int = IO_BUFFER,
) -> CleanResult:
    """One full pass from ``d`` to ``uncleanable`` (default: the active segment's base offset),
    which is rounded down to a segment base offset as selection would."""
    bound = log.segments.active.base_offset if uncleanable is None else uncleanable
    floor = log.segments.floor(bound)
    if floor is not None and bound < log.log_end_offset:
        bound = floor.base_offset
    c = cleaner(log, map_slots, hashed=hashed, check_abort=check_abort, io_buffer=io_buffer)
    return c.clean(log, d, bound, now)


def clean(
    log: PartitionLog,
    d: int,
    now: int | None = None,
    map_slots: int | None = None,
    **kwargs: Any,
) -> int:
    """``clean(d, now)`` (``Cleaner.doClean`` with a given first dirty offset): returns the next dirty
    offset."""
    return clean_result(log, d, now, map_slots, **kwargs).end_offset


def two_pass_clean(log: PartitionLog, d: int, t: int, **kwargs: Any) -> int:
    clean(log, d, t, **kwargs)
    return clean(log, d, t + DAY_MS + 1, **kwargs)


def append_until_segments(
    log: PartitionLog, n: int, start_key: int = 0, value: Callable[[int], int] | None = None
) -> list[int]:
    """Append ``(i, value(i))`` with increasing i until the log has ``n`` segments; returns the keys."""
    keys = []
    i = start_key
    while len(log.segments) < n:
        append_kv(log, i, i if value is None else value(i))
        keys.append(i)
        i += 1
    return keys


def roll_at(log: PartitionLog, offset: int) -> None:
    """Kafka's ``log.roll(Some(offset))``: a new active segment at ``offset`` > LEO (a gap)."""
    with log.lock:
        log._roll_locked(offset, log.clock.now_ms())  # noqa: SLF001 - no public API rolls past the LEO


def rewrite(
    log: PartitionLog,
    group: list[LogSegment],
    offset_map: OffsetMap,
    *,
    now: int,
    upper_bound: int,
    check_abort: Callable[[str, int], None] | None = None,
) -> CleanerStats:
    """Kafka's ``cleanSegments(log, group, map, now, stats, txnMetadata, -1, upperBound)``."""
    assert isinstance(log.clock, FakeClock)
    c = Cleaner(0, offset_map, log.clock, check_abort=check_abort, read_buffer_bytes=IO_BUFFER)
    stats = CleanerStats(log.clock)
    ctx = FilterContext(
        offset_map=offset_map,
        now_ms=now,
        delete_retention_ms=log.config.delete_retention_ms,
        upper_bound_offset=upper_bound,
        active_producers=log.active_producers(log.clock.now_ms(), c.producer_id_expiration_ms),
        tracker=TransactionTracker(),
        stats=stats,
        workspace=Workspace(),
    )
    c.clean_segments(log, group, ctx, c._io(log))  # noqa: SLF001 - the per-thread io of the cleaner
    return stats


def build_map(log: PartitionLog, start: int, end: int, offset_map: OffsetMap) -> CleanerStats:
    assert isinstance(log.clock, FakeClock)
    stats = CleanerStats(log.clock)
    build_offset_map(log, start, end, offset_map, stats, CleanerIo(ReadBuffer(IO_BUFFER)))
    return stats


def leftovers(log: PartitionLog) -> list[str]:
    return sorted(
        p.name for p in log.directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))
    )
