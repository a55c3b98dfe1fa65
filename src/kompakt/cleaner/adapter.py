"""The view of a :class:`PartitionLog` that selection and planning work on.

Planning is written against the small ``CleanableLog`` protocol so it can be tested with plain
segment descriptions; this adapter provides that protocol for real logs, reading only in-memory
segment metadata (sizes, cached timestamps), never segment contents.
"""

from __future__ import annotations

from collections.abc import Sequence

from kompakt.cleaner.planning import NO_TIMESTAMP, SegmentInfo
from kompakt.config.defs import LONG_MAX
from kompakt.log.config import LogConfig
from kompakt.log.partition_log import PartitionLog


class LogView:
    """A partition log as the cleaner's selection sees it."""

    __slots__ = ("log",)

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def partition(self) -> int:
        return self.log.partition

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def segment_infos(self) -> Sequence[SegmentInfo]:
        with self.log.lock:
            segments = self.log.segments.values()
            leo = self.log.log_end_offset
            infos = []
            for i, segment in enumerate(segments):
                first_ts = segment.first_batch_timestamp()
                next_offset = segments[i + 1].base_offset if i + 1 < len(segments) else leo
                infos.append(
                    SegmentInfo(
                        base_offset=segment.base_offset,
                        size_bytes=segment.size,
                        largest_timestamp_ms=segment.largest_timestamp,
                        first_batch_timestamp_ms=NO_TIMESTAMP if first_ts in (LONG_MAX, -1) else first_ts,
                        created_ms=segment.created_ms,
                        next_offset=next_offset,
                    )
                )
            return infos
