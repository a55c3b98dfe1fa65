"""Fixtures for group tests."""

from __future__ import annotations

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(clock: FakeClock) -> Broker:
    return Broker.create(clock=clock, group_config=GroupConfig(group_initial_rebalance_delay_ms=0))


@pytest.fixture
def dispatcher(broker: Broker) -> Dispatcher:
    return Dispatcher(broker)
