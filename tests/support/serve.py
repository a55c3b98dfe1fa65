"""A real ``kompakt serve`` subprocess: for the end-to-end client, CLI, backup and seed-guide tests.

The broker is started on ``--port 0`` over a temporary data directory; :func:`start_broker` parses the
ready line from stdout (with a deadline, no sleeps) and stops the process with SIGTERM on
teardown (SIGKILL only if it does not exit in time). Topics that need configs (the compacted
topic) are created in the data directory with ``LogManager.create_topic`` before launch.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager

READY = re.compile(
    r"^kompakt ready: listening on (?:(?P<name>[A-Z0-9_]+)://)?(?P<host>[^:,\s]+):(?P<port>\d+)"
    r"(?:, [A-Z0-9_]+://[^,\s]+)*, data directory (?P<dir>.+) \("
)
#: One ``NAME://host:port`` of a ready line naming several listeners.
LISTENER = re.compile(r"(?P<name>[A-Z0-9_]+)://(?P<host>[^:,\s\]]+|\[[^\]]+\]):(?P<port>\d+)")
ADMIN_URL = re.compile(r", admin (?P<url>https?://[^,\s]+)")
START_DEADLINE_S = 30.0
COMPACTED = "compacted"


@dataclass
class BrokerProcess:
    process: subprocess.Popen[str]
    data_dir: Path
    port: int
    ready_line: str
    stderr_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def listener_ports(self) -> dict[str, int]:
        """Each named listener's bound port, from the ready line (``SSL://127.0.0.1:40123``)."""
        head = self.ready_line.split(", data directory ")[0]
        return {m["name"]: int(m["port"]) for m in LISTENER.finditer(head)}

    @property
    def admin_url(self) -> str:
        """The admin endpoint's base URL, from the ready line (``, admin http://...``)."""
        match = ADMIN_URL.search(self.ready_line)
        assert match, f"no admin endpoint in the ready line: {self.ready_line}"
        return match["url"]

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
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


def start_broker(data_dir: Path, *extra: str) -> BrokerProcess:
    """Launch ``kompakt serve --port 0`` and wait for its ready line."""
    return launch(data_dir, "--override", "group.initial.rebalance.delay.ms=0", *extra)


def launch(data_dir: Path, *args: str, port: int = 0) -> BrokerProcess:
    """Launch ``kompakt serve`` on ``data_dir`` with ``args`` and wait for its ready line."""
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
        # A fixed Kafka port (a restart on the same port) would put the admin endpoint on its
        # default 9192, which another broker on the machine may hold: a free one unless asked.
        *(() if "--admin-port" in args else ("--admin-port", "0")),
        *args,
    ]
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
        # poll(), not select(): a long test session can hold more than FD_SETSIZE descriptors.
        poller = select.poll()
        poller.register(process.stdout, select.POLLIN | select.POLLHUP)
        readable = poller.poll(remaining * 1000)
        if not readable:
            continue
        line = process.stdout.readline()
        match = READY.match(line)
        if match:
            return BrokerProcess(process, data_dir, int(match["port"]), line.strip(), stderr_path)


def prepare_data_dir(data_dir: Path) -> None:
    """Create the topics the tests need configs for, the way an operator could before launch."""
    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        if COMPACTED not in manager.topics():
            manager.create_topic(COMPACTED, 1, {"cleanup.policy": "compact"})
    finally:
        manager.close()


def poll_until(predicate: object, deadline_s: float = 20.0) -> None:
    """Call ``predicate()`` until it returns true or the deadline passes."""
    assert callable(predicate)
    deadline = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
