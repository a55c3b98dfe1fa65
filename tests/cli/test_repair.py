"""``kompakt log repair`` (dry run and ``--execute``) and the quarantine listing of ``log verify``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kompakt.clock import FakeClock
from kompakt.log.checkpoint import RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kompakt.log.config import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records
from tests.support.log_dirs import keys


def _damaged_flushed_dir(build: Any) -> tuple[Path, Path, bytes]:
    """Three segments of four single-record batches, closed cleanly (recovery point 12), then a
    crash-style restart finds the first batch of the last segment, flushed data, damaged."""
    b = build()
    log = b.topic("t", segment_bytes="300")
    for i in range(12):
        b.put(log, [(f"k{i}".encode(), f"v{i}".encode())])
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    path = b.close()
    (path / ".kafka_cleanshutdown").unlink()
    segment = path / "t-0" / "00000000000000000008.log"
    data = bytearray(segment.read_bytes())
    data[40] ^= 0x01
    segment.write_bytes(bytes(data))
    return path, segment, bytes(data)


def _manager(path: Path) -> LogManager:
    clock = FakeClock()
    manager = LogManager(path, BrokerConfig.from_properties({}), clock)
    manager.open()
    return manager


def _values(manager: LogManager) -> list[tuple[int, bytes | None]]:
    """Every record, read segment by segment as a consumer would."""
    log = manager.get_log("t", 0)
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        views = list(iter_batches(log.read(offset, 1 << 20).records))
        assert views, f"nothing readable at offset {offset}"
        out += [(r.offset, r.value) for v in views for r in decode_records(v)]
        offset = views[-1].next_offset
    return out


def test_repair_brings_an_offline_partition_back_with_the_cut_bytes_in_quarantine(
    build: Any, cli: Any
) -> None:
    path, segment, damaged = _damaged_flushed_dir(build)
    manager = _manager(path)
    assert list(manager.offline_partitions) == [("t", 0)]
    assert f"kompakt log repair {segment.parent}" in manager.offline_partitions[("t", 0)]
    manager.close()
    before = {p.name: p.read_bytes() for p in segment.parent.iterdir()}

    dry = cli("log", "repair", str(path), "--output", "json")
    assert dry.code == 0, dry.err
    report = dry.json()
    assert report["execute"] is False
    [part] = report["partitions"]
    assert part["status"] == "would cut" and part["log_end_offset"] == 8
    assert part["cut"]["file"] == str(segment) and part["cut"]["position"] == 0
    assert [(m["action"], m["target"]) for m in part["moves"]] == [
        ("copy", f"{segment}.corrupt-8"),
    ]
    assert {p.name: p.read_bytes() for p in segment.parent.iterdir()} == before, "a dry run changes nothing"
    table = cli("log", "repair", str(path / "t-0"))
    assert table.code == 0 and "dry run" in table.out and "would cut" in table.out

    done = cli("log", "repair", str(path), "--execute", "--output", "json")
    assert done.code == 0, done.err
    [part] = done.json()["partitions"]
    assert part["status"] == "cut" and part["moves"][0]["bytes"] == len(damaged)
    assert Path(f"{segment}.corrupt-8").read_bytes() == damaged
    assert segment.stat().st_size == 0
    assert OffsetCheckpointFile(path / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).read()[("t", 0)] == 8

    manager = _manager(path)
    assert manager.offline_partitions == {}
    assert _values(manager) == [(i, f"v{i}".encode()) for i in range(8)]
    assert manager.get_log("t", 0).append(_one(b"after")).first_offset == 8
    manager.close()

    verify = cli("log", "verify", str(path), "--output", "json")
    assert verify.code == 0, verify.out
    assert [(q["file"], q["bytes"], q["cut_offset"], q["source"]) for q in verify.json()["quarantine"]] == [
        (f"{segment}.corrupt-8", len(damaged), 8, segment.name)
    ]
    dump = cli("log", "dump", str(path), "--offsets-only", "-o", "json")
    assert [b["base_offset"] for b in dump.json()[0]["batches"]] == [*range(8), 8], "quarantine is no segment"
    verify_table = cli("log", "verify", str(path))
    assert verify_table.code == 0 and "quarantined bytes" in verify_table.out
    assert f"{segment.name}.corrupt-8" in verify_table.out

    again = cli("log", "repair", str(path), "--execute", "--output", "json")
    assert again.json()["partitions"][0]["status"] == "ok", "a second repair finds nothing"


def _one(value: bytes) -> bytes:
    from kompakt.records.builder import SimpleRecord, build_batch

    return build_batch([SimpleRecord(b"k", value)])


def test_repair_execute_refuses_a_directory_in_use_but_a_dry_run_reads_it(build: Any, cli: Any) -> None:
    path, segment, damaged = _damaged_flushed_dir(build)
    manager = _manager(path)  # a running broker holds the lock
    try:
        refused = cli("log", "repair", str(path), "--execute")
        assert refused.code == 1
        assert refused.err.strip().count("\n") == 0 and "Failed to acquire lock" in refused.err
        assert segment.read_bytes() == damaged
        assert cli("log", "repair", str(path), "-o", "json").json()["partitions"][0]["status"] == "would cut"
    finally:
        manager.close()


def test_repair_moves_later_segments_and_rejects_a_segment_file(build: Any, cli: Any) -> None:
    b = build()
    log = b.topic("t", segment_bytes="300")
    b.put(log, keys(1))
    for i in range(11):
        b.put(log, [(f"k{i}".encode(), b"v")])
    path = b.close()
    first = path / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[-3] ^= 0x01  # the last batch of the first segment: segments 4 and 8 follow it
    first.write_bytes(bytes(data))
    result = cli("log", "repair", str(path), "--execute", "-o", "json")
    assert result.code == 0, result.err
    [part] = result.json()["partitions"]
    assert part["log_end_offset"] == 3
    renamed = sorted(Path(m["target"]).name for m in part["moves"] if m["action"] == "rename")
    assert [n for n in renamed if ".log." in n] == [
        "00000000000000000004.log.corrupt-3",
        "00000000000000000008.log.corrupt-3",
    ]
    assert sorted(p.name for p in (path / "t-0").iterdir() if p.name.endswith(".log")) == [first.name]
    usage = cli("log", "repair", str(first))
    assert usage.code == 2 and "not a segment file" in usage.err
