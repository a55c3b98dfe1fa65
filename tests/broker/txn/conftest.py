"""Fixtures of the coordinator tests: a real data directory and a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager

TOPIC = "orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_700_000_000_000)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def open_logs(data_dir: Path, clock: FakeClock) -> LogManager:
    manager = LogManager(data_dir, BrokerConfig.from_properties({"offsets.topic.num.partitions": "3"}), clock)
    manager.open()
    if TOPIC not in manager.topics():
        manager.create_topic(TOPIC, 2)
    return manager


@pytest.fixture
def logs(data_dir: Path, clock: FakeClock) -> Iterator[LogManager]:
    manager = open_logs(data_dir, clock)
    yield manager
    manager.close()
