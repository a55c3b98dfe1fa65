"""Where a segment's ``.index`` and ``.timeindex`` entries go: Kafka 4.1's per-batch rule, once.

Kafka 4.1 ``LogSegment.append`` (KAFKA-806) walks the batches of every append. For each batch it
first raises the segment's max timestamp so far (strictly greater wins; the offset kept is that
batch's last offset), then, when more than ``index.interval.bytes`` were appended since the last
entry, writes the offset-index entry ``(batch last offset, batch position)`` and offers the time
index ``(max timestamp so far, its offset)``, and resets the byte count; only then does it add
the batch's size. ``LogSegment.recover`` applies the same rule while rebuilding.

Every writer of a segment calls :func:`plan_index_entries`: the produce path (one batch per
request, usually), restores and followers, the cleaner's output (many batches per call) and the
index rebuild. The plan is computed before anything is written, so a failed write leaves the
segment's counters as they were. A lookup therefore scans at most ``index.interval.bytes`` plus
one batch from its entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class IndexPlan:
    """The entries one append adds and the segment's index counters after it.

    ``offsets[i]``/``positions[i]`` is the i-th offset-index entry; ``timestamps[i]``/
    ``timestamp_offsets[i]`` what the time index is offered with it (appended only when the
    timestamp is greater than its last entry's, by :meth:`TimeIndex.maybe_append_many`).
    """

    offsets: list[int]
    positions: list[int]
    timestamps: list[int]
    timestamp_offsets: list[int]
    bytes_since_last_entry: int
    max_timestamp: int
    offset_of_max_timestamp: int


def plan_index_entries(
    position: int,
    sizes: Sequence[int],
    last_offsets: Sequence[int],
    max_timestamps: Sequence[int],
    *,
    interval: int,
    bytes_since_last_entry: int,
    max_timestamp: int,
    offset_of_max_timestamp: int,
) -> IndexPlan:
    """Kafka's rule over batches appended at file ``position`` (one entry per qualifying batch).

    The loop is per batch, not per record, and touches only ints already extracted from the
    headers; the cleaner passes whole chunks of output batches in one call.
    """
    offsets: list[int] = []
    positions: list[int] = []
    timestamps: list[int] = []
    ts_offsets: list[int] = []
    since = bytes_since_last_entry
    max_ts = max_timestamp
    max_ts_offset = offset_of_max_timestamp
    for size, last, ts in zip(sizes, last_offsets, max_timestamps, strict=True):
        if ts > max_ts:
            max_ts, max_ts_offset = ts, last
        if since > interval:
            offsets.append(last)
            positions.append(position)
            timestamps.append(max_ts)
            ts_offsets.append(max_ts_offset)
            since = 0
        position += size
        since += size
    return IndexPlan(offsets, positions, timestamps, ts_offsets, since, max_ts, max_ts_offset)
