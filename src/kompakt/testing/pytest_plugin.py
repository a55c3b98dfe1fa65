"""The ``kompakt`` pytest plugin: a ``kompakt_broker`` fixture for tests of compacted topics.

Registered through the ``pytest11`` entry point ``kompakt``, so installing kompakt is enough; a
project can also list it in ``pytest_plugins = ["kompakt.testing.pytest_plugin"]``.

``kompakt_broker`` starts an :class:`~kompakt.testing.InProcessBroker` per test: free ports, a
temporary data directory, a manual clock and a 50 ms cleaner backoff; it stops cleanly at the end
of the test. Override the ``kompakt_broker_config`` fixture to pass broker configs (Kafka names),
e.g. ``{"log.cleaner.enable": "false"}`` to have only explicit ``compact_now`` calls clean.

Compaction chaos (:mod:`kompakt.server.compaction_chaos`): ``pytest --kompakt-compaction-chaos=SEED``
runs every ``kompakt_broker`` with random legal rolls and cleans of its compacted topics as records
arrive, deterministic per seed; a test or conftest can override the ``kompakt_compaction_chaos``
fixture (return a seed) for its own brokers.

Nothing heavy is imported until a test requests the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kompakt.testing.broker import InProcessBroker


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kompakt")
    group.addoption(
        "--kompakt-compaction-chaos",
        action="store",
        type=int,
        default=None,
        metavar="SEED",
        help="run every kompakt_broker with compaction chaos seeded by SEED (random legal rolls and "
        "cleans of compacted topics as records arrive)",
    )


@pytest.fixture
def kompakt_compaction_chaos(request: pytest.FixtureRequest) -> int | None:
    """The compaction chaos seed of ``kompakt_broker`` (None: no chaos); by default the
    ``--kompakt-compaction-chaos`` option's. Override it to choose per test or module."""
    seed: int | None = request.config.getoption("--kompakt-compaction-chaos", default=None)
    return seed


@pytest.fixture
def kompakt_broker_config() -> dict[str, str]:
    """Broker config overrides for ``kompakt_broker`` (override this fixture to change them)."""
    return {}


@pytest.fixture
def kompakt_broker(
    tmp_path: Path, kompakt_broker_config: dict[str, str], kompakt_compaction_chaos: int | None
) -> Iterator[InProcessBroker]:
    """A running in-process broker with a manual clock, stopped after the test."""
    from kompakt.testing.broker import InProcessBroker

    broker = InProcessBroker(
        tmp_path / "kompakt-data", overrides=kompakt_broker_config, compaction_chaos=kompakt_compaction_chaos
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
