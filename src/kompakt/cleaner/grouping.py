"""Grouping the segments of one cleaning pass into the new segments they become (Kafka's
``Cleaner.groupSegmentsBySize``).

Every pass rewrites all segments below its end offset, from the first segment of the log, so small
cleaned segments would pile up if each were rewritten alone. Groups are formed greedily in log
order; each group becomes one new segment whose base offset is the group's first base offset. A
segment joins the current group while all of these hold:

* the summed ``.log`` sizes stay within ``segment.bytes``;
* the summed offset-index and time-index sizes (entries x entry width, not the preallocated
  length) each stay within ``segment.index.bytes``;
* it is empty, or its estimated last offset minus the group's base offset fits in an int32, so
  every offset stays representable relative to the new segment's base.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

INT32_MAX = 2**31 - 1

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class GroupingInput(Generic[S]):
    """What grouping needs to know of a segment; ``segment`` is carried through untouched."""

    segment: S
    base_offset: int
    size_bytes: int
    offset_index_bytes: int
    time_index_bytes: int


def group_segments_by_size(
    segments: Sequence[GroupingInput[S]],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[S]]:
    """Split ``segments`` (in log order) into groups per the rules above."""
    groups: list[list[S]] = []
    remaining = list(segments)
    while remaining:
        first = remaining.pop(0)
        group = [first.segment]
        log_size = first.size_bytes
        index_size = first.offset_index_bytes
        time_index_size = first.time_index_bytes
        while remaining:
            candidate = remaining[0]
            if len(remaining) > 1:
                estimated_last = remaining[1].base_offset - 1
            else:
                estimated_last = first_uncleanable_offset - 1
            fits_offsets = candidate.size_bytes == 0 or estimated_last - first.base_offset <= INT32_MAX
            if not (
                log_size + candidate.size_bytes <= max_size
                and index_size + candidate.offset_index_bytes <= max_index_size
                and time_index_size + candidate.time_index_bytes <= max_index_size
                and fits_offsets
            ):
                break
            log_size += candidate.size_bytes
            index_size += candidate.offset_index_bytes
            time_index_size += candidate.time_index_bytes
            group.append(candidate.segment)
            remaining.pop(0)
        groups.append(group)
    return groups
