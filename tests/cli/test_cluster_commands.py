"""``kompakt topic|produce|consume|group`` against a real ``kompakt serve`` subprocess."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kompakt.cli.cluster import DEFAULT_TIMEOUT_S
from tests.support.cli import run, run_cli
from tests.support.serve import BrokerProcess

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("cli_cluster")]

DEADLINE_S = 20.0


def ok(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    outcome = run(broker, *args, stdin=stdin)
    assert outcome.code == 0, (args, outcome)
    return outcome.stdout


def as_json(broker: BrokerProcess, *args: str, stdin: str | None = None) -> Any:
    return json.loads(ok(broker, *args, "--output", "json", stdin=stdin))


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def configs_by_name(description: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in description["configs"]}


def test_topic_create_list_describe_alter_delete(broker: BrokerProcess) -> None:
    created = as_json(
        broker, "topic", "create", "tp-life", "--partitions", "3", "--config", "cleanup.policy=compact"
    )
    assert created == {
        "topic": "tp-life",
        "partitions": 3,
        "replication_factor": 1,
        "configs": {"cleanup.policy": "compact"},
    }
    assert ok(broker, "topic", "create", "tp-life-2") == "created topic tp-life-2 (1 partition)\n"
    listed = {row["topic"]: row for row in as_json(broker, "topic", "list")}
    assert listed["tp-life"]["partitions"] == 3 and listed["tp-life-2"]["partitions"] == 1

    described = as_json(broker, "topic", "describe", "tp-life")
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["leader"] is not None and p["replicas"] == [p["leader"]] for p in described["partitions"])
    configs = configs_by_name(described)
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert not configs["cleanup.policy"]["is_default"]
    assert configs["min.cleanable.dirty.ratio"]["source"] == "DEFAULT_CONFIG"

    # alter: set one, then delete it again; the source follows (topic override <-> default).
    altered = as_json(
        broker,
        "topic",
        "alter",
        "tp-life",
        "--set",
        "min.cleanable.dirty.ratio=0.1",
        "--set",
        "segment.ms=60000",
    )
    assert altered["set"] == {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "60000"}
    configs = configs_by_name(as_json(broker, "topic", "describe", "tp-life"))
    assert configs["min.cleanable.dirty.ratio"]["value"] == "0.1"
    assert configs["min.cleanable.dirty.ratio"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.ms"]["value"] == "60000"
    assert configs["cleanup.policy"]["value"] == "compact"  # incremental: untouched configs stay

    assert "deleted min.cleanable.dirty.ratio" in ok(
        broker, "topic", "alter", "tp-life", "--delete", "min.cleanable.dirty.ratio"
    )
    configs = configs_by_name(as_json(broker, "topic", "describe", "tp-life"))
    assert configs["min.cleanable.dirty.ratio"]["value"] == "0.5"
    assert configs["min.cleanable.dirty.ratio"]["source"] == "DEFAULT_CONFIG"
    assert configs["segment.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"

    table = ok(broker, "topic", "describe", "tp-life")
    assert "cleanup.policy" in table and "DYNAMIC_TOPIC_CONFIG" in table and "compact" in table

    assert as_json(broker, "topic", "delete", "tp-life-2") == {"topic": "tp-life-2", "deleted": True}
    assert "tp-life-2" not in {row["topic"] for row in as_json(broker, "topic", "list")}
    missing = run(broker, "topic", "describe", "tp-life-2")
    assert missing.code == 1 and "UNKNOWN_TOPIC_OR_PART" in missing.stderr


def test_broker_config_name_at_topic_level_names_the_topic_config(broker: BrokerProcess) -> None:
    """Issue 8 item 1: the guide's broker names are refused with the topic-level name to use."""
    outcome = run_cli(
        "topic", "create", "guide-topic", "--config", "log.cleaner.min.cleanable.ratio=0.3",
        "--bootstrap", broker.bootstrap,
    )  # fmt: skip
    assert outcome.code == 1
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("error: cannot create topic 'guide-topic': INVALID_CONFIG")
    assert "did you mean min.cleanable.dirty.ratio?" in lines[0]

    ok(broker, "topic", "create", "guide-alter")
    altered = run(
        broker, "topic", "alter", "guide-alter", "--set", "log.cleaner.min.compaction.lag.ms=3600000"
    )
    assert altered.code == 1
    assert "INVALID_CONFIG" in altered.stderr and "did you mean min.compaction.lag.ms?" in altered.stderr


def test_usage_errors_exit_2(broker: BrokerProcess) -> None:
    assert run(broker, "topic", "create", "x", "--config", "no-equals-sign").code == 2
    assert run(broker, "topic", "alter", "x").code == 2
    assert run(broker, "consume", "x", "--format", "%q").code == 2
    assert run(broker, "consume", "x", "--from-beginning", "--offset", "3").code == 2
    assert run(broker, "produce", "x", "--property", "no.such=1", stdin="").code == 2
    assert run(broker, "group", "reset-offsets", "g", "--topic", "x").code == 2


def test_bootstrap_server_is_accepted_wherever_a_broker_is_named(broker: BrokerProcess) -> None:
    """Issue 28: ``--bootstrap-server`` (every kafka-* tool's spelling) works on kompakt's own
    commands too, ``--bootstrap`` stays as an alias."""
    ok(broker, "topic", "create", "vocabulary", "--config", "cleanup.policy=compact")
    for flag in ("--bootstrap-server", "--bootstrap", "-b"):
        listed = run_cli("topic", "list", flag, broker.bootstrap)
        assert listed.code == 0 and "vocabulary" in listed.stdout, (flag, listed.stderr)
    # One URL form for a cluster: kafka://HOST:PORT, as the table commands' sources have it.
    for command in (("topic", "list"), ("kafka-topics", "--list")):
        listed = run_cli(*command, "--bootstrap-server", f"kafka://{broker.bootstrap}")
        assert listed.code == 0 and "vocabulary" in listed.stdout, (command, listed.stderr)
    refused = run_cli("topic", "list", "--bootstrap-server", f"kafka://{broker.bootstrap}/vocabulary")
    assert refused.code == 2 and "give kafka://HOST:PORT (no topic)" in refused.stderr
    produced = run_cli(
        "produce", "vocabulary", "--bootstrap-server", broker.bootstrap, "-K", ":", stdin="a:1\n"
    )
    assert produced.code == 0, produced.stderr
    consumed = run_cli(
        "consume", "vocabulary", "--bootstrap-server", broker.bootstrap, "-e", "--from-beginning",
        "--format", "%k=%s\\n",
    )  # fmt: skip
    assert (consumed.code, consumed.stdout) == (0, "a=1\n"), consumed.stderr


def test_console_producer_spelling_sends_a_tombstone(broker: BrokerProcess) -> None:
    """Issue 8 item 5: the guide's command as typed; null and empty values print differently."""
    ok(broker, "topic", "create", "guide-users", "--config", "cleanup.policy=compact")
    produced = run_cli(
        "produce", "guide-users", "--bootstrap", broker.bootstrap,
        "--property", "parse.key=true", "--property", "key.separator=:",
        "--property", "null.marker=TOMBS", "--output", "json",
        stdin="user_id_99:TOMBS\nuser_id_98:\n",
    )  # fmt: skip
    assert produced.code == 0, produced.stderr
    assert json.loads(produced.stdout) == {"topic": "guide-users", "sent": 2, "failed": 0, "errors": []}
    shown = ok(broker, "consume", "guide-users", "--from-beginning", "-e", "--format", "%k %S\\n")
    assert shown == "user_id_99 -1\nuser_id_98 0\n"
    shown = ok(broker, "consume", "guide-users", "--from-beginning", "-e", "--format", "%o:%v|%K\\n")
    assert shown == "0:(null)|10\n1:|10\n"
    shown = ok(broker, "consume", "guide-users", "--from-beginning", "-e", "--null-repr", "NULL")
    assert shown == "NULL\n\n"
    records = json_lines(ok(broker, "consume", "guide-users", "--from-beginning", "-e", "--output", "json"))
    assert [(r["key"], r["value"], r["value_size"]) for r in records] == [
        ("user_id_99", None, -1),
        ("user_id_98", "", 0),
    ]


def test_null_key_on_a_compacted_topic_fails_with_invalid_record(broker: BrokerProcess) -> None:
    ok(broker, "topic", "create", "compacted-nokey", "--config", "cleanup.policy=compact")
    outcome = run_cli("produce", "compacted-nokey", "--bootstrap", broker.bootstrap, stdin="no key here\n")
    assert outcome.code == 1
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 1 of 1 records failed: INVALID_RECORD"), lines
    report = as_json(broker, "produce", "compacted-nokey", "--key-separator", ":", stdin="k:v\n")
    assert report["sent"] == 1
    failed = run(broker, "produce", "compacted-nokey", "--output", "json", stdin="a\nb\n")
    assert failed.code == 1
    assert json.loads(failed.stdout)["failed"] == 2
    assert json.loads(failed.stdout)["errors"][0]["error"].startswith("INVALID_RECORD")


def test_produce_native_options_headers_and_partition(broker: BrokerProcess) -> None:
    ok(broker, "topic", "create", "native", "--partitions", "2")
    lines = "k1=v1\nNULL=v2\nk3=NULL\nk4=\n"
    report = as_json(
        broker, "produce", "native", "--key-separator", "=", "--null-marker", "NULL",
        "--header", "source=cli", "--header", "gone=NULL", "--partition", "1", stdin=lines,
    )  # fmt: skip
    assert (report["sent"], report["failed"]) == (4, 0)
    records = json_lines(ok(broker, "consume", "native", "--from-beginning", "-e", "--output", "json"))
    assert {r["partition"] for r in records} == {1}
    assert [(r["key"], r["value"]) for r in records] == [("k1", "v1"), (None, "v2"), ("k3", None), ("k4", "")]
    assert records[0]["headers"] == [{"key": "source", "value": "cli"}, {"key": "gone", "value": None}]
    text = ok(
        broker, "consume", "native", "-p", "1", "--offset", "0", "-e", "--format", "%t/%p/%o %h\\n", "-c", "1"
    )
    assert text == "native/1/0 source=cli,gone=(null)\n"

    # Kafka's header spelling: headers<TAB>key:value.
    report = as_json(
        broker, "produce", "native", "--property", "parse.headers=true", "--property", "parse.key=true",
        "--property", "key.separator=:", "--partition", "0", stdin="h1:a,h2:b\tkey:value\n",
    )  # fmt: skip
    assert report["sent"] == 1
    text = ok(broker, "consume", "native", "-p", "0", "--from-beginning", "-e", "--format", "%h %k %v\\n")
    assert text == "h1=a,h2=b key value\n"

    bad = run(broker, "produce", "native", "--key-separator", ":", "--output", "json", stdin="nosep\nk:v\n")
    assert bad.code == 1 and "no key separator" in bad.stderr
    assert json.loads(bad.stdout)["sent"] == 1


def test_consume_start_positions(broker: BrokerProcess) -> None:
    ok(broker, "topic", "create", "positions")
    ok(broker, "produce", "positions", stdin="".join(f"v{i}\n" for i in range(10)))
    everything = ok(broker, "consume", "positions", "--from-beginning", "-e", "--format", "%o ")
    assert everything == " ".join(str(i) for i in range(10)) + " "
    assert ok(broker, "consume", "positions", "--offset", "7", "-e", "--format", "%v ") == "v7 v8 v9 "
    assert ok(broker, "consume", "positions", "--offset", "-2", "-e", "--format", "%v ") == "v8 v9 "
    assert ok(broker, "consume", "positions", "--from-beginning", "-c", "3", "--format", "%v ") == "v0 v1 v2 "
    assert ok(broker, "consume", "positions", "-e") == ""  # from the end: nothing new
    records = json_lines(ok(broker, "consume", "positions", "--from-beginning", "-e", "-o", "json"))
    stamp = records[4]["timestamp"]
    later = ok(broker, "consume", "positions", "--timestamp", str(stamp), "-e", "--format", "%o ")
    assert later.split()[0] == str(min(r["offset"] for r in records if r["timestamp"] >= stamp))
    assert ok(broker, "consume", "positions", "--timestamp", "2999-01-01T00:00:00Z", "-e") == ""
    assert run(broker, "consume", "no-such-topic", "-e").code == 1
    assert run(broker, "consume", "positions", "-p", "5", "-e").code == 1


def test_group_list_describe_and_reset_offsets(broker: BrokerProcess) -> None:
    ok(broker, "topic", "create", "grouped", "--partitions", "2")
    ok(broker, "produce", "grouped", "--partition", "0", stdin="a\nb\nc\n")
    ok(broker, "produce", "grouped", "--partition", "1", stdin="d\n")
    seen = ok(broker, "consume", "grouped", "--group", "readers", "--from-beginning", "-e", "--format", "%v")
    assert sorted(seen) == ["a", "b", "c", "d"]

    groups = {row["group"]: row for row in as_json(broker, "group", "list")}
    assert groups["readers"]["state"] == "EMPTY"
    described = as_json(broker, "group", "describe", "readers")
    assert described["state"] == "EMPTY" and described["members"] == []
    offsets = {(o["topic"], o["partition"]): o for o in described["offsets"]}
    assert offsets[("grouped", 0)] | {"member_id": None} == {
        "topic": "grouped", "partition": 0, "committed": 3, "end": 3, "lag": 0, "member_id": None,
    }  # fmt: skip
    assert (offsets[("grouped", 1)]["committed"], offsets[("grouped", 1)]["lag"]) == (1, 0)
    assert "readers" in ok(broker, "group", "describe", "readers")

    # Dry run: shows the plan, changes nothing.
    plan = as_json(broker, "group", "reset-offsets", "readers", "--topic", "grouped", "--to-earliest")
    assert plan["executed"] is False
    assert [(p["partition"], p["current"], p["new"]) for p in plan["partitions"]] == [(0, 3, 0), (1, 1, 0)]
    assert "dry run" in ok(broker, "group", "reset-offsets", "readers", "--topic", "grouped", "--to-earliest")
    unchanged = as_json(broker, "group", "describe", "readers")
    assert {o["partition"]: o["committed"] for o in unchanged["offsets"]} == {0: 3, 1: 1}

    done = as_json(
        broker, "group", "reset-offsets", "readers", "--topic", "grouped:0", "--to-offset", "1", "--execute"
    )
    assert done["executed"] is True and done["partitions"] == [
        {"topic": "grouped", "partition": 0, "current": 3, "new": 1}
    ]
    after = {o["partition"]: o for o in as_json(broker, "group", "describe", "readers")["offsets"]}
    assert (after[0]["committed"], after[0]["lag"], after[1]["committed"]) == (1, 2, 1)
    # The group resumes from the reset offset.
    assert ok(broker, "consume", "grouped", "--group", "readers", "-e", "--format", "%v") == "bc"

    clamped = as_json(broker, "group", "reset-offsets", "readers", "--all-topics", "--to-offset", "99")
    assert {p["partition"]: p["new"] for p in clamped["partitions"]} == {0: 3, 1: 1}
    future = as_json(
        broker,
        "group",
        "reset-offsets",
        "readers",
        "--topic",
        "grouped",
        "--to-datetime",
        "2999-01-01T00:00:00",
    )
    assert {p["partition"]: p["new"] for p in future["partitions"]} == {0: 3, 1: 1}  # nothing after: the end
    past = as_json(broker, "group", "reset-offsets", "readers", "--topic", "grouped", "--to-datetime", "0")
    assert {p["partition"]: p["new"] for p in past["partitions"]} == {0: 0, 1: 0}
    assert run(broker, "group", "describe", "nobody-here").code == 1


def test_reset_offsets_refuses_an_active_group(broker: BrokerProcess) -> None:
    ok(broker, "topic", "create", "busy")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy-group"})
    try:
        consumer.subscribe(["busy"])
        deadline = time.monotonic() + DEADLINE_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment before the deadline"
            consumer.poll(0.2)
        described = as_json(broker, "group", "describe", "busy-group")
        assert described["state"] == "STABLE" and described["protocol"]
        assert described["members"][0]["assignment"] == [{"topic": "busy", "partition": 0}]
        refused = run(broker, "group", "reset-offsets", "busy-group", "--topic", "busy", "--to-earliest")
        assert refused.code == 1 and "inactive" in refused.stderr and "STABLE" in refused.stderr
        tool = ("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group")
        members = run_cli(*tool, "busy-group", "--members", "--verbose", "--output", "json")
        assert members.code == 0, members.stderr
        [row] = json.loads(members.stdout)
        assert row["group"] == "busy-group" and row["partitions"] == 1 and row["assignment"] == "busy-0"
        state = run_cli(*tool, "busy-group", "--state", "--output", "json")
        assert [(r["state"], r["members"]) for r in json.loads(state.stdout)] == [("STABLE", 1)]
    finally:
        consumer.close()


def test_unreachable_bootstrap_is_one_line_quickly() -> None:
    outcome = run_cli("topic", "list", "--bootstrap", "127.0.0.1:1", "--timeout", "1")
    assert outcome.code == 1
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("error: cannot reach the cluster at 127.0.0.1:1 within 1 s")
    # How long the command waits is timed in-process: the program's own start-up (an interpreter
    # and its imports, over 20 s on a loaded machine) is not the wait --timeout bounds. A command
    # that ignored --timeout 1 would wait the default instead.
    waited = run("127.0.0.1:1", "topic", "list", "--timeout", "1")
    assert waited.code == 1 and "within 1 s" in waited.stderr, waited
    assert waited.seconds < DEFAULT_TIMEOUT_S


@pytest.mark.parametrize(
    "command",
    [
        ["group", "list"],
        ["group", "describe", "g"],
        ["consume", "t", "-e"],
        ["topic", "create", "t"],
        ["topic", "describe", "t"],
        ["group", "reset-offsets", "g", "--all-topics", "--to-latest"],
    ],
)
def test_unreachable_bootstrap_every_command(command: list[str]) -> None:
    outcome = run("127.0.0.1:1", *command, "--timeout", "0.5")
    assert outcome.code == 1
    assert "error: cannot reach the cluster at 127.0.0.1:1 within 0.5 s" in outcome.stderr
    assert outcome.seconds < 5


def test_unreachable_bootstrap_produce() -> None:
    outcome = run("127.0.0.1:1", "produce", "t", "--timeout", "0.5", stdin="a\n")
    assert outcome.code == 1 and "cannot reach the cluster" in outcome.stderr


def test_kafka_consumer_groups_delete_offsets(broker: BrokerProcess) -> None:
    """``--delete-offsets`` (OffsetDelete, KIP-496), which confluent-kafka's AdminClient lacks:
    the committed offsets go, a topic the members still subscribe to is refused."""
    ok(broker, "topic", "create", "trimmed", "--partitions", "2")
    ok(broker, "produce", "trimmed", stdin="a\nb\n")
    tool = ("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "trimmers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,  # the committed offsets are exactly the test's
        }
    )
    try:
        consumer.subscribe(["trimmed"])
        deadline = time.monotonic() + DEADLINE_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment before the deadline"
            consumer.poll(0.2)
        consumer.commit(
            offsets=[TopicPartition("trimmed", 0, 1), TopicPartition("trimmed", 1, 0)], asynchronous=False
        )
        busy = run_cli(*tool, "--delete-offsets", "--group", "trimmers", "--topic", "trimmed")
        # Kafka's ConsumerGroupCommand: the refusal on stdout, exit code 0
        assert busy.code == 0, busy.stderr
        assert "Error: Encountered some partition-level error, see the follow-up details." in busy.stdout
        assert "Error: The consumer group is actively subscribed to the topic" in busy.stdout
    finally:
        consumer.close()
    done = run_cli(
        *tool, "--delete-offsets", "--group", "trimmers", "--topic", "trimmed:0", "--output", "json"
    )
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout) == [
        {
            "group": "trimmers",
            "error": None,
            "ok": True,
            "partitions": [{"topic": "trimmed", "partition": 0, "status": "Successful"}],
        }
    ]
    left = as_json(broker, "group", "describe", "trimmers")
    assert [(o["partition"], o["committed"]) for o in left["offsets"]] == [(1, 0)]
    unknown = run_cli(*tool, "--delete-offsets", "--group", "nobody", "--topic", "trimmed")
    assert unknown.code == 0 and "\nError: The group id does not exist.\n" in unknown.stdout
    assert run_cli(*tool, "--delete-offsets", "--group", "trimmers").code == 2  # --topic is required


def test_delete_offsets_takes_the_next_bootstrap_server_when_the_first_is_down(broker: BrokerProcess) -> None:
    """A bootstrap list names several brokers so that one being down does not matter: describe
    (confluent-kafka) went on to the next, --delete-offsets (kompakt's own client) did not."""
    import socket

    ok(broker, "topic", "create", "trimmed-2")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "trimmers-2"})
    try:
        consumer.commit(offsets=[TopicPartition("trimmed-2", 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    with socket.create_server(("127.0.0.1", 0)) as probe:
        dead = probe.getsockname()[1]
    servers = f"127.0.0.1:{dead},{broker.bootstrap}"
    tool = ("kafka-consumer-groups", "--bootstrap-server", servers)
    described = run_cli(*tool, "--describe", "--group", "trimmers-2")
    assert described.code == 0 and "trimmed-2" in described.stdout
    done = run_cli(*tool, "--delete-offsets", "--group", "trimmers-2", "--topic", "trimmed-2")
    assert done.code == 0, done.stderr
    assert "Request succeeded for deleting offsets from group trimmers-2." in done.stdout
