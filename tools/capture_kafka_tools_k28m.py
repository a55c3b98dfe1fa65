#!/usr/bin/env python3
"""Capture Kafka 4.1.2's own tools' output for the tools kompakt added under Kafka's names.

Runs the scenario of ``tests/support/kafka_tools_scenario.py`` against a real Kafka 4.1.2 broker
(``../shared/realkafka/start.sh``) with Kafka's tools built by ``tools/realkafka_tools_build.sh``,
and writes each command's stdout, stderr and exit code to
``tests/cli/fixtures/kafka_tools_4.1.2/added/`` (``NAME.out``, ``NAME.err``, ``manifest.json``).
``tests/cli/test_kafka_added_tools.py`` runs the same scenario against kompakt and compares.

Also captured: ``kafka-dump-log --offsets-decoder`` / ``--transaction-log-decoder`` of the
broker's ``__consumer_offsets`` / ``__transaction_state`` segments, and the perf tests' output
(whose numbers the test normalises).

Usage (the broker must be fresh: the scenario creates its topics)::

    KAFKA_BUILD=/work/rk/build ../shared/realkafka/start.sh /tmp/rk 31000 &
    .venv/bin/python tools/capture_kafka_tools_k28m.py --bootstrap-server 127.0.0.1:31000 \
        --log-dir /tmp/rk/logs [--tools /work/rk/tools]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kompakt.broker.groups.records.placement import partition_for  # noqa: E402
from tests.support import kafka_tools_scenario as scenario  # noqa: E402

OUT = ROOT / "tests" / "cli" / "fixtures" / "kafka_tools_4.1.2" / "added"


def run(tools: Path, tool: str, argv: list[str], bootstrap: str | None) -> tuple[int, str, str]:
    command = [str(tools / "bin" / f"{tool}.sh"), *argv]
    if bootstrap is not None:
        command[1:1] = ["--bootstrap-server", bootstrap]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--log-dir", required=True, type=Path, help="the broker's log.dirs")
    parser.add_argument("--tools", type=Path, default=Path("/work/rk/tools"))
    parser.add_argument("--broker-id", type=int, default=1)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, object]] = {}
    work = Path(tempfile.mkdtemp(prefix="capture-k28m-"))

    def capture(name: str, tool: str, argv: list[str], *, bootstrap: bool = True) -> None:
        code, stdout, stderr = run(args.tools, tool, argv, args.bootstrap_server if bootstrap else None)
        (OUT / f"{name}.out").write_text(stdout, encoding="utf-8")
        (OUT / f"{name}.err").write_text(stderr, encoding="utf-8")
        manifest[name] = {"tool": tool, "argv": argv, "exit": code}
        print(f"{name}: exit {code}, {len(stdout.splitlines())} lines", flush=True)

    scenario.setup_base(args.bootstrap_server)
    phases = {"base": [], "delete": [], "deleted": [], "txn": []}  # type: dict[str, list[scenario.Command]]
    for command in scenario.COMMANDS:
        phases[command.phase].append(command)

    def run_phase(name: str) -> None:
        for command in phases[name]:
            scenario.write_files(command, work)
            capture(command.name, command.tool, scenario.argv_of(command, work, args.broker_id))

    run_phase("base")
    run_phase("delete")
    run_phase("deleted")
    opened = scenario.setup_txn(args.bootstrap_server)
    try:
        run_phase("txn")
    finally:
        opened.abort_transaction(scenario.DEADLINE_S)

    offsets_dir = args.log_dir / f"__consumer_offsets-{partition_for(scenario.GROUP, 50)}"
    capture(
        "dump-log-offsets-decoder",
        "kafka-dump-log",
        ["--offsets-decoder", "--files", str(offsets_dir / "00000000000000000000.log")],
        bootstrap=False,
    )
    for txn_id in ("ledger", "open-txn"):
        txn_dir = args.log_dir / f"__transaction_state-{partition_for(txn_id, 50)}"
        capture(
            f"dump-log-transaction-decoder-{txn_id}",
            "kafka-dump-log",
            ["--transaction-log-decoder", "--files", str(txn_dir / "00000000000000000000.log")],
            bootstrap=False,
        )
    capture(
        "producer-perf-test",
        "kafka-producer-perf-test",
        ["--topic", "perf", "--num-records", "2000", "--record-size", "100", "--throughput", "-1",
         "--producer-props", f"bootstrap.servers={args.bootstrap_server}", "acks=1"],
        bootstrap=False,
    )  # fmt: skip
    capture(
        "consumer-perf-test",
        "kafka-consumer-perf-test",
        ["--topic", "perf", "--messages", "2000", "--group", "perf-group", "--timeout", "20000"],
    )
    capture(
        "consumer-perf-test-hide-header",
        "kafka-consumer-perf-test",
        ["--topic", "perf", "--messages", "500", "--hide-header", "--timeout", "20000"],
    )
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
