"""``kompakt serve`` subprocesses for the end-to-end transaction tests (real clients).

Each broker runs on ``--port 0`` over its own data directory; the ready line is read with a
deadline (no sleeps) and the process is stopped with SIGTERM (SIGKILL only when it does not exit
in time). :func:`restart` starts the same data directory again, for restart scenarios.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

READY = re.compile(r"^kompakt ready: listening on (?P<host>[^:]+):(?P<port>\d+), data directory ")
ADMIN = re.compile(r"admin (?P<url>http://[0-9.:]+)")
START_DEADLINE_S = 30.0
DEADLINE_S = 30.0
#: Fast timeout checks so a broker-side abort is seen within a second of the timeout.
TXN_OVERRIDES = (
    "group.initial.rebalance.delay.ms=0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=100",
    "transaction.state.log.num.partitions=4",
    "offsets.topic.num.partitions=4",
)


@dataclass
class Kompakt:
    process: subprocess.Popen[str]
    data_dir: Path
    port: int
    stderr_path: Path
    extra: tuple[str, ...]
    args: tuple[str, ...] = ()
    admin_url: str = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout_s: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: no clean shutdown (no final flush, no snapshots, no clean-shutdown marker)."""
        self.process.kill()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start(data_dir: Path, *extra: str, port: int = 0, args: tuple[str, ...] = ()) -> Kompakt:
    """Launch ``kompakt serve`` on ``data_dir`` and wait for its ready line.

    ``extra`` are ``--override`` settings, ``args`` other command-line arguments.
    """
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    stderr_path = data_dir.parent / f"{data_dir.name}-stderr-{time.monotonic_ns()}.log"
    command = [
        sys.executable,
        "-m",
        "kompakt.cli.main",
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        *args,
    ]
    for item in (*TXN_OVERRIDES, *extra):
        command += ["--override", item]
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert process.stdout is not None
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or process.poll() is not None:
            process.kill()
            raise AssertionError(f"broker did not become ready:\n{stderr_path.read_text()}")
        poller = select.poll()
        poller.register(process.stdout, select.POLLIN | select.POLLHUP)
        if not poller.poll(remaining * 1000):
            continue
        line = process.stdout.readline()
        match = READY.match(line)
        if match:
            admin = ADMIN.search(line)
            return Kompakt(
                process, data_dir, int(match["port"]), stderr_path, extra, args, admin["url"] if admin else ""
            )


def restart(broker: Kompakt) -> Kompakt:
    """Start the stopped ``broker``'s data directory again on the same port."""
    return start(broker.data_dir, *broker.extra, port=broker.port, args=broker.args)


@dataclass
class External:
    """A broker someone else runs (``KOMPAKT_E2E_BOOTSTRAP``): the differential runs point the
    same scenarios at Apache Kafka this way."""

    bootstrap: str


@pytest.fixture(scope="module")
def kompakt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kompakt | External]:
    external = os.environ.get("KOMPAKT_E2E_BOOTSTRAP")
    if external:
        yield External(external)
        return
    broker = start(tmp_path_factory.mktemp("e2e") / "data")
    yield broker
    assert broker.stop() == 0, broker.stderr_path.read_text()


def poll_until(
    predicate: Callable[[], object], deadline_s: float = DEADLINE_S, what: str = "condition"
) -> None:
    """Call ``predicate()`` until it returns something true or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached before the deadline"
        time.sleep(0.05)
