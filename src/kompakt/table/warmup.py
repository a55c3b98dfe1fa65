"""Compile (or load from numba's cache) the table's kernels by building and reading a tiny table.

Like :mod:`kompakt.cleaner.warmup`: the test command runs it once before the suite, so parallel
test workers share the compiled kernels instead of each compiling them.
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression
from kompakt.table.export import export_tables
from kompakt.table.offline import open_tables
from kompakt.table.partition import LiveTable


def warm_up() -> float:
    """Build, query and export a small table; return the seconds taken."""
    started = time.monotonic()
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog(Path(tmp) / "warmup-0", "warmup", 0, LogConfig.from_overrides({}), clock)
        for i in range(50):
            codec = Compression.ZSTD if i % 2 else Compression.NONE
            value = None if i % 7 == 0 else b"v"
            log.append(build_batch([SimpleRecord(str(i % 11).encode(), value, i)], compression=codec))
        table = LiveTable(log)
        table.get(b"1")
        table.counts()
        table.as_of(10)
        export_tables([table], io.BytesIO(), fmt="parquet")
        log.close()
        (offline,) = open_tables(Path(tmp) / "warmup-0")
        list(offline.scan(include_tombstones=True))
    return time.monotonic() - started


if __name__ == "__main__":
    print(f"table kernels ready in {warm_up():.2f} s")  # noqa: T201
