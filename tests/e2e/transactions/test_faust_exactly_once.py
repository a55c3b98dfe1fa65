"""faust-streaming 0.15.3 with ``processing_guarantee="exactly_once"`` on kompakt (issue 30), the
scenario of ``tools/faust_scenario`` scaled down: keyed inputs in 2 partitions (2 % tombstones), a
faust Table counting per key with a changelog compacted fast (``segment.ms=1000``,
``min.cleanable.dirty.ratio=0.01``), the app SIGKILLed partway and restarted with its state
deleted, the broker SIGKILLed partway, one probe per key at the end.

What a user sees is asserted: no input is lost (every input offset has an output in faust's
read_committed output), and each time faust restores its Table from the changelog the restored
table is the changelog's compacted view as ``kompakt table scan`` reads it. Inputs with more than
one output (faust's own doubles: its transactions can commit a changelog write for an input whose
offset they do not commit, on Kafka as well) are printed, not asserted.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .conftest import Kompakt, poll_until, restart, start
from .txn_clients import create_topic, read_all, unique

pytestmark = pytest.mark.xdist_group("e2e-txn")

APP = Path(__file__).with_name("faust_count_app.py")
INPUTS = 600
KEYS = 100
#: Bounds each wait for the app: a faust worker imports, joins its group (after a SIGKILL, once
#: the dead member's 6 s session has expired) and restores its Table before its first commit.
APP_DEADLINE_S = 120.0
CHANGELOG_CONFIG = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}

faust = pytest.importorskip("faust", reason="faust-streaming is installed by `make test`")


class FaustApp:
    """One faust worker process, with its log and the file it dumps its restored Table to."""

    def __init__(self, env: dict[str, str], work: Path, tag: str) -> None:
        shutil.rmtree(work / "appdata", ignore_errors=True)  # no local state: restore from the changelog
        self.dump = work / f"restored-{tag}.json"
        self.log = work / f"app-{tag}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(APP)],
                env={
                    **env,
                    "DATADIR": str(work / "appdata"),
                    "DUMP": str(self.dump),
                    "WEB_PORT": _free_port(),
                },
                cwd=work,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def check_alive(self) -> None:
        assert self.process.poll() is None, f"faust exited with {self.process.returncode}: {self.tail()}"

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def restored(self) -> dict[str, int]:
        def dumped() -> bool:
            self.check_alive()
            return self.dump.exists()

        poll_until(dumped, deadline_s=APP_DEADLINE_S, what="faust's restored Table")
        restored: dict[str, int] = json.loads(self.dump.read_text())
        return restored

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(APP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.kill()


def _free_port() -> str:
    """faust binds its web port even with ``web_enabled=False``: a free one, not its fixed 6066."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def processed(bootstrap: str, output: str) -> Counter[tuple[int, int]]:
    """How many committed outputs each input ``(partition, offset)`` has."""
    done: Counter[tuple[int, int]] = Counter()
    for partition in (0, 1):
        records, _ = read_all(bootstrap, output, "read_committed", partition)
        for _, _, value in records:
            assert value is not None
            input_partition, input_offset, _count = value.decode().split(":")
            done[(int(input_partition), int(input_offset))] += 1
    return done


def compacted_view(bootstrap: str, changelog: str) -> dict[str, int]:
    """The changelog as a table (the latest committed value per key), read by ``kompakt table``."""
    kompakt = Path(sys.executable).with_name("kompakt")
    got = subprocess.run(
        [str(kompakt), "table", "scan", changelog, "--bootstrap-server", bootstrap, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert got.returncode == 0, got.stderr
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    return {row["key"]: json.loads(row["value"]) for row in rows}


def produce_inputs(
    bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]], over_s: float = 0.0
) -> None:
    """Write ``items``; with ``over_s``, at a steady rate over that long (pacing, so the kills
    land mid-stream however fast the app is; the producer retries across the broker's restart)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    step = max(1, len(items) // 40)
    for first in range(0, len(items), step):
        for key, value in items[first : first + step]:
            producer.produce(topic, key=key, value=value)
        if over_s:
            producer.flush(30)
            time.sleep(over_s / 40)
    assert producer.flush(60) == 0


@pytest.mark.timeout(8 * APP_DEADLINE_S)
def test_faust_exactly_once_count_survives_app_and_broker_kills(tmp_path: Path) -> None:
    began = time.monotonic()
    broker: Kompakt = start(tmp_path / "data", "log.cleaner.backoff.ms=500")
    app: FaustApp | None = None
    try:
        bs = broker.bootstrap
        app_id = unique("faust")
        source, sink, changelog = f"{app_id}-in", f"{app_id}-out", f"{app_id}-counts-changelog"
        create_topic(bs, source, 2)
        create_topic(bs, sink, 2)
        create_topic(bs, changelog, 2, CHANGELOG_CONFIG)
        rng = random.Random(30)
        inputs = [
            (f"key-{rng.randrange(KEYS)}".encode(), None if rng.random() < 0.02 else b"v%d" % i)
            for i in range(INPUTS)
        ]
        produce_inputs(bs, source, inputs[:40])
        trickle = threading.Thread(target=produce_inputs, args=(bs, source, inputs[40:], 6.0), daemon=True)
        env = {**os.environ, "BOOTSTRAP": bs, "APP_ID": app_id, "INPUT": source, "OUTPUT": sink}

        def wait_processed(count: int, what: str) -> None:
            def enough() -> bool:
                assert app is not None
                app.check_alive()
                return len(processed(bs, sink)) >= count

            poll_until(enough, deadline_s=APP_DEADLINE_S, what=what)

        app = FaustApp(env, tmp_path, "1")
        wait_processed(20, "the app consuming")
        trickle.start()
        wait_processed(int(0.4 * INPUTS), "40 % of the inputs processed")
        app.kill()  # mid-stream: its open transactions are left behind
        before_restore = compacted_view(bs, changelog)

        app = FaustApp(env, tmp_path, "2")
        assert app.restored() == before_restore
        wait_processed(int(0.7 * INPUTS), "70 % of the inputs processed")
        broker.kill()  # no clean shutdown: recovery of the changelog's tail and open transactions
        broker = restart(broker)
        trickle.join(APP_DEADLINE_S)
        wait_processed(INPUTS, "every input processed")
        produce_inputs(bs, source, [(f"key-{k}".encode(), b"probe") for k in range(KEYS)])
        wait_processed(INPUTS + KEYS, "every input and probe processed")
        app.stop()

        final_view = compacted_view(bs, changelog)
        app = FaustApp(env, tmp_path, "3")
        assert app.restored() == final_view
        app.stop()
        app = None

        done = processed(bs, sink)
        all_inputs = {(p, o) for p in (0, 1) for o in range(_end_offset(bs, source, p))}
        assert set(done) <= all_inputs
        lost = sorted(all_inputs - set(done))
        doubled = sorted(item for item, n in done.items() if n > 1)
        assert not lost, f"inputs with no committed output: {lost}"
        changelog_records = sum(len(read_all(bs, changelog, "read_committed", p)[0]) for p in (0, 1))
        # every committed output came with a committed changelog write: fewer left means cleaned
        assert changelog_records < sum(done.values()), "the changelog was never compacted"
        print(
            f"faust scenario: {len(all_inputs)} inputs, {sum(done.values())} outputs, 0 lost, "
            f"{len(doubled)} doubled {doubled[:20]}, changelog {changelog_records} records, "
            f"{time.monotonic() - began:.0f} s"
        )
    finally:
        if app is not None:
            app.kill()
        broker.stop()


def _end_offset(bootstrap: str, topic: str, partition: int) -> int:
    _, end = read_all(bootstrap, topic, "read_uncommitted", partition)
    return end
