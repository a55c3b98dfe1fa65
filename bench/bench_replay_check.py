"""The compaction replay check benchmark (issue 29), printing JSON.

Two logs of plain 100-byte-ish records (keys drawn from a fixed key space, one record in 50 a
tombstone), replayed by ``latest_values`` (the state a compacted topic promises):

* 10,000 records in 100-record batches: the generator alone (variants realized per second: the
  source written once with a segment at every cut point, then per variant a copy, the real
  cleaner's passes on a manual clock and the view read back) and the whole check (realize, replay,
  compare) on ``--variants`` sampled plans;
* 1,000,000 records in 1,000-record batches: the check with 100 sampled variants, end to end
  (decoding the source, writing it, cleaning, reading and replaying every variant), against the
  issue's bound of one minute. Building the source records is timed apart: that is the test's work.

``--small``/``--large`` set the record counts; KOMPAKT_BENCH_DIR the scratch directory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kompakt.testing.compaction_log import LogBuilder, LogRecord, SourceLog
from kompakt.testing.compactions import CompactionSpace
from kompakt.testing.replay_check import check_compaction_safe, latest_values

TOMBSTONE_EVERY = 50


def build_log(records: int, per_batch: int, keys: int, seed: int = 1) -> SourceLog:
    """``records`` records in batches of ``per_batch``, keys uniform over ``keys``."""
    rng = random.Random(seed)
    builder = LogBuilder()
    batch: list[tuple[bytes, bytes | None]] = []
    for i in range(records):
        key = b"key-%08d" % rng.randrange(keys)
        value = None if i % TOMBSTONE_EVERY == TOMBSTONE_EVERY - 1 else b"value-%010d" % i
        batch.append((key, value))
        if len(batch) == per_batch:
            builder.append(*batch)
            batch = []
    if batch:
        builder.append(*batch)
    return builder.build(topic="bench")


def generator_rate(source: SourceLog, variants: int, work_dir: Path | None) -> dict[str, Any]:
    # Without a work directory the generator picks its own (/dev/shm when there is room), as the
    # check does.
    with CompactionSpace(source, work_dir=work_dir) as space:
        plans = space.sample(variants, seed=0)
        started, cpu = time.perf_counter(), time.process_time()
        made = sum(1 for _ in space.variants(plans))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        return {
            "cut_points": len(space.cut_points),
            "normal_form_plans": len(space.normal_form()),
            "variants": made,
            "seconds": round(elapsed, 3),
            "cpu_seconds": round(cpu, 3),
            "variants_per_s": round(made / elapsed, 1),
        }


def check(source: SourceLog, variants: int) -> dict[str, Any]:
    replaying = [0.0]

    def replay(records: list[LogRecord]) -> dict[bytes | None, bytes]:
        started = time.process_time()
        try:
            return latest_values(records)
        finally:
            replaying[0] += time.process_time() - started

    started, cpu = time.perf_counter(), time.process_time()
    report = check_compaction_safe(source, replay, max_variants=variants, seed=0)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if report.failure is not None:
        raise SystemExit(f"latest_values must survive every compaction:\n{report.describe()}")
    return {
        "mode": report.mode,
        "plans": report.plans,
        "checked": report.checked,
        "seconds": round(elapsed, 3),
        # This process's CPU time: on a machine shared with other work the wall clock counts
        # the time others ran too.
        "cpu_seconds": round(cpu, 3),
        # The application's own share: latest_values over each variant's records (and the
        # whole log's); the rest is the check (decoding, writing, cleaning, reading back).
        "replay_cpu_seconds": round(replaying[0], 3),
        "variants_per_s": round(report.checked / elapsed, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--variants", type=int, default=200)
    args, _ = parser.parse_known_args()
    scratch = os.environ.get("KOMPAKT_BENCH_DIR")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-replay-", dir=scratch) as tmp:
        small = build_log(args.small, 100, keys=1_000)
        results["small"] = {
            "records": args.small,
            "batches": len(small.batches),
            "generator": generator_rate(small, args.variants, Path(tmp) / "gen" if scratch else None),
            "check": check(small, args.variants),
        }
        started = time.perf_counter()
        large = build_log(args.large, 1_000, keys=100_000)
        build_s = time.perf_counter() - started
        large_check = check(large, 100)
        results["large"] = {
            "records": args.large,
            "batches": len(large.batches),
            "build_source_s": round(build_s, 3),
            "check_100_variants": large_check,
            "under_a_minute": large_check["seconds"] < 60,
            "under_a_minute_cpu": large_check["cpu_seconds"] < 60,
        }
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
