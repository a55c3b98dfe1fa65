"""Backup and restore throughput against a local ``kompakt serve``, each beside its baseline.

Prints one JSON object on its last stdout line. Every rate is MB/s of key and value bytes
(``records * (1024 + 9)``), so the baselines and the runs they are compared with count the same
bytes; all of it in one run, against one broker, because this machine is shared and noisy.

Baselines:

* ``produce``: filling the source topic (1 KiB values, 4 partitions, librdkafka, ``acks=1``);
* ``produce_acks_all``: the same records again into another topic with the restore's default
  settings (idempotent, ``acks=all``): what a restore is compared with (``goal``: 0.8 of it),
  produced again right before or right after each restore (the order alternates) into a new
  topic, and each restore compared with its own;
* ``consume_rdkafka``: a confluent-kafka consumer reading the whole topic (``read_committed``,
  the clock started at the first record, no Python per message beyond ``consume``);
* ``fetch_loop``: kompakt's own Fetch (the backup's data path) reading the whole topic and
  throwing the bytes away: the most a backup can do over this protocol and broker (``goal``:
  the backup at 0.8 of it, and of the consumer). It runs again just before each backup, and each
  backup is compared with that run (``fetch_loop_mb_per_s`` beside it): the load of this shared
  machine moves the rates by 2x within a minute, so a baseline taken a minute earlier says little;
* ``disk_write``: the topic's bytes written to the backup's disk as four files and fsynced (what
  an uncompressed backup must at least do besides reading: a bound when the disk is slower than
  the fetch, as this shared virtual disk often is).

Per codec (``zstd``, ``none``): ``backup`` (snapshot run into a directory:
``max_concurrent_partitions`` threads fetch, check CRCs, scan, compress per segment while it pays,
sha256, write), ``KOMPAKT_BENCH_BACKUP_ROUNDS`` times (default 3), each round a fetch loop then the
backup for each codec, interleaved; the figures are the medians, each round listed under
``rounds`` with the load average at its start, and the CPU each used per MB, client side and
broker (``*_cpu_ms_per_mb``: what bounds a rate on a shared 2-core machine); ``restore``
(through the protocol into a new topic: read, verify, produce the stored batches) of each round's
backup, and ``offline_restore`` (exact restore into a new data directory) of the last one, plus
the stored size, per-partition rates and the ratios to the baselines. Each round also lists the
CPU per MB of its restores and of its produce baseline: on the shared VM, writes into page cache
beyond the first few hundred MB can fall to ~60 MB/s at ~15 ms of kernel CPU per MB, for every
writer (a plain file write shows it), and a round that met that shows it as a broker CPU per MB
ten times the others'.

Module imports are a tool's start, not its rate: ``kompakt.backup.backup`` is imported at the top,
and the native scans (``kompakt.records.scan``: numba, 0.3-1.5 s on this machine) before the first
backup, timed apart as ``import_scan_s`` (a ``kompakt backup`` command pays it once, overlapped
with its first requests to the cluster).

Environment: ``KOMPAKT_BENCH_BACKUP_MB`` (topic size, default 256), ``KOMPAKT_BENCH_DIR`` (where
the data goes, default a temporary directory), ``KOMPAKT_BENCH_BACKUP_ROUNDS`` (default 3).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import re
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

# As the ``kompakt`` command (its package sets OPENBLAS_NUM_THREADS=1 before numpy loads): otherwise
# OpenBLAS's idle threads spin beside the in-process restore on a 2-core machine.
import kompakt.cli  # noqa: F401
from bench_broker import delete_topic_files
from kompakt.backup import wire
from kompakt.backup.backup import run_backup
from kompakt.backup.config import parse_backup_config, parse_restore_config
from kompakt.backup.kafka import KAFKA_ADMIN
from kompakt.backup.offline import run_offline_restore
from kompakt.backup.restore import run_restore

READY = re.compile(r"^kompakt ready: listening on (?P<host>[^:]+):(?P<port>\d+),")
VALUE = 1024
PARTITIONS = 4
RECORD_BYTES = VALUE + 9  # the value and a key of "key-NNNNN"
GOAL = 0.8
ROUNDS = int(os.environ.get("KOMPAKT_BENCH_BACKUP_ROUNDS", "3"))


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "kompakt.cli.main", "serve", "--data-dir", str(data_dir), "--port", "0"),
            # A deleted topic's files go at once (see ``delete_measured``).
            *("--override", "log.segment.delete.delay.ms=0"),
        ],
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


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([KAFKA_ADMIN.NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)


def fill(bootstrap: str, topic: str, count: int, *, acks_all: bool) -> dict[str, Any]:
    """``count`` records of 1 KiB round-robin over the partitions; acks=1, or the restore's
    defaults (idempotent, acks=all)."""
    create(bootstrap, topic)
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000}
    settings.update({"acks": "all", "enable.idempotence": True} if acks_all else {"acks": 1})
    producer = Producer(settings)
    # Distinct hex values (compressible like text, about 2:1), none repeated within a batch.
    values = [os.urandom(VALUE // 2).hex().encode() for _ in range(4096)]
    keys = [f"key-{i:05d}".encode() for i in range(100_000)]
    gc.disable()
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, values[i % 4096], keys[i % 100_000], partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    seconds = time.perf_counter() - started
    gc.enable()
    return rate(count, seconds)


def rate(records: int, seconds: float) -> dict[str, Any]:
    mb = records * RECORD_BYTES / 1e6
    return {
        "records": records,
        "mb": round(mb, 1),
        "seconds": round(seconds, 3),
        "mb_per_s": round(mb / seconds, 1),
    }


def consume_rdkafka(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-backup-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "fetch.queue.backoff.ms": 0,
            "queued.max.messages.kbytes": 512 * 1024,
            "fetch.wait.max.ms": 100,
        }
    )
    got = 0
    gc.disable()
    deadline = time.perf_counter() + 600
    started = 0.0
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        error_of = Message.error
        while got < count:
            # The clock starts at the first record, as in bench_broker.py: the consumer's start
            # (connection, offset lookup) is left out, a stricter baseline than the backup gets.
            batch = consumer.consume(num_messages=1 if got == 0 else 10_000, timeout=1.0)
            if got == 0 and batch:
                started = time.perf_counter()
            if any(map(error_of, batch)):
                raise RuntimeError("consume error")
            got += len(batch)
            if time.perf_counter() > deadline:
                raise RuntimeError("consume did not finish")
        seconds = time.perf_counter() - started
    finally:
        gc.enable()
        consumer.close()
    return rate(got, seconds)


def fetch_loop(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """kompakt's own Fetch over every partition from one connection, bytes thrown away."""
    cluster = wire.Cluster(bootstrap, 10.0, max_response_bytes=128 * 1024 * 1024)
    cluster.refresh([topic])
    address = cluster.leader(topic, 0)
    assert address is not None
    fetcher = wire.open_fetcher(cluster, address)
    positions = {(topic, p): 0 for p in range(PARTITIONS)}
    limits = dict.fromkeys(positions, 16 * 1024 * 1024)
    ends = dict.fromkeys(positions, -1)
    received = 0
    started = time.perf_counter()
    try:
        while any(ends[tp] < 0 or positions[tp] < ends[tp] for tp in positions):
            todo = {tp: o for tp, o in positions.items() if ends[tp] < 0 or o < ends[tp]}
            correlation = wire.send_fetch(
                fetcher, todo, max_wait_ms=100, max_bytes=64 * 1024 * 1024, partition_max_bytes=limits
            )
            for part in wire.receive_fetch(fetcher, correlation, 100):
                tp = (part.topic, part.partition)
                ends[tp] = part.high_watermark
                data = part.records
                received += len(data)
                pos = 0
                while pos + 12 <= len(data):  # batch headers only: where the next fetch starts
                    size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
                    if pos + size > len(data):
                        break
                    last = int.from_bytes(data[pos : pos + 8], "big") + int.from_bytes(
                        data[pos + 23 : pos + 27], "big"
                    )
                    positions[tp] = last + 1
                    pos += size
        seconds = time.perf_counter() - started
    finally:
        fetcher.conn.close()
    return {**rate(count, seconds), "wire_mb": round(received / 1e6, 1)}


def disk_write(where: Path, count: int) -> dict[str, Any]:
    """The topic's bytes (as the fetch returns them, about) written in 1 MiB pieces to one file per
    partition, each fsynced: the disk's share of an uncompressed backup."""
    piece = os.urandom(1024 * 1024)
    per_partition = count * (RECORD_BYTES + 10) // PARTITIONS // len(piece) + 1
    where.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for p in range(PARTITIONS):
        fd = os.open(where / f"p{p}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(per_partition):
                os.write(fd, piece)
            os.fsync(fd)
        finally:
            os.close(fd)
    seconds = time.perf_counter() - started
    shutil.rmtree(where, ignore_errors=True)
    return rate(count, seconds)


def cpu_s(broker: int) -> tuple[float, float]:
    """CPU seconds used so far by this process (every thread) and by the broker's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    with open(f"/proc/{broker}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return own.ru_utime + own.ru_stime, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_mb(before: tuple[float, float], after: tuple[float, float], records: int) -> dict[str, float]:
    """CPU milliseconds per MB of the client side (this process) and of the broker, between two
    :func:`cpu_s` readings: unlike a rate, not moved by what else the machine runs."""
    mb = records * RECORD_BYTES / 1e6
    return {
        "client": round((after[0] - before[0]) * 1000 / mb, 2),
        "broker": round((after[1] - before[1]) * 1000 / mb, 2),
    }


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def ratio(value: float, base: float) -> float:
    return round(value / base, 2) if base else 0.0


def main() -> int:
    megabytes = int(os.environ.get("KOMPAKT_BENCH_BACKUP_MB", "256"))
    base = Path(os.environ.get("KOMPAKT_BENCH_DIR") or tempfile.mkdtemp(prefix="kompakt-bench-backup-"))
    base.mkdir(parents=True, exist_ok=True)
    proc, bootstrap = start_broker(base / "data")
    count = megabytes * 1024 * 1024 // VALUE
    result: dict[str, Any] = {"topic_mb": megabytes, "partitions": PARTITIONS, "value_bytes": VALUE}
    try:
        result["produce"] = fill(bootstrap, "bench-src", count, acks_all=False)
        cpu = cpu_s(proc.pid)
        result["produce_acks_all"] = fill(bootstrap, "bench-idem", count, acks_all=True)
        result["produce_acks_all"]["cpu_ms_per_mb"] = cpu_per_mb(cpu, cpu_s(proc.pid), count)
        delete_topic_files(bootstrap, base / "data", "bench-idem")
        result["consume_rdkafka"] = consume_rdkafka(bootstrap, "bench-src", count)
        result["fetch_loop"] = fetch_loop(bootstrap, "bench-src", count)
        result["disk_write"] = disk_write(base / "disk-write", count)
        consume = result["consume_rdkafka"]["mb_per_s"]
        started = time.perf_counter()
        importlib.import_module("kompakt.records.scan")
        result["import_scan_s"] = round(time.perf_counter() - started, 2)
        rounds: dict[str, list[dict[str, Any]]] = {"zstd": [], "none": []}

        def delete_measured(topic: str) -> None:
            """On the development VM only about 1 GB of memory is fast and the rest comes from the
            host at 70-100 MB/s (docs/benchmarks.md): a run that kept every round's topics wrote
            ~0.8 GB of new page cache a round and met that state from the second round on, in
            whichever phase came last."""
            delete_topic_files(bootstrap, base / "data", topic)

        for n in range(ROUNDS):
            # Interleaved: each round runs, for each codec, a fetch loop and the backup, then the
            # restore and its baseline (an idempotent produce of the same records into a new
            # topic) back to back, in alternating order, each topic deleted once measured: a
            # load that comes and goes lands on both sides of each ratio, and so does the state
            # of this VM's memory (the backup just wrote its files into new page cache, which a
            # baseline taken at the start of the round did not meet: restore 0.36-0.52 of it on
            # 2026-12-06, 0.81-0.92 of a produce in the same state).
            for c, codec in enumerate(("zstd", "none")):
                store = base / f"store-{codec}-{n}"
                cpu = cpu_s(proc.pid)
                fetch = fetch_loop(bootstrap, "bench-src", count)["mb_per_s"]
                fetch_cpu = cpu_per_mb(cpu, cpu_s(proc.pid), count)
                load = os.getloadavg()[0]
                cpu = cpu_s(proc.pid)
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
                backup_cpu = cpu_per_mb(cpu, cpu_s(proc.pid), count)
                records = sum(p["records"] for p in backup.partitions)
                backup_rate = rate(records, backup.seconds)["mb_per_s"]
                restore_first = (n + c) % 2 == 1
                for step in ("restore", "produce") if restore_first else ("produce", "restore"):
                    cpu = cpu_s(proc.pid)
                    if step == "produce":
                        baseline = f"bench-idem-{codec}-{n}"
                        produce = fill(bootstrap, baseline, count, acks_all=True)["mb_per_s"]
                        produce_cpu = cpu_per_mb(cpu, cpu_s(proc.pid), count)
                        delete_measured(baseline)
                        continue
                    restore = run_restore(
                        parse_restore_config(
                            {
                                "backup_id": codec,
                                "target": {"bootstrap_servers": bootstrap},
                                "storage": {"path": str(store)},
                                "restore": {"topic_mapping": {"bench-src": f"bench-dst-{codec}-{n}"}},
                            }
                        )
                    )
                    restore_cpu = cpu_per_mb(cpu, cpu_s(proc.pid), count)
                    restore_rate = rate(restore.records, restore.seconds)["mb_per_s"]
                    delete_measured(f"bench-dst-{codec}-{n}")
                rounds[codec].append(
                    {
                        "fetch_loop_mb_per_s": fetch,
                        "backup_mb_per_s": backup_rate,
                        "fetch_loop_cpu_ms_per_mb": fetch_cpu,
                        "backup_cpu_ms_per_mb": backup_cpu,
                        "backup_vs_fetch_loop": ratio(backup_rate, fetch),
                        "backup_s": round(backup.seconds, 2),
                        "produce_acks_all_mb_per_s": produce,
                        "produce_acks_all_cpu_ms_per_mb": produce_cpu,
                        "restore_mb_per_s": restore_rate,
                        "restore_vs_produce_acks_all": ratio(restore_rate, produce),
                        "restore_cpu_ms_per_mb": restore_cpu,
                        "restore_s": round(restore.seconds, 2),
                        "restore_first": restore_first,
                        "load": round(load, 1),
                        "records": backup.run.records,
                        "stored_mb": round(backup.run.bytes / 1e6, 1),
                    }
                )
                if n + 1 < ROUNDS:
                    shutil.rmtree(store, ignore_errors=True)
        for codec in ("zstd", "none"):
            store = base / f"store-{codec}-{ROUNDS - 1}"
            each = rounds[codec]
            records = each[-1]["records"]
            offline = run_offline_restore(
                parse_restore_config(
                    {
                        "backup_id": codec,
                        "target": {"data_dir": str(base / f"offline-{codec}")},
                        "storage": {"path": str(store)},
                    }
                )
            )
            backup_rate = median([r["backup_mb_per_s"] for r in each])
            fetch = median([r["fetch_loop_mb_per_s"] for r in each])
            restore_rate = median([r["restore_mb_per_s"] for r in each])
            result[codec] = {
                "records": records,
                "stored_mb": each[-1]["stored_mb"],
                "rounds": each,
                "backup_mb_per_s": backup_rate,
                "backup_mb_per_s_per_partition": round(backup_rate / PARTITIONS, 1),
                "fetch_loop_mb_per_s": fetch,
                "backup_vs_fetch_loop": median([r["backup_vs_fetch_loop"] for r in each]),
                "fetch_loop_cpu_ms_per_mb": {
                    side: median([r["fetch_loop_cpu_ms_per_mb"][side] for r in each])
                    for side in ("client", "broker")
                },
                "backup_cpu_ms_per_mb": {
                    side: median([r["backup_cpu_ms_per_mb"][side] for r in each])
                    for side in ("client", "broker")
                },
                "backup_vs_consume_rdkafka": ratio(backup_rate, consume),
                "backup_vs_disk_write": ratio(backup_rate, result["disk_write"]["mb_per_s"]),
                "restore_mb_per_s": restore_rate,
                "restore_mb_per_s_per_partition": round(restore_rate / PARTITIONS, 1),
                "restore_vs_produce_acks_all": median([r["restore_vs_produce_acks_all"] for r in each]),
                "restore_cpu_ms_per_mb": {
                    side: median([r["restore_cpu_ms_per_mb"][side] for r in each])
                    for side in ("client", "broker")
                },
                "produce_acks_all_mb_per_s": median([r["produce_acks_all_mb_per_s"] for r in each]),
                "restore_vs_produce_acks_1": ratio(restore_rate, result["produce"]["mb_per_s"]),
                "offline_restore_mb_per_s": rate(records, offline.seconds)["mb_per_s"],
                "backup_s": median([r["backup_s"] for r in each]),
                "restore_s": median([r["restore_s"] for r in each]),
                "offline_restore_s": round(offline.seconds, 2),
            }
            shutil.rmtree(base / f"offline-{codec}", ignore_errors=True)
        result["goals"] = {
            "backup_vs_fetch_loop": GOAL,
            "backup_vs_consume_rdkafka": GOAL,
            "restore_vs_produce_acks_all": GOAL,
            "mb_per_s_per_partition": 100,
        }
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
