"""Which old segments may be deleted: Kafka's ``deleteOldSegments`` passes, as pure functions.

Passes, in order (the caller re-reads the segment list between passes, because each pass
deletes before the next one looks):

* log-start-offset pass: a segment goes when the next segment's base offset <= log start offset;
* retention-size pass (``retention.bytes >= 0`` and log size >= it): walking from the oldest,
  a segment goes while ``excess - segment.size >= 0``, subtracting each deleted size;
* retention-time pass (``retention.ms >= 0``): a segment goes when
  ``now_ms - largest_timestamp > retention.ms`` (largest timestamp falls back to mtime).

Common rules: walk from the oldest segment and stop at the first that may not go; never delete a
segment whose upper bound (next base offset, or the log end offset for the last one) is above
the high watermark; never delete the last segment when it is empty. Rolling first when every
segment would go, raising the log start offset and renaming files are the log's job.

Policy: ``delete`` in ``cleanup.policy`` enables all three passes; otherwise (``compact`` alone,
or an empty policy) only the log-start-offset pass runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Protocol

from kompakt.log.config import LogConfig


class RetentionPass(StrEnum):
    """The passes of ``deleteOldSegments``, in the order they run."""

    LOG_START_OFFSET = "log-start-offset"
    RETENTION_SIZE = "retention-size"
    RETENTION_TIME = "retention-time"


LOG_START_OFFSET_PASS = RetentionPass.LOG_START_OFFSET
RETENTION_SIZE_PASS = RetentionPass.RETENTION_SIZE
RETENTION_TIME_PASS = RetentionPass.RETENTION_TIME


class SegmentLike(Protocol):
    """What retention needs to know about a segment (``LogSegment`` satisfies it)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def largest_timestamp(self) -> int: ...


def passes_for(config: LogConfig, include_retention: bool = True) -> list[RetentionPass]:
    """The passes ``deleteOldSegments`` runs for this config, in order."""
    if include_retention and config.delete:
        return [LOG_START_OFFSET_PASS, RETENTION_SIZE_PASS, RETENTION_TIME_PASS]
    return [LOG_START_OFFSET_PASS]


def deletable_prefix(
    segments: Sequence[SegmentLike],
    *,
    log_end_offset: int,
    high_watermark: int,
    should_delete: Callable[[SegmentLike, SegmentLike | None], bool],
) -> int:
    """How many of the oldest segments may go under ``should_delete(segment, next_segment)``."""
    count = 0
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = nxt.base_offset if nxt is not None else log_end_offset
        last_and_empty = nxt is None and segment.size == 0
        if last_and_empty or high_watermark < upper_bound or not should_delete(segment, nxt):
            break
        count += 1
    return count


def log_start_offset_breached(
    segments: Sequence[SegmentLike], *, log_start_offset: int, log_end_offset: int, high_watermark: int
) -> int:
    return deletable_prefix(
        segments,
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        should_delete=lambda _s, nxt: nxt is not None and nxt.base_offset <= log_start_offset,
    )


def retention_size_breached(
    segments: Sequence[SegmentLike], *, retention_bytes: int, log_end_offset: int, high_watermark: int
) -> int:
    total = sum(s.size for s in segments)
    if retention_bytes < 0 or total < retention_bytes:
        return 0
    excess = [total - retention_bytes]

    def should_delete(segment: SegmentLike, _next: SegmentLike | None) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return deletable_prefix(
        segments, log_end_offset=log_end_offset, high_watermark=high_watermark, should_delete=should_delete
    )


def retention_time_breached(
    segments: Sequence[SegmentLike],
    *,
    retention_ms: int,
    now_ms: int,
    log_end_offset: int,
    high_watermark: int,
) -> int:
    if retention_ms < 0:
        return 0
    return deletable_prefix(
        segments,
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        should_delete=lambda s, _n: now_ms - s.largest_timestamp > retention_ms,
    )


def deletable_count(
    pass_name: RetentionPass,
    segments: Sequence[SegmentLike],
    config: LogConfig,
    *,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
) -> int:
    """The number of oldest segments the named pass would delete."""
    if pass_name == LOG_START_OFFSET_PASS:
        return log_start_offset_breached(
            segments,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            high_watermark=high_watermark,
        )
    if pass_name == RETENTION_SIZE_PASS:
        return retention_size_breached(
            segments,
            retention_bytes=config.retention_bytes,
            log_end_offset=log_end_offset,
            high_watermark=high_watermark,
        )
    if pass_name == RETENTION_TIME_PASS:
        return retention_time_breached(
            segments,
            retention_ms=config.retention_ms,
            now_ms=now_ms,
            log_end_offset=log_end_offset,
            high_watermark=high_watermark,
        )
    raise ValueError(f"unknown retention pass {pass_name!r}")
