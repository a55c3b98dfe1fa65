"""Tombstone-driven cleaning (beyond Kafka): once a stamped tombstone's delete horizon has passed,
its log is eligible even with nothing dirty; the pass removes exactly the expired tombstones and
leaves every other batch byte-identical; and no log is re-cleaned in a loop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.planning import REASON_TOMBSTONES
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

DELETE_RETENTION_MS = 60_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time_ns() // 1_000_000)


@pytest.fixture
def manager(tmp_path: Path, clock: FakeClock) -> Iterator[LogManager]:
    mgr = LogManager(tmp_path / "data", BrokerConfig.from_properties({}), clock)
    mgr.open()
    yield mgr
    mgr.close()


def batches(log: PartitionLog) -> list[bytes]:
    out = []
    for segment in log.segments.values()[:-1]:
        out.extend(bytes(v.raw) for v in iter_batches(segment.read_bytes(0, segment.size)))
    return out


def keys_and_values(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for raw in batches(log):
        for view in iter_batches(raw):
            out.extend((r.offset, r.key, r.value) for r in decode_records(view))
    return out


def stamped_log(manager: LogManager, clock: FakeClock) -> tuple[PartitionLog, LogCleaner]:
    """A cleaned log whose one tombstone was stamped with a horizon at the current time."""
    manager.create_topic(
        "t",
        1,
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.99",
            "delete.retention.ms": str(DELETE_RETENTION_MS),
            "internal.segment.bytes": "1024",
        },
    )
    log = manager.get_log("t", 0)
    for i in range(30):
        log.append(build_batch([SimpleRecord(f"k{i % 6}".encode(), f"v{i}".encode(), clock.now_ms())]))
    log.append(build_batch([SimpleRecord(b"k2", None, clock.now_ms())]))
    log.append(build_batch([SimpleRecord(b"other", b"x", clock.now_ms())]))
    log.roll()
    service = LogCleaner(manager.broker_config, manager.logs, manager.data_dir, clock)
    assert service.run_once(service.new_cleaner(0)) is True  # first clean: ratio 1.0, stamps
    assert [v for _, k, v in keys_and_values(log) if k == b"k2"] == [None]
    return log, service


def test_not_eligible_before_the_horizon_and_no_busy_cleaning(manager: LogManager, clock: FakeClock) -> None:
    log, service = stamped_log(manager, clock)
    cleaner = service.new_cleaner(0)
    before = batches(log)
    clock.advance(DELETE_RETENTION_MS - 1)
    for _ in range(5):
        assert service.run_once(cleaner) is False
    assert batches(log) == before


def test_eligible_exactly_at_the_horizon_and_only_the_tombstone_goes(
    manager: LogManager, clock: FakeClock
) -> None:
    log, service = stamped_log(manager, clock)
    cleaner = service.new_cleaner(0)
    before = batches(log)
    records_before = keys_and_values(log)
    clock.advance(DELETE_RETENTION_MS)
    views = [v for v in service._views() if v.topic == "t"]  # noqa: SLF001 - selection as the thread sees it
    selection = service.manager.grab_filthiest_compacted_log(
        views, clock.now_ms(), delete_horizons={("t", 0): service.horizons.earliest_horizon(log)}
    )
    assert selection.chosen is not None and selection.chosen.reason == REASON_TOMBSTONES
    service.manager.done_cleaning(("t", 0), selection.chosen.first_dirty_offset)
    assert service.run_once(cleaner) is True
    assert keys_and_values(log) == [r for r in records_before if r[1] != b"k2"]
    after = batches(log)
    removed = [b for b in before if b not in after]
    assert len(removed) == 1 and b"k2" in removed[0]  # only the tombstone's batch changed
    # Nothing is left to act on: no loop.
    for _ in range(3):
        assert service.run_once(cleaner) is False
    assert service.horizons.earliest_horizon(log) is None
