"""Segment roll rules (Kafka's ``LogSegment.shouldRoll``), as pure functions.

A segment is rolled only on append, never in the background. Before an append of
``message_size`` bytes the active segment rolls if any of these holds:

* size: ``active.size > segment.bytes - message_size``;
* time: the segment is not empty and ``time_waited > effective_segment_ms - roll_jitter_ms``,
  where time waited follows batch timestamps once the segment has one (wall clock otherwise);
* the offset index is full, or the time index is full (one slot is kept for the final entry);
* the append's last offset does not fit in 32 bits relative to the segment's base offset.

For compacted logs ``effective_segment_ms = min(segment.ms, max.compaction.lag.ms)`` (KIP-354):
that is the whole of max-lag's "forced" roll.
"""

from __future__ import annotations

import random

from kompakt.log.config import LogConfig
from kompakt.log.segment import LogSegment


def effective_segment_ms(config: LogConfig) -> int:
    """``segment.ms``, lowered to the max compaction lag for compacted logs."""
    if config.compact:
        return min(config.segment_ms, config.effective_max_compaction_lag_ms)
    return config.segment_ms


def random_roll_jitter_ms(config: LogConfig, rng: random.Random) -> int:
    """A fresh segment's jitter in ``[0, min(segment.jitter.ms, segment.ms))``; fixed for its life."""
    if config.segment_jitter_ms <= 0:
        return 0
    return rng.randrange(min(config.segment_jitter_ms, config.segment_ms))


def roll_reason(
    segment: LogSegment,
    config: LogConfig,
    *,
    message_size: int,
    max_timestamp_in_messages: int,
    max_offset_in_messages: int,
    now_ms: int,
) -> str | None:
    """Why the active ``segment`` must roll before this append, or None to append in place."""
    size = segment.size
    if size > config.segment_size - message_size:
        return f"size {size} + {message_size} bytes would exceed segment.bytes {config.segment_size}"
    if size > 0:
        waited = segment.time_waited_for_roll(now_ms, max_timestamp_in_messages)
        limit = effective_segment_ms(config) - segment.roll_jitter_ms
        if waited > limit:
            return f"time waited {waited} ms > segment.ms {limit} ms (jitter {segment.roll_jitter_ms} ms)"
    if segment.offset_index.is_full():
        return f"offset index full ({segment.offset_index.entries} entries)"
    if segment.time_index.is_full():
        return f"time index full ({segment.time_index.entries} entries)"
    if not segment.can_convert_to_relative_offset(max_offset_in_messages):
        return f"offset {max_offset_in_messages} overflows the segment based at {segment.base_offset}"
    return None
