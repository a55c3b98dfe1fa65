"""TLS against plaintext: one `kompakt serve` with a PLAINTEXT and an SSL listener, the same
confluent-kafka workload as bench_broker.py through each, in the same run.

Prints one JSON object on its last stdout line:

* ``plaintext`` and ``tls``: ``produce`` and ``consume`` as in bench_broker.py (1 KiB values,
  ``acks=1``, large batches; a full consume from the beginning), the median run of
  ``KOMPAKT_BENCH_ROUNDS`` (default 3) rounds of ``KOMPAKT_BENCH_TLS_MB`` (default 256) MB each,
  with the broker's CPU seconds. The listeners alternate which goes first in each round, and
  every round writes a topic of its own that is deleted afterwards. ``client_cpu_s`` is the
  benchmark process's CPU (the confluent-kafka client) in the same phase.
* ``ratios``: TLS MB/s over plaintext MB/s for produce and consume (medians), and per round.
  The goal is at least 0.6 for both.

TLS costs the broker twice: the encryption itself (OpenSSL's AES-GCM, fast), and the loss of
the zero-copy Fetch path: records go from the page cache through a read into memory and the TLS
transport instead of ``sendfile``/one copy to the socket. The certificates are a throwaway EC
P-256 CA and broker certificate (``tests/support/tls.py``); TLS 1.3, no client certificates.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support.tls

import bench_broker as bb  # noqa: E402 - after the path set-up
from tests.support.tls import make_pki  # noqa: E402

TOTAL_BYTES = int(float(os.environ.get("KOMPAKT_BENCH_TLS_MB", "256")) * bb.MIB)
ROUNDS = max(1, int(os.environ.get("KOMPAKT_BENCH_ROUNDS", "3")))
LISTENER = re.compile(r"(?P<name>[A-Z_]+)://127\.0\.0\.1:(?P<port>\d+)")


@contextmanager
def kompakt_two_listeners(data_dir: Path, overrides: list[str]) -> Iterator[tuple[bb.Running, bb.Running]]:
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
        deadline = started + bb.DEADLINE_S
        while True:
            if process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError("kompakt serve did not become ready")
            readable, _, _ = select.select([process.stdout], [], [], 1.0)
            if not readable:
                continue
            line = process.stdout.readline().decode()
            if line.startswith("kompakt ready:"):
                ports = {m["name"]: m["port"] for m in LISTENER.finditer(line.split(", data directory")[0])}
                break
        ready_s = time.perf_counter() - started
        yield (
            bb.Running(process, f"127.0.0.1:{ports['PLAINTEXT']}", ready_s, data_dir),
            bb.Running(process, f"127.0.0.1:{ports['SSL']}", ready_s, data_dir),
        )
    finally:
        bb.stop(process)


def with_client_cpu(
    broker: bb.Running, phase: functools.partial[dict[str, float]], topic: str, count: int
) -> dict[str, Any]:
    """bench_broker's ``measured`` plus the client process's CPU seconds (librdkafka's threads
    included): which side of the connection pays for TLS."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = bb.measured(broker, phase, topic, count)
    after = resource.getrusage(resource.RUSAGE_SELF)
    result["client_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    return result


def main() -> int:
    bb.steady_client_memory()
    bb.byte_compile_kompakt()
    root = Path(tempfile.mkdtemp(prefix="bench-tls-", dir=os.environ.get("KOMPAKT_BENCH_DIR")))
    result: dict[str, Any] = {"topic_mb": round(TOTAL_BYTES / bb.MIB, 1), "rounds": ROUNDS}
    try:
        pki = make_pki(root / "pki")
        overrides = [
            "log.segment.delete.delay.ms=0",
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={pki.broker_keystore}",
        ]
        tls_client = {"security.protocol": "ssl", "ssl.ca.location": str(pki.ca_cert)}
        count = TOTAL_BYTES // bb.VALUE_BYTES
        with kompakt_two_listeners(root / "data", overrides) as (plain, tls):
            listeners = {"plaintext": (plain, {}), "tls": (tls, tls_client)}
            warmup = min(count, bb.WARMUP_BYTES // bb.VALUE_BYTES)
            for name, (broker, security) in listeners.items():
                bb.create_topic(plain.bootstrap, f"warmup-{name}")
                bb.produce(broker.bootstrap, f"warmup-{name}", warmup, security)
                bb.consume(broker.bootstrap, f"warmup-{name}", warmup, security)
                bb.delete_topic(plain, f"warmup-{name}")
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {
                name: {"produce": [], "consume": []} for name in listeners
            }
            order = list(listeners)
            for round_ in range(ROUNDS):
                turn = order[round_ % 2 :] + order[: round_ % 2]
                for name in turn:
                    broker, security = listeners[name]
                    topic = f"bench-{name}-{round_}"
                    bb.create_topic(plain.bootstrap, topic)
                    produce = functools.partial(bb.produce, security=security)
                    consume = functools.partial(bb.consume, security=security)
                    runs[name]["produce"].append(with_client_cpu(broker, produce, topic, count))
                    runs[name]["consume"].append(with_client_cpu(broker, consume, topic, count))
                    bb.delete_topic(plain, topic)
        for name, phases in runs.items():
            result[name] = {phase: bb.median_run(phase_runs) for phase, phase_runs in phases.items()}
        ratios: dict[str, Any] = {}
        for phase in ("produce", "consume"):
            tls_mb, plain_mb = result["tls"][phase]["mb_per_s"], result["plaintext"][phase]["mb_per_s"]
            ratios[f"{phase}_tls_over_plaintext"] = round(tls_mb / plain_mb, 2)
            ratios[f"{phase}_per_round"] = [
                round(a / b, 2)
                for a, b in zip(
                    result["tls"][phase]["runs_mb_per_s"],
                    result["plaintext"][phase]["runs_mb_per_s"],
                    strict=True,
                )
            ]
            ratios[f"{phase}_per_round_median"] = statistics.median(ratios[f"{phase}_per_round"])
        result["ratios"] = ratios
        result["goals"] = {
            "tls_produce_at_least_0_6": ratios["produce_tls_over_plaintext"] >= 0.6,
            "tls_consume_at_least_0_6": ratios["consume_tls_over_plaintext"] >= 0.6,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
