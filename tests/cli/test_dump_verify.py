"""``kompakt log dump`` and ``kompakt log verify`` on kompakt and Kafka-format directories."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from tests.support.log_dirs import kafka_dir, keys


def test_dump_kompakt_dir_shows_null_apart_from_empty(build: Any, cli: Any) -> None:
    b = build()
    log = b.topic("t", cleanup_policy="compact")
    b.put(log, [(b"k1", b"v"), (b"k2", b""), (b"k3", None)])
    path = b.close()
    result = cli("log", "dump", str(path), "--records", "--output", "json")
    assert result.code == 0, result.err
    [part] = result.json()
    [batch] = part["batches"]
    assert (batch["base_offset"], batch["last_offset"], batch["count"], batch["crc_valid"]) == (0, 2, 3, True)
    assert batch["codec"] == "none" and batch["delete_horizon_ms"] is None
    values = [(r["key"], r["value"]) for r in batch["records"]]
    assert values == [("k1", "v"), ("k2", ""), ("k3", None)]
    table = cli("log", "dump", str(path / "t-0"), "--records")
    assert table.code == 0
    assert '""' in table.out and "null" in table.out


def test_dump_kafka_dir_written_by_kafka_python(tmp_path: Path, cli: Any) -> None:
    root = kafka_dir(tmp_path / "kafka")
    result = cli("log", "dump", str(root), "--records", "-o", "json")
    assert result.code == 0, result.err
    [part] = result.json()
    assert part["partition"] == "kt-0"
    records = [(r["offset"], r["key"], r["value"]) for b in part["batches"] for r in b["records"]]
    assert records == [
        (0, "a", "1"),
        (1, "b", ""),
        (2, "c", None),
        (3, "a", "2"),
        (4, None, "nokey"),
        (5, "d", "4"),
    ]
    assert part["batches"][0]["records"][0]["headers"] == [{"key": "h", "value": "x"}]
    offsets = cli(
        "log", "dump", str(root / "kt-0" / "00000000000000000004.log"), "--offsets-only", "-o", "json"
    )
    assert offsets.json()[0]["batches"] == [{"base_offset": 4, "last_offset": 5, "count": 2, "position": 0}]
    limited = cli("log", "dump", str(root), "--max-batches", "1", "-o", "json")
    assert len(limited.json()[0]["batches"]) == 1
    assert cli("log", "verify", str(root)).code == 0


def _segmented(build: Any) -> Path:
    b = build(broker={"log.index.interval.bytes": "1"})
    log = b.topic("t", cleanup_policy="compact", index_interval_bytes="1")
    for i in range(4):
        b.put(log, keys(3, prefix=f"b{i}-"))
    log.roll()
    b.put(log, keys(2))
    path: Path = b.close()
    return path


def test_verify_clean_directory(build: Any, cli: Any) -> None:
    path = _segmented(build)
    result = cli("log", "verify", str(path), "-o", "json")
    assert result.code == 0, result.out + result.err
    report = result.json()
    assert report["ok"] and report["partitions"][0]["log_end_offset"] == 14
    assert report["partitions"][0]["batches"] == 5


def test_verify_flipped_crc_byte(build: Any, cli: Any) -> None:
    path = _segmented(build)
    seg = path / "t-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    second = int.from_bytes(data[8:12], "big") + 12
    data[second + 70] ^= 0xFF
    seg.write_bytes(bytes(data))
    result = cli("log", "verify", str(path))
    assert result.code == 1
    assert f"00000000000000000000.log at byte {second} (offset 3): CRC mismatch" in result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


def test_verify_truncated_batch(build: Any, cli: Any) -> None:
    path = _segmented(build)
    seg = path / "t-0" / "00000000000000000000.log"
    data = seg.read_bytes()
    seg.write_bytes(data[:-10])
    result = cli("log", "verify", str(path / "t-0"))
    assert result.code == 1
    assert "truncated or malformed batch" in result.err and "runs past the end of the file" in result.err


def test_verify_index_entry_pointing_mid_batch(build: Any, cli: Any) -> None:
    path = _segmented(build)
    index = path / "t-0" / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 8
    position = int.from_bytes(raw[4:8], "big")
    raw[4:8] = (position + 5).to_bytes(4, "big")
    index.write_bytes(bytes(raw))
    result = cli("log", "verify", str(path))
    assert result.code == 1
    assert "does not point at the start of a batch" in result.err and ".index" in result.err


def test_verify_bad_checkpoints(build: Any, cli: Any) -> None:
    path = _segmented(build)
    OffsetCheckpointFile(path / CLEANER_OFFSET_CHECKPOINT_FILE).write({("t", 0): 99})
    result = cli("log", "verify", str(path))
    assert result.code == 1
    assert "cleaner checkpoint of t-0 is 99, beyond the log end offset 14" in result.err
    (path / CLEANER_OFFSET_CHECKPOINT_FILE).write_text("0\n2\nt 0 1\n")
    result = cli("log", "verify", str(path))
    assert result.code == 1 and "Expected 2 entries" in result.err


def test_bad_paths_are_usage_errors(tmp_path: Path, cli: Any) -> None:
    missing = cli("log", "dump", str(tmp_path / "nope"))
    assert missing.code == 2 and "does not exist" in missing.err
    (tmp_path / "empty").mkdir()
    result = cli("log", "verify", str(tmp_path / "empty"))
    assert result.code == 2 and "is not a log directory" in result.err
    (tmp_path / "x.txt").write_text("hi")
    assert cli("log", "dump", str(tmp_path / "x.txt")).code == 2


def _legacy_message(offset: int, key: bytes | None, value: bytes | None, ts: int = 1_000) -> bytes:
    """A magic-1 message as Kafka before 0.11 wrote it (CRC-32 over magic..value)."""
    body = bytes([1, 0]) + struct.pack(">q", ts)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_legacy_segments_dump_verify_and_explain(tmp_path: Path, cli: Any) -> None:
    part = tmp_path / "old-0"
    part.mkdir()
    seg = _legacy_message(0, b"a", b"1") + _legacy_message(1, b"a", None) + _legacy_message(2, b"b", b"")
    (part / "00000000000000000000.log").write_bytes(seg)
    [dumped] = cli("log", "dump", str(part), "--records", "-o", "json").json()
    rows = [(b["magic"], r["offset"], r["key"], r["value"]) for b in dumped["batches"] for r in b["records"]]
    assert rows == [(1, 0, "a", "1"), (1, 1, "a", None), (1, 2, "b", "")]
    assert cli("log", "verify", str(part)).code == 0
    result = cli(
        "log", "explain", str(part), "--config", "cleanup.policy=compact", "--now", "5000", "-o", "json"
    )
    [report] = result.json()
    assert (
        report["log_end_offset"] == 3
        and report["keys"]["live_keys"] == 2
        and report["tombstones"]["live"] == 1
    )
