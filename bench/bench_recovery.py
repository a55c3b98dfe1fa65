"""The compaction guides' headline claim, measured on kompakt's own data (issue 8, item 6).

The guides say compaction cuts a changelog's recovery (replaying it into a local state store)
from 10.6 minutes to 6.2 seconds. Here: a changelog topic of about 1 GB (1 KiB values, updates
spread over a key space so that about 1 % of the records are live after compaction) is replayed
from offset 0 by a confluent-kafka consumer that rebuilds the latest state in a dict — once from
an uncompacted copy (``cleanup.policy=delete``) and once from a compacted copy after
compact-now. Prints one JSON object with both times, the ratio and the MB/s.

Scale with ``KOMPAKT_BENCH_RECOVERY_MB`` (default 1024).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE_BYTES = 1024
LIVE_FRACTION = 0.01
READY = re.compile(r"listening on [^:]+:(?P<port>\d+).*admin (?P<admin>http://\S+)")


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kompakt.cli.main", "serve", "--data-dir", str(data_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1)
        if ready:
            match = READY.search(proc.stdout.readline())
            if match:
                return proc, int(match["port"]), match["admin"].rstrip(",")
    proc.kill()
    raise RuntimeError("broker did not start")


def produce(bootstrap: str, topic: str, records: int, keys: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
         "queue.buffering.max.kbytes": 1 << 20}
    )  # fmt: skip
    value = b"x" * VALUE_BYTES
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"key-%08d" % (i % keys), value=value)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    return time.perf_counter() - start


def replay(bootstrap: str, topic: str) -> tuple[float, int, int, int]:
    """Rebuild ``key -> value`` from offset 0 to the end; return (seconds, records, bytes, keys)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"replay-{time.monotonic_ns()}",
         "enable.auto.commit": False, "enable.partition.eof": True, "fetch.max.bytes": 64 << 20,
         "max.partition.fetch.bytes": 16 << 20}
    )  # fmt: skip
    state: dict[bytes, bytes | None] = {}
    records = size = 0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    while True:
        msgs = consumer.consume(10_000, 0.1)
        done = False
        for msg in msgs:
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done = True
                    continue
                raise RuntimeError(str(error))
            key, value = msg.key(), msg.value()
            assert key is not None
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
            records += 1
            size += len(key) + (len(value) if value else 0)
        if done:
            break
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed, records, size, len(state)


def main() -> None:
    total_mb = int(os.environ.get("KOMPAKT_BENCH_RECOVERY_MB", "1024"))
    records = total_mb * 1024 * 1024 // VALUE_BYTES
    keys = max(1, int(records * LIVE_FRACTION))
    with tempfile.TemporaryDirectory(dir=os.environ.get("KOMPAKT_BENCH_DIR")) as tmp:
        proc, port, admin_url = start_broker(Path(tmp) / "data")
        bootstrap = f"127.0.0.1:{port}"
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            common = {"segment.bytes": str(128 << 20), "max.message.bytes": str(2 << 20)}
            futures = admin.create_topics(
                [
                    NewTopic("changelog-raw", 1, 1, config={**common, "cleanup.policy": "delete"}),
                    NewTopic("changelog", 1, 1, config={**common, "cleanup.policy": "compact",
                                                        "min.cleanable.dirty.ratio": "0.99"}),
                ]
            )  # fmt: skip
            for future in futures.values():
                future.result(30)
            produce_s = produce(bootstrap, "changelog-raw", records, keys)
            produce(bootstrap, "changelog", records, keys)
            urllib.request.urlopen(  # noqa: S310 - loopback admin endpoint we just started
                urllib.request.Request(f"{admin_url}/v1/roll?topic=changelog", method="POST"), timeout=60
            ).read()
            with urllib.request.urlopen(  # noqa: S310
                urllib.request.Request(f"{admin_url}/v1/compact?topic=changelog&wait=true", method="POST"),
                timeout=600,
            ) as response:
                compaction = json.loads(response.read())
            raw_s, raw_records, raw_bytes, raw_keys = replay(bootstrap, "changelog-raw")
            compact_s, compact_records, compact_bytes, compact_keys = replay(bootstrap, "changelog")
            assert raw_keys == compact_keys == keys, (raw_keys, compact_keys, keys)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    part = compaction["partitions"][0]
    print(
        json.dumps(
            {
                "records_produced": records,
                "unique_keys": keys,
                "value_bytes": VALUE_BYTES,
                "produce_mb_per_s": round(records * VALUE_BYTES / 1048576 / produce_s, 1),
                "compaction_seconds": round(part["seconds"], 2),
                "replay_uncompacted": {
                    "seconds": round(raw_s, 2),
                    "records": raw_records,
                    "mb_per_s": round(raw_bytes / 1048576 / raw_s, 1),
                },
                "replay_compacted": {
                    "seconds": round(compact_s, 3),
                    "records": compact_records,
                    "mb_per_s": round(compact_bytes / 1048576 / compact_s, 1),
                },
                "speedup": round(raw_s / compact_s, 1),
                "guide_claim": {"uncompacted_s": 636, "compacted_s": 6.2, "speedup": round(636 / 6.2, 1)},
            }
        )
    )


if __name__ == "__main__":
    main()
