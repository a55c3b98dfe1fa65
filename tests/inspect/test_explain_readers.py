"""The explain report's readers: the hold and each group's unread tombstones, with reader
positions given (a live broker or ``--bootstrap``) and without them (offline: named groups count
as having read nothing, as offline compaction assumes). Manual clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.readers import PartitionReaders
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.inspect.explain import ConfigInput, PartitionSource, SegmentSource, explain_partition
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch

RETENTION_MS = 60_000
MAX_HOLD_MS = 600_000
OVERRIDES = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.99",
    "delete.retention.ms": str(RETENTION_MS),
    "kompakt.tombstone.retain.for.groups": "g1",
    "kompakt.tombstone.max.hold.ms": str(MAX_HOLD_MS),
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time_ns() // 1_000_000)


@pytest.fixture
def log(tmp_path: Path, clock: FakeClock) -> Iterator[PartitionLog]:
    manager = LogManager(tmp_path / "data", BrokerConfig.from_properties({}), clock)
    manager.open()
    manager.create_topic("t", 1, OVERRIDES)
    partition_log = manager.get_log("t", 0)
    for i in range(10):
        partition_log.append(build_batch([SimpleRecord(f"k{i}".encode(), b"v", clock.now_ms())]))
    for i in (2, 3):
        partition_log.append(build_batch([SimpleRecord(f"k{i}".encode(), None, clock.now_ms())]))
    partition_log.roll()
    cleaner = LogCleaner(manager.broker_config, manager.logs, manager.data_dir, clock)
    cleaner.compact_now(partition_log)  # stamps the tombstones at 10 and 11
    yield partition_log
    manager.close()


def _explain(log: PartitionLog, now: int, readers: PartitionReaders | None) -> object:
    source = PartitionSource(
        "t",
        0,
        tuple(SegmentSource(s.base_offset, s.log_path, s.size, s.created_ms) for s in log.segments.values()),
        cleaner_checkpoint=log.segments.active.base_offset,  # the compact-now cleaned it all
        readers=readers,
    )
    configs = ConfigInput(OVERRIDES, dict.fromkeys(OVERRIDES, "test"), BrokerConfig())
    return explain_partition(source, configs, now)


def test_known_positions_give_each_group_its_unread_tombstones_and_deadline(
    log: PartitionLog, clock: FakeClock
) -> None:
    horizon = clock.now_ms() + RETENTION_MS
    readers = PartitionReaders(committed={"g1": 11, "other": 0}, holding={"g1": 11})
    report = _explain(log, clock.now_ms() + RETENTION_MS + 1, readers)
    r = report.readers  # type: ignore[attr-defined]
    assert r.known and r.hold_offset == 11 and r.holders == (("g1", 11),)
    rows = {g.group: g for g in r.groups}
    assert (rows["other"].unread_tombstones, rows["other"].first_unread_offset) == (2, 10)
    assert rows["other"].removal_ms == horizon  # 10 is below g1's position: it goes at its horizon
    assert (rows["g1"].unread_tombstones, rows["g1"].removal_ms) == (1, horizon + MAX_HOLD_MS)
    assert "group other has not read 2 tombstones of t-0" in rows["other"].detail
    tombs = report.tombstones  # type: ignore[attr-defined]
    assert (tombs.held_for_readers, tombs.past_horizon) == (1, 1)


def test_unknown_positions_hold_for_the_named_groups(log: PartitionLog, clock: FakeClock) -> None:
    report = _explain(log, clock.now_ms() + RETENTION_MS + 1, None)
    r = report.readers  # type: ignore[attr-defined]
    assert not r.known and r.hold_offset == 0 and r.groups == ()
    assert "group positions unknown here" in r.detail
    assert report.tombstones.held_for_readers == 2  # type: ignore[attr-defined]
    assert report.eligible is False  # type: ignore[attr-defined]
    assert "or for their readers (2 held" in report.verdict  # type: ignore[attr-defined]
