"""Compile (or load from numba's on-disk cache) every cleaner kernel by cleaning a tiny log.

numba compiles a kernel on its first call and caches the machine code next to the sources
(``cache=True``). Running this once after installation moves that cost out of the first real
clean; the test command runs it before the suite so parallel test workers share the cache.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression


def warm_up() -> float:
    """Clean a small log with raw and compressed batches and tombstones; return the seconds taken."""
    started = time.monotonic()
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "warmup-0"
        directory.mkdir()
        config = LogConfig.from_overrides({"cleanup.policy": "compact", "segment.bytes": "4096"})
        log = PartitionLog(directory, "warmup", 0, config, clock)
        for i in range(200):
            codec = Compression.ZSTD if i % 3 == 0 else Compression.NONE
            value = None if i % 7 == 0 else b"value"
            batch = [SimpleRecord(str(i % 11).encode(), value, clock.now_ms()), SimpleRecord(b"x", b"y", 0)]
            log.append(build_batch(batch, compression=codec))
        cleaner = Cleaner(0, HashedOffsetMap(1 << 20, 0.9), clock)
        cleaner.clean(log, 0, log.active_segment.base_offset)
        clock.advance(86_400_001)
        cleaner.clean(log, 0, log.active_segment.base_offset)
        log.close()
    return time.monotonic() - started


if __name__ == "__main__":
    print(f"cleaner kernels ready in {warm_up():.2f} s")  # noqa: T201
