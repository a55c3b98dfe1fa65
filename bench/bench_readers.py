"""The cost of the unread-tombstone report (issue 19), per MB of compacted log.

Workload: ``--mb`` MiB (default 64) written to a compacted partition in 500-record uncompressed
batches of 100-byte values, over about as many keys as records (so the cleaned log stays large),
one record in ten a tombstone, 16 MiB segments, cleaned once so every tombstone's batch carries a
delete horizon (the stamped tombstones the report counts).

Measured, each the best of three:

* ``cold_scan``: ``HorizonTracker.stamped_facts`` on a fresh tracker: every stamped batch's records
  parsed natively to find its tombstones (what the first report or the first cleaner pass after a
  clean pays per segment file);
* ``warm_report``: the report for 100 groups at random committed offsets from the cached arrays
  (what every later ``/metrics`` scrape, ``/v1/readers`` call or cleaner pass pays);
* baseline: reading every segment once from the page cache into a reused buffer.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.compact_now import compact_log
from kompakt.cleaner.horizons import HorizonTracker
from kompakt.cleaner.offset_map import SLOT_BYTES, HashedOffsetMap
from kompakt.cleaner.readers import PartitionReaders, reader_risks
from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segments import ManualScheduler
from kompakt.records.builder import SimpleRecord, build_batch

MIB = 1024 * 1024
PER_BATCH = 500
GROUPS = 100


def _build(directory: Path, clock: FakeClock, mb: int, keys_n: int) -> PartitionLog:
    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=16 * MIB)
    log = PartitionLog(directory / "t-0", "t", 0, config, clock, scheduler=ManualScheduler(clock))
    rng = np.random.default_rng(19)
    value = b"v" * 100
    written = 0
    while written < mb * MIB:
        keys = rng.integers(0, keys_n, PER_BATCH)
        tomb = rng.random(PER_BATCH) < 0.1
        batch = build_batch(
            [
                SimpleRecord(b"key-%08d" % k, None if t else value, clock.now_ms())
                for k, t in zip(keys.tolist(), tomb.tolist(), strict=True)
            ]
        )
        log.append(batch)
        written += len(batch)
    log.roll()
    return log


def _best(fn: object, runs: int = 3) -> float:
    assert callable(fn)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=64)
    args, _ = parser.parse_known_args()
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        keys_n = args.mb * MIB // 120
        log = _build(Path(tmp), clock, args.mb, keys_n)
        cleaner = Cleaner(0, HashedOffsetMap(keys_n * 2 * SLOT_BYTES, 0.9), clock)
        compact_log(cleaner, log, log.log_start_offset)  # stamps every tombstone's batch
        segments = log.segments.values()[:-1]
        size = sum(s.size for s in segments)
        facts = HorizonTracker().stamped_facts(log)
        cold = _best(lambda: HorizonTracker().stamped_facts(log))
        rng = np.random.default_rng(7)
        committed = {f"g{i}": int(o) for i, o in enumerate(rng.integers(0, log.log_end_offset, GROUPS))}
        readers = PartitionReaders(committed=committed)
        warm = _best(
            lambda: reader_risks(facts.tomb_offset, facts.tomb_horizon, facts.tomb_batch_last, readers, None)
        )
        buffer = bytearray(16 * MIB)

        def read_all() -> None:
            for segment in segments:
                with segment.log_path.open("rb", buffering=0) as f:
                    while f.readinto(buffer):
                        pass

        read = _best(read_all)
        log.close()
    mb = size / MIB
    result = {
        "log_mb": round(mb, 1),
        "stamped_tombstones": len(facts.tomb_offset),
        "stamped_batches": len(facts.batch_horizon),
        "cold_scan_ms_per_mb": round(1000 * cold / mb, 3),
        "cold_scan_mb_per_s": round(mb / cold, 1),
        "warm_report_ms_100_groups": round(1000 * warm, 3),
        "page_cache_read_mb_per_s": round(mb / read, 1),
        "cold_scan_vs_read": round(cold / read, 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
