"""Shared builders for the log tests: batches, configs and logs in a temp directory."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segments import ManualScheduler
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records


def config(**overrides: Any) -> LogConfig:
    return dataclasses.replace(LogConfig.defaults(), **overrides)


def batch(
    *values: bytes | None,
    keys: Sequence[bytes | None] | None = None,
    timestamp: int = 1_000,
    base_offset: int = 0,
    **kwargs: Any,
) -> bytes:
    """A batch with one record per value (keys default to the values)."""
    ks = list(keys) if keys is not None else list(values)
    records = [SimpleRecord(k, v, timestamp=timestamp) for k, v in zip(ks, values, strict=True)]
    return build_batch(records, base_offset=base_offset, **kwargs)


def kv(i: int, timestamp: int = 1_000, **kwargs: Any) -> bytes:
    return batch(f"{i:04d}".encode(), timestamp=timestamp, **kwargs)


class LogHarness:
    """A PartitionLog in ``directory`` with a FakeClock and a ManualScheduler; reopenable."""

    def __init__(
        self,
        directory: Path,
        cfg: LogConfig | None = None,
        *,
        seed: int = 0,
        file_ops: FileOps = DEFAULT_FILE_OPS,
    ) -> None:
        self.directory = directory
        self.file_ops = file_ops
        self.config = cfg or config()
        self.clock = FakeClock()
        self.scheduler = ManualScheduler(self.clock)
        self.seed = seed
        self.log = self.open(had_clean_shutdown=True)

    def open(
        self, *, had_clean_shutdown: bool, recovery_point: int = 0, log_start_offset: int = 0
    ) -> PartitionLog:
        self.log = PartitionLog(
            self.directory,
            "t",
            0,
            self.config,
            self.clock,
            scheduler=self.scheduler,
            had_clean_shutdown=had_clean_shutdown,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            rng=random.Random(self.seed),
            file_ops=self.file_ops,
        )
        return self.log

    def reopen(self, *, clean: bool = True) -> PartitionLog:
        start = self.log.log_start_offset
        if clean:
            self.log.close()
        else:
            self.log.close_without_flush()
        return self.open(had_clean_shutdown=clean, log_start_offset=start)


def read_offsets(data: bytes) -> list[int]:
    """Record offsets in a fetched byte string."""
    return [r.offset for v in iter_batches(data) for r in decode_records(v)]


def batch_ranges(data: bytes) -> list[tuple[int, int]]:
    return [(v.base_offset, v.last_offset) for v in iter_batches(data)]


def all_records(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    for segment in log.segments.values():
        for _pos, view in segment.iter_batches():
            out.extend((r.offset, r.key) for r in decode_records(view))
    return out
