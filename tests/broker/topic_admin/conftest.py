"""Fixtures: a broker over a real LogManager in a temporary data directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def static_props() -> dict[str, str]:
    """Override per test module to change the static broker config."""
    return {}


@pytest.fixture
def log_manager(tmp_path: Path, clock: FakeClock, static_props: dict[str, str]) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data", BrokerConfig.from_properties(static_props), clock)
    manager.open()
    yield manager
    manager.close()


@pytest.fixture
def broker(log_manager: LogManager, clock: FakeClock) -> Broker:
    return Broker.create(clock=clock, log_manager=log_manager)


@pytest.fixture
def dispatcher(broker: Broker) -> Dispatcher:
    return Dispatcher(broker)
