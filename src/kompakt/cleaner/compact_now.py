"""Compact one log now, from a given offset to its uncleanable boundary, whatever its ratio.

Used by the offline ``kompakt log compact`` command on a stopped directory and by the broker's
compact-now operation. It runs the same :class:`Cleaner` passes as the cleaner threads; when the
offset map fills, it simply runs another pass from where the previous one stopped, until the whole
cleanable range is done. Only the dirty-ratio test is skipped: the boundary is the cleaner's own
(:func:`kompakt.cleaner.planning.first_uncleanable_dirty_offset`), so the active segment, anything
at or above the LSO and segments younger than ``min.compaction.lag.ms`` are never touched, and
``explain`` reports the same boundary.
"""

from __future__ import annotations

from collections.abc import Callable

from kompakt.cleaner.adapter import LogView
from kompakt.cleaner.cleaner import Cleaner, CleanResult
from kompakt.cleaner.planning import cleanable_offsets, first_uncleanable_segment
from kompakt.log.partition_log import PartitionLog


def cleanable_range(log: PartitionLog, first_dirty_offset: int, now_ms: int) -> tuple[int, int]:
    """``(first dirty offset, first uncleanable segment base)`` of a clean from
    ``first_dirty_offset`` at ``now_ms``, exactly as the cleaner threads' selection computes it
    (an offset outside the log restarts from the log start)."""
    view = LogView(log)
    with log.lock:
        segments = view.segment_infos()
        offsets = cleanable_offsets(view, first_dirty_offset, now_ms, segments)
        bound = first_uncleanable_segment(segments, offsets.first_uncleanable_dirty_offset)
        return offsets.first_dirty_offset, bound


def compact_log(
    cleaner: Cleaner,
    log: PartitionLog,
    first_dirty_offset: int,
    *,
    now_ms: int | None = None,
    on_pass: Callable[[CleanResult], None] | None = None,
) -> list[CleanResult]:
    """Clean ``log`` from ``first_dirty_offset`` up to its uncleanable boundary, in as many passes
    as the offset map needs. Passing the log start offset re-cleans the whole log, which also
    removes tombstones and markers whose delete horizon has passed. ``now_ms`` (default: the
    cleaner's clock) is the instant of both the boundary (``min.compaction.lag.ms``) and the
    delete horizons."""
    results: list[CleanResult] = []
    now = cleaner.clock.now_ms() if now_ms is None else now_ms
    start, bound = cleanable_range(log, max(first_dirty_offset, log.log_start_offset), now)
    while start < bound:
        result = cleaner.clean(log, start, bound, now)
        results.append(result)
        if on_pass is not None:
            on_pass(result)
        if result.end_offset <= start:
            break  # no progress possible (cannot happen with a map of >= 1 key; defensive)
        start = result.end_offset
    return results
