"""Fake partition logs built from segment lists, for selection and state tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kompakt.cleaner.planning import NO_TIMESTAMP, SegmentInfo, TopicPartition
from kompakt.config.defs import LONG_MAX

DAY_MS = 86_400_000


@dataclass
class FakeConfig:
    cleanup_policy: frozenset[str] = frozenset({"compact"})
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    segment_ms: int = 7 * DAY_MS
    delete_retention_ms: int = DAY_MS

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def effective_max_compaction_lag_ms(self) -> int:
        return LONG_MAX if self.max_compaction_lag_ms == 0 else self.max_compaction_lag_ms


@dataclass
class FakeLog:
    topic: str
    partition: int
    config: FakeConfig
    segments: list[SegmentInfo]
    log_start_offset: int = 0
    high_watermark: int | None = None
    fail_with: Exception | None = None

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log_end_offset if self.high_watermark is None else self.high_watermark

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def segment_infos(self) -> Sequence[SegmentInfo]:
        if self.fail_with is not None:
            raise self.fail_with
        return list(self.segments)


def segment(
    base: int,
    timestamps: Sequence[int],
    record_size: int = 100,
    *,
    mtime_ms: int = 0,
    created_ms: int = 0,
) -> SegmentInfo:
    """A segment of one-record batches at ``base``, one per entry of ``timestamps``."""
    stamped = [t for t in timestamps if t >= 0]
    return SegmentInfo(
        base_offset=base,
        size_bytes=record_size * len(timestamps),
        largest_timestamp_ms=max(stamped) if stamped else mtime_ms,
        first_batch_timestamp_ms=timestamps[0] if timestamps else NO_TIMESTAMP,
        created_ms=created_ms,
        next_offset=base + len(timestamps),
    )


def build_segments(
    n_records: int,
    roll_after: Callable[[int], bool],
    *,
    timestamp: Callable[[int], int] = lambda _o: NO_TIMESTAMP,
    record_size: int = 100,
    final_roll: bool = True,
) -> list[SegmentInfo]:
    """Append ``n_records`` one-record batches, rolling after each offset where ``roll_after``."""
    segments: list[SegmentInfo] = []
    base = 0
    current: list[int] = []
    for offset in range(n_records):
        current.append(timestamp(offset))
        if roll_after(offset) and offset != n_records - 1:
            segments.append(segment(base, current, record_size))
            base, current = offset + 1, []
    if current:
        segments.append(segment(base, current, record_size))
        base += len(current)
    if final_roll or not segments:
        segments.append(segment(base, [], record_size))
    return segments


def filthy_log(partition: int, n_records: int, topic: str = "t") -> FakeLog:
    """LogCleanerManagerTest's "filthy" log: rolls after offsets 0, 5, 10, ... then once more."""
    config = FakeConfig(min_cleanable_dirty_ratio=0.05, cleanup_policy=frozenset({"compact"}))
    return FakeLog(topic, partition, config, build_segments(n_records, lambda o: o % 5 == 0))


@dataclass
class MemoryCheckpoints:
    """An in-memory ``cleaner-offset-checkpoint`` that counts writes."""

    entries: dict[TopicPartition, int] = field(default_factory=dict)
    writes: int = 0

    def read(self) -> dict[TopicPartition, int]:
        return dict(self.entries)

    def write(self, entries: Mapping[TopicPartition, int], /) -> None:
        self.entries = dict(entries)
        self.writes += 1
