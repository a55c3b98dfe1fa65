"""Transactional produce throughput next to non-transactional produce, same broker, same run.

confluent-kafka, 1 KiB values, one partition; the transactional producer commits a transaction
every 1,000 records (``begin_transaction`` / 1,000 × ``produce`` / ``commit_transaction``); the
baseline is the same producer configuration without a transactional id (idempotent, acks=all,
which a transactional producer implies). Rounds alternate between the two and the medians are
reported with their ratio (goal: >= 0.8, issue 15).

``--bootstrap HOST:PORT`` measures an already running broker instead (Apache Kafka, for the
comparison in the issue's closing note).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench_broker import kompakt

VALUE_BYTES = 1024
TXN_RECORDS = 1000
RECORDS = 100_000
ROUNDS = 3
MIB = 1024 * 1024


def _config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 2_097_151,
        "queue.buffering.max.messages": 2_000_000,
    }


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _send(producer: Producer, topic: str, value: bytes, count: int) -> None:
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)


def plain(bootstrap: str, topic: str, value: bytes) -> float:
    producer = Producer(_config(bootstrap))
    started = time.perf_counter()
    _send(producer, topic, value, RECORDS)
    if producer.flush(120):
        raise RuntimeError("plain produce: records left undelivered")
    return time.perf_counter() - started


def transactional(bootstrap: str, topic: str, value: bytes) -> float:
    producer = Producer({**_config(bootstrap), "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(60)
    started = time.perf_counter()
    for _ in range(RECORDS // TXN_RECORDS):
        producer.begin_transaction()
        _send(producer, topic, value, TXN_RECORDS)
        producer.commit_transaction(60)
    return time.perf_counter() - started


def measure(bootstrap: str) -> dict[str, Any]:
    value = os.urandom(VALUE_BYTES)
    results: dict[str, list[float]] = {"plain": [], "transactional": []}
    # One warm-up transaction creates __transaction_state and loads the code paths.
    warm = f"bench-warm-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, warm)
    producer = Producer({**_config(bootstrap), "transactional.id": f"warm-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    _send(producer, warm, value, 10)
    producer.commit_transaction(60)
    for _ in range(ROUNDS):
        for name, run in (("plain", plain), ("transactional", transactional)):
            topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
            _create(bootstrap, topic)
            results[name].append(run(bootstrap, topic, value))
    out: dict[str, Any] = {
        "records": RECORDS,
        "value_bytes": VALUE_BYTES,
        "records_per_transaction": TXN_RECORDS,
    }
    for name, seconds in results.items():
        median = statistics.median(seconds)
        out[name] = {
            "seconds": round(median, 3),
            "records_per_s": round(RECORDS / median),
            "mb_per_s": round(RECORDS * VALUE_BYTES / MIB / median, 1),
        }
    out["ratio"] = round(out["transactional"]["records_per_s"] / out["plain"]["records_per_s"], 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default=None)
    args, _ = parser.parse_known_args()
    if args.bootstrap:
        result = {"external": measure(args.bootstrap)}
    else:
        with tempfile.TemporaryDirectory() as tmp, kompakt(Path(tmp) / "data") as broker:
            result = {"kompakt": measure(broker.bootstrap)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
