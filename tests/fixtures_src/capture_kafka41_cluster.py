"""Capture ``tests/log/fixtures/kafka41_cluster`` from a real Apache Kafka 4.1.2 broker (issue 31).

A development script, not run by ``make test`` (it needs the JVM build): it starts a single KRaft
node with ``/work/shared/realkafka/start.sh``, gives it topics with topic-level overrides,
broker-level overrides (a cluster default, ``ConfigRecord`` BROKER ``""``, and this broker's own,
BROKER ``"1"``), a deleted topic and a consumer group, and copies its stopped log directory into
the fixture together with what the live broker's DescribeConfigs returned for every topic.

It runs the broker twice. The first run takes a metadata snapshot every 2 s, so a
``<offset>-<epoch>.checkpoint`` file holds phase 1; the second run (snapshots hourly, Kafka's
default) makes the phase 2 changes, which therefore exist only in the metadata log's segment after
that snapshot: a reader that stops at the snapshot, or that does not apply removals in order,
gets them wrong. DescribeConfigs is taken at the end of the second run, just before the clean
shutdown whose directory is copied.

Usage::

    KAFKA_BUILD=/work/rk/build .venv/bin/python tests/fixtures_src/capture_kafka41_cluster.py \
        [--port 29092] [--out tests/log/fixtures/kafka41_cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

START_SH = Path(os.environ.get("REALKAFKA", "/work/shared/realkafka")) / "start.sh"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "log" / "fixtures" / "kafka41_cluster"

#: server.properties lines of both runs (static broker configs: DescribeConfigs says STATIC_BROKER_CONFIG).
STATIC = [
    "log.cleaner.backoff.ms=1000",
    "log.segment.bytes=2097152",
    # Keeps the deleted topic's "-delete" directory in the copy, as on a broker that deleted it a
    # moment ago.
    "log.segment.delete.delay.ms=3600000",
]
FIRST_RUN = [*STATIC, "metadata.log.max.snapshot.interval.ms=2000"]
SECOND_RUN = list(STATIC)

#: The topics and their overrides (phase 1).
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "orders": (
        2,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "1048576",
            "segment.ms": "1500",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "1000",
        },
    ),
    "customers": (
        1,
        {"cleanup.policy": "compact,delete", "retention.ms": "604800000", "min.compaction.lag.ms": "60000"},
    ),
    "events": (1, {"cleanup.policy": "delete", "retention.ms": "86400000", "segment.bytes": "1048576"}),
    "plain": (1, {}),
    "gone": (1, {"cleanup.policy": "compact"}),
}


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except Exception as exc:  # noqa: BLE001 - polling a starting broker
            last = exc
            result = None
        if result:
            return result
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}: {last}")


class Broker:
    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port = root, port
        self.bootstrap = f"127.0.0.1:{port}"
        BOOTSTRAP[:] = [self.bootstrap]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, props: list[str]) -> AdminClient:
        out = (self.root / "broker.out").open("ab")
        self.proc = subprocess.Popen(
            ["bash", str(START_SH), str(self.root), str(self.port), *props], stdout=out, stderr=out
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        wait_for("the broker", lambda: admin.list_topics(timeout=2).brokers)
        return admin

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        print(f"broker stopped (exit {code})")
        self.proc = None


def alter(admin: AdminClient, restype: ResourceType, name: str, ops: list[tuple[str, str | None]]) -> None:
    if restype == ResourceType.BROKER:
        alter_broker(admin, name, ops)
        return
    entries = [
        ConfigEntry(
            k, v or "", incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET
        )
        for k, v in ops
    ]
    for future in admin.incremental_alter_configs(
        [ConfigResource(restype, name, incremental_configs=entries)]
    ).values():
        future.result(timeout=30)


BOOTSTRAP: list[str] = []


def alter_broker(admin: AdminClient, name: str, ops: list[tuple[str, str | None]]) -> None:
    """IncrementalAlterConfigs v1 on the wire: librdkafka cannot name the cluster-default BROKER
    resource (the empty name), which is the ConfigRecord this fixture needs."""
    from kompakt.protocol import codec
    from tests.support.wire import request_bytes

    values = {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": name,
                "configs": [
                    {"name": k, "config_operation": 1 if v is None else 0, "value": v} for k, v in ops
                ],
            }
        ],
        "validate_only": False,
    }
    host, port = BOOTSTRAP[0].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request_bytes(44, 1, values, correlation_id=7))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        _, response = codec.decode_response(_recv(sock, size), 44, 1)
    for entry in response.responses:
        if int(entry.error_code) != 0:
            raise SystemExit(f"alter broker {name!r}: error {entry.error_code} {entry.error_message}")


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise SystemExit("the broker closed the connection")
        data += chunk
    return data


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for key, value, partition in records:
        producer.produce(topic, value=value, key=key, partition=partition)
        producer.poll(0)
    if producer.flush(30):
        raise SystemExit(f"produce to {topic} did not finish")


def snapshots(logs: Path) -> list[str]:
    return sorted(
        p.name
        for p in (logs / "__cluster_metadata-0").glob("*.checkpoint")
        if not p.name.startswith("0" * 20)
    )


def phase1(admin: AdminClient, broker: Broker) -> None:
    alter(
        admin,
        ResourceType.BROKER,
        "",
        [
            ("log.cleanup.policy", "compact"),
            ("log.cleaner.delete.retention.ms", "3600000"),
            ("log.retention.ms", "172800000"),
        ],
    )
    alter(
        admin, ResourceType.BROKER, "", [("log.retention.ms", None)]
    )  # a removal: ConfigRecord with a null value
    alter(
        admin,
        ResourceType.BROKER,
        "1",
        [("log.cleaner.delete.retention.ms", "7200000"), ("log.cleaner.threads", "2")],
    )
    # The cleaner's sizing settings are dynamic too (kompakt sizing --log-dir reads them).
    alter(admin, ResourceType.BROKER, "", [("log.cleaner.dedupe.buffer.size", "67108864")])
    new = [NewTopic(name, partitions, 1, config=configs) for name, (partitions, configs) in TOPICS.items()]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(timeout=30)
    alter(admin, ResourceType.TOPIC, "orders", [("max.compaction.lag.ms", "86400000")])
    alter(admin, ResourceType.TOPIC, "orders", [("max.compaction.lag.ms", None)])
    # orders: 40 keys updated in 6 rounds about 2 s apart (segment.ms rolls), every 7th a tombstone.
    for round_ in range(6):
        batch = []
        for i in range(40):
            key = f"order-{i:03d}".encode()
            value = None if (i + round_) % 7 == 0 else f"round {round_} of order {i} ".encode() * 3
            batch.append((key, value, i % 2))
        produce(broker.bootstrap, "orders", batch)
        time.sleep(2.0)
    produce(
        broker.bootstrap,
        "customers",
        [(f"cust-{i}".encode(), f"customer {i}".encode(), 0) for i in range(30)],
    )
    produce(broker.bootstrap, "events", [(None, f"event {i}".encode(), 0) for i in range(50)])
    produce(broker.bootstrap, "plain", [(f"k{i % 10}".encode(), f"v{i}".encode(), 0) for i in range(40)])
    produce(broker.bootstrap, "gone", [(f"g{i}".encode(), b"soon gone", 0) for i in range(10)])
    # A binary key (not UTF-8) for the dump's escaping.
    produce(broker.bootstrap, "plain", [(b"\x00\x01\xffbin", b"binary key", 0)])
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "fixture-group", "enable.auto.commit": False}
    )
    offsets = [TopicPartition("orders", 0, 100), TopicPartition("orders", 1, 90)]
    # The coordinator answers NOT_COORDINATOR while __consumer_offsets is being created and loaded.
    wait_for("a committed offset", lambda: consumer.commit(offsets=offsets, asynchronous=False))
    consumer.close()
    logs = broker.root / "logs"
    wait_for(
        "the cleaner to compact orders",
        lambda: "orders 0" in (logs / "cleaner-offset-checkpoint").read_text(),
    )
    wait_for("a metadata snapshot", lambda: snapshots(logs), timeout_s=60)
    print("snapshots after phase 1:", snapshots(logs))


def phase2(admin: AdminClient, broker: Broker) -> None:
    for future in admin.delete_topics(["gone"], operation_timeout=30).values():
        future.result(timeout=30)
    alter(
        admin,
        ResourceType.TOPIC,
        "customers",
        [("min.cleanable.dirty.ratio", "0.2"), ("min.compaction.lag.ms", None)],
    )
    alter(admin, ResourceType.BROKER, "", [("log.cleaner.min.cleanable.ratio", "0.3")])
    late = [
        NewTopic("late", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "3145728"}),
        # Empty: the target of an offline restore into this directory.
        NewTopic("restore-target", 2, 1, config={"cleanup.policy": "compact"}),
    ]
    for future in admin.create_topics(late, operation_timeout=30).values():
        future.result(timeout=30)
    produce(broker.bootstrap, "late", [(f"late-{i}".encode(), b"after the snapshot", 0) for i in range(5)])


def describe(admin: AdminClient) -> dict[str, Any]:
    metadata = admin.list_topics(timeout=10)
    topics = sorted(metadata.topics)
    described = admin.describe_topics(__import__("confluent_kafka").TopicCollection(topics))
    # librdkafka prints a Uuid in standard base64; Kafka (and partition.metadata) in URL-safe base64.
    ids = {
        name: str(f.result(timeout=30).topic_id).replace("+", "-").replace("/", "_")
        for name, f in described.items()
    }
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics] + [
        ConfigResource(ResourceType.BROKER, "1")
    ]
    result: dict[str, Any] = {"topics": {}, "broker": {}}
    for resource, future in admin.describe_configs(resources, request_timeout=30).items():
        entries = future.result(timeout=30)
        table = {
            name: {"value": e.value, "source": ConfigSource(int(e.source)).name}
            for name, e in sorted(entries.items())
        }
        if resource.restype == ResourceType.BROKER:
            result["broker"] = table
        else:
            result["topics"][resource.name] = {
                "topic_id": ids[resource.name],
                "partitions": len(metadata.topics[resource.name].partitions),
                "configs": table,
            }
    return result


def trim_preallocated_indexes(logs: Path) -> None:
    """Cut the zero-filled preallocation off the indexes of a ``-delete`` directory.

    Kafka trims an index to its entries when it closes a log, but a deleted topic's directory is
    renamed while its indexes are open and never closed: they stay 10 MiB of zeros each. Only the
    all-zero tail is cut (whole entries), so every entry Kafka wrote is kept.
    """
    for directory in logs.glob("*-delete"):
        for path, width in [(p, 8) for p in directory.glob("*.index")] + [
            (p, 12) for p in directory.glob("*.timeindex")
        ]:
            data = path.read_bytes()
            end = len(data) - len(data) % width
            while end >= width and not any(data[end - width : end]):
                end -= width
            path.write_bytes(data[:end])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=29092)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--keep", action="store_true", help="keep the broker's temporary directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kafka41-cluster-"))
    broker = Broker(root, args.port)
    try:
        admin = broker.start(FIRST_RUN)
        phase1(admin, broker)
        broker.stop()
        admin = broker.start(SECOND_RUN)
        phase2(admin, broker)
        described = describe(admin)
        broker.stop()
    except BaseException:
        if broker.proc is not None:
            broker.proc.kill()
        raise
    out: Path = args.out
    shutil.rmtree(out / "logs", ignore_errors=True)  # the README stays
    shutil.copytree(root / "logs", out / "logs")
    trim_preallocated_indexes(out / "logs")
    properties = (root / "server.properties").read_text().replace(str(root), "/var/lib/kafka")
    (out / "server.properties").write_text(properties)
    (out / "describe_configs.json").write_text(json.dumps(described, indent=1, sort_keys=True) + "\n")
    print(f"captured {out}: {sum(p.stat().st_size for p in out.rglob('*') if p.is_file())} bytes")
    if not args.keep:
        shutil.rmtree(root)
    else:
        print(f"kept {root}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"kafka error: {exc}") from None
