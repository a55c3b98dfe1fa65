"""The table benchmark (issue 18): one partition of N distinct keys (default 10 M), printing JSON.

The log: uncompressed 500-record batches of 11-byte keys and 100-byte values (the cleaner
benchmark's anchor workload), each key once, in 256 MiB segments, appended to a topic of an
in-process broker (so the HTTP endpoint serves the same log). Measured in one run, each figure
next to its baseline:

* page-cache read: the segment files read twice with ``preadv`` into one buffer, the second
  time timed (what "native speed" is compared with);
* rebuild: the live index built again from the log (after a clean or a restart), median of
  three, as records/s and as a ratio to the read; the offline build (``--log-dir``) too;
* memory: the index's bytes and bytes per key;
* lookups: p50/p99 of random existing keys in-process (``LiveTable.get``: index probe, read the
  batch, check the key) and over HTTP (one keep-alive connection to the admin endpoint);
* catch-up: 100 k records appended, then one lookup (the index reads only the new records);
* export: the whole table to Parquet offline (key+value MB/s, rows/s, file size).

``--keys`` sets N; KOMPAKT_BENCH_DIR the scratch directory.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from kompakt.table.export import export_tables  # noqa: E402
from kompakt.table.offline import open_tables  # noqa: E402
from kompakt.table.partition import LiveTable  # noqa: E402
from kompakt.testing import InProcessBroker  # noqa: E402
from workload import KEY_WIDTH, VALUE_SIZE, varint  # noqa: E402

PER_BATCH = 500
TOPIC = "table-bench"


def unique_key_log(n_keys: int, seed: int) -> tuple[np.ndarray, int, int]:
    """Batches holding each key ``key-%07d`` (or wider) exactly once, in random order."""
    width = max(KEY_WIDTH, len(f"key-{n_keys - 1:07d}"))
    template = bytearray()
    key_pos = []
    for od in range(PER_BATCH):
        tail = varint(width) + b"k" * width + varint(VALUE_SIZE) + b"v" * VALUE_SIZE + varint(0)
        body = b"\x00" + varint(0) + varint(od) + tail
        rec = varint(len(body)) + body
        key_pos.append(len(template) + len(rec) - len(tail) + len(varint(width)))
        template += rec
    batch_size = 61 + len(template)
    n_batches = -(-n_keys // PER_BATCH)
    buf = np.empty(n_batches * batch_size, dtype=np.uint8)
    view = buf.reshape(n_batches, batch_size)
    view[:, 61:] = np.frombuffer(bytes(template), dtype=np.uint8)
    order = np.random.default_rng(seed).permutation(n_batches * PER_BATCH) % n_keys
    digits = np.array([f"key-{i:0{width - 4}d}".encode() for i in range(n_keys)], dtype=f"S{width}")
    cols = np.asarray(key_pos)[:, None] + np.arange(width)[None, :]
    keys = digits.view(np.uint8).reshape(n_keys, width)
    view[:, 61 + cols] = keys[order.reshape(n_batches, PER_BATCH)]
    for b in range(n_batches):
        ts = 1_700_000_000_000 + b
        tail = struct.pack(">hiqqqhii", 0, PER_BATCH - 1, ts, ts, -1, -1, -1, PER_BATCH)
        view[b, 21:61] = np.frombuffer(tail, dtype=np.uint8)
        crc = crc32c.crc32c(view[b, 21:].data)
        view[b, :21] = np.frombuffer(
            struct.pack(">qiibI", b * PER_BATCH, batch_size - 12, 0, 2, crc), np.uint8
        )
    return buf, batch_size, width


def page_cache_read_s(paths: list[Path]) -> tuple[float, int]:
    buffer = bytearray(16 * 1024 * 1024)
    view = memoryview(buffer)
    best = None
    total = 0
    for _ in range(2):
        total = 0
        started = time.perf_counter()
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            pos = 0
            while (got := os.preadv(fd, [view], pos)) > 0:
                pos += got
            total += pos
            os.close(fd)
        best = time.perf_counter() - started
    assert best is not None
    return best, total


def percentiles(samples: list[float]) -> dict[str, float]:
    samples.sort()
    return {
        "p50_us": round(samples[len(samples) // 2] * 1e6, 1),
        "p99_us": round(samples[int(len(samples) * 0.99)] * 1e6, 1),
        "max_us": round(samples[-1] * 1e6, 1),
    }


def run(n_keys: int, lookups: int) -> dict[str, Any]:
    out: dict[str, Any] = {"keys": n_keys, "value_bytes": VALUE_SIZE, "records_per_batch": PER_BATCH}
    with tempfile.TemporaryDirectory(dir=os.environ.get("KOMPAKT_BENCH_DIR")) as tmp:
        data_dir = Path(tmp) / "data"
        with InProcessBroker(data_dir, overrides={"log.cleaner.enable": "false"}) as broker:
            broker.create_topic(TOPIC, 1, cleanup_policy="compact", segment_bytes=256 * 1024 * 1024)
            log = broker.admin.broker.logs.logs()[(TOPIC, 0)]
            buf, batch_size, width = unique_key_log(n_keys, 7)
            step = 64 * batch_size
            for pos in range(0, len(buf), step):
                log.append_with_offsets(buf[pos : pos + step].tobytes())
            records = log.log_end_offset
            del buf
            log.flush()
            paths = [s.log_path for s in log.segments.values()]
            read_s, nbytes = page_cache_read_s(paths)
            out["log_bytes"] = nbytes
            out["records"] = records
            out["page_cache_read"] = {
                "seconds": round(read_s, 3),
                "gb_per_s": round(nbytes / read_s / 1e9, 2),
                "records_per_s": round(records / read_s),
            }
            table = broker.admin.tables.table(log)
            assert isinstance(table, LiveTable)
            table.counts()  # first build (JIT load, page cache warm)
            rebuilds = []
            for _ in range(3):
                log.history_version += 1  # what a clean does: the next count rebuilds
                started = time.perf_counter()
                counts = table.counts()
                rebuilds.append(time.perf_counter() - started)
            rebuild_s = statistics.median(rebuilds)
            out["rebuild_live"] = {
                "seconds": round(rebuild_s, 3),
                "records_per_s": round(records / rebuild_s),
                "time_vs_page_cache_read": round(rebuild_s / read_s, 2),
                "all_seconds": [round(x, 3) for x in rebuilds],
            }
            assert counts.live_keys == n_keys, counts
            out["index"] = {
                "bytes": counts.index_bytes,
                "bytes_per_key": round(counts.bytes_per_key or 0, 2),
                "goal_bytes_per_key": 40,
            }
            started = time.perf_counter()
            (offline,) = open_tables(data_dir, TOPIC)
            offline_s = time.perf_counter() - started
            out["rebuild_offline"] = {
                "seconds": round(offline_s, 3),
                "records_per_s": round(records / offline_s),
                "time_vs_page_cache_read": round(offline_s / read_s, 2),
            }
            rng = random.Random(1)
            keys = [f"key-{rng.randrange(n_keys):0{width - 4}d}".encode() for _ in range(lookups)]
            samples = []
            for key in keys:
                started = time.perf_counter()
                found = table.get(key)
                samples.append(time.perf_counter() - started)
                assert found is not None
            out["lookup_in_process"] = {**percentiles(samples), "lookups": lookups, "goal_p99_us": 1000}
            conn = http.client.HTTPConnection(broker.admin_url.removeprefix("http://"), timeout=30)
            samples = []
            for key in keys[: lookups // 2]:
                started = time.perf_counter()
                conn.request("GET", f"/v1/topics/{TOPIC}/keys/{key.decode()}")
                response = conn.getresponse()
                body = response.read()
                samples.append(time.perf_counter() - started)
                assert response.status == 200, body
            conn.close()
            out["lookup_http"] = {**percentiles(samples), "lookups": lookups // 2}
            extra, _, _ = unique_key_log(100_000, 9)
            base = log.log_end_offset
            rebased = bytearray(extra.tobytes())
            for b in range(len(rebased) // batch_size):
                struct.pack_into(">q", rebased, b * batch_size, base + b * PER_BATCH)
            log.append_with_offsets(bytes(rebased))
            started = time.perf_counter()
            table.get(keys[0])
            catch_up_s = time.perf_counter() - started
            out["catch_up_100k_records"] = {
                "seconds": round(catch_up_s, 4),
                "records_per_s": round(100_000 / catch_up_s),
            }
        parquet = Path(tmp) / "table.parquet"
        stats = export_tables([offline], parquet, fmt="parquet")
        out["export_parquet"] = {
            **stats.to_json(),
            "rows_per_s": round(stats.rows / stats.seconds),
            "file_bytes": parquet.stat().st_size,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--lookups", type=int, default=20_000)
    args = parser.parse_args()
    print(json.dumps(run(args.keys, args.lookups)))


if __name__ == "__main__":
    main()
