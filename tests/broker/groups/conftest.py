"""Fixtures for group tests: every coordinator writes its records to ``__consumer_offsets`` in
``tmp_path``, the production format, and can be restarted over the same directory."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import ConsumerGroupConfig, GroupConfig, GroupCoordinator, GroupLog
from kompakt.broker.groups.records.log import LoadedRecord
from kompakt.broker.groups.records.schemas import GroupRecordKey, GroupRecordValue
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager

#: Few partitions keep the topic's creation cheap; placement is tested on its own.
OFFSETS_PARTITIONS = 3


class GroupsDir:
    """A data directory whose ``__consumer_offsets`` coordinators write to and reload from."""

    def __init__(self, data_dir: Path, clock: FakeClock) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self.logs = self._open()

    def _open(self) -> LogManager:
        config = BrokerConfig.from_properties({"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)})
        logs = LogManager(self.data_dir, config, self.clock)
        logs.open()
        return logs

    def topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (meta.topic_id, meta.partitions) for name, meta in self.logs.topics().items()}

    def coordinator(
        self, config: GroupConfig | None = None, consumer_config: ConsumerGroupConfig | None = None
    ) -> GroupCoordinator:
        """A coordinator loaded from the directory's log (a restart when one ran before)."""
        coordinator = GroupCoordinator(
            config or GroupConfig(group_initial_rebalance_delay_ms=0),
            self.clock,
            GroupLog(self.logs, self.clock),
            consumer_config,
            topics=self.topics,
        )
        coordinator.load()
        return coordinator

    def stored(self) -> dict[GroupRecordKey, GroupRecordValue]:
        """What ``__consumer_offsets`` holds now: the latest value of every key, tombstoned keys
        gone (the view compaction converges to), read back from the files."""
        view: dict[GroupRecordKey, GroupRecordValue] = {}
        for item in GroupLog(self.logs, self.clock).load():
            if isinstance(item, LoadedRecord) and item.producer_id is None:
                view.pop(item.key, None)
                if item.value is not None:
                    view[item.key] = item.value
        return view

    def restart(self) -> None:
        """Close and reopen the data directory (the next coordinator replays what is on disk)."""
        self.logs.close()
        self.logs = self._open()

    def close(self) -> None:
        self.logs.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def groups_dir(tmp_path: Path, clock: FakeClock) -> Iterator[GroupsDir]:
    directory = GroupsDir(tmp_path / "data", clock)
    yield directory
    directory.close()


@pytest.fixture
def make_coordinator(groups_dir: GroupsDir) -> Callable[..., GroupCoordinator]:
    return groups_dir.coordinator


@pytest.fixture
def broker(clock: FakeClock) -> Broker:
    return Broker.create(clock=clock, group_config=GroupConfig(group_initial_rebalance_delay_ms=0))


@pytest.fixture
def dispatcher(broker: Broker) -> Dispatcher:
    return Dispatcher(broker)
