"""The ``kompakt`` pytest plugin: a ``kompakt_broker`` fixture for tests of compacted topics.

Registered through the ``pytest11`` entry point ``kompakt``, so installing kompakt is enough; a
project can also list it in ``pytest_plugins = ["kompakt.testing.pytest_plugin"]``.

``kompakt_broker`` starts an :class:`~kompakt.testing.InProcessBroker` per test: free ports, a
temporary data directory, a manual clock and a 50 ms cleaner backoff; it stops cleanly at the end
of the test. Override the ``kompakt_broker_config`` fixture to pass broker configs (Kafka names),
e.g. ``{"log.cleaner.enable": "false"}`` to have only explicit ``compact_now`` calls clean.

Nothing heavy is imported until a test requests the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kompakt.testing.broker import InProcessBroker


@pytest.fixture
def kompakt_broker_config() -> dict[str, str]:
    """Broker config overrides for ``kompakt_broker`` (override this fixture to change them)."""
    return {}


@pytest.fixture
def kompakt_broker(tmp_path: Path, kompakt_broker_config: dict[str, str]) -> Iterator[InProcessBroker]:
    """A running in-process broker with a manual clock, stopped after the test."""
    from kompakt.testing.broker import InProcessBroker

    broker = InProcessBroker(tmp_path / "kompakt-data", overrides=kompakt_broker_config)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
