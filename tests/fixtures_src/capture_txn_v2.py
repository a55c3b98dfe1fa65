"""Capture ``tests/broker/txn/fixtures/kafka41_tv{1,2}_java_producer.json`` from Apache Kafka 4.1.2
(issue 30), or check a client or a broker against them.

A development script, not run by ``make test`` (it needs the JVM build). It starts a fresh
single-node Kafka with ``/work/shared/realkafka/start.sh`` (one ``__transaction_state``
partition), or a fresh ``kompakt serve`` (``--broker kompakt``), sets ``transaction.version`` (on
Kafka through the Java Admin's ``updateFeatures``, ``tests/fixtures_src/Features.java``, as
``kafka-features downgrade`` does; on kompakt with the broker config), runs the scenario with
Kafka's Java producer (``tests/fixtures_src/TxnDiff.java``, compiled against the build's classpath)
or with its wire replica (:mod:`tests.support.tv2_producer`), stops the broker cleanly and prints
or writes the normalised capture (:mod:`tests.support.txn_capture`).

Usage::

    KAFKA_BUILD=/work/rk/build .venv/bin/python tests/fixtures_src/capture_txn_v2.py \\
        --broker kafka --client java --transaction-version 2 [--out FILE] [--compare FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.tv2_producer import run_java_scenario  # noqa: E402
from tests.support.txn_capture import capture  # noqa: E402

HERE = Path(__file__).resolve().parent
START = Path("/work/shared/realkafka/start.sh")
TOPIC, TXN_ID, GROUP = "tv2", "tv2-app", "tv2-group"


def _classpath(build: Path, classes: Path) -> str:
    return f"{(build / 'classpath').read_text().strip()}:{classes}"


def _compile(build: Path, classes: Path) -> None:
    sources = [str(HERE / "TxnDiff.java"), str(HERE / "Features.java")]
    subprocess.run(["javac", "-d", str(classes), "-cp", _classpath(build, classes), *sources], check=True)


def _java(build: Path, classes: Path, main: str, *args: str) -> str:
    out = subprocess.run(
        ["java", "-cp", _classpath(build, classes), main, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout


def _wait_port(port: int, deadline_s: float = 90.0) -> None:
    import socket

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise SystemExit(f"nothing listens on {port}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--broker", choices=("kafka", "kompakt"), default="kafka")
    parser.add_argument("--client", choices=("java", "wire"), default="java")
    parser.add_argument("--transaction-version", type=int, choices=(1, 2), default=2)
    parser.add_argument("--port", type=int, default=32092)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path)
    args = parser.parse_args()
    build = Path(os.environ.get("KAFKA_BUILD", "/work/rk/build"))
    work = Path(tempfile.mkdtemp(prefix="txn-v2-"))
    classes = work / "classes"
    classes.mkdir()
    if args.client == "java" or args.broker == "kafka":
        _compile(build, classes)
    if args.broker == "kafka":
        data = work / "kafka"
        command = [str(START), str(data), str(args.port), "transaction.state.log.num.partitions=1"]
        env = {**os.environ, "KAFKA_BUILD": str(build)}
        log_dir = data / "logs"
    else:
        data = work / "kompakt"
        command = [
            sys.executable, "-m", "kompakt.cli.main", "serve", "--data-dir", str(data),
            "--port", str(args.port), "--admin-port", "-1",
            "--override", "transaction.state.log.num.partitions=1",
            "--override", "group.initial.rebalance.delay.ms=0",
            "--override", f"transaction.version={args.transaction_version}",
        ]  # fmt: skip
        env = dict(os.environ)
        log_dir = data
    broker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(args.port)
        bootstrap = f"127.0.0.1:{args.port}"
        if args.broker == "kafka" and args.transaction_version != 2:
            level = str(args.transaction_version)
            print(_java(build, classes, "Features", bootstrap, level, "SAFE_DOWNGRADE"))
        if args.client == "java":
            print(_java(build, classes, "TxnDiff", bootstrap, TOPIC))
        else:
            from tests.e2e.transactions.txn_clients import create_topic, read_all

            create_topic(bootstrap, TOPIC)
            run_java_scenario("127.0.0.1", args.port, TOPIC, TXN_ID, GROUP, args.transaction_version)
            committed, lso = read_all(bootstrap, TOPIC, "read_committed")
            print("READ_COMMITTED", [(o, v) for o, _, v in committed], "LSO", lso)
    finally:
        broker.terminate()
        broker.wait(60)
    result = capture(log_dir, TOPIC, TXN_ID, GROUP)
    text = json.dumps(result, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    if args.compare:
        same = json.loads(args.compare.read_text()) == result
        print("SAME as" if same else "DIFFERENT from", args.compare)
        if not same:
            print(text)
    if not args.out and not args.compare:
        print(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
