#!/usr/bin/env python3
"""librdkafka's own test suite against one broker: a development check, not part of ``make test``.

librdkafka's ``tests/test-runner`` runs against any cluster named in a ``test.conf`` (its
tests/README.md, "If you'd rather use an existing cluster"). This script writes that file, starts
the broker (``kompakt serve`` from this checkout, or Apache Kafka 4.1.2 built by
``realkafka/build.sh``, or neither with ``--bootstrap``), runs each selected test in its own
``test-runner`` process so one hang or crash does not hide the rest, and prints a Markdown table:
test, state, seconds, and the runner's failure reason. Tests with many independent subtests
(0081, the admin test) run one subtest group at a time (``SUBTESTS``), so a failure names the
API that failed and does not stop the other APIs from running.

Why one broker for the whole run: the suite is written for a long-lived cluster (random topic
names, no cleanup); restarting per test would cost more than the tests. Why the broker settings
below: they are the suite's "default" scenario (``tests/scenarios/default.json``: topic
auto-creation, 4 partitions), the same on both brokers so a difference in results is the
broker's. ``group.initial.rebalance.delay.ms`` is Kafka's default, 3 s, set explicitly because
realkafka's ``start.sh`` (like Kafka's sample server.properties) sets 0: the group tests count
rebalance callbacks on the assumption that consumers subscribing together land in one generation
(0113's l_unsubscribe, 0118), and with no delay they fail on Kafka as on kompakt.

Build librdkafka first (offline: use the system's libraries, not ``--install-deps``)::

    ./configure --disable-gssapi --disable-curl --disable-sasl && make libs && make -C tests build

Usage::

    .venv/bin/python tools/librdkafka_suite.py --librdkafka /path/to/librdkafka \\
        [--broker kompakt|kafka | --bootstrap HOST:PORT] [--port 59092] [--tests 0001,0081,...]
        [--group-protocol classic|consumer] [--quick] [--setting K=V ...] [--out DIR]

``--broker kafka`` needs ``KAFKA_BUILD`` (or ``--kafka-build``) and the folder of ``start.sh``
(``--realkafka``, default ``$REALKAFKA``, else ``../shared/realkafka`` beside the repository).
Exit code 0 only when no selected test failed. ``compare KOMPAKT.json KAFKA.json`` puts two runs'
``--json`` side by side (docs/librdkafka-suite.md is made with it).

A few tests (0052 timestamps, 0077 compaction) create their topic with Kafka's
``kafka-topics.sh`` from ``$KAFKA_PATH`` instead of the Admin API. The realkafka build has no
tools module, so this script hands the runner a ``KAFKA_PATH`` whose ``bin/kafka-topics.sh`` runs
``kafka-topics`` below: a CreateTopics through confluent-kafka's AdminClient with the same
arguments, so those tests run against either broker.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The selection run by default: the broker tests of the areas kompakt serves (produce and fetch,
# consumer groups classic and cooperative, offsets, admin, transactions, compaction), without
# those that need SASL/SSL, several brokers (0103 creates its topics with replication factor 3),
# ACLs through kafka-acls.sh (0109), a mock cluster, ZooKeeper, a 4.2 broker (share groups) or
# run for many minutes (0038 performance, 0042 many topics, 0079 fork).
_SELECTION = (
    "0001 0002 0003 0005 0007 0008 0011 0012 0013 0014 0015 0016 0017 0018 0019 0020 0021 0022 0026 "
    "0028 0029 0030 0031 0033 0034 0035 0036 0039 0040 0041 0044 0045 0048 0049 0050 0051 0052 0053 "
    "0054 0055 0056 0057 0059 0060 0061 0063 0064 0065 0067 0069 0070 0073 0075 0076 0077 0081 0082 "
    "0083 0084 0085 0086 0088 0089 0090 0091 0092 0093 0094 0098 0099 0102 0107 0110 0111 0112 0113 "
    "0114 0116 0118 0122 0123 0125 0127 0129 0130 0132 0137 0140 "
)
DEFAULT_TESTS = tuple(_SELECTION.split())

# Tests run one SUBTESTS group at a time: the substring of the subtest names (``func:line: ...``)
# that selects each group. 0081 runs every admin API in one process; split, a failure names it.
SUBTEST_GROUPS: dict[str, tuple[str, ...]] = {
    "0081": (
        "do_test_unclean_destroy",
        "do_test_CreateTopics",
        "do_test_DeleteTopics",
        "do_test_CreatePartitions",
        "do_test_CreateAcls",
        "do_test_DescribeAcls",
        "do_test_DeleteAcls",
        "do_test_AlterConfigs",
        "do_test_IncrementalAlterConfigs",
        "do_test_DescribeConfigs",
        "do_test_DeleteRecords",
        "do_test_ListConsumerGroups",
        "do_test_DescribeConsumerGroups",
        "do_test_DescribeTopics",
        "do_test_DescribeCluster",
        "do_test_DeleteGroups",
        "do_test_DeleteConsumerGroupOffsets",
        "do_test_ListOffsets",
        "do_test_AlterConsumerGroupOffsets",
        "do_test_ListConsumerGroupOffsets",
        "do_test_UserScramCredentials",
    ),
}

BROKER_SETTINGS = (
    "num.partitions=4",
    "auto.create.topics.enable=true",
    "group.initial.rebalance.delay.ms=3000",
)

ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
SUMMARY_ROW = re.compile(
    r"^\|\s*(?P<name>\S+)\s*\|\s*(?P<state>DNS|SKIPPED|RUNNING|PASSED|FAILED)\s*\|\s*"
    r"(?P<secs>[\d.]+)s\s*\|\s*(?P<reason>.*)$"
)

FAILURE = re.compile(r'### Test "(?!<MAIN>)(?P<where>[^"]+)" failed at [^\n]*###\n(?P<reason>[^\n]*)')


def kafka_topics(argv: list[str]) -> int:
    """``kafka-topics.sh --bootstrap-server B --create --topic T [--partitions N]
    [--replication-factor R] [--config K=V]...``: the subset librdkafka's tests call."""
    from confluent_kafka.admin import AdminClient  # only this subcommand needs them
    from confluent_kafka.cimpl import NewTopic

    p = argparse.ArgumentParser(prog="kafka-topics.sh")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--create", action="store_true", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--config", action="append", default=[])
    args = p.parse_args(argv)
    configs = dict(c.split("=", 1) for c in args.config)
    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    topic = NewTopic(args.topic, args.partitions, args.replication_factor, config=configs)
    try:
        admin.create_topics([topic], request_timeout=30)[args.topic].result(timeout=60)
    except Exception as exc:  # noqa: BLE001 - reported as kafka-topics.sh would, by exit status
        print(f"Error while executing topic command : {exc}", file=sys.stderr)  # noqa: T201
        return 1
    say(f"Created topic {args.topic}.")
    return 0


def kafka_path(out: Path) -> Path:
    """A ``KAFKA_PATH`` whose ``bin/kafka-topics.sh`` is :func:`kafka_topics` of this script."""
    bin_dir = out / "kafka-path/bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "kafka-topics.sh"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" kafka-topics "$@"\n')
    shim.chmod(0o755)
    return bin_dir.parent


def say(text: str) -> None:
    print(text, flush=True)  # noqa: T201 (a development script reports on stdout)


@dataclass
class Result:
    """One row of the runner's summary table, as this run saw it."""

    test: str
    state: str
    seconds: float
    reason: str


def wait_port(host: str, port: int, deadline_s: float, proc: subprocess.Popen[bytes] | None) -> None:
    """Wait until the broker accepts TCP: a Metadata answer follows within a fraction of a second."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the broker exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
            return
        time.sleep(0.2)  # polling a port with a deadline, not synchronisation
    raise SystemExit(f"nothing listens on {host}:{port} after {deadline_s:.0f} s")


@contextlib.contextmanager
def broker(args: argparse.Namespace, out: Path) -> Iterator[str]:
    """Yield the bootstrap address of the broker under test; stop it (if started here) on exit."""
    if args.bootstrap:
        yield args.bootstrap
        return
    data = out / f"{args.broker}-data"
    shutil.rmtree(data, ignore_errors=True)
    log = (out / f"{args.broker}.log").open("wb")
    if args.broker == "kompakt":
        cmd = [
            str(REPO / ".venv/bin/kompakt"),
            "serve",
            "--data-dir",
            str(data),
            "--port",
            str(args.port),
            "--admin-port",
            str(args.admin_port),
        ]
        for setting in (*BROKER_SETTINGS, *args.setting):
            cmd += ["--override", setting]
        env = os.environ.copy()
    else:
        build = args.kafka_build or os.environ.get("KAFKA_BUILD")
        if not build:
            raise SystemExit("--broker kafka needs --kafka-build or KAFKA_BUILD")
        cmd = [
            "bash",
            str(Path(args.realkafka) / "start.sh"),
            str(data),
            str(args.port),
            *BROKER_SETTINGS,
            *args.setting,
        ]
        env = {**os.environ, "KAFKA_BUILD": build}
    say(f"starting {args.broker}: {' '.join(cmd)}")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_port("127.0.0.1", args.port, 120.0, proc)
        yield f"127.0.0.1:{args.port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run_one(
    args: argparse.Namespace,
    tests_dir: Path,
    conf: Path,
    out: Path,
    test: str,
    subtests: str | None,
    bootstrap: str,
) -> list[Result]:
    """One test-runner process for TESTS=test (and SUBTESTS=subtests); its summary rows."""
    label = test if subtests is None else f"{test}:{subtests}"
    logfile = out / (re.sub(r"[^\w.-]", "_", label) + ".log")
    env = {
        **os.environ,
        "TESTS": test,
        "KAFKA_PATH": str(kafka_path(out)),
        "BROKERS": bootstrap,
        "TEST_KAFKA_VERSION": args.kafka_version,
        "RDKAFKA_TEST_CONF": str(conf),
        "LD_LIBRARY_PATH": f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}",
        "RDKAFKA_GITVER": "librdkafka_suite",
    }
    if subtests is not None:
        env["SUBTESTS"] = subtests
    if args.group_protocol:
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = args.group_protocol
    cmd = ["./test-runner", "-L", "-E" if args.no_sockem else "", "-Q" if args.quick else ""]
    cmd = [c for c in cmd if c]
    started = time.monotonic()
    with logfile.open("wb") as fh:
        proc = subprocess.Popen(
            cmd, cwd=tests_dir, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=args.test_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return [
                Result(
                    label,
                    "TIMEOUT",
                    time.monotonic() - started,
                    f"killed after {args.test_timeout} s (log {logfile})",
                )
            ]
    return parse_log(logfile.read_text(errors="replace"), label, subtests, rc, time.monotonic() - started)


def parse_log(raw: str, label: str, subtests: str | None, rc: int, seconds: float) -> list[Result]:
    """The runner's summary rows; without them (the runner aborted), its first failure.

    The runner aborts before its summary when a failed test leaves client threads behind (an
    assertion fails while a handle is still open), so the failure text is the useful part.
    """
    text = ANSI.sub("", raw)
    rows = [m for m in (SUMMARY_ROW.match(line.strip()) for line in text.splitlines()) if m]
    results = [
        Result(
            m["name"] if subtests is None else f"{m['name']}:{subtests}",
            m["state"],
            float(m["secs"]),
            m["reason"].strip(),
        )
        for m in rows
        if m["name"] != "<MAIN>" and m["state"] != "DNS"
    ]
    if results:
        return results
    failure = FAILURE.search(text)
    if failure:
        return [Result(label, "FAILED", seconds, f"{failure['where']}: {failure['reason'].strip()[:400]}")]
    tail = " / ".join(text.strip().splitlines()[-3:])
    return [Result(label, "CRASHED" if rc else "NONE", seconds, f"exit {rc}, no summary: {tail[:300]}")]


def default_realkafka() -> Path:
    """``shared/realkafka`` beside the repository, or beside its worktree folder."""
    for root in (REPO.parent, REPO.parent.parent):
        if (root / "shared/realkafka/start.sh").exists():
            return root / "shared/realkafka"
    return REPO.parent / "shared/realkafka"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--librdkafka", required=True, type=Path, help="librdkafka source tree, built with tests/")
    p.add_argument("--broker", choices=("kompakt", "kafka"), default="kompakt")
    p.add_argument("--bootstrap", help="use this running broker instead of starting one")
    p.add_argument("--port", type=int, default=59092)
    p.add_argument("--admin-port", type=int, default=59192, help="kompakt's admin endpoint")
    p.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="K=V",
        help="one more broker setting, on either broker (e.g. the authorizer for 0081's ACL subtests)",
    )
    p.add_argument("--kafka-build", help="realkafka build folder (default $KAFKA_BUILD)")
    p.add_argument("--realkafka", default=os.environ.get("REALKAFKA", str(default_realkafka())))
    p.add_argument("--kafka-version", default="4.1.2", help="TEST_KAFKA_VERSION")
    p.add_argument("--tests", default=",".join(DEFAULT_TESTS), help="comma-separated test numbers")
    p.add_argument("--no-split", action="store_true", help="run 0081 whole, not one subtest group at a time")
    p.add_argument("--subtests", help="only these subtest groups (comma-separated substrings)")
    p.add_argument("--group-protocol", choices=("classic", "consumer"), help="TEST_CONSUMER_GROUP_PROTOCOL")
    p.add_argument("--quick", action="store_true", help="the runner's -Q (fewer iterations, less data)")
    p.add_argument("--no-sockem", action="store_true", help="skip the socket-emulation tests (-E)")
    p.add_argument(
        "--timeout-multiplier",
        type=float,
        default=2.0,
        help="test.timeout.multiplier: the machine is shared and loaded",
    )
    p.add_argument("--test-timeout", type=float, default=900.0, help="wall-clock limit per runner process")
    p.add_argument("--out", type=Path, help="logs and data (default a new temporary folder)")
    p.add_argument("--json", type=Path, help="also write the results here")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    tests_dir = args.librdkafka.resolve() / "tests"
    if not (tests_dir / "test-runner").exists():
        raise SystemExit(f"no {tests_dir / 'test-runner'}: build librdkafka and `make -C tests build` first")
    out = args.out or Path(tempfile.mkdtemp(prefix="librdkafka-suite-"))
    out.mkdir(parents=True, exist_ok=True)
    say(f"logs in {out}")
    results: list[Result] = []
    with broker(args, out) as bootstrap:
        conf = out / "test.conf"
        conf.write_text(f"bootstrap.servers={bootstrap}\ntest.timeout.multiplier={args.timeout_multiplier}\n")
        for test in [t.strip() for t in args.tests.split(",") if t.strip()]:
            groups: tuple[str | None, ...] = (None,)
            if args.subtests:
                groups = tuple(args.subtests.split(","))
            elif test in SUBTEST_GROUPS and not args.no_split:
                groups = SUBTEST_GROUPS[test]
            for group in groups:
                for r in run_one(args, tests_dir, conf, out, test, group, bootstrap):
                    results.append(r)
                    say(f"{r.test:60} {r.state:8} {r.seconds:8.1f}s {r.reason}")
    say("\n| test | state | s | reason |\n|---|---|---|---|")
    for r in results:
        say(f"| {r.test} | {r.state} | {r.seconds:.1f} | {r.reason.replace('|', '/')} |")
    failed = [r for r in results if r.state not in ("PASSED", "SKIPPED")]
    say(
        f"\n{len(results)} results: {sum(r.state == 'PASSED' for r in results)} passed, "
        f"{sum(r.state == 'SKIPPED' for r in results)} skipped, {len(failed)} failed"
    )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 1 if failed else 0


def _unify_aborted(rows: dict[str, Result], other: dict[str, Result]) -> None:
    """Name a runner that aborted before its summary (its row is labelled ``0077``, not
    ``0077_compaction``) as the other run names the same test, when exactly one name fits."""
    for label in [t for t in rows if t not in other and re.fullmatch(r"\d{4}(:.*)?", t)]:
        number, _, subtests = label.partition(":")
        fits = [
            t
            for t in other
            if t not in rows and t.startswith(number + "_") and t.endswith(f":{subtests}" if subtests else "")
        ]
        if len(fits) == 1:
            rows[fits[0]] = rows.pop(label)


def compare(argv: list[str]) -> int:
    """``compare KOMPAKT.json KAFKA.json``: one Markdown row per test, kompakt's result beside Kafka's.

    Exit code 1 when a test passed on Kafka and did not on kompakt: those are kompakt's bugs (a test
    that fails on both is the test's or the setup's, not the broker's).
    """
    p = argparse.ArgumentParser(prog="librdkafka_suite.py compare")
    p.add_argument("kompakt", type=Path, help="--json of a run against kompakt")
    p.add_argument("kafka", type=Path, help="--json of a run against Kafka, same selection")
    args = p.parse_args(argv)
    ours = {r["test"]: Result(**r) for r in json.loads(args.kompakt.read_text())}
    theirs = {r["test"]: Result(**r) for r in json.loads(args.kafka.read_text())}
    _unify_aborted(ours, theirs)
    _unify_aborted(theirs, ours)

    def cell(r: Result | None) -> str:
        return "not run" if r is None else f"{r.state} {r.seconds:.1f} s"

    say("| test | kompakt | Kafka 4.1.2 | note |\n|---|---|---|---|")
    worse = 0
    for test in sorted(ours.keys() | theirs.keys()):
        k, r = ours.get(test), theirs.get(test)
        note = ""
        if r is not None and r.state == "PASSED" and (k is None or k.state != "PASSED"):
            worse += 1
            note = f"kompakt only: {k.reason if k else 'not run'}"
        elif k is not None and k.state not in ("PASSED", "SKIPPED"):
            note = f"both: {k.reason}" if r is not None and r.state == k.state else k.reason
        elif r is not None and r.state not in ("PASSED", "SKIPPED") and k is not None and k.state == "PASSED":
            note = f"Kafka only: {r.reason}"
        elif k is not None and k.state == "SKIPPED":
            note = k.reason
        say(f"| {test} | {cell(k)} | {cell(r)} | {note.replace('|', '/')[:200]} |")
    say(f"\n{worse} tests pass on Kafka and not on kompakt")
    return 1 if worse else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["kafka-topics"]:
        sys.exit(kafka_topics(sys.argv[2:]))
    if sys.argv[1:2] == ["compare"]:
        sys.exit(compare(sys.argv[2:]))
    sys.exit(main())
