"""``kompakt log repair`` (dry run and ``--execute``) and the quarantine listing of ``log verify``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.checkpoint import RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kompakt.log.manager import LogManager
from kompakt.log.segment import batch_positions
from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records
from tests.support.log_dirs import keys


def _damaged_flushed_dir(build: Any) -> tuple[Path, Path, bytes]:
    """Three segments of four single-record batches, closed cleanly (recovery point 12), then a
    crash-style restart finds the first batch of the last segment, flushed data, damaged."""
    b = build()
    log = b.topic("t", internal_segment_bytes="300")
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
    log = b.topic("t", internal_segment_bytes="300")
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


def _cut_active_segment(build: Any, name: str, *, clean: bool) -> tuple[Path, Path, bytes]:
    """3,000 records in 100 batches, closed cleanly or left as a crash leaves them, then the active
    segment loses all but 50 bytes of its last batch; the directory, the segment and the cut bytes."""
    b = build(name)
    log = b.topic("t")
    for i in range(100):
        b.put(log, [(f"k{j}".encode(), f"v{j}".encode()) for j in range(30 * i, 30 * i + 30)])
    if clean:
        path = b.close()
        assert (path / ".kafka_cleanshutdown").exists()
    else:
        b.manager.close_without_flush()
        path = b.path
    segment = path / "t-0" / "00000000000000000000.log"
    data = segment.read_bytes()
    last = batch_positions(data)[-1]
    segment.write_bytes(data[: last + 50])
    return path, segment, data[last : last + 50]


def test_verify_reports_a_cut_active_segment_after_clean_shutdown_as_after_a_crash(
    build: Any, cli: Any
) -> None:
    """Hardening item 2: the clean start quarantines the cut tail and serves 2,970 records (it
    was offline), and ``log verify`` reports it exactly as it reports the same damage after a
    crash, while the broker runs (the checkpoints already follow the cut) and after it stops."""
    reports: dict[bool, list[Any]] = {}
    for clean in (True, False):
        path, segment, cut = _cut_active_segment(build, f"clean-{clean}", clean=clean)
        manager = _manager(path)
        assert manager.offline_partitions == {}
        assert manager.get_log("t", 0).log_end_offset == 2_970
        assert _values(manager) == [(i, f"v{i}".encode()) for i in range(2_970)]
        quarantine = Path(f"{segment}.corrupt-2970")
        assert quarantine.read_bytes() == cut
        running = cli("log", "verify", str(path), "--output", "json")
        assert running.code == 0, running.out
        manager.close()
        stopped = cli("log", "verify", str(path), "--output", "json")
        assert stopped.code == 0, stopped.out
        assert stopped.json()["quarantine"] == [
            {
                "partition": "t-0",
                "file": str(quarantine),
                "bytes": 50,
                "cut_offset": 2_970,
                "source": segment.name,
            }
        ]
        [part] = stopped.json()["partitions"]
        assert (part["records"], part["log_end_offset"], part["defects"]) == (2_970, 2_970, 0)
        table = cli("log", "verify", str(path))
        assert table.code == 0, table.out
        assert "quarantined bytes" in table.out and f"{segment.name}.corrupt-2970" in table.out
        assert "ok: 1 segment files verified, no defects" in table.out
        reports[clean] = [json.loads(report.out.replace(str(path), "DATA")) for report in (running, stopped)]
    assert reports[True] == reports[False]
