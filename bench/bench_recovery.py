"""The compaction guides' headline claim, measured on kompakt's own data (issue 8, item 6).

The guides say compaction cuts a changelog's recovery (replaying it into a local state store)
from 10.6 minutes to 6.2 seconds. Here: a changelog topic of about 1 GB (1 KiB values, updates
spread over a key space so that about 1 % of the records are live after compaction) is replayed
from offset 0 by a confluent-kafka consumer that rebuilds the latest state in a dict — once from
an uncompacted copy (``cleanup.policy=delete``) and once from a compacted copy after
compact-now (the broker runs with ``log.cleaner.enable=false``, so that is the only clean and
its time is one full compaction). Prints one JSON object with both times, the ratio, the MB/s and
the share of each replay spent starting the client.

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
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

VALUE_BYTES = 1024
LIVE_FRACTION = 0.01
READY = re.compile(r"listening on [^:]+:(?P<port>\d+).*admin (?P<admin>http://\S+)")


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], int, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kompakt.cli.main",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            # Only the explicit compact-now cleans, so its time is one full compaction of the topic
            # (with the cleaner on it would clean part of the topic while it is being produced).
            "--override",
            "log.cleaner.enable=false",
        ],
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


def replay(bootstrap: str, topic: str) -> Replay:
    """Rebuild ``key -> value`` from offset 0 to the end of the partition.

    As Kafka Streams restores a store: look up the end offset first, then read until the
    position reaches it (waiting for an end-of-partition event instead would add the broker's
    ``fetch.wait.max.ms`` long poll, 500 ms, to every replay). The clock starts before the
    consumer is created, as a restarting application's would; the client's start-up (create,
    connect, metadata, end-offset lookup) is reported apart, because on a small compacted
    changelog it is most of the total.
    """
    start = time.perf_counter()
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"replay-{time.monotonic_ns()}",
         "enable.auto.commit": False, "enable.partition.eof": True, "fetch.max.bytes": 64 << 20,
         "max.partition.fetch.bytes": 16 << 20}
    )  # fmt: skip
    state: dict[bytes, bytes | None] = {}
    records = size = 0
    _, end_offset = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=60)
    startup_s = time.perf_counter() - start
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    done = end_offset == 0
    while not done:
        # librdkafka's consume(n, timeout) waits out the whole timeout unless n messages are
        # ready, so a long timeout would add itself to the last batch: a 10 MB compacted replay
        # takes about 0.1 s in all. Java's poll() returns as soon as records arrive; a short
        # timeout behaves the same.
        msgs = consumer.consume(10_000, 0.005)
        for msg in msgs:
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done = True
                    continue
                raise RuntimeError(str(error))
            key, value, offset = msg.key(), msg.value(), msg.offset()
            assert key is not None and offset is not None
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
            records += 1
            size += len(key) + (len(value) if value else 0)
            done = done or offset + 1 >= end_offset
    elapsed = time.perf_counter() - start
    consumer.close()
    return Replay(elapsed, startup_s, records, size, len(state))


@dataclass(frozen=True)
class Replay:
    seconds: float
    startup_seconds: float
    records: int
    bytes: int
    keys: int

    def report(self) -> dict[str, object]:
        data_s = max(self.seconds - self.startup_seconds, 1e-9)
        return {
            "seconds": round(self.seconds, 3),
            "client_startup_seconds": round(self.startup_seconds, 3),
            "data_seconds": round(self.seconds - self.startup_seconds, 3),
            "records": self.records,
            "mb": round(self.bytes / 1048576, 1),
            "mb_per_s": round(self.bytes / 1048576 / self.seconds, 1),
            "records_per_s": round(self.records / self.seconds),
            "data_mb_per_s": round(self.bytes / 1048576 / data_s, 1),
        }


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
                    NewTopic("changelog", 1, 1, config={**common, "cleanup.policy": "compact"}),
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
            del admin  # librdkafka handles log reconnect errors once the broker stops
            raw = replay(bootstrap, "changelog-raw")
            compacted = replay(bootstrap, "changelog")
            assert raw.keys == compacted.keys == keys, (raw.keys, compacted.keys, keys)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    part = compaction["partitions"][0]
    data_speedup = (raw.seconds - raw.startup_seconds) / max(
        compacted.seconds - compacted.startup_seconds, 1e-3
    )
    print(
        json.dumps(
            {
                "records_produced": records,
                "unique_keys": keys,
                "value_bytes": VALUE_BYTES,
                "produce_mb_per_s": round(records * VALUE_BYTES / 1048576 / produce_s, 1),
                "compaction_seconds": round(part["seconds"], 2),
                "compaction_mb_per_s": round(part["bytes_read"] / 1048576 / part["seconds"], 1),
                "replay_uncompacted": raw.report(),
                "replay_compacted": compacted.report(),
                "speedup": round(raw.seconds / compacted.seconds, 1),
                "speedup_excluding_client_startup": round(data_speedup, 1),
                "guide_claim": {"uncompacted_s": 636, "compacted_s": 6.2, "speedup": round(636 / 6.2, 1)},
            }
        )
    )


if __name__ == "__main__":
    main()
