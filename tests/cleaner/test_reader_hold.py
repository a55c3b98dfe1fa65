"""The reader hold (beyond Kafka): a tombstone past its delete horizon stays until every group named
in ``kompakt.tombstone.retain.for.groups`` has committed past it, or ``kompakt.tombstone.max.hold.ms``
has run out; a group that is not named (or does not exist) does not hold, as in Kafka. The cleaner
threads' eligibility, their filter and compact-now all follow it. Manual clock throughout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.readers import FixedPositions, PartitionReaders, TombstoneHold, reader_risks
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

from ._harness import DAY_MS, LARGE, O, abort, commit, lct_log, make_map, roll, txn

DELETE_RETENTION_MS = 60_000
MAX_HOLD_MS = 600_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time_ns() // 1_000_000)


@pytest.fixture
def manager(tmp_path: Path, clock: FakeClock) -> Iterator[LogManager]:
    mgr = LogManager(tmp_path / "data", BrokerConfig.from_properties({}), clock)
    mgr.open()
    yield mgr
    mgr.close()


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for segment in log.segments.values():
        for view in iter_batches(segment.read_bytes(0, segment.size)):
            out.extend((r.offset, r.key, r.value) for r in decode_records(view))
    return out


def tombstone_offsets(log: PartitionLog) -> list[int]:
    return [o for o, k, v in records(log) if k is not None and v is None]


def held_log(
    manager: LogManager, clock: FakeClock, groups: str = "g1", **extra: str
) -> tuple[PartitionLog, LogCleaner]:
    """A compacted log with tombstones for k1 and k2 (offsets 30, 31) whose horizon was stamped now."""
    manager.create_topic(
        "t",
        1,
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.99",
            "delete.retention.ms": str(DELETE_RETENTION_MS),
            "internal.segment.bytes": "1024",
            "kompakt.tombstone.retain.for.groups": groups,
            "kompakt.tombstone.max.hold.ms": str(MAX_HOLD_MS),
            **extra,
        },
    )
    log = manager.get_log("t", 0)
    for i in range(30):
        log.append(build_batch([SimpleRecord(f"k{i % 6}".encode(), f"v{i}".encode(), clock.now_ms())]))
    log.append(build_batch([SimpleRecord(b"k1", None, clock.now_ms())]))
    log.append(build_batch([SimpleRecord(b"k2", None, clock.now_ms())]))
    log.append(build_batch([SimpleRecord(b"other", b"x", clock.now_ms())]))
    log.roll()
    service = LogCleaner(manager.broker_config, manager.logs, manager.data_dir, clock)
    assert service.run_once(service.new_cleaner(0)) is True  # first clean stamps the horizons
    assert tombstone_offsets(log) == [30, 31]
    return log, service


def at(offsets: dict[str, int]) -> FixedPositions:
    return FixedPositions({("t", 0): offsets})


def test_a_named_group_that_has_not_read_the_tombstones_holds_them_past_the_horizon(
    manager: LogManager, clock: FakeClock
) -> None:
    log, service = held_log(manager, clock)
    service.readers = at({"g1": 5})
    cleaner = service.new_cleaner(0)
    clock.advance(DELETE_RETENTION_MS + 1)
    for _ in range(3):  # not eligible: no clean loop either
        assert service.run_once(cleaner) is False
    service.compact_now(log)  # compact-now honours the hold too
    assert tombstone_offsets(log) == [30, 31]


def test_the_tombstones_go_once_the_group_has_committed_past_them(
    manager: LogManager, clock: FakeClock
) -> None:
    log, service = held_log(manager, clock)
    cleaner = service.new_cleaner(0)
    clock.advance(DELETE_RETENTION_MS + 1)
    service.readers = at({"g1": 31})  # read k1's tombstone (30), not k2's (31): its batch stays
    assert service.run_once(cleaner) is True
    assert tombstone_offsets(log) == [31]
    assert service.run_once(cleaner) is False
    service.readers = at({"g1": 32})
    assert service.run_once(cleaner) is True
    assert tombstone_offsets(log) == []


def test_an_unnamed_group_misses_the_tombstones_as_in_kafka(manager: LogManager, clock: FakeClock) -> None:
    log, service = held_log(manager, clock)
    service.readers = at({"g1": 100, "lagging": 0})  # "lagging" is not in the hold
    clock.advance(DELETE_RETENTION_MS)
    assert service.run_once(service.new_cleaner(0)) is True
    assert tombstone_offsets(log) == []


def test_a_named_group_that_does_not_exist_does_not_hold(manager: LogManager, clock: FakeClock) -> None:
    log, service = held_log(manager, clock, groups="deleted-group")
    service.readers = at({"someone-else": 0})
    clock.advance(DELETE_RETENTION_MS)
    assert service.run_once(service.new_cleaner(0)) is True
    assert tombstone_offsets(log) == []


def test_a_named_group_without_an_offset_on_the_partition_holds_from_zero(
    manager: LogManager, clock: FakeClock
) -> None:
    log, service = held_log(manager, clock)
    service.readers = FixedPositions({("other-topic", 0): {"g1": 7}})  # g1 exists, nothing on t-0
    clock.advance(DELETE_RETENTION_MS)
    assert service.run_once(service.new_cleaner(0)) is False
    assert tombstone_offsets(log) == [30, 31]


def test_the_maximum_hold_releases(manager: LogManager, clock: FakeClock) -> None:
    log, service = held_log(manager, clock)
    service.readers = at({"g1": 0})
    cleaner = service.new_cleaner(0)
    clock.advance(DELETE_RETENTION_MS + MAX_HOLD_MS - 1)
    assert service.run_once(cleaner) is False
    assert tombstone_offsets(log) == [30, 31]
    clock.advance(1)
    assert service.run_once(cleaner) is True
    assert tombstone_offsets(log) == []


def test_a_backup_registered_as_reader_holds_its_partitions(manager: LogManager, clock: FakeClock) -> None:
    log, service = held_log(manager, clock, groups="")
    service.readers = FixedPositions({}, registered={("t", 0): {"backup": 10}})
    cleaner = service.new_cleaner(0)
    clock.advance(DELETE_RETENTION_MS)
    assert service.run_once(cleaner) is False
    assert tombstone_offsets(log) == [30, 31]
    service.readers = FixedPositions({})  # the backup finished: it no longer registers
    assert service.run_once(cleaner) is True
    assert tombstone_offsets(log) == []


def test_the_report_names_the_group_the_count_and_the_deadline(manager: LogManager, clock: FakeClock) -> None:
    log, service = held_log(manager, clock)
    horizon = clock.now_ms() + DELETE_RETENTION_MS
    service.readers = at({"g1": 31, "lagging": 0, "caught-up": 40})
    _, hold, risks = service.reader_report(log)
    assert hold is not None and hold.offset == 31
    by_group = {r.group: r for r in risks}
    assert (by_group["lagging"].unread, by_group["lagging"].first_offset) == (2, 30)
    # lagging is not named: the first tombstone it has not read is not held (30 < 31) and goes
    # at its horizon; g1 holds what it has not read until the maximum hold runs out.
    assert by_group["lagging"].removal_ms == horizon and not by_group["lagging"].holds
    assert (by_group["g1"].unread, by_group["g1"].first_offset) == (1, 31)
    assert by_group["g1"].removal_ms == horizon + MAX_HOLD_MS and by_group["g1"].holds
    assert by_group["caught-up"].unread == 0 and by_group["caught-up"].removal_ms is None
    line = by_group["lagging"].sentence("t", 0, "T")
    assert line == (
        "group lagging has not read 2 tombstones of t-0 that will be removed at T (first at offset 30); "
        "it must catch up by T"
    )


def test_reader_risks_counts_from_each_committed_offset() -> None:
    offsets = np.array([3, 5, 9, 12], dtype=np.int64)
    horizons = np.array([400, 100, 300, 200], dtype=np.int64)
    risks = reader_risks(
        offsets,
        horizons,
        offsets,
        PartitionReaders(committed={"a": 0, "b": 6, "c": 13}),
        None,
    )
    got = {r.group: (r.unread, r.first_offset, r.removal_ms) for r in risks}
    assert got == {"a": (4, 3, 100), "b": (2, 9, 200), "c": (0, None, None)}
    hold = TombstoneHold(offset=6, max_hold_ms=1000)
    held = reader_risks(offsets, horizons, offsets, PartitionReaders(committed={"a": 0}), hold)
    assert (held[0].removal_ms, held[0].holds) == (100, False)  # 5 < 6 is not held: 100


def _held_clean(log: PartitionLog, now: int, offsets: dict[str, int]) -> None:
    readers = FixedPositions({("t", 0): offsets})
    cleaner = Cleaner(0, make_map(), log.clock, readers=readers)  # type: ignore[arg-type]
    cleaner.clean(log, 0, log.segments.active.base_offset, now)


def test_a_held_abort_marker_stays_past_its_horizon(tmp_path: Path) -> None:
    """``LogCleanerTest.testAbortMarkerRemoval`` with the hold: the ABORT marker at 3 outlives its
    horizon while the named group has not read past it, and goes once it has."""
    clock = FakeClock()
    log = lct_log(tmp_path, clock, internal_segment_bytes=256, kompakt_tombstone_retain_for_groups=("g",))
    txn(log, 1, 1)
    txn(log, 1, 2, 3)
    abort(log, 1)
    txn(log, 1, 3)
    commit(log, 1)
    roll(log)
    _held_clean(log, LARGE, {"g": 0})
    assert O(log) == [3, 4, 5]
    _held_clean(log, LARGE, {"g": 0})  # stamps the marker's horizon: LARGE + 1 day
    _held_clean(log, LARGE + DAY_MS + 1, {"g": 3})  # past the horizon; g has not read offset 3
    assert O(log) == [3, 4, 5]
    _held_clean(log, LARGE + DAY_MS + 1, {"g": 4})  # now it has
    assert O(log) == [4, 5]
    log.close()


def test_a_maximum_hold_near_long_max_never_overflows() -> None:
    hold = TombstoneHold(offset=0, max_hold_ms=2**63 - 1)
    horizon = np.array([1_700_000_000_000], dtype=np.int64)
    assert hold.removal_ms(horizon, np.array([5], dtype=np.int64)).tolist() == [2**63 - 1]
    assert hold.held(horizon, np.array([5], dtype=np.int64), 1_800_000_000_000).tolist() == [True]
