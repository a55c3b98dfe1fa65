"""kompakt beside an Apache Kafka broker given by address: librdkafka's ``rdkafka_performance``,
the same rounds against both, taking turns.

A development benchmark, not part of ``make bench``/``make test`` (it needs a Kafka broker and a
built ``rdkafka_performance``). Usage::

    python bench/bench_vs_kafka.py --kafka 127.0.0.1:34092          # a running broker
    python bench/bench_vs_kafka.py --start-kafka /work/rk/build     # start one with realkafka/start.sh

Prints a Markdown table and, on its last stdout line, one JSON object.

* Workloads (the table of issue 33): 1 KiB records, ``KOMPAKT_BENCH_VS_KAFKA_RECORDS`` (default
  1,000,000) per run; on a topic of 1 and of 4 partitions: produce with ``acks=1``, produce with
  ``acks=all`` (``-a -1``), and a consume from the beginning of the ``acks=all`` topic (every
  partition, ``-o beginning``). ``rdkafka_performance``'s own settings otherwise (it sets
  ``linger.ms=1000``, so batches fill to librdkafka's ``batch.size`` of 1,000,000 bytes; the
  consumer keeps ``queued.min.messages=1000000``); extra ``-X`` settings go in
  ``KOMPAKT_BENCH_VS_KAFKA_X`` (space separated ``name=value``).
* Rounds: ``KOMPAKT_BENCH_ROUNDS`` (default 3). Every workload runs on both brokers back to back,
  the first broker alternating from round to round, so a noisy neighbour falls on both alike and
  Kafka's JIT warms as the rounds go (the last round is reported apart as "warm"). Each topic is
  deleted as soon as its broker is done with it (the acks=all topic is consumed right after its
  produce), so every produce starts with none of the benchmark's topics in the page cache, and
  acks=1 and acks=all swap places every round. On this VM, writing into page cache just freed
  costs several times less than writing into memory the guest has not used for a while (the
  kernel's copy into the page cache took 0.35 to 2.5 CPU-s per GB across runs of the same
  produce). With one topic kept while the next was produced, the second produce of a round cost
  both brokers more, whichever acks it used. A 16 MB produce and consume on each broker comes
  first (kompakt loads numpy and its kernels on first use, the JVM its classes).
* MB/s: bytes of values over ``rdkafka_performance``'s own clock (the producer's first send to
  its last delivery report; the consumer's first message to its last), in MiB/s as
  ``bench_broker.py`` reports them. ``cpu_s_per_gb``: the broker process's user+system CPU over
  the run, per GiB. For ``--kafka`` the broker process is the one listening on the address's port
  (found in ``/proc``; ``--kafka-pid`` names it otherwise); a remote broker has no CPU figure.
* ``load``: the 1-minute load average before each run, so a reader can tell a quiet run from a
  noisy one.

Environment: ``RDKAFKA_PERFORMANCE`` (the binary; default ``/work/rdk-lib/examples/...`` or
``$PATH``), ``KOMPAKT_REALKAFKA_START`` (``start.sh`` of ``--start-kafka``; default
``/work/shared/realkafka/start.sh``), ``KOMPAKT_BENCH_DIR`` (where data directories go).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

import bench_broker as bb

RECORDS = int(os.environ.get("KOMPAKT_BENCH_VS_KAFKA_RECORDS", "1000000"))
ROUNDS = max(1, int(os.environ.get("KOMPAKT_BENCH_ROUNDS", "3")))
VALUE_BYTES = 1024
WARMUP_RECORDS = 16 * 1024
PARTITION_COUNTS = (1, 4)
WORKLOADS = ("produce acks=1", "produce acks=all", "consume")
RUN_TIMEOUT_S = 600.0
PRODUCED = re.compile(
    r"^% (?P<msgs>\d+) messages produced \((?P<bytes>\d+) bytes\), (?P<delivered>\d+) delivered "
    r"\(offset -?\d+, (?P<failed>\d+) failed\) in (?P<ms>\d+)ms",
    re.MULTILINE,
)
CONSUMED = re.compile(
    r"^% (?P<msgs>\d+) messages \((?P<bytes>\d+) bytes\) consumed in (?P<ms>\d+)ms", re.MULTILINE
)
GIB = 1 << 30


@dataclass
class Broker:
    name: str
    bootstrap: str
    #: The broker process (its CPU is measured), None when it cannot be found (a remote broker).
    pid: int | None
    #: kompakt's data directory, where a deleted topic's files must be gone before the next round.
    data_dir: Path | None = None


def rdkafka_performance() -> str:
    candidates: list[str | None] = [
        os.environ.get("RDKAFKA_PERFORMANCE"),
        "/work/rdk-lib/examples/rdkafka_performance",
        "/work/rdk-perf/examples/rdkafka_performance",
        shutil.which("rdkafka_performance"),
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("rdkafka_performance not found: set RDKAFKA_PERFORMANCE")


def listening_pid(port: int) -> int | None:
    """The process with a socket listening on ``port`` (of this host), from ``/proc``."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(proc.name)
    return None


@contextmanager
def started_kafka(build: Path, root: Path) -> Iterator[Broker]:
    """A Kafka broker from ``realkafka/start.sh`` with the same segment-deletion delay as kompakt's."""
    port = bb.free_port()
    start = os.environ.get("KOMPAKT_REALKAFKA_START", "/work/shared/realkafka/start.sh")
    log = (root / "kafka.out").open("wb")
    process = subprocess.Popen(
        ["bash", start, str(root / "kafka"), str(port), "log.segment.delete.delay.ms=0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "KAFKA_BUILD": str(build), "CONTROLLER_PORT": str(bb.free_port())},
    )
    try:
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not start, see {root / 'kafka.out'}")
            try:
                if AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2).brokers:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.2)
        yield Broker("kafka", bootstrap, process.pid)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        log.close()


def create_topic(broker: Broker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([bb.KAFKA_ADMIN.NewTopic(topic, partitions, 1)])[topic].result(60)
    deadline = time.monotonic() + bb.DEADLINE_S
    while True:  # every partition has a leader in the metadata
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} never showed up in {broker.name}'s metadata")
        time.sleep(0.05)


def delete_topics(broker: Broker, topics: list[str]) -> None:
    """Delete a round's topics and wait until they (and kompakt's files) are gone."""
    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics(topics).values():
        future.result(60)
    deadline = time.monotonic() + bb.DEADLINE_S
    while True:
        listed = set(admin.list_topics(timeout=10).topics) & set(topics)
        leftovers = [
            path
            for topic in topics
            for path in (broker.data_dir.glob(f"{topic}-*") if broker.data_dir else [])
        ]
        if not listed and not leftovers:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{broker.name}: {sorted(listed)} not deleted in time")
        time.sleep(0.05)


def extra_settings() -> list[str]:
    args: list[str] = []
    for setting in os.environ.get("KOMPAKT_BENCH_VS_KAFKA_X", "").split():
        args += ["-X", setting]
    return args


def run_perf(
    broker: Broker, args: list[str], pattern: re.Pattern[str], delivered: int | None = None
) -> dict[str, Any]:
    """One ``rdkafka_performance`` run; its figures and the broker's CPU meanwhile.

    ``delivered``: for a produce, the record count asked for. ``rdkafka_performance`` exits 1 when
    its count of messages sent, less what its out queue holds at the end, differs from the
    delivery reports; that queue can still hold an event that is not a message (seen once: 999,999
    "produced", 1,000,000 delivered, 0 failed), so a produce counts as done when every record asked
    for was reported delivered and none failed.
    """
    command = [rdkafka_performance(), "-b", broker.bootstrap, *args, *extra_settings()]
    load = os.getloadavg()[0]
    before = bb.cpu_s(broker.pid) if broker.pid is not None else None
    client_before = _children_cpu_s()
    busy_before = machine_jiffies()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    busy_after = machine_jiffies()
    client_cpu = _children_cpu_s() - client_before
    after = bb.cpu_s(broker.pid) if broker.pid is not None else None
    matches = list(pattern.finditer(proc.stdout))
    last_match = matches[-1] if matches else None
    all_delivered = (
        delivered is not None
        and last_match is not None
        and int(last_match["delivered"]) == delivered
        and not int(last_match["failed"])
    )
    if last_match is None or (proc.returncode != 0 and not all_delivered):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise RuntimeError(f"{broker.name}: {' '.join(command)} failed ({proc.returncode}): {tail}")
    last = last_match
    seconds = int(last["ms"]) / 1000
    value_bytes = int(last["bytes"])
    if delivered is not None and not all_delivered:
        raise RuntimeError(f"{broker.name}: {last.group(0)}")
    result: dict[str, Any] = {
        "records": int(last["msgs"]),
        "seconds": seconds,
        "mb_per_s": round(value_bytes / bb.MIB / max(seconds, 1e-3), 1),
        "load": round(load, 1),
    }
    if before is not None and after is not None:
        result["cpu_s"] = round(after - before, 2)
        result["cpu_s_per_gb"] = round((after - before) / (value_bytes / GIB), 2)
    result["client_cpu_s_per_gb"] = round(client_cpu / (value_bytes / GIB), 2)
    busy, total = (b - a for a, b in zip(busy_before, busy_after, strict=True))
    result["machine_busy"] = round(busy / total, 2) if total else None
    return result


def _children_cpu_s() -> float:
    """User + system CPU of this process's finished children (the ``rdkafka_performance`` runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_jiffies() -> tuple[int, int]:
    """``(busy, total)`` jiffies of every CPU since boot (``/proc/stat``): whether a run had a
    core to spare. On the 2-core VM client and broker share the machine, so once it is busy the
    broker can only go faster by taking less of it."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def produce(broker: Broker, topic: str, records: int, acks: str) -> dict[str, Any]:
    args = ["-P", "-t", topic, "-s", str(VALUE_BYTES), "-c", str(records), "-a", acks]
    return run_perf(broker, args, PRODUCED, delivered=records)


def consume(broker: Broker, topic: str, records: int, partitions: int) -> dict[str, Any]:
    args = ["-C", "-t", topic, "-o", "beginning", "-c", str(records), "-e"]
    for partition in range(partitions):
        args += ["-p", str(partition)]
    result = run_perf(broker, args, CONSUMED)
    if result["records"] != records:
        raise RuntimeError(f"{broker.name}: consumed {result['records']} of {records} records from {topic}")
    return result


def run(brokers: list[Broker]) -> dict[str, Any]:
    for broker in brokers:  # warm-up: first-use costs on both sides
        create_topic(broker, "warmup-all", 4)
        produce(broker, "warmup-all", WARMUP_RECORDS, "-1")
        consume(broker, "warmup-all", WARMUP_RECORDS, 4)
        delete_topics(broker, ["warmup-all"])
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {b.name: {} for b in brokers}

    def record(broker: Broker, key: str, round_: int, result: dict[str, Any]) -> None:
        result["round"] = round_ + 1
        runs[broker.name].setdefault(key, []).append(result)
        print(
            f"round {round_ + 1} {broker.name:7} {key:36} {json.dumps(result)}", file=sys.stderr, flush=True
        )

    for round_ in range(ROUNDS):
        turn = brokers[round_ % len(brokers) :] + brokers[: round_ % len(brokers)]
        # Every produce starts with none of the benchmark's topics in the page cache (see the
        # docstring): each topic is consumed (acks=all) and deleted before the next produce, on
        # either broker. acks=1 and acks=all swap places every round all the same.
        acks_order = [("1", "one"), ("-1", "all")]
        if round_ % 2:
            acks_order.reverse()
        for partitions in PARTITION_COUNTS:
            label = f"{partitions} partition{'s' if partitions > 1 else ''}"
            for acks, suffix in acks_order:
                topic = f"vs-p{partitions}-r{round_}-{suffix}"
                produced = f"produce acks={'all' if acks == '-1' else acks}, {label}"
                for broker in turn:
                    create_topic(broker, topic, partitions)
                    record(broker, produced, round_, produce(broker, topic, RECORDS, acks))
                    if suffix == "all":
                        record(
                            broker, f"consume, {label}", round_, consume(broker, topic, RECORDS, partitions)
                        )
                    delete_topics(broker, [topic])
    return {
        name: dict(sorted(rows.items(), key=lambda item: _row_order(item[0]))) for name, rows in runs.items()
    }


def _row_order(key: str) -> tuple[int, int]:
    """Rows as issue 33's table lists them: per partition count, acks=1, acks=all, consume."""
    workload, _, label = key.partition(", ")
    return int(label.split()[0]), WORKLOADS.index(workload)


def summary(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    names = list(runs)
    rows: dict[str, Any] = {}
    for key in runs[names[0]]:
        row: dict[str, Any] = {}
        for name in names:
            series = runs[name][key]
            cpu = [r["cpu_s_per_gb"] for r in series if "cpu_s_per_gb" in r]
            busy = [r["machine_busy"] for r in series if r.get("machine_busy") is not None]
            row[name] = {
                "mb_per_s_median": statistics.median(r["mb_per_s"] for r in series),
                "mb_per_s_runs": [r["mb_per_s"] for r in series],
                "mb_per_s_last_round": series[-1]["mb_per_s"],
                "cpu_s_per_gb_median": statistics.median(cpu) if cpu else None,
                "client_cpu_s_per_gb_median": statistics.median(r["client_cpu_s_per_gb"] for r in series),
                "machine_busy_median": statistics.median(busy) if busy else None,
                "load_runs": [r["load"] for r in series],
            }
        if len(names) == 2:
            a, b = (row[n] for n in names)
            row["ratio_median"] = round(a["mb_per_s_median"] / b["mb_per_s_median"], 2)
            row["ratio_last_round"] = round(a["mb_per_s_last_round"] / b["mb_per_s_last_round"], 2)
            row["ratio_per_round"] = [
                round(x / y, 2) for x, y in zip(a["mb_per_s_runs"], b["mb_per_s_runs"], strict=True)
            ]
        rows[key] = row
    return rows


def markdown(rows: dict[str, Any], names: list[str]) -> str:
    a, b = names[0], names[-1]
    lines = [
        f"| workload | {a} MB/s | {b} MB/s | ratio (last round) | broker CPU s/GB {a} / {b} "
        f"| client CPU s/GB {a} / {b} | machine busy {a} / {b} |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, row in rows.items():

        def cell(name: str, row: dict[str, Any] = row) -> str:
            r = row[name]
            return f"{r['mb_per_s_median']:,.0f} ({r['mb_per_s_last_round']:,.0f})"

        def cpu(name: str, field: str = "cpu_s_per_gb_median", row: dict[str, Any] = row) -> str:
            value = row[name][field]
            return "-" if value is None else f"{value:.1f}"

        def busy(name: str, row: dict[str, Any] = row) -> str:
            value = row[name]["machine_busy_median"]
            return "-" if value is None else f"{value:.0%}"

        ratio = f"{row['ratio_median']:.2f} ({row['ratio_last_round']:.2f})" if "ratio_median" in row else "-"
        client = "client_cpu_s_per_gb_median"
        lines.append(
            f"| {key} | {cell(a)} | {cell(b)} | {ratio} | {cpu(a)} / {cpu(b)} "
            f"| {cpu(a, client)} / {cpu(b, client)} | {busy(a)} / {busy(b)} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--kafka", help="bootstrap address of a running Kafka broker")
    target.add_argument("--start-kafka", metavar="BUILD", help="start Kafka from this realkafka build")
    parser.add_argument("--kafka-pid", type=int, help="the Kafka broker's PID (default: found by its port)")
    parser.add_argument("--kompakt-only", action="store_true", help="no Kafka broker: kompakt's figures only")
    options = parser.parse_args()
    if not (options.kafka or options.start_kafka or options.kompakt_only):
        parser.error("give --kafka ADDRESS, --start-kafka BUILD or --kompakt-only")
    bb.steady_client_memory()
    bb.byte_compile_kompakt()
    root = Path(tempfile.mkdtemp(prefix="bench-vs-kafka-", dir=os.environ.get("KOMPAKT_BENCH_DIR")))
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result: dict[str, Any] = {
        "date": started,
        "records": RECORDS,
        "value_bytes": VALUE_BYTES,
        "rounds": ROUNDS,
    }
    try:
        with contextlib.ExitStack() as stack:
            running = stack.enter_context(bb.kompakt(root / "kompakt", "log.segment.delete.delay.ms=0"))
            brokers = [Broker("kompakt", running.bootstrap, running.process.pid, running.data_dir)]
            if options.start_kafka:
                brokers.append(stack.enter_context(started_kafka(Path(options.start_kafka), root)))
            elif options.kafka:
                port = int(options.kafka.rsplit(":", 1)[1])
                pid = options.kafka_pid if options.kafka_pid is not None else listening_pid(port)
                brokers.append(Broker("kafka", options.kafka, pid))
            result["load_before"] = round(os.getloadavg()[0], 1)
            runs = run(brokers)
            result["load_after"] = round(os.getloadavg()[0], 1)
            for broker in brokers:
                if broker.pid is not None:
                    result[f"{broker.name}_rss_mb"] = round(bb.rss_mb(broker.pid), 1)
        rows = summary(runs)
        result["rows"] = rows
        result["runs"] = runs
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{started}, {RECORDS:,} records of {VALUE_BYTES} B per run, {ROUNDS} rounds; medians (last round)")
    print(markdown(rows, [b.name for b in brokers]))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
