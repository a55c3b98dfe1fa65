"""Selection: which compacted log to clean next, and which offset range of it.

This module is pure. It reads a partition log only through the small :class:`CleanableLog`
protocol (offsets, config, and one :class:`SegmentInfo` per segment), takes ``now_ms`` as an
argument and returns values; it never writes a checkpoint or changes a cleaning state. The
cleaner manager (``cleaner/manager.py``) applies what it returns under its lock.

Sections of a compacted log (Kafka's ``LogToClean`` and ``LogCleanerManager.calculateCleanableBytes``)::

    [ clean ][ dirty: cleanable | uncleanable (ends with the active segment) ]
    log_start  first_dirty        first_uncleanable                        log_end

* ``first_dirty_offset`` is the cleaner checkpoint, reset to ``log_start_offset`` when missing or
  invalid (below the log start or above the log end).
* the first uncleanable offset is the lowest of the last stable offset, the active segment's base
  offset and, with ``min.compaction.lag.ms > 0``, the base of the first segment that is too young.

Ranking (deliberately different from Kafka 4.x, which ranks by dirty ratio only):

1. logs that must be cleaned because ``max.compaction.lag.ms`` was exceeded (KIP-354 as
   written), by their *must-clean ratio* (bytes of the overdue segments over clean + cleanable
   bytes), then by dirty ratio;
2. logs whose dirty ratio is strictly above ``min.cleanable.dirty.ratio``, by dirty ratio;
3. logs that are eligible only because tombstones or markers in them are past their delete
   horizon, oldest horizon first.

KIP-354's estimate of a segment's earliest timestamp: the max timestamp of its first batch when
that batch carries one; otherwise, for the log's first segment, its largest timestamp minus the
longest time a segment can stay open, and for every later segment the previous segment's largest
timestamp (its records were appended after those). Kafka 4.x instead ignores segments
without timestamps, so such data is never forced.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kompakt.config.defs import LONG_MAX
from kompakt.errors import UncleanablePartitionError

logger = logging.getLogger(__name__)

NO_TIMESTAMP = -1

TopicPartition = tuple[str, int]

REASON_TOMBSTONES = "tombstones past their delete horizon"


class CleanableLogConfig(Protocol):
    """The topic configs selection reads (a subset of ``kompakt.log.config.LogConfig``)."""

    @property
    def compact(self) -> bool: ...

    @property
    def delete(self) -> bool: ...

    @property
    def min_cleanable_dirty_ratio(self) -> float: ...

    @property
    def min_compaction_lag_ms(self) -> int: ...

    @property
    def effective_max_compaction_lag_ms(self) -> int:
        """``max.compaction.lag.ms``, with 0 (disabled) mapped to Long.MAX."""
        ...

    @property
    def segment_ms(self) -> int: ...

    @property
    def delete_retention_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What selection needs to know about one segment.

    ``largest_timestamp_ms`` is the largest batch max-timestamp in the segment, or the file's
    last-modified time when no batch has a timestamp (Kafka's fallback; the adapter supplies
    it). ``first_batch_timestamp_ms`` is the max timestamp of the segment's first batch, or
    ``NO_TIMESTAMP`` (-1) when the segment is empty or that batch has none. ``created_ms`` is
    the wall-clock time the segment was created (used for rolling timestamp-less segments).
    ``next_offset`` is one past the segment's last offset (its base offset when empty).
    """

    base_offset: int
    size_bytes: int
    largest_timestamp_ms: int
    first_batch_timestamp_ms: int
    created_ms: int
    next_offset: int


class CleanableLog(Protocol):
    """The view of a partition log that selection works on.

    ``segment_infos()`` lists every segment in offset order; the last one is the active
    segment. ``last_stable_offset`` is the high watermark on a single node without open
    transactions, else the first offset of the earliest open transaction.
    """

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def config(self) -> CleanableLogConfig: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def segment_infos(self) -> Sequence[SegmentInfo]: ...


L = TypeVar("L", bound=CleanableLog)


def topic_partition(log: CleanableLog) -> TopicPartition:
    return (log.topic, log.partition)


def log_name(log: CleanableLog) -> str:
    """Kafka's ``topic-partition`` spelling, used in messages and log lines."""
    return f"{log.topic}-{log.partition}"


# --------------------------------------------------------------------------------------------
# Segment arithmetic (Kafka's logSegments(from, to) / nonActiveLogSegmentsFrom(from))


def _floor_index(segments: Sequence[SegmentInfo], offset: int) -> int:
    """Index of the segment containing ``offset``: the last one whose base is ``<= offset``.

    An offset below the first base maps to the first segment, as Kafka's range lookups do when
    there is no floor entry.
    """
    bases = [s.base_offset for s in segments]
    return max(bisect.bisect_right(bases, offset) - 1, 0)


def segments_in_range(segments: Sequence[SegmentInfo], from_offset: int, to_offset: int) -> list[SegmentInfo]:
    """Segments overlapping ``[from_offset, to_offset)``; empty when ``from == to``."""
    if not segments or from_offset >= to_offset:
        return []
    start = _floor_index(segments, from_offset)
    return [s for s in segments[start:] if s.base_offset < to_offset]


def non_active_segments_from(segments: Sequence[SegmentInfo], from_offset: int) -> list[SegmentInfo]:
    """Non-active segments from the one containing ``from_offset``; empty past the active base."""
    if not segments:
        return []
    active_base = segments[-1].base_offset
    if from_offset > active_base:
        return []
    return segments_in_range(segments, from_offset, active_base)


# --------------------------------------------------------------------------------------------
# Step 3: the cleanable range


@dataclass(frozen=True, slots=True)
class CleanableOffsets:
    """``first_uncleanable_dirty_offset`` is not yet rounded to a segment base
    (``LogCleanerManager.cleanableOffsets``)."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool


def cleanable_offsets(
    log: CleanableLog,
    checkpoint: int | None,
    now_ms: int,
    segments: Sequence[SegmentInfo] | None = None,
) -> CleanableOffsets:
    """Where cleaning of ``log`` may start and where it must stop, given its checkpoint.

    An invalid checkpoint (below the log start or beyond the log end) restarts from the log start
    and asks the caller to write that back at once, so the bad value is not re-read forever.
    ``segments`` may pass ``log.segment_infos()`` already read, so one pass reads it once.
    """
    log_start = log.log_start_offset
    cp = log_start if checkpoint is None else checkpoint
    force = False
    if cp < log_start:
        if not log.config.delete:
            # With compact,delete retention moves the log start past the checkpoint routinely.
            logger.warning(
                "Resetting first dirty offset of %s to log start offset %d since the checkpointed "
                "offset %d is invalid.",
                log_name(log),
                log_start,
                cp,
            )
        first_dirty, force = log_start, True
    elif cp > log.log_end_offset:
        logger.warning(
            "The last checkpoint dirty offset for partition %s is %d, which is larger than the log "
            "end offset %d. Resetting to the log start offset %d.",
            log_name(log),
            cp,
            log.log_end_offset,
            log_start,
        )
        first_dirty, force = log_start, True
    else:
        first_dirty = cp

    if segments is None:
        segments = log.segment_infos()
    bound = first_uncleanable_dirty_offset(log, first_dirty, now_ms, segments)
    return CleanableOffsets(first_dirty, bound, force)


def first_uncleanable_dirty_offset(
    log: CleanableLog, first_dirty_offset: int, now_ms: int, segments: Sequence[SegmentInfo]
) -> int:
    """The end of what a clean from ``first_dirty_offset`` may touch (Kafka's
    ``LogCleanerManager.cleanableOffsets``): the lowest of the last stable offset, the active
    segment's base and, with ``min.compaction.lag.ms > 0``, the base of the first non-active
    segment whose newest record is younger than the lag (KIP-58). Never below
    ``first_dirty_offset``; not rounded to a segment base (see :func:`first_uncleanable_segment`).

    The one bound of the cleaner threads' selection, ``explain`` and compact-now (the offline
    ``kompakt log compact`` and the admin endpoint's compact): compact-now skips only the dirty
    ratio test, never this bound.
    """
    bounds = [log.last_stable_offset, segments[-1].base_offset if segments else first_dirty_offset]
    young = first_too_young_segment(segments, first_dirty_offset, log.config.min_compaction_lag_ms, now_ms)
    if young is not None:
        bounds.append(young.base_offset)
    return max(first_dirty_offset, min(bounds))


def first_too_young_segment(
    segments: Sequence[SegmentInfo], first_dirty_offset: int, min_compaction_lag_ms: int, now_ms: int
) -> SegmentInfo | None:
    """The first non-active segment from ``first_dirty_offset`` that ``min.compaction.lag.ms``
    holds back (KIP-58: a segment is cleanable only when even its newest record is old enough),
    or None when the lag is off or holds nothing."""
    if min_compaction_lag_ms <= 0:
        return None
    too_young = now_ms - min_compaction_lag_ms
    for seg in non_active_segments_from(segments, first_dirty_offset):
        if seg.largest_timestamp_ms > too_young:
            return seg
    return None


# --------------------------------------------------------------------------------------------
# Step 4: max compaction lag (KIP-354)


def max_segment_ms(config: CleanableLogConfig) -> int:
    """Longest time a segment of a compacted log stays active (its effective roll time)."""
    return min(config.segment_ms, config.effective_max_compaction_lag_ms)


def estimated_earliest_timestamps(
    segments: Sequence[SegmentInfo], max_segment_open_ms: int
) -> list[int | None]:
    """KIP-354's estimate of each segment's earliest record timestamp (``None``: empty segment).

    ``segments`` is the whole log in offset order. A segment whose first batch has a timestamp
    uses it. Otherwise the log's first segment is estimated as "its newest record minus the
    longest time it could have been open", and every later segment as the previous segment's
    largest timestamp: its records were appended after the previous segment was rolled.
    """
    estimates: list[int | None] = []
    for i, seg in enumerate(segments):
        if seg.size_bytes == 0:
            estimates.append(None)
        elif seg.first_batch_timestamp_ms >= 0:
            estimates.append(seg.first_batch_timestamp_ms)
        elif i == 0:
            estimates.append(seg.largest_timestamp_ms - max_segment_open_ms)
        else:
            estimates.append(segments[i - 1].largest_timestamp_ms)
    return estimates


def _overdue_segments(
    segments: Sequence[SegmentInfo], config: CleanableLogConfig, first_dirty_offset: int, now_ms: int
) -> tuple[int, list[int]]:
    """``(delay_ms, base offsets of overdue segments)`` for the dirty non-active segments."""
    dirty = non_active_segments_from(segments, first_dirty_offset)
    if not dirty:
        return 0, []
    first = _floor_index(segments, dirty[0].base_offset)
    estimates = estimated_earliest_timestamps(segments, max_segment_ms(config))[first : first + len(dirty)]
    clean_until = now_ms - max(config.effective_max_compaction_lag_ms, 0)
    # Kafka ignores timestamps <= 0: they are unset or nonsensical, never a reason to force.
    known = [(seg, ts) for seg, ts in zip(dirty, estimates, strict=True) if ts is not None and ts > 0]
    overdue = [seg.base_offset for seg, ts in known if ts < clean_until]
    earliest = min((ts for _, ts in known), default=LONG_MAX)
    delay = clean_until - earliest if earliest < clean_until else 0
    return delay, overdue


def max_compaction_delay(log: CleanableLog, first_dirty_offset: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is, in ms (0 if not)."""
    return _overdue_segments(log.segment_infos(), log.config, first_dirty_offset, now_ms)[0]


# --------------------------------------------------------------------------------------------
# Step 5: LogToClean


@dataclass(frozen=True, slots=True)
class LogToClean(Generic[L]):
    """One candidate with its byte accounting and, when eligible, why.

    ``first_uncleanable_offset`` is rounded down to a segment base (the active segment's base
    when the bound is past every non-active segment). A segment holding ``first_dirty_offset``
    in its middle is counted in both ``clean_bytes`` and ``cleanable_bytes``, as Kafka does.
    ``earliest_expired_horizon_ms`` is the earliest delete horizon in the log that has passed,
    when the caller knows one. ``reason`` is ``None`` for logs that are not eligible.
    """

    log: L
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    must_clean_bytes: int
    max_compaction_delay_ms: int
    earliest_expired_horizon_ms: int | None = None
    reason: str | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return topic_partition(self.log)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def must_clean_ratio(self) -> float:
        total = self.total_bytes
        return self.must_clean_bytes / total if total else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0

    @property
    def must_clean(self) -> bool:
        """Eligible through max.compaction.lag.ms (needs something cleanable to act on)."""
        return self.needs_compaction_now and self.cleanable_bytes > 0

    @property
    def ratio_eligible(self) -> bool:
        """The strict ``>`` test of quirk 6: a ratio equal to the minimum is not enough."""
        return self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio

    @property
    def eligible(self) -> bool:
        return self.reason is not None

    def rank(self) -> tuple[int, float, float]:
        """Sort key, higher first: must-clean and ratio tiers, then expired tombstones."""
        if self.must_clean or self.ratio_eligible:
            return (1, self.must_clean_ratio, self.cleanable_ratio)
        horizon = self.earliest_expired_horizon_ms
        return (0, -float(horizon if horizon is not None else LONG_MAX), self.cleanable_ratio)


def first_uncleanable_segment(segments: Sequence[SegmentInfo], uncleanable_offset: int) -> int:
    """``uncleanable_offset`` rounded down to the base of the segment holding it (the active
    segment's base when it is past every non-active segment): a clean rewrites whole segments,
    so a segment that holds the bound is not cleaned at all. ``segments`` must not be empty."""
    non_active = non_active_segments_from(segments, uncleanable_offset)
    return non_active[0].base_offset if non_active else segments[-1].base_offset


def calculate_cleanable_bytes(
    segments: Sequence[SegmentInfo], first_dirty_offset: int, uncleanable_offset: int
) -> tuple[int, int]:
    """``(first_uncleanable_offset rounded to a segment base, cleanable bytes)``
    (``LogCleanerManager.calculateCleanableBytes``)."""
    if not segments:
        return uncleanable_offset, 0
    first_uncleanable = first_uncleanable_segment(segments, uncleanable_offset)
    lower = min(first_dirty_offset, first_uncleanable)
    cleanable = sum(s.size_bytes for s in segments_in_range(segments, lower, first_uncleanable))
    return first_uncleanable, cleanable


def _reason(ltc: LogToClean[L]) -> str | None:
    if ltc.must_clean:
        return f"max.compaction.lag.ms exceeded by {ltc.max_compaction_delay_ms} ms"
    if ltc.ratio_eligible:
        return (
            f"dirty ratio {ltc.cleanable_ratio:.2f} > min.cleanable.dirty.ratio "
            f"{ltc.log.config.min_cleanable_dirty_ratio}"
        )
    if ltc.earliest_expired_horizon_ms is not None:
        return REASON_TOMBSTONES
    return None


def log_to_clean(
    log: L,
    first_dirty_offset: int,
    uncleanable_offset: int,
    now_ms: int,
    *,
    earliest_horizon_ms: int | None = None,
    segments: Sequence[SegmentInfo] | None = None,
) -> LogToClean[L]:
    """Account one candidate's bytes and decide whether, and why, it is eligible.

    ``earliest_horizon_ms`` is the earliest delete horizon stamped in the log's clean section
    (``None`` when unknown or there is none); it counts only once ``now_ms`` has reached it, the
    moment the cleaner may drop the tombstone.
    """
    if segments is None:
        segments = log.segment_infos()
    clean_bytes = sum(s.size_bytes for s in segments_in_range(segments, -1, first_dirty_offset))
    first_uncleanable, cleanable_bytes = calculate_cleanable_bytes(
        segments, first_dirty_offset, uncleanable_offset
    )
    delay, overdue = _overdue_segments(segments, log.config, first_dirty_offset, now_ms)
    lower = min(first_dirty_offset, first_uncleanable)
    overdue_set = set(overdue)
    must_clean_bytes = sum(
        s.size_bytes
        for s in segments_in_range(segments, lower, first_uncleanable)
        if s.base_offset in overdue_set
    )
    expired = (
        earliest_horizon_ms if earliest_horizon_ms is not None and earliest_horizon_ms <= now_ms else None
    )
    ltc = LogToClean(
        log=log,
        first_dirty_offset=first_dirty_offset,
        first_uncleanable_offset=first_uncleanable,
        clean_bytes=clean_bytes,
        cleanable_bytes=cleanable_bytes,
        must_clean_bytes=must_clean_bytes,
        max_compaction_delay_ms=delay,
        earliest_expired_horizon_ms=expired,
    )
    return dataclasses.replace(ltc, reason=_reason(ltc))


# --------------------------------------------------------------------------------------------
# Steps 1-8: the whole selection


@dataclass(frozen=True, slots=True)
class Selection(Generic[L]):
    """The outcome of one selection pass.

    ``checkpoint_resets`` must be written even when ``chosen`` is ``None`` (quirk 7).
    ``eligible`` lists every eligible candidate, best first (``chosen`` is its head).
    ``max_dirty_percent`` is ``100 ×`` the highest cleanable ratio among non-empty candidates.
    """

    chosen: LogToClean[L] | None
    checkpoint_resets: dict[TopicPartition, int]
    max_dirty_percent: float
    max_compaction_delay_ms: int
    cleanable_count: int
    delayed_count: int
    eligible: tuple[LogToClean[L], ...] = ()


class SelectionError(UncleanablePartitionError):
    """Evaluating one candidate failed; the caller marks ``topic_partition`` uncleanable.

    The original error is chained as ``__cause__``. ``checkpoint_resets`` holds the resets found
    for the logs evaluated before the failure, which the caller still writes.
    """

    def __init__(
        self, message: str, topic_partition: TopicPartition, checkpoint_resets: dict[TopicPartition, int]
    ) -> None:
        super().__init__(message)
        self.topic_partition = topic_partition
        self.checkpoint_resets = checkpoint_resets


def is_candidate(
    log: CleanableLog, busy: Container[TopicPartition], uncleanable: Container[TopicPartition]
) -> bool:
    """A compacted log with no cleaning state that is not marked uncleanable."""
    tp = topic_partition(log)
    return log.config.compact and tp not in busy and tp not in uncleanable


def grab_filthiest(
    logs_with_checkpoints: Iterable[tuple[L, int | None]],
    now_ms: int,
    states: Container[TopicPartition],
    uncleanable: Container[TopicPartition],
    *,
    delete_horizons: Mapping[TopicPartition, int | None] | None = None,
) -> Selection[L]:
    """Pick the log to clean next (``LogCleanerManager.grabFilthiestCompactedLog`` with kompakt's ranking).

    ``states`` holds the partitions that have a cleaning state (in progress, aborted, paused);
    ``delete_horizons`` optionally gives each log's earliest stamped delete horizon.
    Raises :class:`SelectionError` naming the log whose evaluation failed.
    """
    resets: dict[TopicPartition, int] = {}
    evaluated: list[LogToClean[L]] = []
    max_delay = 0
    delayed = 0
    for log, checkpoint in logs_with_checkpoints:
        if not is_candidate(log, states, uncleanable):
            continue
        tp = topic_partition(log)
        try:
            segments = log.segment_infos()
            offsets = cleanable_offsets(log, checkpoint, now_ms, segments)
            if offsets.force_update_checkpoint:
                resets[tp] = offsets.first_dirty_offset
            horizon = delete_horizons.get(tp) if delete_horizons is not None else None
            ltc = log_to_clean(
                log,
                offsets.first_dirty_offset,
                offsets.first_uncleanable_dirty_offset,
                now_ms,
                earliest_horizon_ms=horizon,
                segments=segments,
            )
        except Exception as exc:
            raise SelectionError(
                f"Failed to calculate log cleaning stats for partition {log_name(log)}: {exc}",
                tp,
                dict(resets),
            ) from exc
        max_delay = max(max_delay, ltc.max_compaction_delay_ms)
        if ltc.max_compaction_delay_ms > 0:
            delayed += 1
        if ltc.total_bytes > 0:
            evaluated.append(ltc)

    max_dirty_percent = 100.0 * max((c.cleanable_ratio for c in evaluated), default=0.0)
    eligible = sorted((c for c in evaluated if c.eligible), key=lambda c: c.rank(), reverse=True)
    return Selection(
        chosen=eligible[0] if eligible else None,
        checkpoint_resets=resets,
        max_dirty_percent=max_dirty_percent,
        max_compaction_delay_ms=max_delay,
        cleanable_count=len(eligible),
        delayed_count=delayed,
        eligible=tuple(eligible),
    )


# --------------------------------------------------------------------------------------------
# Compacted-log retention and forced rolls (run by the cleaner thread)


def deletable_logs(
    logs: Iterable[L], states: Container[TopicPartition], uncleanable: Container[TopicPartition]
) -> list[L]:
    """Compacted logs whose old segments the cleaner thread should delete now
    (``LogCleanerManager.deletableLogs``).

    Only the cleaner thread runs retention for logs whose policy contains ``compact``; it skips
    logs being cleaned, paused or aborted, and logs marked uncleanable.
    """
    return [log for log in logs if is_candidate(log, states, uncleanable)]


def needs_forced_roll(log: CleanableLog, config: CleanableLogConfig, now_ms: int) -> bool:
    """Whether an idle compacted log's active segment has outlived ``max.compaction.lag.ms``.

    Kafka only rolls on append, so an idle partition's active segment is never compacted; kompakt
    lets the cleaner's maintenance pass roll it instead. The age is taken from the first batch's
    timestamp, or from the segment's creation time when the batch has none (the same clocks the
    append-time roll rule uses).
    """
    if not config.compact:
        return False
    max_lag = config.effective_max_compaction_lag_ms
    if max_lag >= LONG_MAX:
        return False
    segments = log.segment_infos()
    if not segments:
        return False
    active = segments[-1]
    if active.size_bytes == 0:
        return False
    first_ts = active.first_batch_timestamp_ms if active.first_batch_timestamp_ms >= 0 else active.created_ms
    return first_ts < now_ms - max_lag


def segments_to_force_roll(now_ms: int, logs: Iterable[L]) -> list[L]:
    """The logs whose active segment the cleaner should roll now (see :func:`needs_forced_roll`)."""
    return [log for log in logs if needs_forced_roll(log, log.config, now_ms)]
