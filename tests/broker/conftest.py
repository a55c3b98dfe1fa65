"""Fixtures for data-path handler tests: a real LogManager in tmp_path, a FakeClock, manual timers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager

NOW_MS = 1_700_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def broker_config() -> BrokerConfig:
    return BrokerConfig.from_properties({"num.partitions": "2"})


@pytest.fixture
def log_manager(tmp_path: Path, clock: FakeClock, broker_config: BrokerConfig) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data", broker_config, clock)
    manager.open()
    yield manager
    manager.close()


@pytest.fixture
def timers(clock: FakeClock) -> ManualTimers:
    return ManualTimers(clock)


@pytest.fixture
def broker(clock: FakeClock, log_manager: LogManager, timers: ManualTimers) -> Broker:
    return Broker.create(
        clock=clock,
        log_manager=log_manager,
        producer_ids=ProducerIdManager(log_manager.data_dir),
        timers=timers,
        cluster_id="test-cluster",
        advertised_host="broker.example",
        advertised_port=19092,
    )


@pytest.fixture
def dispatcher(broker: Broker) -> Dispatcher:
    return Dispatcher(broker)
