"""Offline compaction's buffers and map in base pages (its default) or 2 MiB pages (a broker's
cleaner thread): the page size changes only the speed, never a byte of the result."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from kompakt.cleaner.offline import compact_directory
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.records.builder import SimpleRecord, build_batch


def make_dir(data: Path, clock: FakeClock) -> None:
    manager = LogManager(data, BrokerConfig.from_properties({}), clock)
    manager.open()
    manager.create_topic("users", 1, {"cleanup.policy": "compact", "internal.segment.bytes": "65536"})
    log = manager.get_log("users", 0)
    for i in range(3000):
        key = f"user-{(i * 7919) % 700}".encode()
        value = None if i % 97 == 0 else f"value-{i}".encode() * 3
        log.append(build_batch([SimpleRecord(key, value, clock.now_ms())]))
    manager.close()


def files(partition: Path) -> dict[str, bytes]:
    kept = (".log", ".index", ".timeindex")
    return {f.name: f.read_bytes() for f in sorted(partition.iterdir()) if f.suffix in kept}


def test_base_and_huge_pages_write_the_same_segments(tmp_path: Path) -> None:
    clock = FakeClock(time.time_ns() // 1_000_000)
    make_dir(tmp_path / "source", clock)
    shutil.copytree(tmp_path / "source", tmp_path / "base")
    shutil.copytree(tmp_path / "source", tmp_path / "huge")
    base = compact_directory(tmp_path / "base", clock=clock)
    huge = compact_directory(tmp_path / "huge", clock=clock, huge_pages=True)
    assert [(r.records_read, r.records_written, r.end_offset) for r in base] == [
        (r.records_read, r.records_written, r.end_offset) for r in huge
    ]
    assert base[0].records_written < base[0].records_read
    written = files(tmp_path / "base" / "users-0")
    assert written == files(tmp_path / "huge" / "users-0")
    assert len(written) >= 3
