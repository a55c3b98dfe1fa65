"""Compact one log now, from a given offset to its uncleanable boundary, whatever its ratio.

Used by the offline ``kompakt log compact`` command on a stopped directory and by the broker's
compact-now operation. It runs the same :class:`Cleaner` passes as the cleaner threads; when the
offset map fills, it simply runs another pass from where the previous one stopped, until the whole
cleanable range is done. The active segment and anything at or above the LSO are never touched.
"""

from __future__ import annotations

from collections.abc import Callable

from kompakt.cleaner.cleaner import Cleaner, CleanResult
from kompakt.log.partition_log import PartitionLog


def first_uncleanable_offset(log: PartitionLog) -> int:
    """The active segment's base, or the base of the segment holding the LSO if lower."""
    with log.lock:
        bound = log.active_segment.base_offset
        lso_segment = log.segments.floor(log.last_stable_offset)
        if lso_segment is not None:
            bound = min(bound, lso_segment.base_offset)
        return bound


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
    removes tombstones and markers whose delete horizon has passed."""
    results: list[CleanResult] = []
    start = max(first_dirty_offset, log.log_start_offset)
    bound = first_uncleanable_offset(log)
    while start < bound:
        result = cleaner.clean(log, start, bound, now_ms)
        results.append(result)
        if on_pass is not None:
            on_pass(result)
        if result.end_offset <= start:
            break  # no progress possible (cannot happen with a map of >= 1 key; defensive)
        start = result.end_offset
    return results
