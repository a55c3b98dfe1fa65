#!/usr/bin/env python3
"""Capture Kafka 4.1.2's own tools' output for the tools kompakt added under Kafka's names.

Runs the scenario of ``tests/support/kafka_tools_scenario.py`` against a real Kafka 4.1.2 broker
(``../shared/realkafka/start.sh``) with Kafka's tools built by ``tools/realkafka_tools_build.sh``,
and writes each command's stdout, stderr and exit code to
``tests/cli/fixtures/kafka_tools_4.1.2/added/`` (``NAME.out``, ``NAME.err``, ``manifest.json``).
``tests/cli/test_kafka_added_tools.py`` runs the same scenario against kompakt and compares.

Also captured: ``kafka-dump-log --offsets-decoder`` / ``--transaction-log-decoder`` of the
broker's ``__consumer_offsets`` / ``__transaction_state`` segments (copied next to the fixtures),
of segments a kompakt broker wrote (``--kompakt-partition``), and the perf tests' output (whose
numbers the test normalises).

Usage (the broker must be fresh: the scenario creates its topics)::

    KAFKA_BUILD=/work/rk/build ../shared/realkafka/start.sh /tmp/rk 31000 &
    .venv/bin/python tools/capture_kafka_tools_k28m.py --bootstrap-server 127.0.0.1:31000 \
        --log-dir /tmp/rk/logs [--tools /work/rk/tools]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kompakt.broker.groups.records.placement import partition_for  # noqa: E402
from tests.support import kafka_tools_scenario as scenario  # noqa: E402

OUT = ROOT / "tests" / "cli" / "fixtures" / "kafka_tools_4.1.2" / "added"


def run(tools: Path, tool: str, argv: list[str]) -> tuple[int, str, str]:
    command = [str(tools / "bin" / f"{tool}.sh"), *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--log-dir", required=True, type=Path, help="the broker's log.dirs")
    parser.add_argument("--tools", type=Path, default=Path("/work/rk/tools"))
    parser.add_argument("--broker-id", type=int, default=1)
    parser.add_argument(
        "--kompakt-partition",
        action="append",
        default=[],
        type=Path,
        help="a __consumer_offsets-N or __transaction_state-N directory a kompakt broker wrote: Kafka's "
        "DumpLogSegments output of its first segment is captured too (repeatable)",
    )
    parser.add_argument(
        "--dumps-only",
        action="store_true",
        help="only the dump-log captures, of a broker the scenario ran on",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, object]] = {}
    work = Path(tempfile.mkdtemp(prefix="capture-k28m-"))

    def capture(name: str, tool: str, argv: list[str]) -> None:
        code, stdout, stderr = run(args.tools, tool, argv)
        (OUT / f"{name}.out").write_text(stdout, encoding="utf-8")
        (OUT / f"{name}.err").write_text(stderr, encoding="utf-8")
        manifest[name] = {"tool": tool, "argv": argv, "exit": code}
        print(f"{name}: exit {code}, {len(stdout.splitlines())} lines", flush=True)  # noqa: T201 (progress)

    if args.dumps_only:
        manifest.update(json.loads((OUT / "manifest.json").read_text(encoding="utf-8")))
    else:
        run_scenario(args, capture, work)
    dump_segments(args, capture)
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


def run_scenario(
    args: argparse.Namespace, capture: Callable[[str, str, list[str]], None], work: Path
) -> None:
    scenario.setup_base(args.bootstrap_server)
    phases: dict[str, list[scenario.Command]] = {
        "base": [],
        "delete": [],
        "deleted": [],
        "txn": [],
        "perf": [],
    }
    for command in scenario.COMMANDS:
        phases[command.phase].append(command)

    def run_phase(name: str) -> None:
        for command in phases[name]:
            scenario.write_files(command, work)
            argv = scenario.argv_of(command, work, args.broker_id, args.bootstrap_server)
            capture(command.name, command.tool, argv)

    run_phase("base")
    run_phase("delete")
    run_phase("deleted")
    opened = scenario.setup_txn(args.bootstrap_server)
    try:
        run_phase("txn")
    finally:
        opened.abort_transaction(scenario.DEADLINE_S)

    run_phase("perf")
    scenario.setup_modern_group(args.bootstrap_server)


def dump_segments(args: argparse.Namespace, capture: Callable[[str, str, list[str]], None]) -> None:
    # The coordinators' segments are copied next to the fixtures: the test runs kompakt's
    # decoders on these very files, so the comparison is byte for byte.
    segments = OUT / "segments"
    segments.mkdir(exist_ok=True)
    groups = (scenario.GROUP, "perf-group", scenario.MODERN_GROUP)
    dumps = [("offsets-decoder", "__consumer_offsets", group) for group in groups]
    dumps += [("transaction-log-decoder", "__transaction_state", txn) for txn in ("ledger", "open-txn")]
    dumped: set[str] = set()
    for decoder, topic, key in dumps:
        name = f"{topic}-{partition_for(key, 50)}"
        if name in dumped:  # two of the groups may share a partition
            continue
        dumped.add(name)
        copy = segments / name / "00000000000000000000.log"  # Kafka reads the base offset off the name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(args.log_dir / name / copy.name, copy)
        capture(f"dump-log-{decoder}-{key}", "kafka-dump-log", [f"--{decoder}", "--files", str(copy)])
    for partition_dir in args.kompakt_partition:
        decoder = (
            "offsets-decoder" if partition_dir.name.startswith("__consumer") else "transaction-log-decoder"
        )
        copy = segments / f"kompakt{partition_dir.name}" / "00000000000000000000.log"
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(partition_dir / copy.name, copy)
        capture(
            f"dump-log-{decoder}-kompakt{partition_dir.name}",
            "kafka-dump-log",
            [f"--{decoder}", "--files", str(copy)],
        )


if __name__ == "__main__":
    sys.exit(main())
