"""LogManager: topics, partitions, checkpoints, locking, clean shutdown, offline partitions."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import LogDirectoryError, TopicExistsError, UnknownTopicOrPartitionError
from kompakt.log.checkpoint import OffsetCheckpointFile
from kompakt.log.manager import InvalidPartitionsError, LogManager
from kompakt.log.metadata_files import read_partition_metadata
from kompakt.log.segments import ManualScheduler

from .log_helpers import kv


def manager(data_dir: Path, clock: FakeClock | None = None) -> LogManager:
    clock = clock or FakeClock()
    m = LogManager(data_dir, BrokerConfig.from_properties({}), clock, ManualScheduler(clock))
    m.open()
    return m


def test_create_append_close_reopen(tmp_path: Path) -> None:
    m = manager(tmp_path)
    meta = m.create_topic("orders", 2, {"cleanup.policy": "compact", "internal.segment.bytes": "1000"})
    assert read_partition_metadata(tmp_path / "orders-1") == meta.topic_id
    log0 = m.get_log("orders", 0)
    assert log0.config.compact and log0.config.segment_size == 1000
    for i in range(5):
        log0.append(kv(i))
    log0.increment_log_start_offset(2)
    with pytest.raises(TopicExistsError):
        m.create_topic("orders", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        m.get_log("orders", 2)
    m.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()[("orders", 0)] == 5
    assert OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint").read() == {("orders", 0): 2}
    m2 = manager(tmp_path)
    assert m2.had_clean_shutdown and not (tmp_path / ".kafka_cleanshutdown").exists()
    log0 = m2.get_log("orders", 0)
    assert (log0.log_start_offset, log0.log_end_offset) == (2, 5)
    assert m2.topics()["orders"].topic_id == meta.topic_id
    m2.close()


def test_lock_prevents_second_open(tmp_path: Path) -> None:
    m = manager(tmp_path)
    with pytest.raises(LogDirectoryError):
        manager(tmp_path)
    m.close()
    manager(tmp_path).close()


def test_partitions_configs_and_delete(tmp_path: Path) -> None:
    clock = FakeClock()
    m = manager(tmp_path, clock)
    m.create_topic("a", 1, {"file.delete.delay.ms": "100"})
    with pytest.raises(InvalidPartitionsError):
        m.create_partitions("a", 1)
    m.create_partitions("a", 3)
    assert m.get_log("a", 2).log_end_offset == 0
    m.alter_topic_config("a", {"retention.ms": "5", "file.delete.delay.ms": "100"})
    assert m.get_log("a", 1).config.retention_ms == 5
    m.delete_topic("a")
    with pytest.raises(UnknownTopicOrPartitionError):
        m.get_log("a", 0)
    assert not (tmp_path / "a-0").exists()
    assert any(p.name.endswith("-delete") for p in tmp_path.iterdir())
    clock.advance(100)
    assert isinstance(m.scheduler, ManualScheduler)
    m.scheduler.run_due()
    assert not any(p.name.endswith("-delete") for p in tmp_path.iterdir())
    m.close()


def test_corrupt_flushed_partition_goes_offline_others_open(tmp_path: Path) -> None:
    """Damage below the recovery point (flushed data) keeps the partition offline, and it stays
    offline across restarts: its checkpoint entries are written back, not dropped."""
    m = manager(tmp_path)
    m.create_topic("t", 2)
    for p in range(2):
        for i in range(5):
            m.get_log("t", p).append(kv(i))
    size = len(kv(0))
    m.close()
    (tmp_path / ".kafka_cleanshutdown").unlink()  # as after a crash; the recovery points are 5
    path = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[size + 30] ^= 0x01
    path.write_bytes(bytes(data))
    m2 = manager(tmp_path)
    assert list(m2.offline_partitions) == [("t", 0)]
    reason = m2.offline_partitions[("t", 0)]
    assert f"{path} at byte {size}" in reason and "below its recovery point 5" in reason
    assert f"kompakt log repair {path.parent}" in reason
    assert m2.get_log("t", 1).log_end_offset == 5
    m2.close()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()[("t", 0)] == 5
    m3 = manager(tmp_path)
    assert list(m3.offline_partitions) == [("t", 0)], "a second start must not cut flushed data"
    assert path.read_bytes() == bytes(data)
    assert not [p.name for p in path.parent.iterdir() if ".corrupt-" in p.name]
    m3.close()


def test_corrupt_unflushed_partition_is_cut_and_quarantined(tmp_path: Path) -> None:
    """Without a recovery point (nothing promised durable) the cut is recovery's to make."""
    m = manager(tmp_path)
    m.create_topic("t", 1)
    for i in range(5):
        m.get_log("t", 0).append(kv(i))
    size = len(kv(0))
    m.close()
    (tmp_path / ".kafka_cleanshutdown").unlink()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[size + 30] ^= 0x01
    path.write_bytes(bytes(data))
    m2 = manager(tmp_path)
    assert not m2.offline_partitions
    assert m2.get_log("t", 0).log_end_offset == 1
    assert (path.parent / "00000000000000000000.log.corrupt-1").read_bytes() == bytes(data[size:])
    m2.close()


def test_real_kafka_style_dir_without_metadata_opens(tmp_path: Path) -> None:
    (tmp_path / "legacy-3").mkdir()
    m = manager(tmp_path)
    assert m.get_log("legacy", 3).log_end_offset == 0
    assert m.topics()["legacy"].partitions == 4
    m.close()


def test_open_thousand_partitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 partitions x 3 segments open correctly (speed is the lead's benchmark)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # filling the dir need not be durable
    m = manager(tmp_path)
    m.create_topic("big", 1000)
    for p in range(1000):
        partition_log = m.get_log("big", p)
        partition_log.append(kv(p))
        partition_log.roll()
        partition_log.append(kv(p))
        partition_log.roll()
    m.close()
    monkeypatch.undo()
    started = time.perf_counter()
    m2 = manager(tmp_path)
    elapsed = time.perf_counter() - started
    logs = m2.logs()
    assert len(logs) == 1000 and not m2.offline_partitions
    assert all(len(lg.segments) == 3 and lg.log_end_offset == 2 for lg in logs.values())
    assert elapsed >= 0
    m2.close()
