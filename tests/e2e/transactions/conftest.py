"""``kompakt serve`` subprocesses for the end-to-end transaction tests (real clients).

Each broker runs on ``--port 0`` over its own data directory; the ready line is read with a
deadline (no sleeps) and the process is stopped with SIGTERM (SIGKILL only when it does not exit
in time). :func:`restart` starts the same data directory again, for restart scenarios.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.serve import BrokerProcess, launch

DEADLINE_S = 30.0
#: Fast timeout checks so a broker-side abort is seen within a second of the timeout.
TXN_OVERRIDES = (
    "group.initial.rebalance.delay.ms=0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=100",
    "transaction.state.log.num.partitions=4",
    "offsets.topic.num.partitions=4",
)


@dataclass
class Kompakt(BrokerProcess):
    """A broker of these tests: remembers its settings, so :func:`restart` starts it the same way."""

    extra: tuple[str, ...] = ()
    args: tuple[str, ...] = ()

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
    overrides = [word for item in (*TXN_OVERRIDES, *extra) for word in ("--override", item)]
    # A fixed --port (a restart) would take the admin endpoint's fixed default 9192, which any
    # other broker on the machine may hold: any free one instead.
    admin = ["--admin-port", "0"] if port and "--admin-port" not in args else []
    b = launch(data_dir, *args, *admin, *overrides, port=port)
    return Kompakt(b.process, b.data_dir, b.port, b.ready_line, b.stderr_path, extra, args)


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
