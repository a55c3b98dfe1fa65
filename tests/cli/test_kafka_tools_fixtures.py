"""``kompakt kafka-*`` prints what Kafka 4.1.2's own tools print (issue 28 item 3).

The scenario of :mod:`tests.cli.kafka_tools_scenario` runs here with the real ``kompakt`` program
against a fresh ``kompakt serve`` (``node.id=1``, as the captured Kafka broker), and each step's
stdout (and, where scripts read it, stderr) and exit code must equal what Kafka's tool printed
against a real Kafka 4.1.2 (``fixtures/kafka_tools_4.1.2``, re-recorded by
``tools/capture_kafka_tools.py``), after :func:`normalise` of the per-run values.

A few steps differ for a reason one broker or one implementation forces; :data:`DIFFERENCES`
names each and compares what still has to match.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.kafka_tools_scenario import (
    BROKER_ID,
    FIXTURES,
    STEPS,
    Step,
    command_line,
    member_command_line,
    member_committed,
    normalise,
)
from tests.support.serve import BrokerProcess, poll_until, start_broker

DEADLINE_S = 60.0


def _kompakt(tool: str, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", tool, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        cwd=FIXTURES,
        env={**{k: v for k, v in os.environ.items() if k != "KOMPAKT_BOOTSTRAP"}, "COLUMNS": "80"},
    )


@pytest.fixture(scope="module")
def outcomes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """Every step's outcome, the scenario run once in order against one fresh broker."""
    broker: BrokerProcess = start_broker(
        tmp_path_factory.mktemp("kafka-tools") / "data", "--override", f"node.id={BROKER_ID}"
    )
    members: dict[str, subprocess.Popen[str]] = {}
    results: dict[str, subprocess.CompletedProcess[str]] = {}

    def describe(group: str, *view: str) -> str:
        return _kompakt(
            "kafka-consumer-groups",
            ["--bootstrap-server", broker.bootstrap, "--describe", "--group", group, *view],
        ).stdout

    try:
        for step in STEPS:
            if step.kind == "snapshot":
                continue
            if step.kind == "start-member":
                members[step.args[0]] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "kompakt.cli.main",
                        "kafka-console-consumer",
                        *member_command_line(step.args[0], broker.bootstrap),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            elif step.kind == "wait-stable":
                poll_until(lambda g=step.args[0]: member_committed(describe(g)), DEADLINE_S)
            elif step.kind == "stop-member":
                member = members.pop(step.args[0])
                member.send_signal(signal.SIGTERM)
                member.wait(DEADLINE_S)
                poll_until(lambda g=step.args[0]: "Empty" in describe(g, "--state"), DEADLINE_S)
            else:
                results[step.name] = _kompakt(step.tool, command_line(step, broker.bootstrap), step.stdin)
        yield results
    finally:
        for member in members.values():
            member.kill()
        assert broker.stop() == 0, broker.stderr_path.read_text()


def _expected(name: str) -> tuple[str, str, int]:
    index = {entry["name"]: entry for entry in json.loads((FIXTURES / "index.json").read_text())}
    stdout = (FIXTURES / f"{name}.stdout").read_text()
    stderr = (FIXTURES / f"{name}.stderr").read_text()
    return stdout, stderr, int(index[name]["exit_code"])


def _without_cluster_min_isr(text: str) -> str:
    """Drop ``min.insync.replicas=1`` from a topic line's ``Configs:``: a Kafka 4.1 KRaft
    cluster gets it as a cluster-default dynamic config when it is formatted (with eligible
    leader replicas), so Kafka's TopicCommand lists it for every topic; a kompakt broker sets no
    cluster default unless told to."""
    return re.sub(r"(Configs: )min\.insync\.replicas=1,?|,min\.insync\.replicas=1(?=\n|$)", r"\1", text)


def _without_config_lines(*names: str) -> Callable[[str], str]:
    """Drop the ``  name=...`` lines of configs one broker has and the other has not (or with a
    different default); every other line must still match."""
    prefixes = tuple(f"  {name}=" for name in names)
    return lambda text: "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith(prefixes)
    )


def _lines_starting(*prefixes: str) -> Callable[[str], str]:
    return lambda text: "".join(line for line in text.splitlines(keepends=True) if line.startswith(prefixes))


def _leader_epoch_column(text: str) -> str:
    """Blank the LEADER-EPOCH column (4th) of ``--describe --offsets --verbose`` rows: it is the
    epoch the *client* committed with, which Kafka's Java console consumer leaves out and
    librdkafka sends; the broker only stores it."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("g2 "):
            line = re.sub(r"^(\S+\s+\S+\s+\S+\s+)\S+", r"\g<1>-", line)
        out.append(line)
    return "".join(out)


DIFFERENCES: dict[str, tuple[str, Callable[[str], str]]] = {
    "topics-describe-orders": ("Kafka's cluster-default min.insync.replicas", _without_cluster_min_isr),
    "topics-describe-wide": ("Kafka's cluster-default min.insync.replicas", _without_cluster_min_isr),
    "configs-describe-topic-all": (
        "topic configs only one broker has: kompakt's own (kompakt.tombstone.*), Kafka's tiered "
        "storage switches (remote.log.*), message.format.version (gone in Kafka 4, kept by kompakt) "
        "and the cluster-default min.insync.replicas",
        _without_config_lines(
            "kompakt.tombstone.max.hold.ms",
            "kompakt.tombstone.retain.for.groups",
            "remote.log.copy.disable",
            "remote.log.delete.on.disable",
            "message.format.version",
            "min.insync.replicas",
        ),
    ),
    "configs-describe-broker-all": (
        "the brokers' own config sets differ (KRaft controller, listeners, kompakt's admin and "
        "cleaner extensions); the header and the log cleaner's configs must match",
        _lines_starting("All configs for broker", "  log.cleaner."),
    ),
    "groups-describe-active-verbose": (
        "LEADER-EPOCH is what the client committed with (Java: none, librdkafka: the epoch)",
        _leader_epoch_column,
    ),
}
"""Step -> (why the whole output cannot match, the part of stdout that still must)."""

RUN_STEPS = [step for step in STEPS if step.kind == "run"]


@pytest.mark.parametrize("step", RUN_STEPS, ids=[step.name for step in RUN_STEPS])
def test_kompakt_prints_what_kafka_prints(
    step: Step, outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    got = outcomes[step.name]
    stdout, stderr, code = _expected(step.name)
    assert got.returncode == code, got.stderr
    keep: Callable[[str], str] = lambda text: text  # noqa: E731
    if step.name in DIFFERENCES:
        keep = DIFFERENCES[step.name][1]
    assert normalise(keep(got.stdout)) == normalise(keep(stdout))
    if step.compare_stderr:
        assert normalise(got.stderr) == normalise(stderr)


def test_fixtures_cover_every_step() -> None:
    index = json.loads((FIXTURES / "index.json").read_text())
    assert [entry["name"] for entry in index] == [step.name for step in RUN_STEPS]
    assert Path(FIXTURES / "segments" / "orders-0" / "00000000000000000000.log").stat().st_size > 0
