"""Compaction statistics of a ``__consumer_offsets``-shaped partition agree with the files.

The issue: compactions of ``__consumer_offsets`` that removed deleted groups' records reported
``tombstones_removed: 0``. The partition here holds what the group coordinator writes: offset
commits (version 1 keys) and group metadata (version 2 keys) of four groups, two of which are then
deleted (a tombstone for every key), a later round of commits by the surviving groups, and a
transactional offset commit that aborts. The map holds the broker's smallest dedupe buffer, so
this partition's 40,004 keys take two passes, as a large ``__consumer_offsets`` partition does
with the default buffer. Each compact-now is checked against a plain read of the segments before
and after it: what compact-now returns, and the partition's last-clean record that the admin
endpoint and the ``kompakt_partition_last_clean_*`` metrics expose.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kompakt.broker.groups.records.schemas import GroupMetadataKey, OffsetCommitKey, encode_key
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.stats import combine_passes
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import write_crc
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch
from kompakt.records.record import decode_records

TOPIC = "__consumer_offsets"
GROUPS = ["g0", "g1", "g2", "g3"]
DELETED = ["g0", "g1"]
PARTITIONS = 10_000  # per group: 40,004 keys in all, more than one pass of a 1 MiB map holds
DAY_MS = 86_400_000
#: The smallest dedupe buffer a broker accepts (more than 1 MiB per thread): 39,321 keys a pass.
MIN_DEDUPE = str(1024 * 1024 + 24)


@dataclass(frozen=True)
class Files:
    """What a plain read of the partition's non-active segments finds."""

    records: int
    tombstones: int
    size: int


def read_files(log: PartitionLog) -> Files:
    records = tombstones = size = 0
    for segment in log.segments.values():
        if segment is log.segments.active:
            continue
        size += segment.size
        for _pos, view in segment.iter_batches():
            for r in decode_records(view):
                records += 1
                tombstones += int(not view.is_control and r.is_tombstone)
    return Files(records, tombstones, size)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[tuple[LogManager, FakeClock]]:
    clock = FakeClock(time.time_ns() // 1_000_000)
    broker = BrokerConfig.from_properties({"log.cleaner.dedupe.buffer.size": MIN_DEDUPE})
    mgr = LogManager(tmp_path / "data", broker, clock)
    mgr.open()
    yield mgr, clock
    mgr.close()


def _commits(groups: list[str], round_: int, now: int) -> list[SimpleRecord]:
    return [
        SimpleRecord(encode_key(OffsetCommitKey(g, "orders", p)), f"offset-{round_}-{p}".encode(), now)
        for g in groups
        for p in range(PARTITIONS)
    ]


def _write(log: PartitionLog, clock: FakeClock) -> None:
    now = clock.now_ms()
    _append_batches(log, _commits(GROUPS, 1, now))
    log.append(
        build_batch([SimpleRecord(encode_key(GroupMetadataKey(g)), b"generation-1", now) for g in GROUPS])
    )
    # A transactional offset commit (TxnOffsetCommit) that its producer aborts.
    txn = [SimpleRecord(encode_key(OffsetCommitKey("g2", "orders", p)), b"txn", now) for p in range(3)]
    log.append(build_batch(txn, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True))
    log.append(build_control_batch(ControlType.ABORT, producer_id=7, producer_epoch=0, timestamp=now))
    # Deleting a group writes a tombstone for each of its keys.
    tombstones = [
        SimpleRecord(encode_key(OffsetCommitKey(g, "orders", p)), None, now)
        for g in DELETED
        for p in range(PARTITIONS)
    ]
    tombstones += [SimpleRecord(encode_key(GroupMetadataKey(g)), None, now) for g in DELETED]
    _append_batches(log, tombstones)
    _append_batches(log, _commits([g for g in GROUPS if g not in DELETED], 2, now))
    log.roll()


def _append_batches(log: PartitionLog, records: list[SimpleRecord]) -> None:
    for start in range(0, len(records), 4_000):  # as a coordinator does, in many batches
        log.append(build_batch(records[start : start + 4_000]))


def test_consumer_offsets_compaction_reports_what_it_removed(manager: tuple[LogManager, FakeClock]) -> None:
    mgr, clock = manager
    mgr.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": str(1024 * 1024)})
    log = mgr.get_log(TOPIC, 0)
    _write(log, clock)
    service = LogCleaner(mgr.broker_config, mgr.logs, mgr.data_dir, clock)
    deleted_keys = len(DELETED) * (PARTITIONS + 1)

    # First compaction: superseded commits, the deleted groups' older records and the aborted
    # transaction go; the tombstones are stamped with their delete horizon and stay.
    before = read_files(log)
    results = service.compact_now(log)
    after = read_files(log)
    assert after.tombstones == before.tombstones == deleted_keys
    _check(service, log, results, before, after, tombstones_removed=0)

    # A day later the horizon has passed: the next compaction removes every tombstone.
    clock.advance(DAY_MS + 1)
    before = read_files(log)
    results = service.compact_now(log)
    after = read_files(log)
    assert len(results) == 2  # the map's 39,321 keys a pass do not cover the partition's keys
    assert after.tombstones == 0
    _check(service, log, results, before, after, tombstones_removed=deleted_keys)


def _check(
    service: LogCleaner,
    log: PartitionLog,
    results: list[object],
    before: Files,
    after: Files,
    *,
    tombstones_removed: int,
) -> None:
    """compact-now's passes combined, and the partition's last-clean record, say what the files say."""
    combined = combine_passes([r.stats for r in results])  # type: ignore[attr-defined]
    last = service.metrics.per_partition()[(log.topic, log.partition)]
    for name, (read, written, tombstones, size_before, size_after) in {
        "compact-now": (
            combined.messages_read,
            combined.messages_written,
            combined.tombstones_removed,
            combined.bytes_read,
            combined.bytes_written,
        ),
        "last clean": (
            last.records_read,
            last.records_written,
            last.tombstones_removed,
            last.bytes_read,
            last.bytes_written,
        ),
    }.items():
        assert (read, written, tombstones) == (before.records, after.records, tombstones_removed), name
        assert (size_before, size_after) == (before.size, after.size), name
    assert last.records_removed == before.records - after.records


def test_an_aborted_batch_whose_records_do_not_parse_is_still_dropped(
    manager: tuple[LogManager, FakeClock],
) -> None:
    """Kafka drops an aborted batch on its header alone; counting its tombstones must not fail the
    clean (and leave the partition uncleanable) when its records are garbage under a valid CRC."""
    mgr, clock = manager
    mgr.create_topic("t", 1, {"cleanup.policy": "compact"})
    log = mgr.get_log("t", 0)
    now = clock.now_ms()
    txn = bytearray(
        build_batch(
            [SimpleRecord(b"k", None, now), SimpleRecord(b"j", b"v", now)],
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
    )
    txn[61:] = b"\xff" * (len(txn) - 61)  # the records: varint lengths that run off the batch
    write_crc(txn, 0)
    log.append(bytes(txn))
    log.append(build_control_batch(ControlType.ABORT, producer_id=7, producer_epoch=0, timestamp=now))
    log.append(build_batch([SimpleRecord(b"k", b"kept", now)]))
    log.roll()
    service = LogCleaner(mgr.broker_config, mgr.logs, mgr.data_dir, clock)
    results = service.compact_now(log)
    combined = combine_passes([r.stats for r in results])
    assert combined.aborted_records_removed == 2
    kept = [
        (r.key, r.value)
        for s in log.segments.values()
        for _p, v in s.iter_batches()
        for r in decode_records(v)
    ]
    assert (b"k", b"kept") in kept and all(value != b"v" for _key, value in kept)
