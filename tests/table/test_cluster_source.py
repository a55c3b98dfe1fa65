"""``kompakt table get|scan|counts|export kafka://HOST:PORT/TOPIC`` (or ``--bootstrap``): a topic on a
cluster read by a read_committed consumer answers as the broker's admin endpoint and its files do
(issue 31: a user without shell access to the brokers keeps the table view)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from rich.console import Console

from kompakt.table.partitioner import partition_for
from kompakt.testing import InProcessBroker

from .table_helpers import TOPIC, CliResult, produce

Cli = Callable[..., CliResult]


def _seed(broker: InProcessBroker) -> None:
    produce(
        broker.bootstrap_servers,
        TOPIC,
        [(b"alpha", b"1"), (b"beta", b"2"), (b"gamma", None), (b"\xff\x00bin", b"\x01\xfe")],
        headers=[("h", b"x")],
    )
    produce(broker.bootstrap_servers, TOPIC, [(b"alpha", b"3"), (b"delta", b"4"), (b"omega", None)])
    many = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(60)]
    produce(broker.bootstrap_servers, TOPIC, many)


def _lines(result: CliResult) -> list[dict[str, Any]]:
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.out.splitlines()]


def test_a_kafka_source_gives_the_rows_of_the_admin_endpoint_and_the_files(
    broker: InProcessBroker, cli: Cli, tmp_path: Path
) -> None:
    _seed(broker)
    kafka = f"kafka://{broker.bootstrap_servers}/{TOPIC}"
    admin = (TOPIC, "--admin-url", broker.admin_url)
    files = (TOPIC, "--log-dir", str(broker.data_dir))
    bootstrap = (TOPIC, "--bootstrap", broker.bootstrap_servers)
    for flags in ((), ("--include-tombstones",), ("--prefix", "key-1"), ("--partition", "1")):
        expected = _lines(cli("table", "scan", *admin, *flags, "-o", "json"))
        assert expected, flags
        assert _lines(cli("table", "scan", *files, *flags, "-o", "json")) == expected
        assert _lines(cli("table", "scan", kafka, *flags, "-o", "json")) == expected, flags
        assert _lines(cli("table", "scan", *bootstrap, *flags, "-o", "json")) == expected, flags
    shown = cli("table", "scan", kafka)
    assert shown.code == 0 and "tbl: 64 keys" in shown.out and "base64:/wBiaW4=" in shown.out

    offline = cli("table", "counts", *files, "-o", "json").json()
    assert (offline["live_keys"], offline["tombstones"]) == (64, 2)
    assert cli("table", "counts", kafka, "-o", "json").json() == offline
    live = cli("table", "counts", *admin, "-o", "json").json()
    for got, want in zip(offline["partitions"], live["partitions"], strict=True):
        assert (got["live_keys"], got["tombstones"], got["indexed_to_offset"]) == (
            want["live_keys"],
            want["tombstones"],
            want["indexed_to_offset"],
        )

    for key in ("alpha", "key-7", "ff0062696e"):
        encoding = ["--key-encoding", "hex"] if key.startswith("ff") else []
        want = cli("table", "get", *admin, key, *encoding, "-o", "json").json()
        got = cli("table", "get", kafka, key, *encoding, "-o", "json").json()
        assert want.pop("location") is not None and got.pop("location") is None
        assert got == want
    table = cli("table", "get", *admin, "alpha").out.splitlines()
    assert table[-1].startswith("in 00000000000000000000.log at byte")  # no such line from a cluster
    assert cli("table", "get", kafka, "alpha").out.splitlines() == table[:-1]
    gone = cli("table", "get", kafka, "gamma")
    assert gone.code == 1 and "key gamma is deleted in tbl-" in gone.err
    assert "(tombstone at offset" in gone.err
    absent = cli("table", "get", *bootstrap, "nope")
    assert absent.code == 1 and "key nope is not in tbl-" in absent.err

    exported = {}
    for name, source in (("admin", admin), ("kafka", (kafka,))):
        out = tmp_path / f"{name}.jsonl"
        flags = ("--format", "jsonl", "--encoding", "base64", "--include-tombstones")
        got = cli("table", "export", *source, *flags, "--out", str(out))
        assert got.code == 0, got.err
        exported[name] = out.read_text()
    assert exported["kafka"] == exported["admin"] and exported["kafka"].count("\n") == 66


def test_get_reads_only_the_partition_the_partitioner_gives(
    broker: InProcessBroker, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kompakt.table.cluster import ClusterTopic

    _seed(broker)
    read: list[int] = []
    original = ClusterTopic.read

    def spy(self: ClusterTopic, partition: int, stop: int | None = None) -> Any:
        read.append(partition)
        return original(self, partition, stop)

    monkeypatch.setattr(ClusterTopic, "read", spy)
    kafka = f"kafka://{broker.bootstrap_servers}/{TOPIC}"
    got = cli("table", "get", kafka, "key-7", "-o", "json")
    assert got.code == 0 and got.json()["value"] == "value-7"
    assert read == [partition_for(b"key-7", 3, "murmur2")]
    read.clear()
    got = cli("table", "get", kafka, "key-7", "--partitioner", "crc32", "-o", "json")
    assert read == [partition_for(b"key-7", 3, "crc32")]
    read.clear()
    got = cli("table", "get", kafka, "key-7", "--partitioner", "any", "-o", "json")
    assert (got.code, got.json()["value"], sorted(read)) == (0, "value-7", [0, 1, 2])


@pytest.fixture
def txn_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    overrides = {
        "log.cleaner.enable": "false",
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    }
    with InProcessBroker(tmp_path / "data", overrides=overrides) as b:
        b.create_topic(TOPIC, 1, cleanup_policy="compact")
        yield b


def _transactional(broker: InProcessBroker, txn_id: str) -> Any:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id, "linger.ms": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


def test_a_kafka_source_reads_committed_data_below_the_last_stable_offset(
    txn_broker: InProcessBroker, cli: Cli
) -> None:
    broker = txn_broker
    committed = _transactional(broker, "committed")
    committed.produce(TOPIC, key=b"k1", value=b"a", partition=0)
    committed.commit_transaction(30)
    aborted = _transactional(broker, "aborted")
    aborted.produce(TOPIC, key=b"k1", value=b"aborted", partition=0)
    aborted.produce(TOPIC, key=b"k2", value=b"aborted", partition=0)
    aborted.flush(30)
    aborted.abort_transaction(30)
    still_open = _transactional(broker, "open")
    still_open.produce(TOPIC, key=b"k3", value=b"open", partition=0)
    still_open.flush(30)
    produce(broker.bootstrap_servers, TOPIC, [(b"k4", b"after the open transaction")], partition=0)
    kafka = f"kafka://{broker.bootstrap_servers}/{TOPIC}"

    rows = _lines(cli("table", "scan", kafka, "-o", "json"))
    assert {r["key"]: r["value"] for r in rows} == {"k1": "a"}
    assert cli("table", "get", kafka, "k2", "--partition", "0").code == 1
    counts = cli("table", "counts", kafka, "-o", "json").json()
    assert counts["live_keys"] == 1
    assert counts["partitions"][0]["indexed_to_offset"] == counts_offline(cli, broker)["indexed_to_offset"]

    still_open.commit_transaction(30)
    rows = _lines(cli("table", "scan", kafka, "-o", "json"))
    assert {r["key"]: r["value"] for r in rows} == {
        "k1": "a",
        "k3": "open",
        "k4": "after the open transaction",
    }


def counts_offline(cli: Cli, broker: InProcessBroker) -> dict[str, Any]:
    got = cli("table", "counts", TOPIC, "--log-dir", str(broker.data_dir), "-o", "json")
    assert got.code == 0, got.err
    partitions: list[dict[str, Any]] = got.json()["partitions"]
    return partitions[0]


def test_as_of_over_a_kafka_source_says_a_compacted_topic_may_be_incomplete(
    broker: InProcessBroker, cli: Cli
) -> None:
    base = 1_700_000_000_000
    broker.create_topic("history", 1, cleanup_policy="delete")
    for topic in (TOPIC, "history"):
        produce(broker.bootstrap_servers, topic, [(b"k", b"old")], partition=0, timestamp=base)
        produce(broker.bootstrap_servers, topic, [(b"k", b"new")], partition=0, timestamp=base + 10_000)
    at = ["--partition", "0", "--as-of", str(base + 5_000), "-o", "json"]
    got = cli("table", "get", f"kafka://{broker.bootstrap_servers}/history", "k", *at)
    assert got.code == 0, got.err
    data = got.json()
    assert (data["value"], data["as_of"]["complete"], data["as_of"]["cut_offset"]) == ("old", True, 1)
    got = cli("table", "get", f"kafka://{broker.bootstrap_servers}/{TOPIC}", "k", *at)
    data = got.json()
    assert (got.code, data["value"], data["as_of"]["complete"]) == (0, "old", False)
    assert "does not say how far its cleaner has run" in data["as_of"]["reason"]
    got = cli("table", "scan", f"kafka://{broker.bootstrap_servers}/{TOPIC}", "--as-of", str(base + 5_000))
    assert got.code == 0 and "│ old " in got.out and "note: the answer may be incomplete" in got.out
    got = cli("table", "get", f"kafka://{broker.bootstrap_servers}/history", "k", "--partition", "0")
    assert got.code == 0 and "│ new " in got.out


def test_kafka_source_errors_are_one_line(broker: InProcessBroker, cli: Cli, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    broker.create_topic("nothing", 2, cleanup_policy="compact")
    got = cli("table", "counts", f"kafka://{bootstrap}/nothing", "--timeout", "10", "-o", "json")
    assert got.code == 0, got.err  # empty partitions end, they do not time out
    assert [(p["live_keys"], p["indexed_to_offset"]) for p in got.json()["partitions"]] == [(0, 0), (0, 0)]
    got = cli("table", "scan", f"kafka://{bootstrap}/no-such-topic")
    assert got.code == 1 and f"topic 'no-such-topic' does not exist at {bootstrap}" in got.err
    got = cli("table", "counts", f"kafka://{bootstrap}")
    assert got.code == 2 and "names no topic" in got.err
    got = cli("table", "get", TOPIC, "k", "--bootstrap", bootstrap, "--log-dir", str(tmp_path))
    assert got.code == 2 and "give one source" in got.err
    got = cli("table", "get", f"kafka://{bootstrap}/{TOPIC}", "k", "--partition", "7")
    assert got.code == 1 and "partition 7 is not here (have 0, 1, 2)" in got.err
    got = cli("table", "counts", "kafka://127.0.0.1:9/t", "--timeout", "1")
    assert got.code == 1 and "127.0.0.1:9" in got.err and got.err.count("\n") == 1


def test_a_long_read_shows_progress_on_a_terminal(
    broker: InProcessBroker, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kompakt.cli import cluster

    _seed(broker)
    screen = io.StringIO()
    monkeypatch.setattr(cluster, "err_console", Console(file=screen, force_terminal=True, width=160))
    got = cli("table", "scan", f"kafka://{broker.bootstrap_servers}/{TOPIC}", "-o", "json")
    assert len(_lines(got)) == 64
    shown = screen.getvalue()
    assert f"reading {TOPIC} from {broker.bootstrap_servers}" in shown
    assert "100%" in shown
    assert "{" not in shown  # the rows went to stdout, not through the progress display
