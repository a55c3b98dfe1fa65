#!/usr/bin/env python3
"""kompakt's tools against a real 3-broker Apache Kafka 4 cluster (issue 31): a development check.

Not part of ``make test``: it needs the JVM build of Apache Kafka 4.1.2 (``realkafka/build.sh``).
It starts a KRaft cluster with ``realkafka/cluster.sh ROOT PORT 3 min.insync.replicas=2`` (node 1
broker+controller, nodes 2 and 3 brokers; RF 3, leaders spread over the three), then checks, each
step printing PASS or FAIL with what it saw:

1. a compacted topic of 6 partitions, RF 3, with leaders on every broker, written with acks=all,
   tombstones, a committed and an aborted transaction;
2. ``kompakt backup`` of it, ``kompakt restore`` into another topic, ``kompakt table diff`` of
   the two topics and of the backup against the topic: equal;
3. ``kompakt table get|scan|counts kafka://HOST:PORT/TOPIC``: the expected rows, partitions led
   by every broker;
4. ``kompakt log explain <node N>/logs --bootstrap HOST:PORT`` on each broker's directory (and
   ``--html``): exit 0, the KRaft metadata log skipped, the topic's own configs;
5. ``kompakt kafka-consumer-groups --describe`` and ``--delete-offsets`` with a bootstrap broker
   that is not the group's coordinator (and a bootstrap list whose first broker is down);
6. broker 3 stopped, ``kompakt log compact`` on its copy of the topic, broker 3 restarted: it
   rejoins the ISR of every partition, leads its preferred partitions again after a preferred
   leader election, and the cluster serves the same keys and values as before (``table scan``
   and ``table diff`` of broker 3's compacted files against the cluster).

Usage::

    KAFKA_BUILD=/path/to/realkafka-build .venv/bin/python tools/realkafka_multibroker.py \\
        [--root DIR] [--port 39260] [--realkafka DIR] [--keep]

``--realkafka`` is the folder of ``cluster.sh`` (default ``$REALKAFKA``, else
``../shared/realkafka`` beside the repository). The cluster is stopped at the end unless
``--keep``. Exit code 0 only when every step passed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

TOPIC = "orders"
RESTORED = "orders-restored"
GROUP = "order-readers"
PARTITIONS = 6
KEYS = 2_000
RECORDS = 40_000
DEADLINE_S = 120.0

results: list[bool] = []
#: librdkafka's own lines (a broker going away is expected here) stay out of the report.
QUIET = logging.getLogger("realkafka_multibroker.librdkafka")
QUIET.disabled = True


def say(text: str) -> None:
    print(text, flush=True)  # noqa: T201 (a development script reports on stdout)


def check(name: str, ok: bool, detail: str) -> bool:
    results.append(ok)
    say(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
    return ok


def kompakt(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """``kompakt ARGS`` as a user runs it (the installed entry point of this checkout)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "120"},
    )
    say(f"$ kompakt {' '.join(args)}   # exit {done.returncode}, {time.monotonic() - started:.1f} s")
    return done


def show(text: str, limit: int = 14) -> None:
    lines = text.rstrip("\n").splitlines()
    for line in lines[:limit]:
        say(f"    {line}")
    if len(lines) > limit:
        say(f"    ... ({len(lines) - limit} more lines)")


def wait_for(what: str, condition: Callable[[], bool], deadline_s: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except KafkaException:
            pass
        time.sleep(0.5)
    say(f"    gave up waiting for {what} after {deadline_s:.0f} s")
    return False


# --------------------------------------------------------------------------------------------
# The cluster


class Cluster:
    def __init__(self, root: Path, port: int, realkafka: Path, build: Path) -> None:
        self.root, self.port, self.realkafka, self.build = root, port, realkafka, build
        self.ports = [port + 2 * i for i in range(3)]
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        #: Nodes this script started again (its children: waited for, or they stay zombies).
        self.children: dict[int, subprocess.Popen[bytes]] = {}

    def broker(self, node: int) -> str:
        return f"127.0.0.1:{self.ports[node - 1]}"

    def logs(self, node: int) -> Path:
        return self.root / f"node{node}" / "logs"

    def start(self, attempts: int = 3) -> None:
        """cluster.sh, tried again when a node could not bind its port: the ports lie in Linux's
        ephemeral range, where any process's outgoing connection may hold one for a moment."""
        env = {**os.environ, "KAFKA_BUILD": str(self.build)}
        command = [
            str(self.realkafka / "cluster.sh"),
            str(self.root),
            str(self.port),
            "3",
            "min.insync.replicas=2",
        ]
        for attempt in range(1, attempts + 1):
            say(f"$ {' '.join(command)}")
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
            show(done.stdout + done.stderr)
            if done.returncode == 0:
                return
            logs = " ".join(p.read_text(errors="replace") for p in self.root.glob("node*.out"))
            if (self.root / "pids").exists():
                self.stop()
            if "Address already in use" not in logs or attempt == attempts:
                raise SystemExit(f"cluster.sh failed with exit code {done.returncode}")
            say("    a port was taken for a moment: starting again")
            shutil.rmtree(self.root)

    def pids(self) -> list[int]:
        return [int(line) for line in (self.root / "pids").read_text().split()]

    def _wait_gone(self, pid: int, deadline_s: float = 60.0) -> bool:
        child = self.children.pop(pid, None)
        if child is not None:
            try:
                child.wait(deadline_s)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.2)
        return not Path(f"/proc/{pid}").exists()

    def stop_node(self, node: int) -> None:
        pid = self.pids()[node - 1]
        os.kill(pid, 15)
        if not self._wait_gone(pid):
            raise SystemExit(f"node {node} (pid {pid}) did not stop")

    def start_node(self, node: int) -> None:
        """Node 2..N again, with the command line cluster.sh uses."""
        d = self.root / f"node{node}"
        classpath = (self.build / "classpath").read_text().strip()
        heap = os.environ.get("KAFKA_HEAP_OPTS", "-Xmx512M -Xms512M").split()
        command = [
            "java",
            *heap,
            "-server",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.build}/config/log4j2.yaml",
            f"-Dkafka.logs.dir={d}/app-logs",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(d / "server.properties"),
        ]
        out = (self.root / f"node{node}.restart.out").open("w")
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.children[process.pid] = process
        pids = self.pids()
        pids[node - 1] = process.pid
        (self.root / "pids").write_text("".join(f"{p}\n" for p in pids))

    def stop(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        for pid in self.pids():
            self._wait_gone(pid)

    def admin(self, bootstrap: str | None = None) -> Any:
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap or self.bootstrap, "logger": QUIET}
        return AdminClient(conf)

    def partitions(self, topic: str) -> dict[int, Any]:
        meta = self.admin().list_topics(topic, timeout=20)
        return dict(meta.topics[topic].partitions)


# --------------------------------------------------------------------------------------------
# Steps


def create_and_fill(cluster: Cluster) -> dict[bytes, bytes]:
    """The topic, written as a user would; returns the table a read_committed reader ends with."""
    admin = cluster.admin()
    topic = NewTopic(
        TOPIC,
        PARTITIONS,
        3,
        # Kafka's cleaner cleans a fully dirty log (ratio 1.0), not the second round of updates
        # (about 0.9): that is left for the offline compaction of broker 3's copy.
        config={"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.99"},
    )
    for future in admin.create_topics([topic], request_timeout=60).values():
        future.result(60)
    wait_for(
        "leaders of every partition", lambda: all(p.leader >= 0 for p in cluster.partitions(TOPIC).values())
    )
    expected: dict[bytes, bytes] = {}
    write_round(cluster, expected, 1)
    committed = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": "check-committed", "logger": QUIET}
    )
    committed.init_transactions(60)
    committed.begin_transaction()
    for i in range(5):
        key = f"txn-{i}".encode()
        committed.produce(TOPIC, key=key, value=b"committed")
        expected[key] = b"committed"
    committed.commit_transaction(60)
    aborted = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": "check-aborted", "logger": QUIET}
    )
    aborted.init_transactions(60)
    aborted.begin_transaction()
    for i in range(5):
        aborted.produce(TOPIC, key=f"txn-{i}".encode(), value=b"aborted")
        aborted.produce(TOPIC, key=b"never", value=b"aborted")
    aborted.flush(60)
    aborted.abort_transaction(60)
    leaders = {p: meta.leader for p, meta in sorted(cluster.partitions(TOPIC).items())}
    replicas = {p: list(meta.replicas) for p, meta in sorted(cluster.partitions(TOPIC).items())}
    check(
        "topic",
        len(set(leaders.values())) == 3 and all(len(r) == 3 for r in replicas.values()),
        f"{TOPIC}: {PARTITIONS} partitions, RF 3, leaders by partition {leaders}; "
        f"{RECORDS:,} records over {KEYS:,} keys, {KEYS // 20} tombstones, a committed and an aborted "
        f"transaction: {len(expected):,} live keys expected",
    )
    return expected


def write_round(cluster: Cluster, expected: dict[bytes, bytes], round_: int) -> None:
    """RECORDS updates over KEYS keys with values of about 250 bytes (several 1 MiB segments per
    partition), then a tombstone for every 20th key; ``expected`` follows."""
    producer = Producer(
        {
            "logger": QUIET,
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }
    )
    pad = b"." * 240
    for i in range(RECORDS):
        key, value = f"order-{i % KEYS:05d}".encode(), f"r{round_}-v{i}".encode() + pad
        headers: list[tuple[str, str | bytes | None]] | None = [("src", b"check")] if i % 997 == 0 else None
        producer.produce(TOPIC, key=key, value=value, headers=headers)
        expected[key] = value
        if i % 5000 == 0:
            producer.poll(0)
    for i in range(round_ - 1, KEYS, 20):
        key = f"order-{i:05d}".encode()
        producer.produce(TOPIC, key=key, value=None)
        expected.pop(key, None)
    assert producer.flush(60) == 0


def scan(source: str, *extra: str) -> dict[bytes, bytes] | None:
    done = kompakt("table", "scan", *source.split(), *extra, "-o", "json")
    if done.returncode != 0:
        show(done.stderr)
        return None
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    import base64

    return {base64.b64decode(r["key_base64"]): base64.b64decode(r["value_base64"]) for r in rows}


def backup_restore_diff(cluster: Cluster, work: Path) -> None:
    store = work / "backups"
    backup = work / "backup.yaml"
    backup.write_text(
        "backup_id: multi\n"
        f"source: {{bootstrap_servers: [{', '.join(repr(b) for b in cluster.bootstrap.split(','))}], "
        f"topics: {{include: [{TOPIC}]}}}}\n"
        f"storage: {{backend: filesystem, path: {store}}}\n"
    )
    done = kompakt("backup", "--config", str(backup))
    show(done.stdout + done.stderr, 8)
    if not check("backup", done.returncode == 0, f"{TOPIC} from the 3 brokers into {store}"):
        return
    restore = work / "restore.yaml"
    restore.write_text(
        "backup_id: multi\n"
        f"storage: {{backend: filesystem, path: {store}}}\n"
        f"target: {{bootstrap_servers: '{cluster.broker(2)}'}}\n"
        f"restore: {{topics: [{TOPIC}], topic_mapping: {{{TOPIC}: {RESTORED}}}, create_topics: true}}\n"
    )
    done = kompakt("restore", "--config", str(restore))
    show(done.stdout + done.stderr, 8)
    check("restore", done.returncode == 0, f"into {RESTORED} through broker 2")
    kafka = f"kafka://{cluster.broker(1)}"
    done = kompakt(
        "table", "diff", kafka, f"kafka://{cluster.broker(3)}", "--topic", TOPIC, "--topic-b", RESTORED
    )
    show(done.stdout + done.stderr, 6)
    check("table diff topic/restored", done.returncode == 0 and "equal:" in done.stdout, "the two topics")
    done = kompakt("table", "diff", f"{store}/multi", kafka, "--topic", TOPIC)
    show(done.stdout + done.stderr, 6)
    check(
        "table diff backup/topic",
        done.returncode == 0 and "equal:" in done.stdout,
        "the backup and the topic",
    )


def table_over_kafka(cluster: Cluster, expected: dict[bytes, bytes]) -> None:
    for node in (1, 2, 3):
        got = scan(f"kafka://{cluster.broker(node)}/{TOPIC}")
        check(
            f"table scan kafka:// (bootstrap broker {node})",
            got == expected,
            f"{len(got or {}):,} rows, {'the expected ones' if got == expected else 'NOT the expected ones'}",
        )
    leaders = {p: meta.leader for p, meta in cluster.partitions(TOPIC).items()}
    for key in (b"order-00007", b"order-01999", b"txn-3"):
        done = kompakt("table", "get", f"kafka://{cluster.broker(2)}/{TOPIC}", key.decode(), "-o", "json")
        data = json.loads(done.stdout) if done.returncode == 0 else {}
        check(
            f"table get {key.decode()}",
            data.get("value", "").encode() == expected[key],
            f"{str(data.get('value'))[:12]!r}... from partition {data.get('partition')} (led by broker "
            f"{leaders.get(data.get('partition', -1))})",
        )
    done = kompakt("table", "get", f"kafka://{cluster.broker(2)}/{TOPIC}", "order-00020")
    check(
        "table get (tombstone)", done.returncode == 1 and "is deleted in" in done.stderr, done.stderr.strip()
    )
    done = kompakt("table", "counts", TOPIC, "--bootstrap", cluster.bootstrap)
    show(done.stdout)
    check(
        "table counts --bootstrap", done.returncode == 0 and f"{len(expected):,} live keys" in done.stdout, ""
    )


def _config_rows(reports: list[dict[str, Any]], name: str) -> set[tuple[str, str]]:
    """``(value, source)`` of one config over the topic's partitions in explain's JSON."""
    return {
        (c["value"], c["source"])
        for r in reports
        if r["topic"] == TOPIC
        for c in r["configs"]
        if c["name"] == name
    }


def explain_each_broker(cluster: Cluster, work: Path) -> None:
    # Brokers of one cluster may differ: broker 2 alone keeps tombstones for an hour. A topic
    # without its own delete.retention.ms takes its broker's value, so explain must ask the
    # broker whose directory it reads.
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry(
        "log.cleaner.delete.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
    )
    admin = cluster.admin()
    resource = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(60)
    say("    broker 2 alone: log.cleaner.delete.retention.ms=3600000 (kafka-configs --entity-name 2)")
    for node in (1, 2, 3):
        done = kompakt(
            "log", "explain", str(cluster.logs(node)), "--bootstrap", cluster.broker(1), "-o", "json"
        )
        reports = json.loads(done.stdout) if done.returncode == 0 else []
        names = {f"{r['topic']}-{r['partition']}" for r in reports}
        policies = _config_rows(reports, "cleanup.policy")
        retention = _config_rows(reports, "delete.retention.ms")
        want = (
            {
                (
                    "3600000",
                    f"cluster {cluster.broker(1)}, broker 2 (DYNAMIC_BROKER_CONFIG): "
                    "log.cleaner.delete.retention.ms",
                )
            }
            if node == 2
            else {("86400000", "Kafka default")}
        )
        show(done.stderr, 4)
        check(
            f"log explain node{node}/logs --bootstrap",
            done.returncode == 0
            and "__cluster_metadata-0" not in names
            and {f"{TOPIC}-{p}" for p in range(PARTITIONS)} <= names
            and policies == {("compact", f"topic override (cluster {cluster.broker(1)})")}
            and retention == want,
            f"{len(reports)} partitions explained; {TOPIC}'s cleanup.policy {sorted(policies)}, "
            f"delete.retention.ms {sorted(retention)}",
        )
    page = work / "node2-map.html"
    done = kompakt(
        "log", "explain", str(cluster.logs(2)), "--bootstrap", cluster.broker(3), "--html", str(page)
    )
    check("log explain --html", done.returncode == 0 and page.is_file(), done.stdout.strip())


class Member:
    """A group member that keeps polling in the background, as an application does (a member
    that stops polling is dropped from the group after max.poll.interval.ms)."""

    def __init__(self, cluster: Cluster) -> None:
        self.consumer = Consumer(
            {
                "logger": QUIET,
                "bootstrap.servers": cluster.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([TOPIC])
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self.consumer.poll(0.2)

    def assigned(self) -> bool:
        with self._lock:
            return bool(self.consumer.assignment())

    def commit(self, offsets: list[TopicPartition]) -> None:
        with self._lock:
            self.consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def groups(cluster: Cluster) -> None:
    member = Member(cluster)
    try:
        wait_for("an assignment", member.assigned, deadline_s=180)
        member.commit([TopicPartition(TOPIC, p, 100 + p) for p in range(PARTITIONS)])
        every = ("kafka-consumer-groups", "--bootstrap-server", cluster.bootstrap)
        done = kompakt(*every, "--describe", "--group", GROUP, "--state", "--output", "json")
        show(done.stdout + done.stderr)
        state = json.loads(done.stdout)[0] if done.returncode == 0 else {}
        coordinator = int(str(state.get("coordinator") or "(0)").rsplit("(", 1)[1].rstrip(")"))
        if not check("kafka-consumer-groups --describe --state", coordinator in (1, 2, 3), f"{state}"):
            return
        other = next(n for n in (1, 2, 3) if n != coordinator)
        say(f"    group {GROUP}: coordinator broker {coordinator}; bootstrap broker {other}")
        tool = ("kafka-consumer-groups", "--bootstrap-server", cluster.broker(other))
        done = kompakt(*tool, "--describe", "--group", GROUP)
        show(done.stdout + done.stderr)
        check(
            "kafka-consumer-groups --describe",
            done.returncode == 0 and done.stdout.count(f" {TOPIC} ") == PARTITIONS,
            f"coordinator {coordinator}, asked through broker {other}",
        )
        done = kompakt(*tool, "--describe", "--group", GROUP, "--members")
        show(done.stdout + done.stderr, 6)
        check(
            "kafka-consumer-groups --describe --members",
            done.returncode == 0 and "rdkafka" in done.stdout,
            "",
        )
        done = kompakt(*tool, "--delete-offsets", "--group", GROUP, "--topic", f"{TOPIC}:0")
        show(done.stdout + done.stderr, 6)
        check(
            "kafka-consumer-groups --delete-offsets (subscribed)",
            # Kafka's ConsumerGroupCommand prints the partition's error and exits 0.
            done.returncode == 0 and "The consumer group is actively subscribed to the topic" in done.stdout,
            "refused while a member subscribes to the topic, with Kafka's words and exit code",
        )
    finally:
        member.close()
    dead = "127.0.0.1:1"
    tool = ("kafka-consumer-groups", "--bootstrap-server", f"{dead},{cluster.broker(other)}")
    done = kompakt(*tool, "--delete-offsets", "--group", GROUP, "--topic", f"{TOPIC}:0,1")
    show(done.stdout + done.stderr, 8)
    check(
        "kafka-consumer-groups --delete-offsets",
        done.returncode == 0,
        f"through {dead} (down) and broker {other}, the coordinator being broker {coordinator}",
    )
    done = kompakt(*tool, "--describe", "--group", GROUP, "--output", "json")
    rows = json.loads(done.stdout) if done.returncode == 0 else []
    left = sorted(r["partition"] for r in rows if r.get("topic") == TOPIC)
    check("offsets left", left == [2, 3, 4, 5], f"partitions with committed offsets: {left}")


def dir_bytes(paths: Iterable[Path]) -> int:
    return sum(f.stat().st_size for p in paths for f in p.iterdir() if f.suffix == ".log")


def offline_compact_and_rejoin(cluster: Cluster, expected: dict[bytes, bytes]) -> None:
    node = 3
    write_round(cluster, expected, 2)
    before = scan(f"kafka://{cluster.broker(1)}/{TOPIC}")
    cluster.stop_node(node)
    say(f"    broker {node} stopped (SIGTERM, clean shutdown)")
    wait_for(
        f"ISR without broker {node}",
        lambda: all(node not in meta.isrs for meta in cluster.partitions(TOPIC).values()),
    )
    parts = [cluster.logs(node) / f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    size_before = dir_bytes(parts)
    configs = ["--config", "cleanup.policy=compact", "--config", "segment.bytes=1048576"]
    failed = []
    for part in parts:
        done = kompakt("log", "compact", str(part), *configs, "-o", "json")
        if done.returncode != 0:
            failed.append(part.name)
            show(done.stdout + done.stderr)
    size_after = dir_bytes(parts)
    check(
        f"log compact (broker {node} stopped)",
        not failed and size_after < size_before,
        f"{TOPIC}'s {PARTITIONS} partitions on broker {node}: "
        f"{size_before:,} -> {size_after:,} bytes of segments",
    )
    left = sorted(p.name for p in cluster.logs(node).iterdir() if "kompakt" in p.name)
    check("no kompakt files left in Kafka's directory", not left, ", ".join(left) or "none")
    done = kompakt("log", "verify", str(cluster.logs(node)))
    check(f"log verify node{node}/logs", done.returncode == 0, (done.stdout.strip().splitlines() or [""])[-1])
    cluster.start_node(node)
    say(f"    broker {node} restarted")
    rejoined = wait_for(
        f"broker {node} back in every ISR",
        lambda: all(node in meta.isrs for meta in cluster.partitions(TOPIC).values()),
        deadline_s=180,
    )
    check("rejoin", rejoined, f"broker {node} is in the ISR of every partition of {TOPIC}")
    admin = cluster.admin()  # held until the election answers: a dropped handle cancels it
    election = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    )
    try:
        election.result(60)
    except KafkaException as exc:
        say(f"    preferred leader election: {exc}")
    wait_for(
        f"broker {node} leading its preferred partitions",
        lambda: any(meta.leader == node for meta in cluster.partitions(TOPIC).values()),
    )
    led = sorted(p for p, meta in cluster.partitions(TOPIC).items() if meta.leader == node)
    after = scan(f"kafka://{cluster.broker(node)}/{TOPIC}")
    check(
        "the cluster serves the same keys",
        after == before == expected and bool(led),
        f"{len(after or {}):,} rows read after the rejoin, equal to before; "
        f"broker {node} leads partitions {led}",
    )
    done = kompakt("table", "diff", str(cluster.logs(node)), f"kafka://{cluster.broker(1)}", "--topic", TOPIC)
    show(done.stdout + done.stderr, 4)
    check(f"table diff node{node}/logs vs the cluster", done.returncode == 0 and "equal:" in done.stdout, "")
    log = (cluster.root / f"node{node}.restart.out").read_text(errors="replace")
    errors = [line for line in log.splitlines() if " ERROR " in line]
    show("\n".join(errors[:5]))
    check(f"broker {node}'s log after the restart", not errors, f"{len(errors)} ERROR lines")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", type=Path, help="Where the cluster and the backups live (default: a temp dir)."
    )
    parser.add_argument("--port", type=int, default=39260, help="Base port (uses PORT..PORT+5).")
    here = Path(__file__).resolve().parent.parent
    parser.add_argument(
        "--realkafka",
        type=Path,
        default=Path(os.environ.get("REALKAFKA", here.parent / "shared" / "realkafka")),
    )
    parser.add_argument("--keep", action="store_true", help="Leave the cluster running.")
    args = parser.parse_args()
    build = os.environ.get("KAFKA_BUILD")
    if not build:
        parser.error("set KAFKA_BUILD to the realkafka build folder")
    work = args.root or Path(tempfile.mkdtemp(prefix="kompakt-multibroker-"))
    if (work / "cluster").exists():
        shutil.rmtree(work / "cluster")
    cluster = Cluster(work / "cluster", args.port, args.realkafka, Path(build))
    started = time.monotonic()
    cluster.start()
    try:
        wait_for("3 brokers", lambda: len(cluster.admin().list_topics(timeout=10).brokers) == 3)
        expected = create_and_fill(cluster)
        backup_restore_diff(cluster, work)
        table_over_kafka(cluster, expected)
        explain_each_broker(cluster, work)
        groups(cluster)
        offline_compact_and_rejoin(cluster, expected)
    finally:
        if not args.keep:
            cluster.stop()
    passed = sum(results)
    say(f"{passed}/{len(results)} checks passed in {time.monotonic() - started:.0f} s")
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
