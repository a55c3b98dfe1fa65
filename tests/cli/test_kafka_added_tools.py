"""The tools kompakt added under Kafka's names (issue 28) print what Kafka 4.1.2's own tools print.

The fixtures under ``fixtures/kafka_tools_4.1.2/added/`` are Kafka's tools run against a real
Kafka 4.1.2 broker (``tools/capture_kafka_tools_k28m.py``); here the same scenario
(:mod:`tests.support.kafka_tools_scenario`) runs against a fresh ``kompakt serve`` and kompakt's
tool of the same name must print the same stdout, byte for byte after replacing only per-run
values (the broker id, the data directory, producer ids and times), and exit the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from kompakt.cli import commands, kafka_tools
from kompakt.errors import KompaktError
from tests.support import kafka_tools_scenario as scenario
from tests.support.serve import BrokerProcess, start_broker

FIXTURES = Path(__file__).parent / "fixtures" / "kafka_tools_4.1.2" / "added"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
KOMPAKT_BROKER_ID = 0
KAFKA_BROKER_ID = 1
assert commands.REGISTRARS  # the tools register themselves on import


def run_tool(tool: str, argv: list[str]) -> tuple[int, str, str]:
    """One tool in-process: (exit code, stdout, stderr), errors mapped as ``kompakt.cli.main``."""
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            kafka_tools.run_tool(tool, argv)
        except typer.Exit as exc:
            code = exc.exit_code
        except KompaktError as exc:
            code = 2 if type(exc).__name__ == "CliUsageError" else 1
            stderr.write(f"error: {exc}\n")
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def kompakt_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("added-tools") / "data")
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


@pytest.fixture(scope="module")
def outcomes(
    kompakt_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[int, str, str]]:
    """Every scenario command run by kompakt against kompakt, phase by phase as in the capture."""
    work = tmp_path_factory.mktemp("added-tools-files")
    bootstrap = kompakt_broker.bootstrap
    results: dict[str, tuple[int, str, str]] = {}

    def run_phase(phase: str) -> None:
        for command in scenario.COMMANDS:
            if command.phase == phase:
                scenario.write_files(command, work)
                argv = scenario.argv_of(command, work, KOMPAKT_BROKER_ID, bootstrap)
                results[command.name] = run_tool(command.tool, argv)
                if command.kind == "reset":
                    results[command.name + "/json"] = run_tool(command.tool, [*argv, "--output", "json"])

    scenario.setup_base(bootstrap)
    run_phase("base")
    run_phase("delete")
    run_phase("deleted")
    opened = scenario.setup_txn(bootstrap)
    try:
        run_phase("txn")
    finally:
        opened.abort_transaction(scenario.DEADLINE_S)
    run_phase("perf")
    return results


def _expected(name: str) -> tuple[int, str, str]:
    return (
        int(MANIFEST[name]["exit"]),
        (FIXTURES / f"{name}.out").read_text(encoding="utf-8"),
        (FIXTURES / f"{name}.err").read_text(encoding="utf-8"),
    )


def _kafka_view(kind: str, text: str, broker_id: int) -> str:
    if kind == "log-dirs":
        text = re.sub(rf'"broker":{broker_id}\b', '"broker":<B>', text)
        text = re.sub(rf"(Current existent brokers: |from brokers ){broker_id}\b", r"\1<B>", text)
    return scenario.normalise(kind, text)


def _kafka_reset_plan(text: str) -> dict[tuple[str, int], int]:
    rows = [line.split() for line in text.splitlines() if line and not line.startswith(("GROUP ", "Warn:"))]
    return {(topic, int(partition)): int(new) for _, topic, partition, new in rows}


@pytest.mark.parametrize("command", [c for c in scenario.COMMANDS if c.kind == "reset"], ids=lambda c: c.name)
def test_reset_shift_by_and_by_duration_plan_kafkas_offsets(
    command: scenario.Command, outcomes: dict[str, tuple[int, str, str]]
) -> None:
    """The new offsets are Kafka's, and so are the fall-back warnings; the plan's table is the
    reset's own format (kafka-consumer-groups' tables are compared in test_kafka_tools)."""
    code, table, stderr = outcomes[command.name]
    json_code, json_out, _ = outcomes[command.name + "/json"]
    want_code, want_stdout, _ = _expected(command.name)
    assert code == json_code == want_code == 0, stderr
    plan = {(p["topic"], p["partition"]): p["new"] for p in json.loads(json_out)["partitions"]}
    assert plan == _kafka_reset_plan(want_stdout)
    warnings = [line for line in want_stdout.splitlines() if line.startswith("Warn:")]
    assert [line for line in table.splitlines() if line.startswith("Warn:")] == warnings
    # Kafka's clamping warnings (log lines on stderr), without the log prefix.
    clamped = sorted(re.findall(r"WARN (New offset .*) \(org\.apache", _expected(command.name)[2]))
    assert sorted(re.findall(r"WARN (New offset .*)", stderr)) == clamped


@pytest.mark.parametrize("command", [c for c in scenario.COMMANDS if c.kind != "reset"], ids=lambda c: c.name)
def test_kompakt_prints_what_kafkas_tool_prints(
    command: scenario.Command, outcomes: dict[str, tuple[int, str, str]]
) -> None:
    code, stdout, stderr = outcomes[command.name]
    want_code, want_stdout, want_stderr = _expected(command.name)
    assert _kafka_view(command.kind, stdout, KOMPAKT_BROKER_ID) == _kafka_view(
        command.kind, want_stdout, KAFKA_BROKER_ID
    ), stderr
    assert (code == 0) == (want_code == 0), (code, stderr)
    if want_code != 0:
        # Kafka's message (its first line, without the tool's own "Error occurred: " prefix).
        message = want_stderr.splitlines()[0].removeprefix("Error occurred: ")
        kind = command.kind
        assert _kafka_view(kind, message, KAFKA_BROKER_ID) in _kafka_view(kind, stderr, KOMPAKT_BROKER_ID)


DUMPS = sorted(name for name in MANIFEST if name.startswith("dump-log-"))


@pytest.mark.parametrize("name", DUMPS)
def test_dump_log_decoders_print_kafkas_lines_for_kafkas_own_segments(name: str) -> None:
    """kompakt's decoders on the very segments Kafka's DumpLogSegments read (copied next to the
    fixtures): every line the same, except the path on ``Dumping``."""
    decoder, path = MANIFEST[name]["argv"][0], Path(MANIFEST[name]["argv"][2])
    segment = FIXTURES / "segments" / path.parent.name / path.name
    code, stdout, stderr = run_tool("kafka-dump-log", [decoder, "--files", str(segment)])
    want_code, want_stdout, _ = _expected(name)
    assert code == want_code == 0, stderr
    assert stdout.splitlines()[0] == f"Dumping {segment}"
    assert stdout.splitlines()[1:] == want_stdout.splitlines()[1:]


def test_by_duration_reads_javas_iso_durations() -> None:
    from kompakt.cli.reset_shift import parse_duration_ms

    assert parse_duration_ms("P1DT2H") == 93_600_000
    assert parse_duration_ms("PT30M") == 1_800_000
    assert parse_duration_ms("-PT10S") == -10_000
    assert parse_duration_ms("PT1.5S") == 1_500
    for bad in ("P1Y", "PT", "P", "1D", "P1DT"):
        with pytest.raises(KompaktError):
            parse_duration_ms(bad)


def test_shift_by_clamps_and_needs_a_committed_offset() -> None:
    from kompakt.cli.reset_shift import shifted

    tps = [("t", 0), ("t", 1)]
    assert shifted(
        tps, {("t", 0): 4, ("t", 1): 1}, -2, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 5, ("t", 1): 3}
    ) == {
        ("t", 0): 2,
        ("t", 1): 0,
    }
    with pytest.raises(KompaktError, match="no current committed offset"):
        shifted(tps, {("t", 0): 4}, 1, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 5, ("t", 1): 3})


def test_java_hash_order_is_hashmaps_iteration_order() -> None:
    """The orders Kafka's own tools printed in the fixtures (a JVM's HashMap iteration)."""
    from kompakt.cli.kafka_java import hash_order, string_hash, topic_partition_hash

    # new HashSet<>(List.of("version", "brokers")) iterates brokers first (fixture log-dirs-topic).
    assert hash_order(["version", "brokers"], string_hash) == ["brokers", "version"]
    # leader-election-json: orders-1, orders-0, events-0 in, orders-0, orders-1, events-0 out.
    tps = [("orders", 1), ("orders", 0), ("events", 0)]
    assert hash_order(tps, lambda k: topic_partition_hash(*k)) == [
        ("orders", 0),
        ("orders", 1),
        ("events", 0),
    ]


def test_transactions_abort_and_find_hanging_against_kompakt(
    kompakt_broker: BrokerProcess, outcomes: dict[str, tuple[int, str, str]]
) -> None:
    """kompakt's broker has no WriteTxnMarkers: ``abort`` finds the open transaction and then
    fails with a message saying so (exit 1); an open transaction the coordinator knows is not
    hanging, whatever its age. (After the scenario, which creates the topic.)"""
    from confluent_kafka import Producer

    assert outcomes

    bootstrap = kompakt_broker.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "abort-me"})
    producer.init_transactions(scenario.DEADLINE_S)
    producer.begin_transaction()
    producer.produce("events", value=b"open", partition=0)
    assert producer.flush(scenario.DEADLINE_S) == 0
    try:
        code, table, stderr = run_tool(
            "kafka-transactions",
            ["--bootstrap-server", bootstrap, "describe-producers", "--topic", "events", "--partition", "0"],
        )
        assert code == 0, stderr
        starts = [row.split("\t")[5].strip() for row in table.splitlines()[1:]]
        start = next(s for s in starts if s != "None")
        code, _, stderr = run_tool(
            "kafka-transactions",
            [
                "--bootstrap-server",
                bootstrap,
                "abort",
                "--topic",
                "events",
                "--partition",
                "0",
                "--start-offset",
                start,
            ],
        )
        assert code == 1
        assert stderr.startswith("Failed to abort transaction AbortTransactionSpec(topicPartition=events-0, ")
        assert "The node does not support WRITE_TXN_MARKERS" in stderr
        code, _, stderr = run_tool(
            "kafka-transactions",
            [
                "--bootstrap-server",
                bootstrap,
                "abort",
                "--topic",
                "events",
                "--partition",
                "0",
                "--start-offset",
                "999",
            ],
        )
        assert (code, stderr) == (
            1,
            "Could not find any open transactions starting at offset 999 on partition events-0\n",
        )
        code, hanging, stderr = run_tool(
            "kafka-transactions",
            [
                "--bootstrap-server",
                bootstrap,
                "find-hanging",
                "--broker-id",
                "0",
                "--max-transaction-timeout",
                "0",
            ],
        )
        assert code == 0, stderr
        assert hanging.splitlines()[1:] == []
    finally:
        producer.abort_transaction(scenario.DEADLINE_S)
