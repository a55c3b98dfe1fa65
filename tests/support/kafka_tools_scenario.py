"""One scenario for the tools kompakt added under Kafka's names (issue 28): the commands, and the
cluster state they run against, shared by ``tools/capture_kafka_tools_k28m.py`` (Kafka 4.1.2's own
tools against a real Kafka) and ``tests/cli/test_kafka_added_tools.py`` (kompakt's against kompakt).

The state is built with confluent-kafka, the same way on both brokers, so what differs between the
captures is only what differs per run (timestamps, producer ids, member ids, the data directory,
the broker id): :func:`normalise` replaces exactly those, per command kind.

Phases, in order (each command names the phase after which it runs):

``base``
    topics ``orders`` (3 partitions) and ``events`` (1); 5/3/0 records in orders' partitions and
    2 in events, with fixed CreateTimes; group ``reports`` with committed offsets 4/1/0 on orders
    and no members.
``deleted``
    after ``kafka-delete-records`` moved orders-0 to offset 2 (and orders-1 to its end).
``txn``
    transactional id ``ledger`` committed one transaction to events; ``open-txn`` has an open
    transaction on orders-2 (one record at offset 0), kept open while these commands run.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BASE_TS = 1_700_000_000_000
ORDERS = {0: 5, 1: 3, 2: 0}
EVENTS = 2
GROUP = "reports"
COMMITTED = {0: 4, 1: 1, 2: 0}
DEADLINE_S = 60.0
_KEEP = {"retention.ms": "-1"}


@dataclass(frozen=True)
class Command:
    name: str
    """The fixture's file name (without ``.txt``)."""
    tool: str
    argv: list[str]
    phase: str
    kind: str = "plain"
    """How the output is normalised (see :func:`normalise`)."""
    files: dict[str, str] = field(default_factory=dict)
    """Files the command reads, written into the run's directory first: name -> content."""
    with_bootstrap: bool = True
    """Whether ``--bootstrap-server`` goes first (the producer perf test takes it in its props)."""


DELETE_JSON = json.dumps(
    {
        "partitions": [
            {"topic": "orders", "partition": 0, "offset": 2},
            {"topic": "orders", "partition": 1, "offset": -1},
        ],
        "version": 1,
    }
)
ELECTION_JSON = json.dumps(
    {
        "partitions": [
            {"topic": "orders", "partition": 1},
            {"topic": "orders", "partition": 0},
            {"topic": "events", "partition": 0},
        ]
    }
)

COMMANDS: list[Command] = [
    # kafka-get-offsets
    Command("get-offsets-latest", "kafka-get-offsets", ["--exclude-internal-topics"], "base"),
    Command("get-offsets-topic", "kafka-get-offsets", ["--topic", "orders"], "base"),
    Command("get-offsets-earliest", "kafka-get-offsets", ["--topic", "orders", "--time", "-2"], "base"),
    Command(
        "get-offsets-max-timestamp",
        "kafka-get-offsets",
        ["--topic", "orders", "--time", "max-timestamp"],
        "base",
    ),
    Command(
        "get-offsets-timestamp",
        "kafka-get-offsets",
        ["--topic", "orders", "--time", str(BASE_TS + 2_000)],
        "base",
    ),
    Command(
        "get-offsets-partitions", "kafka-get-offsets", ["--topic", "orders", "--partitions", "0,2"], "base"
    ),
    Command(
        "get-offsets-topic-partitions",
        "kafka-get-offsets",
        ["--topic-partitions", "orders:1-,ev.*:0", "--time", "earliest"],
        "base",
    ),
    Command(
        "get-offsets-regex",
        "kafka-get-offsets",
        ["--topic", "ord.*|events", "--exclude-internal-topics"],
        "base",
    ),
    Command("get-offsets-no-match", "kafka-get-offsets", ["--topic", "nope"], "base"),
    # kafka-log-dirs
    Command(
        "log-dirs-topic",
        "kafka-log-dirs",
        ["--describe", "--topic-list", "orders,events"],
        "base",
        "log-dirs",
    ),
    Command(
        "log-dirs-broker",
        "kafka-log-dirs",
        ["--describe", "--topic-list", "events", "--broker-list", "{BROKER}"],
        "base",
        "log-dirs",
    ),
    # kafka-leader-election
    Command(
        "leader-election-one",
        "kafka-leader-election",
        ["--election-type", "preferred", "--topic", "orders", "--partition", "0"],
        "base",
    ),
    Command(
        "leader-election-all",
        "kafka-leader-election",
        ["--election-type", "preferred", "--all-topic-partitions"],
        "base",
    ),
    Command(
        "leader-election-json",
        "kafka-leader-election",
        ["--election-type", "PREFERRED", "--path-to-json-file", "{DIR}/election.json"],
        "base",
        files={"election.json": ELECTION_JSON},
    ),
    Command(
        "leader-election-unknown",
        "kafka-leader-election",
        ["--election-type", "unclean", "--path-to-json-file", "{DIR}/unknown.json"],
        "base",
        files={
            "unknown.json": json.dumps(
                {"partitions": [{"topic": "orders", "partition": 9}, {"topic": "nope", "partition": 0}]}
            )
        },
    ),
    Command(
        "log-dirs-unknown-broker", "kafka-log-dirs", ["--describe", "--broker-list", "5"], "base", "log-dirs"
    ),
    # kafka-consumer-groups --reset-offsets --shift-by / --by-duration
    Command(
        "reset-shift-by-dry-run",
        "kafka-consumer-groups",
        ["--group", GROUP, "--reset-offsets", "--topic", "orders", "--shift-by", "-2", "--dry-run"],
        "base",
        "reset",
    ),
    Command(
        "reset-shift-by-forward",
        "kafka-consumer-groups",
        ["--group", GROUP, "--reset-offsets", "--topic", "orders", "--shift-by", "3", "--dry-run"],
        "base",
        "reset",
    ),
    Command(
        "reset-by-duration",
        "kafka-consumer-groups",
        ["--group", GROUP, "--reset-offsets", "--topic", "orders", "--by-duration", "P1DT2H", "--dry-run"],
        "base",
        "reset",
    ),
    # kafka-delete-records (changes orders-0 and orders-1)
    Command(
        "delete-records",
        "kafka-delete-records",
        ["--offset-json-file", "{DIR}/delete.json"],
        "delete",
        "delete-records",
        files={"delete.json": DELETE_JSON},
    ),
    Command(
        "delete-records-out-of-range",
        "kafka-delete-records",
        ["--offset-json-file", "{DIR}/beyond.json"],
        "deleted",
        files={
            "beyond.json": json.dumps({"partitions": [{"topic": "orders", "partition": 2, "offset": 99}]})
        },
    ),
    Command(
        "get-offsets-after-delete",
        "kafka-get-offsets",
        ["--topic", "orders", "--time", "earliest"],
        "deleted",
    ),
    # kafka-transactions (with one open transaction)
    Command("transactions-list", "kafka-transactions", ["list"], "txn", "txn-list"),
    Command(
        "transactions-describe",
        "kafka-transactions",
        ["describe", "--transactional-id", "open-txn"],
        "txn",
        "txn",
    ),
    Command(
        "transactions-describe-committed",
        "kafka-transactions",
        ["describe", "--transactional-id", "ledger"],
        "txn",
        "txn",
    ),
    Command(
        "transactions-describe-producers",
        "kafka-transactions",
        ["describe-producers", "--topic", "orders", "--partition", "2"],
        "txn",
        "txn",
    ),
    Command(
        "transactions-find-hanging", "kafka-transactions", ["find-hanging", "--topic", "orders"], "txn", "txn"
    ),
    Command(
        "transactions-describe-unknown",
        "kafka-transactions",
        ["describe", "--transactional-id", "nope"],
        "txn",
        "txn",
    ),
    # the perf tests, on their own topic (created by the producer's first send)
    Command(
        "producer-perf-test",
        "kafka-producer-perf-test",
        [
            "--topic",
            "perf",
            "--num-records",
            "2000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            "bootstrap.servers={BOOTSTRAP}",
            "acks=1",
        ],
        "perf",
        "numbers",
        with_bootstrap=False,
    ),
    Command(
        "consumer-perf-test",
        "kafka-consumer-perf-test",
        ["--topic", "perf", "--messages", "2000", "--group", "perf-group", "--timeout", "20000"],
        "perf",
        "numbers",
    ),
    Command(
        "consumer-perf-test-hide-header",
        "kafka-consumer-perf-test",
        ["--topic", "perf", "--messages", "500", "--hide-header", "--timeout", "20000"],
        "perf",
        "numbers",
    ),
]


# --------------------------------------------------------------------------------------------
# building the state


def _wait(futures: dict[Any, Any]) -> None:
    for future in futures.values():
        future.result(timeout=DEADLINE_S)


def setup_base(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _wait(
        admin.create_topics(
            # retention.ms=-1: the records' CreateTimes are years old, and time retention would
            # delete them (at a moment that differs per run) on both brokers.
            [
                NewTopic("orders", num_partitions=3, replication_factor=1, config=_KEEP),
                NewTopic("events", num_partitions=1, replication_factor=1, config=_KEEP),
            ],
            request_timeout=DEADLINE_S,
        )
    )
    _wait_for_leaders(admin, {"orders": 3, "events": 1})
    # One batch per record (a flush after each): librdkafka's batching varies with the machine's
    # load, and the batches decide the partitions' sizes that kafka-log-dirs prints.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    sends = [("orders", p, i) for p, count in ORDERS.items() for i in range(count)]
    sends += [("events", 0, i) for i in range(EVENTS)]
    for topic, partition, i in sends:
        value = f"order-{partition}-{i}" if topic == "orders" else f"event-{i}"
        key = f"k{i}" if topic == "orders" else f"e{i}"
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=BASE_TS + i * 1000)
        assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    deadline = time.monotonic() + DEADLINE_S
    while True:  # the offsets topic is created (and its coordinator loaded) on first use
        try:
            consumer.commit(
                offsets=[TopicPartition("orders", p, o) for p, o in COMMITTED.items()], asynchronous=False
            )
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    consumer.close()


def _wait_for_leaders(admin: AdminClient, topics: dict[str, int]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        meta = admin.list_topics(timeout=10)
        ready = all(
            t in meta.topics
            and len(meta.topics[t].partitions) == n
            and all(p.leader >= 0 for p in meta.topics[t].partitions.values())
            for t, n in topics.items()
        )
        if ready:
            return
        time.sleep(0.1)
    raise AssertionError(f"topics {topics} have no leaders after {DEADLINE_S} s")


def setup_txn(bootstrap: str) -> Producer:
    """Commit one transaction as ``ledger``, then leave ``open-txn``'s transaction open (the
    returned producer holds it; close it after the commands)."""
    committed = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ledger"})
    committed.init_transactions(DEADLINE_S)
    committed.begin_transaction()
    committed.produce("events", key="t", value="in-txn", partition=0, timestamp=BASE_TS + 10_000)
    committed.commit_transaction(DEADLINE_S)
    committed.flush(DEADLINE_S)
    opened = Producer({"bootstrap.servers": bootstrap, "transactional.id": "open-txn", "linger.ms": 0})
    opened.init_transactions(DEADLINE_S)
    opened.begin_transaction()
    opened.produce("orders", key="o", value="open", partition=2, timestamp=BASE_TS + 20_000)
    assert opened.flush(DEADLINE_S) == 0
    return opened


def write_files(command: Command, directory: Path) -> None:
    for name, content in command.files.items():
        (directory / name).write_text(content, encoding="utf-8")


def argv_of(command: Command, directory: Path, broker_id: int, bootstrap: str) -> list[str]:
    argv = [
        a.replace("{DIR}", str(directory))
        .replace("{BROKER}", str(broker_id))
        .replace("{BOOTSTRAP}", bootstrap)
        for a in command.argv
    ]
    return ["--bootstrap-server", bootstrap, *argv] if command.with_bootstrap else argv


# --------------------------------------------------------------------------------------------
# normalising per-run values


_RULES: dict[str, list[tuple[str, str | Callable[[re.Match[str]], str]]]] = {
    "log-dirs": [
        (r'"logDir":"[^"]*"', '"logDir":"<DIR>"'),
        (r'"broker":\d+', '"broker":<B>'),
        (r"from brokers \d+", "from brokers <B>"),
        (r"Current existent brokers: \d+", "Current existent brokers: <B>"),
    ],
    "txn-list": [],
    "txn": [],
}


def _txn_table(text: str) -> str:
    """The transactions tables with per-run columns (ids, times, the broker) replaced, and the
    padding recomputed so widths follow the replaced values."""
    lines = [line for line in text.splitlines() if line]
    if not lines or "\t" not in lines[0]:
        return text
    rows = [line.rstrip("\t").split("\t") for line in lines]
    headers = [h.strip() for h in rows[0]]
    per_run = {
        "CoordinatorId": "<B>",
        "Coordinator": "<B>",
        "ProducerId": "<PID>",
        "CurrentTransactionStartTimeMs": "<TS>",
        "TransactionDurationMs": "<MS>",
        "LastTimestamp": "<TS>",
        "Duration(min)": "<MIN>",
        "LatestCoordinatorEpoch": "<EPOCH>",
    }
    out_rows = [headers]
    for row in rows[1:]:
        cells = [c.strip() for c in row]
        out_rows.append(
            [per_run[h] if h in per_run and cells[i] != "None" else cells[i] for i, h in enumerate(headers)]
        )
    if headers[0] == "TransactionalId":
        out_rows = [out_rows[0], *sorted(out_rows[1:])]
    widths = [max(len(r[i]) for r in out_rows) for i in range(len(headers))]
    return "".join(
        "".join(c.ljust(w) + "\t" for c, w in zip(r, widths, strict=True)) + "\n" for r in out_rows
    )


def normalise(kind: str, text: str) -> str:
    for pattern, replacement in _RULES.get(kind, []):
        text = re.sub(pattern, replacement, text)
    if kind == "delete-records":
        # Kafka's order is that of an immutable map salted afresh in every JVM: per run.
        lines = text.splitlines(keepends=True)
        head = [line for line in lines if not line.startswith("partition: ")]
        text = "".join(head + sorted(line for line in lines if line.startswith("partition: ")))
    if kind in ("txn", "txn-list"):
        text = _txn_table(text)
    if kind == "numbers":
        text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", "<DATE>", text)
        text = re.sub(r"\b\d+(\.\d+)?\b", lambda m: "<N.N>" if m.group(1) else "<N>", text)
    return text


MODERN_GROUP = "modern"
"""A consumer group of the KIP-848 protocol (``group.protocol=consumer``), for the offsets decoder."""


def setup_modern_group(bootstrap: str) -> None:
    """A KIP-848 member joins ``modern`` on ``events``, reads, commits and leaves: the group's
    metadata, member, target assignment and current assignment records, then their tombstones."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": MODERN_GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["events"])
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            consumer.commit(message=message, asynchronous=False)
            break
    else:
        raise AssertionError(f"the {MODERN_GROUP} consumer read nothing in {DEADLINE_S} s")
    consumer.close()
