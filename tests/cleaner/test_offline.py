"""Offline compaction of a stopped directory: kompakt's own, a Kafka-style one written by an
independent writer, a single partition directory, and refusal of a directory a broker holds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kompakt.cleaner.offline import compact_directory
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import LogDirectoryError
from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kompakt.log.files import segment_file_name
from kompakt.log.manager import LogManager
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records


def now_clock() -> FakeClock:
    return FakeClock(time.time_ns() // 1_000_000)


def records_on_disk(partition_dir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for path in sorted(partition_dir.glob("*.log")):
        for view in iter_batches(path.read_bytes()):
            view.validate()
            out.extend((r.offset, r.key, r.value) for r in decode_records(view))
    return out


def make_kompakt_dir(data: Path, clock: FakeClock) -> None:
    manager = LogManager(data, BrokerConfig.from_properties({}), clock)
    manager.open()
    manager.create_topic("users", 1, {"cleanup.policy": "compact", "internal.segment.bytes": "1024"})
    manager.create_topic("events", 1, {"cleanup.policy": "delete", "internal.segment.bytes": "1024"})
    for name in ("users", "events"):
        log = manager.get_log(name, 0)
        for i in range(60):
            log.append(
                build_batch([SimpleRecord(f"user-{i % 5}".encode(), f"v{i}".encode(), clock.now_ms())])
            )
            if i in (10, 30):  # a key written once, then deleted
                value = b"x" if i == 10 else None
                log.append(build_batch([SimpleRecord(b"gone", value, clock.now_ms())]))
    manager.close()


def test_compacts_a_stopped_kompakt_directory(tmp_path: Path) -> None:
    clock = now_clock()
    data = tmp_path / "data"
    make_kompakt_dir(data, clock)
    before_events = records_on_disk(data / "events-0")
    results = compact_directory(data, clock=clock)
    assert [(r.topic, r.partition) for r in results] == [("users", 0)]
    result = results[0]
    assert result.bytes_after < result.bytes_before
    surviving = records_on_disk(data / "users-0")
    latest = {key: (offset, value) for offset, key, value in surviving}
    assert latest[b"gone"][1] is None  # the tombstone survives its first clean, stamped
    assert [v for _, k, v in surviving if k == b"gone"] == [None]
    assert latest[b"user-1"][1] == b"v56"
    assert records_on_disk(data / "events-0") == before_events  # delete-policy topic untouched
    checkpoint = OffsetCheckpointFile(data / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    assert checkpoint[("users", 0)] == result.end_offset
    # The directory reopens cleanly and serves the same records.
    manager = LogManager(data, BrokerConfig.from_properties({}), clock)
    manager.open()
    assert manager.had_clean_shutdown
    manager.close()


def test_compacts_a_kafka_directory_written_by_another_implementation(tmp_path: Path) -> None:
    clock = now_clock()
    partition = tmp_path / "kafka-logs" / "orders-3"
    partition.mkdir(parents=True)
    raw = bytearray()
    offset = 0
    for batch_no in range(20):
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i in range(5):
            key = f"order-{(batch_no * 5 + i) % 7}".encode()
            builder.append(i, timestamp=clock.now_ms(), key=key, value=f"{offset + i}".encode(), headers=[])
        batch = bytearray(builder.build())
        batch[0:8] = offset.to_bytes(8, "big")
        raw += batch
        offset += 5
    (partition / segment_file_name(0, "log")).write_bytes(bytes(raw))
    tail = build_batch([SimpleRecord(b"order-x", b"tail", clock.now_ms())], base_offset=offset)
    (partition / segment_file_name(offset, "log")).write_bytes(tail)
    results = compact_directory(partition, clock=clock, config_overrides={"cleanup.policy": "compact"})
    assert len(results) == 1 and results[0].records_written == 7
    surviving = records_on_disk(partition)
    assert sorted(k for _, k, _ in surviving) == sorted(
        [f"order-{i}".encode() for i in range(7)] + [b"order-x"]
    )
    for o, key, value in surviving:
        if key != b"order-x":
            assert value == str(o).encode()


def test_refuses_a_directory_held_by_a_running_broker(tmp_path: Path) -> None:
    clock = now_clock()
    data = tmp_path / "data"
    make_kompakt_dir(data, clock)
    holder = LogManager(data, BrokerConfig.from_properties({}), clock)
    holder.open()
    try:
        with pytest.raises(LogDirectoryError, match="lock"):
            compact_directory(data, clock=clock)
    finally:
        holder.close()


def test_rejects_a_path_that_is_not_a_log_directory(tmp_path: Path) -> None:
    with pytest.raises(LogDirectoryError):
        compact_directory(tmp_path / "missing", clock=now_clock())


def test_a_corrupt_cleaner_checkpoint_is_kept_aside_and_replaced(tmp_path: Path) -> None:
    clock = now_clock()
    data = tmp_path / "data"
    make_kompakt_dir(data, clock)
    checkpoint = data / CLEANER_OFFSET_CHECKPOINT_FILE
    checkpoint.write_bytes(b"0\n1\nusers 0 not-a-number\n")
    [result] = compact_directory(data, clock=clock)
    assert result.records_written < result.records_read
    assert OffsetCheckpointFile(checkpoint).read() == {("users", 0): result.end_offset}
    [kept] = data.glob(f"{CLEANER_OFFSET_CHECKPOINT_FILE}.corrupt-*")
    assert kept.read_bytes() == b"0\n1\nusers 0 not-a-number\n"
    assert not list((data / "users-0").glob("*.deleted"))


def test_leaves_a_deleted_topics_directory_to_the_broker(tmp_path: Path) -> None:
    """Only the segments the run retired are deleted at its end; a ``-delete`` directory that a
    topic deletion left behind stays for the broker's next start, as before."""
    clock = now_clock()
    data = tmp_path / "data"
    make_kompakt_dir(data, clock)
    manager = LogManager(data, BrokerConfig.from_properties({}), clock)
    manager.open()
    manager.delete_topic("events")
    manager.close()
    [doomed] = [p for p in data.iterdir() if p.name.endswith("-delete")]
    files = sorted(p.name for p in doomed.iterdir())
    [result] = compact_directory(data, clock=clock)
    assert result.topic == "users" and result.bytes_reclaimed > 0
    assert sorted(p.name for p in doomed.iterdir()) == files
    assert not list((data / "users-0").glob("*.deleted"))
