"""Fixtures for protocol tests: a dispatcher over a broker with a fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.clock import FakeClock

from .isolated import IsolatedDecoder


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def dispatcher(clock: FakeClock) -> Dispatcher:
    broker = Broker.create(
        clock=clock,
        group_config=GroupConfig(group_initial_rebalance_delay_ms=0),
        advertised_host="broker.test",
        advertised_port=19092,
    )
    return Dispatcher(broker)


@pytest.fixture(scope="module")
def isolated_decoder() -> Iterator[IsolatedDecoder]:
    """A decoding child process shared by a module's tests (restarted if a decode kills it)."""
    decoder = IsolatedDecoder()
    yield decoder
    decoder.close()
