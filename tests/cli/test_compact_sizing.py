"""``kompakt log compact`` (before/after, refusing a locked directory) and ``kompakt sizing``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.producer_state import encode_snapshot
from kompakt.log.segment import _CHUNK as READ_WINDOW  # the header scan's read size
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch
from tests.support.log_dirs import DAY, HOUR, keys


def _dir(build: Any) -> Any:
    b = build()
    log = b.topic("t", cleanup_policy="compact")
    b.put(log, keys(10))
    log.roll()
    b.put(log, keys(10) + [(b"k0", None)])
    log.roll()
    b.put(log, keys(2, prefix="z"))
    return b.close()


def test_compact_reports_before_and_after(build: Any, cli: Any) -> None:
    path = _dir(build)
    result = cli("log", "compact", str(path), "-o", "json")
    assert result.code == 0, result.err
    [row] = result.json()
    assert row["partition"] == "t-0" and row["passes"] == 1 and row["end_offset"] == 21
    assert row["records_read"] == 21 and row["records_written"] == 10
    assert row["bytes_after"] < row["bytes_before"]
    assert cli("log", "verify", str(path)).code == 0
    dump = cli("log", "dump", str(path), "--records", "-o", "json").json()
    live = [r["key"] for b in dump[0]["batches"] for r in b["records"]]
    assert live == [f"k{i}" for i in range(1, 10)] + ["k0", "z0", "z1"]
    table = cli("log", "compact", str(path))
    assert table.code == 0 and "compacted" in table.out


def test_compact_refuses_a_locked_directory(build: Any, cli: Any) -> None:
    path = _dir(build)
    before = {p.name: p.stat().st_size for p in (path / "t-0").iterdir()}
    holder = LogManager(path, BrokerConfig.from_properties({}), FakeClock())
    holder.open()
    try:
        result = cli("log", "compact", str(path))
    finally:
        holder.close()
    assert result.code == 1
    assert (
        result.err.startswith("error: Failed to acquire lock on file .lock") and result.err.count("\n") == 1
    )
    assert {p.name: p.stat().st_size for p in (path / "t-0").iterdir()} == before
    assert cli("log", "verify", str(path)).code == 0


def test_compact_rejects_unknown_config(build: Any, cli: Any) -> None:
    path = _dir(build)
    result = cli("log", "compact", str(path), "--config", "no.such.config=1")
    assert result.code == 2 and "unknown topic config" in result.err


def test_sizing_default_buffer(cli: Any) -> None:
    result = cli("sizing", "--keys", "10000000", "-o", "json")
    assert result.code == 0, result.err
    s = result.json()
    assert s["default_keys_per_pass"] == 5_033_164 and s["keys_per_pass"] == 5_033_164
    assert s["raw_bytes"] == 240_000_000
    assert s["bytes_with_load_factor"] == 11_111_112 * 24
    assert s["passes"] == 2
    table = cli("sizing", "--keys", "1")
    assert "5,033,164" in table.out


def test_sizing_threads_and_load_factor(cli: Any) -> None:
    s = cli(
        "sizing",
        "--keys",
        "1000",
        "--threads",
        "4",
        "--dedupe-buffer-size",
        "100000000",
        "--load-factor",
        "0.5",
        "-o",
        "json",
    ).json()
    assert s["keys_per_pass"] == (100_000_000 // 4 // 24) // 2
    assert s["passes"] == 1
    assert cli("sizing", "--keys", "1", "--load-factor", "0").code == 2
    assert cli("sizing", "--keys", "1", "--threads", "0").code == 2


# --------------------------------------------------------------------------------------------
# The cleanable bound: the same as explain's, min.compaction.lag.ms included (issue 14 item 9)


def test_compact_respects_min_compaction_lag_as_explain_does(build: Any, cli: Any) -> None:
    # Segment 0 is old, segment 1 was written a minute ago: with a one-hour minimum lag only
    # segment 0 may be cleaned, by the cleaner, by explain's account and by ``log compact``.
    now = int(time.time() * 1000)
    b = build()
    log = b.topic("lag", cleanup_policy="compact", min_compaction_lag_ms=str(HOUR))
    b.put(log, keys(3) + keys(3), ts=now - 2 * DAY)  # offsets 0-5, old
    log.roll()
    b.put(log, keys(3, prefix="y") + keys(3, prefix="y"), ts=now - 60_000)  # offsets 6-11, young
    log.roll()
    b.put(log, keys(1, prefix="z"), ts=now)  # the active segment
    path = b.close()
    [explained] = cli("log", "explain", str(path), "-o", "json").json()
    assert explained["first_uncleanable_offset"] == 6

    result = cli("log", "compact", str(path), "-o", "json")
    assert result.code == 0, result.err
    [row] = result.json()
    assert row["end_offset"] == 6 and row["records_read"] == 6 and row["records_written"] == 3
    dump = cli("log", "dump", str(path), "--records", "-o", "json").json()
    offsets = [r["offset"] for batch in dump[0]["batches"] for r in batch["records"]]
    assert offsets == [3, 4, 5, *range(6, 13)]  # the young duplicates are all still there


# --------------------------------------------------------------------------------------------
# Nothing left behind (issue 14 item 10)


def _snapshot(offset: int) -> str:
    return f"{offset:020d}.snapshot"


def test_compact_deletes_retired_segments_and_merged_away_snapshots(build: Any, cli: Any) -> None:
    path = _dir(build)  # segments at 0, 10 and 21 (active); log end 23
    part = path / "t-0"
    # Kafka's producer-state snapshots: one per roll, and the clean-shutdown one at the log end.
    for offset in (10, 21, 23):
        (part / _snapshot(offset)).write_bytes(encode_snapshot([]))  # Kafka's ProducerSnapshot v1
    disk_before = sum(p.stat().st_size for p in part.iterdir())

    result = cli("log", "compact", str(path), "-o", "json")
    assert result.code == 0, result.err
    [row] = result.json()
    names = sorted(p.name for p in part.iterdir())
    assert not [n for n in names if n.endswith(".deleted")], names
    # Segments 0 and 10 were merged into 0: 10's snapshot has no segment any more. The active
    # segment's and the log end's are what Kafka's LogLoader still reads.
    assert [n for n in names if n.endswith(".snapshot")] == [_snapshot(21), _snapshot(23)]
    assert [n for n in names if n.endswith(".log")] == [
        "00000000000000000000.log",
        "00000000000000000021.log",
    ]
    disk_after = sum(p.stat().st_size for p in part.iterdir())
    assert sum((part / n).stat().st_size for n in names if n.endswith(".log")) == row["bytes_after"]
    assert row["bytes_reclaimed"] == disk_before - disk_after > row["bytes_before"] - row["bytes_after"] > 0
    [again] = cli("log", "compact", str(path), "-o", "json").json()  # rewrites segment 0 again
    assert again["bytes_reclaimed"] == 0 and again["bytes_after"] == row["bytes_after"]
    assert not [p for p in part.iterdir() if p.name.endswith(".deleted")]
    table = cli("log", "compact", str(path))
    assert table.code == 0 and "bytes_reclaimed" in table.out


def test_compacting_an_empty_partition_reclaims_nothing_and_writes_no_snapshot(build: Any, cli: Any) -> None:
    """Kafka's ``takeSnapshot`` writes only past the newest snapshot (``lastMapOffset >
    lastSnapOffset``, both 0 for a new log); offline compaction used to leave a 10-byte
    ``00000000000000000000.snapshot`` in an empty partition and report ``bytes_reclaimed`` -10."""
    b = build()
    b.topic("empty", cleanup_policy="compact")
    path = b.close()
    part = path / "empty-0"
    files_before = sorted(p.name for p in part.iterdir())
    result = cli("log", "compact", str(path), "-o", "json")
    assert result.code == 0, result.err
    [row] = result.json()
    assert row["bytes_reclaimed"] == 0
    assert sorted(p.name for p in part.iterdir()) == files_before
    assert not list(part.glob("*.snapshot"))


# --------------------------------------------------------------------------------------------
# Transactional logs: a marker that straddles the header-scan window (issue 14 item 8)

PID = 4242
MARKER_BYTES = len(build_control_batch(ControlType.COMMIT, producer_id=PID, producer_epoch=0))


def _txn_data(key: bytes, value: bytes, seq: int, ts: int) -> bytes:
    record = SimpleRecord(key, value, timestamp=ts)
    return build_batch([record], producer_id=PID, producer_epoch=0, base_sequence=seq, is_transactional=True)


def _transactional_dir(build: Any, marker_at: int) -> tuple[Path, dict[str, str]]:
    """One producer's one-record transactions, every fifth aborted, in a compacted topic; a data
    batch is padded so that a commit marker starts at byte ``marker_at`` of the first segment.
    Returns the directory and the latest committed value of each key."""
    b = build()
    log = b.topic("txn", cleanup_policy="compact")
    ts = b.clock.now_ms()
    committed: dict[str, str] = {}
    seq = 0

    def transaction(key: str, value: str, *, abort: bool = False) -> None:
        nonlocal seq
        log.append(_txn_data(key.encode(), value.encode(), seq, ts))
        seq += 1
        kind = ControlType.ABORT if abort else ControlType.COMMIT
        log.append(build_control_batch(kind, producer_id=PID, producer_epoch=0, timestamp=ts))
        if not abort:
            committed[key] = value

    i = 0
    while log.active_segment.size < marker_at - 1000:
        transaction(f"k{i % 25}", f"v{i}-" + "x" * 200, abort=i % 5 == 2)
        i += 1
    gap = marker_at - log.active_segment.size
    pad = next(n for n in range(gap) if len(_txn_data(b"pad", b"p" * n, seq, ts)) == gap)
    transaction("pad", "p" * pad)
    assert log.active_segment.size == marker_at + MARKER_BYTES  # the commit marker is where planned
    for j in range(40):
        transaction(f"k{j % 25}", f"w{j}", abort=j % 5 == 2)
    log.roll()
    b.put(log, [(b"tail", b"t")])  # the active segment, never cleaned
    return b.close(), committed


@pytest.mark.parametrize(
    "marker_at",
    [
        READ_WINDOW - MARKER_BYTES + 10,  # header in the window, the control record past it
        READ_WINDOW - 30,  # the window ends inside the header
        READ_WINDOW - 5,  # the window ends inside the length field
    ],
    ids=["record-outside", "header-split", "length-split"],
)
def test_compact_a_transactional_log_whose_marker_straddles_the_scan_window(
    build: Any, cli: Any, marker_at: int
) -> None:
    path, committed = _transactional_dir(build, marker_at)
    result = cli("log", "compact", str(path), "-o", "json")
    assert result.code == 0, result.err
    [row] = result.json()
    assert row["partition"] == "txn-0" and row["bytes_after"] < row["bytes_before"]
    assert cli("log", "verify", str(path)).code == 0
    dump = cli("log", "dump", str(path), "--records", "-o", "json").json()
    data = [
        (r["key"], r["value"])
        for batch in dump[0]["batches"]
        if not batch["is_control"]
        for r in batch["records"]
    ]
    # Aborted records are gone and every key keeps exactly its latest committed value.
    assert data[-1] == ("tail", "t")
    assert sorted(data[:-1]) == sorted(committed.items())
