"""Storage-engine benchmarks (issue: storage engine), printing one JSON object.

* append: pre-built 1 MiB uncompressed batches appended to one partition log (offsets assigned
  by rewriting the header in place, indexes maintained, page-cache writes, no fsync), against a
  ``dd``-style baseline measured in the same run: writing the same bytes in 1 MiB ``os.write``
  calls to a fresh file.
* append_small: 1 KiB single-batch leader appends (the broker's produce path per request: offset
  assignment, producer-state check, roll check, index rule), reported as appends per second.
* open: opening a data directory of 1,000 partitions x 3 segments after a clean shutdown (lazy
  indexes, no segment scans).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.config import LogConfig
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch

MIB = 1024 * 1024


def one_mib_batch() -> bytes:
    value = b"v" * 1000
    records = [SimpleRecord(f"key-{i}".encode(), value, 1_700_000_000_000 + i) for i in range(1040)]
    return build_batch(records)


def bench_dd_write(directory: Path, chunk: bytes, count: int) -> float:
    path = directory / "dd.bin"
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for _ in range(count):
            os.write(fd, chunk)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed


def bench_append(directory: Path, batch: bytes, count: int) -> float:
    log_dir = directory / "bench-0"
    log_dir.mkdir()
    log = PartitionLog(log_dir, "bench", 0, LogConfig.defaults(), SystemClock())
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch)
    elapsed = time.perf_counter() - start
    log.close()
    shutil.rmtree(log_dir)
    return elapsed


def bench_append_small(directory: Path, batch: bytes, count: int) -> float:
    log_dir = directory / "small-0"
    log_dir.mkdir()
    log = PartitionLog(log_dir, "small", 0, LogConfig.defaults(), SystemClock())
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch)
    elapsed = time.perf_counter() - start
    log.close()
    shutil.rmtree(log_dir)
    return elapsed


def bench_open(directory: Path, partitions: int = 1000, segments: int = 3) -> float:
    data = directory / "open-data"
    clock = SystemClock()
    manager = LogManager(data, BrokerConfig.from_properties({}), clock)
    manager.open()
    batch = build_batch([SimpleRecord(b"k", b"v" * 100, 1_700_000_000_000)])
    for t in range(partitions // 10):
        manager.create_topic(f"topic-{t}", 10, {})
        for p in range(10):
            log = manager.get_log(f"topic-{t}", p)
            for _ in range(segments):
                log.append(batch)
                log.roll()
    manager.close()
    start = time.perf_counter()
    reopened = LogManager(data, BrokerConfig.from_properties({}), clock)
    reopened.open()
    elapsed = time.perf_counter() - start
    count = len(reopened.logs())
    reopened.close()
    assert count == partitions, count
    return elapsed


def main() -> None:
    count = int(os.environ.get("KOMPAKT_BENCH_APPEND_MIB", "512"))
    batch = one_mib_batch()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("KOMPAKT_BENCH_DIR")) as tmp:
        directory = Path(tmp)
        dd, app = [], []
        for _ in range(3):
            dd.append(bench_dd_write(directory, batch, count))
            app.append(bench_append(directory, batch, count))
        total = len(batch) * count
        dd_s, app_s = statistics.median(dd), statistics.median(app)
        results["append"] = {
            "bytes": total,
            "batch_bytes": len(batch),
            "append_mb_per_s": round(total / app_s / MIB, 1),
            "page_cache_write_mb_per_s": round(total / dd_s / MIB, 1),
            "ratio_to_write_bandwidth": round(dd_s / app_s, 3),
            "goal_ratio": 0.5,
        }
        small_count = int(os.environ.get("KOMPAKT_BENCH_SMALL_APPENDS", "100000"))
        small = build_batch([SimpleRecord(b"key", b"v" * 1000, 1_700_000_000_000)])
        smalls = [bench_append_small(directory, small, small_count) for _ in range(3)]
        results["append_small"] = {
            "batch_bytes": len(small),
            "appends": small_count,
            "appends_per_s": round(small_count / statistics.median(smalls)),
        }
        opens = [bench_open(directory / f"o{i}") for i in range(2)]
        results["open_1000_partitions_x3_segments_s"] = round(min(opens), 3)
        results["open_goal_s"] = 0.5
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
