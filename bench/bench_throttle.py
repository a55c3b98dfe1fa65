"""``log.cleaner.io.max.bytes.per.second`` on a short clean: a benchmark of issue 17's claim.

The compaction guide sets ``log.cleaner.io.max.bytes.per.second=15728640`` (15 MiB/s). Kafka's
``Throttler.maybeThrottle`` measures a period from the end of the previous one and checks only
after 300 ms, so a clean after an idle spell ran at 514 MB/s. This writes a 100 MiB compacted log
(the cleaner benchmark's workload: 100-byte values, 500-record batches, 16 MiB segments), leaves
the throttler idle while the log is written (as a broker that cleaned nothing for a while), then
cleans every non-active segment once through the cleaner's own I/O with a real clock and real
sleeps, and once without a throttle for the natural rate.

Prints one JSON object: the log's bytes, the throttled and unthrottled wall seconds, the bytes
the cleaner reported to the throttler (map pass reads, copy pass reads and writes), and the
rates. At 15 MiB/s a 100 MiB clean must take at least 100 / 15 = 6.7 s. Measured on the shared
2-core machine: 14.0 s for 100 MiB (212 MiB of cleaner I/O at 15.2 MiB/s; 0.3 s unthrottled); with
Kafka's throttle (the tree before issue 17) 6.7 s at 31.7 MiB/s of I/O, and a 10 MiB clean
(``--records 84000``) went through at 534 MiB/s in 0.05 s, where it now takes 1.7 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cleaner import write_log  # noqa: E402
from kompakt.cleaner.cleaner import Cleaner  # noqa: E402
from kompakt.cleaner.offset_map import HashedOffsetMap  # noqa: E402
from kompakt.cleaner.throttler import Throttler  # noqa: E402
from kompakt.cleaner.warmup import warm_up  # noqa: E402
from kompakt.clock import SystemClock  # noqa: E402

MIB = 1024 * 1024
GUIDE_RATE = 15_728_640


def clean_once(root: Path, records: int, rate: float | None) -> dict[str, float]:
    """Write the log, then clean it; the throttler exists (idle) from before the write."""
    clock = SystemClock()
    throttler = Throttler(rate, clock, time.sleep) if rate is not None else None
    log = write_log(root, records, 100_000, 16 * MIB)
    try:
        log_bytes = sum(s.size for s in log.segments.values()[:-1])
        cleaner = Cleaner(0, HashedOffsetMap(128 * MIB, 0.9), clock, throttler=throttler)
        started = time.perf_counter()
        cleaner.clean(log, 0, log.active_segment.base_offset)
        seconds = time.perf_counter() - started
    finally:
        log.close()
        shutil.rmtree(root)
    result = {"log_mib": round(log_bytes / MIB, 1), "seconds": round(seconds, 2)}
    result["log_mib_per_s"] = round(log_bytes / MIB / seconds, 1)
    if throttler is not None:
        result["throttled_io_mib"] = round(throttler.total_bytes / MIB, 1)
        result["throttled_io_mib_per_s"] = round(throttler.total_bytes / MIB / seconds, 2)
        result["slept_s"] = round(throttler.total_sleep_ms / 1000, 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=840_000, help="Records (125 bytes each: 100 MiB).")
    parser.add_argument("--rate", type=float, default=GUIDE_RATE, help="Bytes per second.")
    args = parser.parse_args()
    warm_up()
    with tempfile.TemporaryDirectory(prefix="kompakt-throttle-") as tmp:
        unthrottled = clean_once(Path(tmp) / "free", args.records, None)
        throttled = clean_once(Path(tmp) / "throttled", args.records, args.rate)
    out = {
        "rate_mib_per_s": round(args.rate / MIB, 2),
        "unthrottled": unthrottled,
        "throttled": throttled,
        "floor_s": round(throttled["log_mib"] * MIB / args.rate, 2),
    }
    print(json.dumps({"throttle": out}))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
