#!/usr/bin/env python3
"""Re-record ``tests/cli/fixtures/kafka_tools_4.1.2``: run the scenario of
``tests/cli/kafka_tools_scenario.py`` with Kafka 4.1.2's own tools against a fresh real Kafka.

Needs the realkafka build (``../shared/realkafka/build.sh``) and its tools module
(``tools/realkafka_tools_build.sh``)::

    tools/capture_kafka_tools.py [--build /work/rk/build] [--tools /work/rk/tools] [--port 30100]

Writes, per step, ``NAME.stdout``, ``NAME.stderr`` and an ``index.json`` with each step's command
line and exit code, and copies the segments the ``kafka-dump-log`` steps read into ``segments/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cli.kafka_tools_scenario import (  # noqa: E402
    BROKER_ID,
    FIXTURES,
    STEPS,
    Step,
    command_line,
    member_command_line,
    member_committed,
)

START_SH = Path("/work/shared/realkafka/start.sh")


def _wait(predicate: object, what: str, deadline_s: float = 120.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def _first_batches(data: bytes, limit: int) -> bytes:
    """The whole record batches that fit in ``limit`` bytes (a batch is 12 + its length field)."""
    end = 0
    while end + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, end + 8)
        if end + 12 + length > limit:
            break
        end += 12 + length
    return data[:end]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="/work/rk/build")
    parser.add_argument("--tools", default="/work/rk/tools")
    parser.add_argument("--port", type=int, default=30100)
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args()
    bin_dir = Path(args.tools) / "bin"
    if not (Path(args.tools) / "DONE").exists():
        raise SystemExit(f"{args.tools}: run tools/realkafka_tools_build.sh first")
    bootstrap = f"127.0.0.1:{args.port}"
    work = Path(tempfile.mkdtemp(prefix="kafka-tools-capture-"))
    data = work / "kafka"
    env = {**os.environ, "KAFKA_BUILD": args.build}
    broker = subprocess.Popen(
        [str(START_SH), str(data), str(args.port), f"node.id={BROKER_ID}"],
        stdout=(work / "broker.log").open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.std*"):
        old.unlink()
    shutil.rmtree(out / "segments", ignore_errors=True)
    members: dict[str, subprocess.Popen[bytes]] = {}
    index = []
    try:
        _wait(lambda: "Kafka Server started" in (work / "broker.log").read_text(), "the broker")

        def run(step: Step) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                [str(bin_dir / f"{step.tool}.sh"), *command_line(step, bootstrap)],
                input=None if step.stdin is None else step.stdin.encode(),
                capture_output=True,
                cwd=out,
                timeout=120,
            )

        for step in STEPS:
            sys.stdout.write(f"{step.name}\n")
            if step.kind == "snapshot":
                source = data / "logs" / step.args[0] / "00000000000000000000.log"
                target = out / "segments" / step.args[0] / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                raw = source.read_bytes()
                if len(step.args) > 1:
                    raw = _first_batches(raw, int(step.args[1]))
                target.write_bytes(raw)
                continue
            if step.kind == "start-member":
                members[step.args[0]] = subprocess.Popen(
                    [
                        str(bin_dir / "kafka-console-consumer.sh"),
                        *member_command_line(step.args[0], bootstrap),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                continue
            if step.kind == "wait-stable":
                probe = Step("probe", "kafka-consumer-groups", ("--describe", "--group", step.args[0]))
                _wait(
                    lambda p=probe: member_committed(run(p).stdout.decode()), f"group {step.args[0]}'s member"
                )
                continue
            if step.kind == "stop-member":
                member = members.pop(step.args[0])
                member.send_signal(signal.SIGTERM)
                member.wait(60)
                probe = Step(
                    "probe", "kafka-consumer-groups", ("--describe", "--group", step.args[0], "--state")
                )
                _wait(lambda p=probe: b"Empty" in run(p).stdout, f"group {step.args[0]} to be Empty")
                continue
            done = run(step)
            (out / f"{step.name}.stdout").write_bytes(done.stdout)
            (out / f"{step.name}.stderr").write_bytes(done.stderr)
            index.append(
                {
                    "name": step.name,
                    "tool": step.tool,
                    "args": command_line(step, "127.0.0.1:PORT0"),
                    "exit_code": done.returncode,
                }
            )
        (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    finally:
        for member in members.values():
            member.kill()
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(60)
        except subprocess.TimeoutExpired:
            broker.kill()
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(f"captured {len(index)} commands into {out}\n")


if __name__ == "__main__":
    main()
