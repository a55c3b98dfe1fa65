"""Why is (or isn't) a partition compacting? The engine behind ``kompakt log explain``.

"My topic is not compacting" always comes down to a partition state and the event that will
change it: data still in the active segment, a dirty ratio at or under the threshold,
``min.compaction.lag.ms`` holding the head, an open transaction pinning the LSO, tombstones
waiting for ``delete.retention.ms``, an offset map too small for the dirty keys. This module
computes all of them from a partition's segment files and its effective configs, using the
cleaner's own selection code (:mod:`kompakt.cleaner.planning`) so the answer is the one the
cleaner would reach, and returns a frozen :class:`PartitionExplain` with a one-line verdict.

It reads files and returns values: no printing, no CLI, no locks taken, nothing written. The CLI
builds its input from a directory on disk; the broker's admin endpoint can build the same
:class:`PartitionSource` from a live log (segment paths and sizes read under the log's lock).

The report's types live in :mod:`kompakt.inspect.explain_report` (no native code) and the file
scanning in :mod:`kompakt.inspect.explain_scan`; both are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.planning import (
    NO_TIMESTAMP,
    LogToClean,
    SegmentInfo,
    cleanable_offsets,
    estimated_earliest_timestamps,
    first_too_young_segment,
    log_to_clean,
    max_segment_ms,
)
from kompakt.cleaner.readers import (
    AssumeUnread,
    PartitionReaders,
    TombstoneHold,
    earliest_removal_ms,
    hold_for,
    reader_risks,
)
from kompakt.cleaner.rewrite import horizon_held, past_delete_horizon
from kompakt.cleaner.sizing import SLOT_BYTES, keys_per_pass
from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import LONG_MAX
from kompakt.errors import CorruptCheckpointError
from kompakt.inspect.explain_report import (
    BOOL,
    I64,
    MAX_TOMBSTONES_LISTED,
    ActiveSegment,
    ConfigInput,
    ConfigValue,
    Hold,
    Keys,
    MaxLag,
    OffsetMapReport,
    PartitionExplain,
    PartitionSource,
    ReaderRow,
    Readers,
    Section,
    SegmentReport,
    SegmentSource,
    Tombstone,
    Tombstones,
    duration,
    human_bytes,
    iso_ms,
    resolve_configs,
)
from kompakt.inspect.explain_scan import PartitionScan, concat_columns, digest_rows, latest_mask, varint_sizes
from kompakt.inspect.explain_scan import scan_partition as _scan
from kompakt.inspect.log_files import PartitionDir
from kompakt.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kompakt.log.config import LogConfig
from kompakt.log.producer_state import ProducerStateManager
from kompakt.records.batch import (
    ATTR_CONTROL,
    BATCH_OVERHEAD,
)

__all__ = [
    "ConfigInput",
    "ConfigValue",
    "PartitionExplain",
    "PartitionSource",
    "SegmentSource",
    "duration",
    "explain_partition",
    "iso_ms",
    "resolve_configs",
    "source_from_files",
]

# --------------------------------------------------------------------------------------------
# The explanation


class _Log:
    """The ``CleanableLog`` the planner reads, built from the scan."""

    def __init__(
        self,
        source: PartitionSource,
        config: LogConfig,
        infos: list[SegmentInfo],
        start: int,
        leo: int,
        lso: int,
    ) -> None:
        self.topic = source.topic
        self.partition = source.partition
        self.config = config
        self._infos = infos
        self.log_start_offset = start
        self.log_end_offset = leo
        self.last_stable_offset = lso

    def segment_infos(self) -> Sequence[SegmentInfo]:
        return self._infos


@dataclass(frozen=True, slots=True)
class _Position:
    """Where the log stands, as the planner sees it: its bounds and where the dirty section starts."""

    log: _Log
    infos: list[SegmentInfo]
    first_dirty: int
    #: The planner's uncleanable bound before it is rounded to a segment base.
    uncleanable: int

    @property
    def start(self) -> int:
        return self.log.log_start_offset

    @property
    def leo(self) -> int:
        return self.log.log_end_offset


def _position(source: PartitionSource, config: LogConfig, scan: PartitionScan, now_ms: int) -> _Position:
    infos = [s.info for s in scan.segments]
    if not infos:
        infos = [SegmentInfo(0, 0, 0, NO_TIMESTAMP, now_ms, 0)]
    leo = scan.log_end_offset
    start = min(max(source.log_start_offset or 0, infos[0].base_offset), leo)
    first_unstable = scan.producers.first_unstable_offset()
    lso = leo if first_unstable is None else min(first_unstable, leo)
    log = _Log(source, config, infos, start, leo, lso)
    offsets = cleanable_offsets(log, source.cleaner_checkpoint, now_ms, infos)
    return _Position(log, infos, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset)


@dataclass(frozen=True, slots=True)
class _Records:
    """The scan as columns: one row per record, and per batch what the cleaner's rules read.

    ``held`` and ``past_horizon`` are the cleaner's own decisions for each batch at ``now_ms``
    (:func:`kompakt.cleaner.rewrite.horizon_held` and :func:`~kompakt.cleaner.rewrite.past_delete_horizon`),
    so what explain predicts for a tombstone is what the next clean does with it.
    """

    offset: I64
    digest: npt.NDArray[np.void]
    null_key: BOOL
    tomb: BOOL
    size: I64
    batch: I64
    timestamp: I64
    in_log: BOOL
    keyed: BOOL
    batch_attrs: I64
    batch_segment: I64
    batch_last: I64
    batch_stamped: BOOL
    batch_horizon: I64  # -1 where not stamped
    held: BOOL
    past_horizon: BOOL

    def per_record(self, per_batch: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-batch column spread over the records."""
        return per_batch[self.batch] if len(self.batch) else np.empty(0, per_batch.dtype)


def _records(scan: PartitionScan, start: int, hold: TombstoneHold | None, now_ms: int) -> _Records:
    c = scan.cols
    offset = concat_columns(c.offset, np.int64)
    null_key = concat_columns(c.null_key, np.bool_)
    in_log = offset >= start
    stamped = np.array([h is not None for h in scan.batches.horizon], dtype=np.bool_)
    horizon = np.array([-1 if h is None else h for h in scan.batches.horizon], dtype=np.int64)
    last = np.array(scan.batches.last_offset, dtype=np.int64)
    held = horizon_held(hold, stamped, horizon, last, now_ms)
    return _Records(
        offset=offset,
        digest=digest_rows(concat_columns(c.hi, np.uint64), concat_columns(c.lo, np.uint64)),
        null_key=null_key,
        tomb=concat_columns(c.tombstone, np.bool_),
        size=concat_columns(c.size, np.int64),
        batch=concat_columns(c.batch, np.int64),
        timestamp=concat_columns(c.timestamp, np.int64),
        in_log=in_log,
        keyed=in_log & ~null_key,
        batch_attrs=np.array(scan.batches.attributes, dtype=np.int64),
        batch_segment=np.array(scan.batches.segment, dtype=np.int64),
        batch_last=last,
        batch_stamped=stamped,
        batch_horizon=horizon,
        held=held,
        past_horizon=past_delete_horizon(stamped, horizon, held, now_ms),
    )


def _earliest_horizon(
    scan: PartitionScan, rec: _Records, active_index: int, hold: TombstoneHold | None
) -> int | None:
    """The earliest removal a tombstone or marker outside the active segment waits for: its
    horizon, or the end of the maximum hold while a reader holds it (the cleaner's own rule)."""
    tomb_batches = np.zeros(len(rec.batch_stamped), dtype=np.bool_)
    tomb_batches[rec.batch[rec.tomb]] = True
    governing = np.flatnonzero(
        rec.batch_stamped
        & (rec.batch_segment != active_index)
        & (np.array(scan.batches.records, dtype=np.int64) != 0)
        & (((rec.batch_attrs & ATTR_CONTROL) != 0) | tomb_batches)
    )
    return earliest_removal_ms(rec.batch_horizon[governing], rec.batch_last[governing], hold)


def _keys(rec: _Records, latest: BOOL, first_dirty: int, first_uncleanable: int) -> Keys:
    dirty = rec.keyed & (rec.offset >= first_dirty) & (rec.offset < first_uncleanable)
    return Keys(
        records=int(rec.in_log.sum()),
        keyed_records=int(rec.keyed.sum()),
        null_key_records=int((rec.in_log & rec.null_key).sum()),
        live_keys=int(latest.sum()),
        live_records=int((latest & ~rec.tomb).sum()),
        dirty_records=int(dirty.sum()),
        dirty_distinct_keys=int(len(np.unique(rec.digest[dirty]))) if dirty.any() else 0,
    )


def _estimated_after(
    scan: PartitionScan,
    rec: _Records,
    infos: Sequence[SegmentInfo],
    first_uncleanable: int,
    config: LogConfig,
    now_ms: int,
) -> int:
    """The size after the next clean of ``[log start, first uncleanable)``: the latest record of each
    key, less the tombstones the cleaner's rule removes now. Control batches are counted whole:
    whether a marker may go depends on its transaction's data, which only the clean's pass over
    the log establishes."""
    in_range = rec.in_log & (rec.offset < first_uncleanable)
    latest_range = latest_mask(rec.digest, rec.keyed & in_range)
    removed_tomb = rec.tomb & rec.per_record(rec.past_horizon)
    kept = ~in_range | (latest_range & ~removed_tomb)
    nb = len(scan.batches.size)
    # A batch that keeps an unstamped tombstone gets a delete horizon as its base timestamp, so
    # every kept record's timestamp delta is re-encoded against it (usually a longer varint).
    base_ts = np.array(scan.batches.base_timestamp, dtype=np.int64)
    stamping = np.zeros(nb, dtype=np.bool_)
    stamping[rec.batch[rec.tomb & kept & in_range & ~rec.per_record(rec.batch_stamped)]] = True
    grow = np.zeros(len(rec.size), dtype=np.int64)
    if stamping.any():
        rows = stamping[rec.batch] & kept
        horizon_ts = now_ms + config.delete_retention_ms
        grow[rows] = varint_sizes(rec.timestamp[rows] - horizon_ts) - varint_sizes(
            rec.timestamp[rows] - base_ts[rec.batch[rows]]
        )
    total_rec = np.bincount(rec.batch, weights=rec.size, minlength=nb) if nb else np.zeros(0)
    kept_rec = np.bincount(rec.batch, weights=(rec.size + grow) * kept, minlength=nb) if nb else np.zeros(0)
    estimated = 0
    for b in range(nb):
        size = scan.batches.size[b]
        if (
            rec.batch_segment[b] >= len(infos)
            or scan.batches.records[b] == 0
            or rec.batch_attrs[b] & ATTR_CONTROL
        ):
            estimated += size
            continue
        total, kept_b = float(total_rec[b]), float(kept_rec[b])
        if total <= 0 or (kept_b == total and not stamping[b]):
            estimated += size
        elif kept_b > 0:
            body = size - BATCH_OVERHEAD  # compressed bodies shrink in proportion to what is kept
            estimated += BATCH_OVERHEAD + round(body * kept_b / total)
    return min(estimated, sum(i.size_bytes for i in infos))


def explain_partition(source: PartitionSource, configs: ConfigInput, now_ms: int) -> PartitionExplain:
    """Explain one partition at ``now_ms`` (pure given the files: the same inputs, the same report)."""
    config, config_rows = resolve_configs(configs)
    scan = _scan(source)
    pos = _position(source, config, scan, now_ms)
    infos = pos.infos
    # Where the readers are, and what they hold (kompakt.cleaner.readers). Offline the positions
    # are unknown: named groups count as having read nothing, as offline compaction assumes.
    readers = source.readers
    if readers is None:
        readers = AssumeUnread().positions(
            source.topic, source.partition, config.kompakt_tombstone_retain_for_groups
        )
    hold = hold_for(config, readers)
    rec = _records(scan, pos.start, hold, now_ms)
    ltc = log_to_clean(
        pos.log,
        pos.first_dirty,
        pos.uncleanable,
        now_ms,
        earliest_horizon_ms=_earliest_horizon(scan, rec, len(infos) - 1, hold),
        segments=infos,
    )
    first_uncleanable = ltc.first_uncleanable_offset
    latest = latest_mask(rec.digest, rec.keyed)
    keys = _keys(rec, latest, pos.first_dirty, first_uncleanable)
    holds = _holds(pos.log, infos, pos.first_dirty, pos.log.last_stable_offset, now_ms, scan.producers)
    max_lag = _max_lag(
        config,
        infos,
        pos.first_dirty,
        now_ms,
        ltc.max_compaction_delay_ms,
        ltc.must_clean_bytes,
        ltc.must_clean_ratio,
    )
    active_report = _active(config, infos[-1], scan.segments[-1].records if scan.segments else 0, now_ms)
    tombstones = _tombstones(scan, rec, latest, first_uncleanable, config, now_ms, hold)
    stamped = np.flatnonzero(rec.tomb & rec.in_log & rec.per_record(rec.batch_stamped))
    reader_report = _readers(
        source,
        config,
        readers,
        hold,
        rec.offset[stamped],
        rec.per_record(rec.batch_horizon)[stamped],
        rec.per_record(rec.batch_last)[stamped],
    )
    map_report = _offset_map(configs.broker, keys.dirty_distinct_keys)
    verdict, eligible = _verdict(
        source, config, ltc, pos, holds, max_lag, active_report, tombstones, map_report
    )
    if eligible and not configs.broker.log_cleaner_enable:
        verdict += (
            "; but log.cleaner.enable=false, so no cleaner thread runs: only compact-now cleans it "
            "(and its retention waits too)"
        )
    return PartitionExplain(
        topic=source.topic,
        partition=source.partition,
        now_ms=now_ms,
        verdict=verdict,
        eligible=eligible,
        reason=ltc.reason,
        configs=config_rows,
        log_start_offset=pos.start,
        first_dirty_offset=pos.first_dirty,
        first_uncleanable_offset=first_uncleanable,
        log_end_offset=pos.leo,
        last_stable_offset=pos.log.last_stable_offset,
        sections=_sections(infos, pos, first_uncleanable, ltc.clean_bytes, ltc.cleanable_bytes),
        total_bytes=sum(i.size_bytes for i in infos),
        dirty_ratio=ltc.cleanable_ratio,
        min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
        holds=holds,
        max_lag=max_lag,
        active=active_report,
        segments=_segment_reports(scan, infos, config, pos.start, pos.first_dirty, first_uncleanable, now_ms),
        tombstones=tombstones,
        keys=keys,
        estimated_bytes_after=_estimated_after(scan, rec, infos, first_uncleanable, config, now_ms),
        offset_map=map_report,
        uncleanable_reason=source.uncleanable_reason,
        readers=reader_report,
    )


def _readers(
    source: PartitionSource,
    config: LogConfig,
    readers: PartitionReaders,
    hold: TombstoneHold | None,
    offsets: I64,
    horizons: I64,
    batch_last: I64,
) -> Readers:
    """The hold and each group's unread stamped tombstones (the risk report)."""
    order = np.argsort(offsets, kind="stable")
    risks = reader_risks(offsets[order], horizons[order], batch_last[order], readers, hold)
    rows = tuple(
        ReaderRow(
            r.group,
            r.committed_offset,
            r.unread,
            r.first_offset,
            r.removal_ms,
            r.holds,
            r.sentence(source.topic, source.partition, iso_ms(r.removal_ms)),
        )
        for r in risks
    )
    named = config.kompakt_tombstone_retain_for_groups
    if source.readers is None:
        detail = (
            "group positions unknown here (run against a broker: --bootstrap or the admin endpoint); "
            + (f"the named groups {', '.join(named)} count as having read nothing" if named else "no hold")
        )
    elif hold is None:
        detail = "no reader holds tombstone removal (Kafka's behaviour)"
    else:
        who = ", ".join(f"{g} at {o}" for g, o in hold.holders)
        detail = (
            f"tombstones and markers at or above offset {hold.offset} stay past their delete horizon for "
            f"{who}, for at most kompakt.tombstone.max.hold.ms={config.kompakt_tombstone_max_hold_ms}"
        )
    return Readers(
        known=source.readers is not None,
        retain_for_groups=named,
        max_hold_ms=config.kompakt_tombstone_max_hold_ms,
        hold_offset=hold.offset if hold is not None else None,
        holders=hold.holders if hold is not None else (),
        groups=rows,
        detail=detail,
    )


def _sections(
    infos: Sequence[SegmentInfo],
    pos: _Position,
    first_uncleanable: int,
    clean_bytes: int,
    cleanable_bytes: int,
) -> tuple[Section, ...]:
    """Clean / cleanable / uncleanable / active, with whole-segment bytes as the planner counts them
    (a segment holding the first dirty offset in its middle counts in both clean and cleanable)."""
    active = infos[-1]
    start, first_dirty, leo = pos.start, pos.first_dirty, pos.leo
    clean_end = min(first_dirty, first_uncleanable)
    unclean_bytes = sum(i.size_bytes for i in infos[:-1] if i.base_offset >= first_uncleanable)
    return (
        Section("clean", start, max(start, clean_end), clean_bytes),
        Section("cleanable", first_dirty, max(first_dirty, first_uncleanable), cleanable_bytes),
        Section("uncleanable", first_uncleanable, max(first_uncleanable, active.base_offset), unclean_bytes),
        Section("active", active.base_offset, max(leo, active.base_offset), active.size_bytes),
    )


def _holds(
    log: _Log,
    infos: Sequence[SegmentInfo],
    first_dirty: int,
    lso: int,
    now_ms: int,
    producers: ProducerStateManager,
) -> tuple[Hold, ...]:
    config = log.config
    active = infos[-1]
    holds: list[tuple[int, str, int | None, str]] = [
        (
            active.base_offset,
            "active segment",
            None,
            f"the active segment starts at offset {active.base_offset}",
        )
    ]
    if lso < log.log_end_offset:
        open_pids = [
            (e.current_txn_first_offset, pid)
            for pid, e in producers.producers.items()
            if e.current_txn_first_offset is not None
        ]
        first, pid = min(open_pids) if open_pids else (lso, -1)
        holds.append(
            (
                lso,
                "last stable offset",
                None,
                f"an open transaction of producer {pid} started at offset {first}",
            )
        )
    # The same rule as the bound itself (planning.first_uncleanable_dirty_offset).
    seg = first_too_young_segment(infos, first_dirty, config.min_compaction_lag_ms, now_ms)
    if seg is not None:
        holds.append(
            (
                seg.base_offset,
                "min.compaction.lag.ms",
                seg.largest_timestamp_ms + config.min_compaction_lag_ms,
                f"the segment at {seg.base_offset} holds a record from "
                f"{iso_ms(seg.largest_timestamp_ms)}, "
                f"younger than min.compaction.lag.ms={config.min_compaction_lag_ms}",
            )
        )
    binding = min(h[0] for h in holds)
    result = []
    seen_binding = False
    for offset, kind, until_ms, detail in sorted(holds, key=lambda h: h[0]):
        is_binding = offset == binding and not seen_binding
        seen_binding = seen_binding or is_binding
        result.append(Hold(kind, offset, until_ms, detail, is_binding))
    return tuple(result)


def _max_lag(
    config: LogConfig,
    infos: Sequence[SegmentInfo],
    first_dirty: int,
    now_ms: int,
    delay_ms: int,
    must_clean_bytes: int,
    must_clean_ratio: float,
) -> MaxLag:
    max_lag = config.effective_max_compaction_lag_ms
    enabled = max_lag < LONG_MAX
    deadline: int | None = None
    detail = "max.compaction.lag.ms is not set: no deadline"
    if config.max_compaction_lag_ms == 0:
        detail = "max.compaction.lag.ms is 0, which disables it (KIP-354): no deadline"
    if enabled:
        estimates = estimated_earliest_timestamps(infos, max_segment_ms(config))
        dirty_non_active = [
            (i, est) for i, est in zip(infos[:-1], estimates[:-1], strict=True) if i.next_offset > first_dirty
        ]
        known = [(i, est) for i, est in dirty_non_active if est is not None and est > 0]
        if known:
            seg, est = min(known, key=lambda p: p[1])
            deadline = est + max_lag
            detail = (
                f"the dirty segment at {seg.base_offset} (earliest record ~{iso_ms(est)}) "
                "must be cleaned by then"
            )
        else:
            active = infos[-1]
            first_ts = (
                active.first_batch_timestamp_ms if active.first_batch_timestamp_ms >= 0 else active.created_ms
            )
            if active.size_bytes > 0 and config.compact:
                deadline = first_ts + max_lag
                detail = (
                    "the active segment's first record reaches max.compaction.lag.ms then; kompakt rolls it "
                    "and cleans it"
                )
            else:
                detail = "no dirty data"
    return MaxLag(max_lag, enabled, delay_ms, must_clean_bytes, must_clean_ratio, deadline, detail)


def _active(config: LogConfig, active: SegmentInfo, records: int, now_ms: int) -> ActiveSegment:
    eff = (
        min(config.segment_ms, config.effective_max_compaction_lag_ms)
        if config.compact
        else config.segment_ms
    )
    left = max(config.segment_size - active.size_bytes, 0)
    if active.size_bytes == 0:
        return ActiveSegment(
            active.base_offset,
            0,
            0,
            None,
            None,
            eff,
            None,
            left,
            None,
            "empty: it rolls only after data arrives",
        )
    first_ts = active.first_batch_timestamp_ms if active.first_batch_timestamp_ms >= 0 else active.created_ms
    time_roll = first_ts + eff if eff < LONG_MAX else None
    forced: int | None = None
    if config.compact and config.effective_max_compaction_lag_ms < LONG_MAX:
        forced = first_ts + config.effective_max_compaction_lag_ms
    parts = []
    if time_roll is not None:
        when = "now" if time_roll < now_ms else iso_ms(time_roll)
        parts.append(f"at the first append after {when} (segment.ms {duration(eff)})")
    limit = f"{_segment_size_name(config)} {human_bytes(config.segment_size)}"
    parts.append(f"when {human_bytes(left)} more arrive ({limit})")
    if forced is not None:
        when = "at the next cleaner pass" if forced < now_ms else f"at {iso_ms(forced)}"
        parts.append(f"kompakt's cleaner rolls it idle {when} (max.compaction.lag.ms)")
    return ActiveSegment(
        active.base_offset,
        active.size_bytes,
        records,
        first_ts,
        now_ms - first_ts,
        eff,
        time_roll,
        left,
        forced,
        "; ".join(parts),
    )


def _segment_size_name(config: LogConfig) -> str:
    """Which config sets the roll size: a test topic's ``internal.segment.bytes`` or ``segment.bytes``."""
    return "segment.bytes" if config.internal_segment_bytes is None else "internal.segment.bytes"


def _segment_reports(
    scan: PartitionScan,
    infos: Sequence[SegmentInfo],
    config: LogConfig,
    start: int,
    first_dirty: int,
    first_uncleanable: int,
    now_ms: int,
) -> tuple[SegmentReport, ...]:
    estimates = estimated_earliest_timestamps(infos, max_segment_ms(config))
    max_lag = config.effective_max_compaction_lag_ms
    out = []
    for n, (info, est) in enumerate(zip(infos, estimates, strict=True)):
        if n == len(infos) - 1:
            section = "active"
        elif info.next_offset <= first_dirty:
            section = "clean"
        elif info.base_offset >= first_uncleanable:
            section = "uncleanable"
        else:
            section = "cleanable"
        deadline = est + max_lag if est is not None and est > 0 and max_lag < LONG_MAX else None
        overdue = deadline is not None and deadline < now_ms and section in ("cleanable", "uncleanable")
        records = scan.segments[n].records if n < len(scan.segments) else 0
        out.append(
            SegmentReport(
                info.base_offset,
                info.next_offset,
                info.size_bytes,
                section,
                records,
                info.largest_timestamp_ms,
                est,
                deadline,
                overdue,
            )
        )
    return tuple(out)


def _tombstones(
    scan: PartitionScan,
    rec: _Records,
    latest: BOOL,
    first_uncleanable: int,
    config: LogConfig,
    now_ms: int,
    hold: TombstoneHold | None,
) -> Tombstones:
    live = np.flatnonzero(rec.tomb & latest & rec.in_log)
    waiting = past = unstamped_c = unstamped_u = held_n = 0
    earliest_waiting: int | None = None
    listed: list[Tombstone] = []
    for row in live.tolist():
        offset = int(rec.offset[row])
        b = int(rec.batch[row])
        horizon = int(rec.batch_horizon[b]) if rec.batch_stamped[b] else None
        if horizon is not None and hold is not None and bool(rec.held[b]):
            waiting += 1
            held_n += 1
            until = horizon + hold.max_hold_ms
            earliest_waiting = until if earliest_waiting is None else min(earliest_waiting, until)
            state = (
                f"held for its readers (kompakt.tombstone.retain.for.groups) until they commit past it, "
                f"at most until {iso_ms(until)}"
            )
            removable = until
        elif horizon is not None and bool(rec.past_horizon[b]):
            past += 1
            state, removable = "past its delete horizon: removed at the next clean", horizon
        elif horizon is not None:
            waiting += 1
            earliest_waiting = horizon if earliest_waiting is None else min(earliest_waiting, horizon)
            state, removable = f"waiting for delete.retention.ms until {iso_ms(horizon)}", horizon
        elif offset < first_uncleanable:
            unstamped_c += 1
            state = (
                "not stamped yet: the next clean stamps horizon = clean time + delete.retention.ms "
                f"({duration(config.delete_retention_ms)})"
            )
            removable = None
        else:
            unstamped_u += 1
            state = "not stamped yet: not cleanable yet"
            removable = None
        if len(listed) < MAX_TOMBSTONES_LISTED:
            key = scan.tombstone_keys.get(offset, b"")
            listed.append(
                Tombstone(offset, key.decode("utf-8", errors="backslashreplace"), horizon, state, removable)
            )
    return Tombstones(
        total=int((rec.tomb & rec.in_log).sum()),
        live=len(live),
        stamped_waiting=waiting,
        past_horizon=past,
        unstamped_cleanable=unstamped_c,
        unstamped_uncleanable=unstamped_u,
        earliest_waiting_horizon_ms=earliest_waiting,
        delete_retention_ms=config.delete_retention_ms,
        listed=tuple(listed),
        held_for_readers=held_n,
    )


def _offset_map(broker: BrokerConfig, dirty_keys: int) -> OffsetMapReport:
    buffer = broker.log_cleaner_dedupe_buffer_size
    threads = max(broker.log_cleaner_threads, 1)
    lf = broker.log_cleaner_io_buffer_load_factor
    per_thread = buffer // threads
    slots = per_thread // SLOT_BYTES
    per_pass = keys_per_pass(buffer, threads, lf)
    needed = math.ceil(dirty_keys / lf) * SLOT_BYTES if dirty_keys else 0
    passes = (
        math.ceil(dirty_keys / per_pass)
        if dirty_keys and per_pass > 0
        else (0 if not dirty_keys else LONG_MAX)
    )
    return OffsetMapReport(
        dedupe_buffer_size=buffer,
        threads=threads,
        load_factor=lf,
        buffer_per_thread=per_thread,
        slots=slots,
        keys_per_pass=per_pass,
        dirty_distinct_keys=dirty_keys,
        raw_bytes_needed=dirty_keys * SLOT_BYTES,
        bytes_needed=needed,
        passes_needed=passes,
        fits=dirty_keys <= per_pass,
    )


def _verdict(
    source: PartitionSource,
    config: LogConfig,
    ltc: LogToClean[_Log],
    pos: _Position,
    holds: tuple[Hold, ...],
    max_lag: MaxLag,
    active: ActiveSegment,
    tombstones: Tombstones,
    offset_map: OffsetMapReport,
) -> tuple[str, bool]:
    """The one line: eligible and why, or the event that will change it."""
    reason, ratio = ltc.reason, ltc.cleanable_ratio
    clean_bytes, cleanable_bytes = ltc.clean_bytes, ltc.cleanable_bytes
    if not config.compact:
        policy = ",".join(sorted(config.cleanup_policy)) or '"" (keep forever)'
        return f"not compacting: cleanup.policy is {policy}", False
    if source.uncleanable_reason is not None:
        return f"not compacting: the partition is marked uncleanable ({source.uncleanable_reason})", False
    if pos.leo <= pos.start or sum(i.size_bytes for i in pos.infos) == 0:
        return "nothing to clean: the log is empty", False
    map_note = ""
    if not offset_map.fits and offset_map.dirty_distinct_keys:
        map_note = (
            f"; the offset map is too small for one pass: "
            f"{offset_map.dirty_distinct_keys} distinct dirty keys, "
            f"{offset_map.keys_per_pass} per pass, so it takes {offset_map.passes_needed} passes "
            f"(raise log.cleaner.dedupe.buffer.size to {offset_map.bytes_needed} "
            f"({human_bytes(offset_map.bytes_needed)}) for one)"
        )
    if reason is not None:
        if tombstones.past_horizon and "tombstones" in reason:
            reason = f"{tombstones.past_horizon} tombstones past their horizon"
        return f"will be cleaned at the next cleaner pass: {reason}{map_note}", True
    if tombstones.past_horizon:
        # Expired tombstones that no rule can act on (e.g. still in the active segment).
        pass
    binding = next(h for h in holds if h.binding)
    if cleanable_bytes == 0:
        if binding.kind == "last stable offset":
            return (
                f"not eligible until the open transaction completes, because {binding.detail} "
                f"pins the last stable offset at {binding.offset}",
                False,
            )
        if binding.kind == "min.compaction.lag.ms":
            return (
                f"not eligible until {iso_ms(binding.until_ms)}, because min.compaction.lag.ms="
                f"{config.min_compaction_lag_ms} holds the head from offset {binding.offset} "
                f"({binding.detail})",
                False,
            )
        if tombstones.stamped_waiting and tombstones.earliest_waiting_horizon_ms is not None:
            return (
                f"not eligible until {iso_ms(tombstones.earliest_waiting_horizon_ms)}, because "
                f"{tombstones.stamped_waiting} tombstones wait for delete.retention.ms="
                f"{config.delete_retention_ms} (their delete horizon){_held_note(tombstones)}",
                False,
            )
        if max_lag.deadline_ms is not None:
            return (
                f"nothing to clean: all dirty data is in the active segment, which rolls {active.rolls}; "
                f"max.compaction.lag.ms forces a clean by {iso_ms(max_lag.deadline_ms)}",
                False,
            )
        return f"nothing to clean: all dirty data is in the active segment, which rolls {active.rolls}", False
    m = config.min_cleanable_dirty_ratio
    more = math.floor(m * clean_bytes / (1 - m)) - cleanable_bytes + 1 if m < 1 else None
    why = f"dirty ratio {ratio:.2f} <= min.cleanable.dirty.ratio {m}"
    need = f" ({human_bytes(more)} more dirty data must roll)" if more is not None and more > 0 else ""
    if max_lag.deadline_ms is not None:
        return (
            f"not eligible until {iso_ms(max_lag.deadline_ms)} (max.compaction.lag.ms), because {why}{need}",
            False,
        )
    if tombstones.stamped_waiting and tombstones.earliest_waiting_horizon_ms is not None:
        return (
            f"not eligible until {iso_ms(tombstones.earliest_waiting_horizon_ms)}, because {why}{need} and "
            f"{tombstones.stamped_waiting} tombstones wait for delete.retention.ms{_held_note(tombstones)}",
            False,
        )
    return f"not eligible: {why}{need}", False


def _held_note(tombstones: Tombstones) -> str:
    """The verdict's mention of tombstones past their horizon that readers hold."""
    n = tombstones.held_for_readers
    if not n:
        return ""
    return (
        f" or for their readers ({n} held for kompakt.tombstone.retain.for.groups or a backup, until "
        "they commit past them or kompakt.tombstone.max.hold.ms runs out)"
    )


# --------------------------------------------------------------------------------------------
# Offline input


def source_from_files(part: PartitionDir, data_dir: Path | None) -> PartitionSource:
    """A :class:`PartitionSource` from a partition directory and its data directory's checkpoints.

    Unreadable checkpoints are treated as absent, as the broker does when it opens the directory
    (``kompakt log verify`` reports them).
    """
    start: int | None = None
    checkpoint: int | None = None
    if data_dir is not None:
        tp = (part.topic, part.partition)
        start = _checkpoint_entry(data_dir / LOG_START_OFFSET_CHECKPOINT_FILE, tp)
        checkpoint = _checkpoint_entry(data_dir / CLEANER_OFFSET_CHECKPOINT_FILE, tp)
    segments = []
    for seg in part.segments:
        stat = seg.path.stat()
        segments.append(SegmentSource(seg.base_offset, seg.path, stat.st_size, int(stat.st_mtime * 1000)))
    return PartitionSource(part.topic, part.partition, tuple(segments), start, checkpoint)


def _checkpoint_entry(path: Path, tp: tuple[str, int]) -> int | None:
    try:
        return OffsetCheckpointFile(path).read().get(tp)
    except CorruptCheckpointError:
        return None
