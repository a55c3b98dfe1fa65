"""Quix Streams with ``processing_guarantee="exactly-once"`` on kompakt: a stateful count per
key, its changelog compacted by kompakt's cleaner; the app is killed mid-stream (SIGKILL) and
restarted with its local state deleted, so the state comes back from the changelog; a second test
SIGKILLs the broker mid-stream first. The output, read committed, has every count of every key
exactly once, in order."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .conftest import External, Kompakt, poll_until, restart, start
from .txn_clients import create_topic, read_all, unique

pytestmark = pytest.mark.xdist_group("e2e-txn")

APP = Path(__file__).with_name("quix_count_app.py")
KEYS = 5
#: Bounds the wait for an app's committed output. An app starts a Python interpreter, imports
#: Quix Streams, joins its group and restores its state before its first commit: over 30 s on a
#: loaded machine. A dead app fails the wait at once, with its log.
OUTPUT_DEADLINE_S = 180.0


def _launch(
    bootstrap: str, source: str, sink: str, group: str, state_dir: Path, log: Path
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(APP), bootstrap, source, sink, group, str(state_dir)], stdout=out, stderr=out
        )


def _produce(bootstrap: str, topic: str, start: int, stop: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for seq in range(start, stop):
        key = f"k{seq % KEYS}"
        producer.produce(topic, key=key.encode(), value=json.dumps({"key": key, "seq": seq}).encode())
    producer.flush(30)


def _committed_output(bootstrap: str, sink: str) -> list[dict[str, object]]:
    records, _ = read_all(bootstrap, sink, "read_committed")
    return [json.loads(value) for _, _, value in records if value is not None]


def _wait_for_output(bootstrap: str, sink: str, count: int, app: subprocess.Popen[bytes], log: Path) -> None:
    def enough() -> bool:
        assert app.poll() is None, f"the app exited with {app.returncode}: {log.read_text()[-3000:]}"
        return len(_committed_output(bootstrap, sink)) >= count

    try:
        poll_until(enough, deadline_s=OUTPUT_DEADLINE_S, what=f"{count} committed outputs")
    except AssertionError:
        _dump_stacks(app, log)
        raise


def _dump_stacks(app: subprocess.Popen[bytes], log: Path) -> None:
    """A stalled app writes its threads' stacks to its log (SIGUSR1, quix_count_app.py), and the
    failure shows them: where a transaction waits is the first thing to know."""
    if app.poll() is not None:
        return
    size = log.stat().st_size
    app.send_signal(signal.SIGUSR1)
    poll_until(lambda: log.stat().st_size > size, deadline_s=10, what="the app's stack dump")
    print(log.read_text()[-20_000:], file=sys.stderr)


@pytest.mark.timeout(3 * OUTPUT_DEADLINE_S)
def test_quix_exactly_once_count_survives_a_kill(kompakt: Kompakt | External, tmp_path: Path) -> None:
    bs = kompakt.bootstrap
    source, sink, group = unique("quix-in"), unique("quix-out"), unique("quix")
    create_topic(bs, source)
    create_topic(bs, sink)
    state_dir, log = tmp_path / "state", tmp_path / "app.log"
    _produce(bs, source, 0, 150)

    app = _launch(bs, source, sink, group, state_dir, log)
    try:
        _wait_for_output(bs, sink, 40, app, log)
    finally:
        app.send_signal(signal.SIGKILL)  # mid-stream: its open transaction is left behind
        app.wait(10)
    shutil.rmtree(state_dir)  # the restarted app must restore its counts from the changelog
    _produce(bs, source, 150, 300)

    app = _launch(bs, source, sink, group, state_dir, log)
    try:
        _wait_for_output(bs, sink, 300, app, log)
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(OUTPUT_DEADLINE_S)  # a clean shutdown commits and closes; slow under load

    _check_counts(_committed_output(bs, sink), log)


def _check_counts(output: list[dict[str, object]], log: Path) -> None:
    """300 outputs, each key's sequence numbers once and in order, its counts 1, 2, 3…"""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for item in output:
        by_key[str(item["key"])].append((int(str(item["seq"])), int(str(item["count"]))))
    assert len(output) == 300, log.read_text()[-3000:]
    for key, items in by_key.items():
        seqs = [seq for seq, _ in items]
        counts = [count for _, count in items]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"{key}: duplicates or disorder {seqs}"
        assert counts == list(range(1, len(items) + 1)), f"{key}: counts {counts}"
    assert sorted(by_key) == [f"k{i}" for i in range(KEYS)]


@pytest.mark.timeout(4 * OUTPUT_DEADLINE_S)
def test_quix_exactly_once_count_survives_a_broker_kill(tmp_path: Path) -> None:
    """The broker SIGKILLed mid-stream (no clean shutdown: its open transactions, the changelog's
    dirty tail and the unflushed segments are recovered at restart), then the app SIGKILLed and
    restarted with its state deleted, so its counts come back from the changelog the restarted
    broker recovered and compacts."""
    broker = start(tmp_path / "data", "log.cleaner.backoff.ms=500")
    try:
        bs = broker.bootstrap
        source, sink, group = unique("quix-in"), unique("quix-out"), unique("quix")
        create_topic(bs, source)
        create_topic(bs, sink)
        state_dir, log = tmp_path / "state", tmp_path / "app.log"
        _produce(bs, source, 0, 150)
        app = _launch(bs, source, sink, group, state_dir, log)
        try:
            _wait_for_output(bs, sink, 40, app, log)
            broker.kill()
            broker = restart(broker)
            # At most the 150 inputs written so far, so 20 more are always still to come: the
            # app's transactions must go on against the restarted broker (its recovered
            # coordinator and producer state), not just have committed before the kill.
            committed = len(_committed_output(bs, sink))
            _produce(bs, source, 150, 225)
            if app.poll() is None:
                _wait_for_output(bs, sink, committed + 20, app, log)
        finally:
            app.send_signal(signal.SIGKILL)
            app.wait(10)
        shutil.rmtree(state_dir, ignore_errors=True)
        _produce(bs, source, 225, 300)
        app = _launch(bs, source, sink, group, state_dir, log)
        try:
            _wait_for_output(bs, sink, 300, app, log)
        finally:
            app.send_signal(signal.SIGTERM)
            app.wait(OUTPUT_DEADLINE_S)
        _check_counts(_committed_output(bs, sink), log)
    finally:
        broker.stop()
