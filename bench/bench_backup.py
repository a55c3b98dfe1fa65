"""Backup and restore throughput against a local ``kompakt serve``, with zstd and with none.

Prints one JSON object on its last stdout line:

* ``produce``: filling the source topic (1 KiB values, 4 partitions), as a baseline of what the
  broker and librdkafka do on this machine;
* per codec (``zstd``, ``none``): ``backup`` (snapshot run into a directory: consume, build
  RecordBatch v2 at the original offsets, compress, sha256, write), ``restore`` (protocol restore
  into a new topic: read, verify, decode, produce) and ``offline_restore`` (exact restore into a
  new data directory), each in MB/s of key+value bytes, plus the stored size.

Environment: ``KOMPAKT_BENCH_BACKUP_MB`` (topic size, default 128; the issue's target is 1024),
``KOMPAKT_BENCH_DIR`` (where the data goes, default a temporary directory).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kompakt.backup.backup import run_backup
from kompakt.backup.config import parse_backup_config, parse_restore_config
from kompakt.backup.kafka import KAFKA_ADMIN
from kompakt.backup.offline import run_offline_restore
from kompakt.backup.restore import run_restore

READY = re.compile(r"^kompakt ready: listening on (?P<host>[^:]+):(?P<port>\d+),")
VALUE = 1024
PARTITIONS = 4


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kompakt.cli.main", "serve", "--data-dir", str(data_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            match = READY.match(proc.stdout.readline())
            if match:
                return proc, f"127.0.0.1:{match['port']}"
        if proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("the broker did not start")


def fill(bootstrap: str, topic: str, megabytes: int) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([KAFKA_ADMIN.NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000, "acks": 1})
    count = megabytes * 1024 * 1024 // VALUE
    # Distinct hex values (compressible like text, about 2:1), none repeated within a batch.
    values = [os.urandom(VALUE // 2).hex().encode() for _ in range(4096)]
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                key = f"key-{i % 100_000}".encode()
                producer.produce(topic, values[i % 4096], key, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    seconds = time.perf_counter() - started
    return {
        "records": count,
        "mb": round(count * VALUE / 1e6, 1),
        "mb_per_s": round(count * VALUE / 1e6 / seconds, 1),
    }


def main() -> int:
    megabytes = int(os.environ.get("KOMPAKT_BENCH_BACKUP_MB", "128"))
    base = Path(os.environ.get("KOMPAKT_BENCH_DIR") or tempfile.mkdtemp(prefix="kompakt-bench-backup-"))
    base.mkdir(parents=True, exist_ok=True)
    proc, bootstrap = start_broker(base / "data")
    result: dict[str, Any] = {"topic_mb": megabytes, "partitions": PARTITIONS, "value_bytes": VALUE}
    try:
        result["produce"] = fill(bootstrap, "bench-src", megabytes)
        for codec in ("zstd", "none"):
            store = base / f"store-{codec}"
            backup = run_backup(
                parse_backup_config(
                    {
                        "backup_id": codec,
                        "source": {"bootstrap_servers": bootstrap, "topics": {"include": ["bench-src"]}},
                        "storage": {"path": str(store)},
                        "backup": {"compression": codec, "consumer_group_snapshot": False},
                    }
                )
            )
            value_bytes = sum(p["records"] for p in backup.partitions) * (VALUE + 9)
            restore = run_restore(
                parse_restore_config(
                    {
                        "backup_id": codec,
                        "target": {"bootstrap_servers": bootstrap},
                        "storage": {"path": str(store)},
                        "restore": {"topic_mapping": {"bench-src": f"bench-dst-{codec}"}},
                    }
                )
            )
            offline = run_offline_restore(
                parse_restore_config(
                    {
                        "backup_id": codec,
                        "target": {"data_dir": str(base / f"offline-{codec}")},
                        "storage": {"path": str(store)},
                    }
                )
            )
            result[codec] = {
                "records": backup.run.records,
                "stored_mb": round(backup.run.bytes / 1e6, 1),
                "backup_mb_per_s": round(value_bytes / 1e6 / backup.seconds, 1),
                "restore_mb_per_s": round(restore.bytes / 1e6 / restore.seconds, 1),
                "offline_restore_mb_per_s": round(value_bytes / 1e6 / offline.seconds, 1),
                "backup_s": round(backup.seconds, 2),
                "restore_s": round(restore.seconds, 2),
                "offline_restore_s": round(offline.seconds, 2),
            }
            shutil.rmtree(base / f"offline-{codec}", ignore_errors=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        if not os.environ.get("KOMPAKT_BENCH_DIR"):
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
