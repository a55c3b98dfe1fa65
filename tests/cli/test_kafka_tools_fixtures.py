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
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.kafka_tools_scenario import (
    BROKER_ID,
    FIXTURES,
    MEMBER_CLIENT_ID,
    STEPS,
    Step,
    command_line,
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
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """Every step's outcome, the scenario run once in order against one fresh broker."""
    broker: BrokerProcess = start_broker(
        tmp_path_factory.mktemp("kafka-tools") / "data", "--override", f"node.id={BROKER_ID}"
    )
    members: dict[str, subprocess.Popen[str]] = {}
    results: dict[str, subprocess.CompletedProcess[str]] = {}

    def state(group: str) -> str:
        return _kompakt(
            "kafka-consumer-groups", ["--bootstrap-server", broker.bootstrap, "--describe", "--group", group, "--state"]
        ).stdout

    try:
        for step in STEPS:
            if step.kind == "snapshot":
                continue
            if step.kind == "start-member":
                members[step.args[0]] = subprocess.Popen(
                    [sys.executable, "-m", "kompakt.cli.main", "kafka-console-consumer",
                     "--bootstrap-server", broker.bootstrap, "--topic", "orders", "--group", step.args[0],
                     "--consumer-property", f"client.id={MEMBER_CLIENT_ID}"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            elif step.kind == "wait-stable":
                poll_until(lambda g=step.args[0]: "Stable" in state(g), DEADLINE_S)
            elif step.kind == "stop-member":
                member = members.pop(step.args[0])
                member.send_signal(signal.SIGTERM)
                member.wait(DEADLINE_S)
                poll_until(lambda g=step.args[0]: "Empty" in state(g), DEADLINE_S)
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


def _only(prefix: str) -> Callable[[str], str]:
    """Keep the lines that start with ``prefix`` (what a script greps for)."""
    return lambda text: "".join(line for line in text.splitlines(keepends=True) if line.startswith(prefix))


DIFFERENCES: dict[str, tuple[str, Callable[[str], str]]] = {}
"""Step -> (why the whole output cannot match, the part of stdout that still must)."""

RUN_STEPS = [step for step in STEPS if step.kind == "run"]


@pytest.mark.parametrize("step", RUN_STEPS, ids=[step.name for step in RUN_STEPS])
def test_kompakt_prints_what_kafka_prints(step: Step, outcomes: dict[str, subprocess.CompletedProcess[str]]) -> None:
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
