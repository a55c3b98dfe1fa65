"""``kompakt log compact``'s counts agree with ``kompakt log dump`` of the directory before and after.

The partition needs two passes of the smallest dedupe buffer a broker accepts (40,100 keys; a
pass holds 39,321), and holds an aborted transaction whose records include tombstones. The
second pass reads again what the first wrote, so the passes' counts must be combined, not added;
and the aborted batch goes whole, tombstones included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch
from tests.support.log_dirs import keys

MIN_DEDUPE = 1024 * 1024 + 24  # 43,691 slots, 39,321 keys a pass at the default load factor
KEYS = 40_000
ABORTED_TOMBSTONES = 5


def _dir(build: Any) -> Path:
    b = build()
    log = b.topic("t", cleanup_policy="compact")
    pairs = keys(KEYS)
    for start in range(0, KEYS, 4_000):
        b.put(log, pairs[start : start + 4_000])
    now = b.clock.now_ms()
    aborted = [SimpleRecord(f"k{i}".encode(), None, now) for i in range(ABORTED_TOMBSTONES)]
    aborted.append(SimpleRecord(b"txn-only", b"x", now))
    log.append(build_batch(aborted, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True))
    log.append(build_control_batch(ControlType.ABORT, producer_id=9, producer_epoch=0, timestamp=now))
    b.put(log, keys(100, value=None))  # deletes: stamped by this compaction, not yet removed
    b.put(log, keys(100, prefix="late"))
    log.roll()
    return b.close()


def _counts(cli: Any, path: Path) -> tuple[int, int]:
    """(records, tombstones) in ``path`` as ``kompakt log dump`` shows them."""
    dump = cli("log", "dump", str(path), "--records", "-o", "json").json()
    batches = [b for part in dump for b in part["batches"]]
    records = [r for b in batches for r in b["records"]]
    tombstones = [
        r
        for b in batches
        if not b["is_control"]
        for r in b["records"]
        if r["key"] is not None and r["value"] is None
    ]
    return len(records), len(tombstones)


def test_compact_counts_match_the_dump_across_passes(build: Any, cli: Any) -> None:
    path = _dir(build)
    records_before, tombstones_before = _counts(cli, path)
    result = cli(
        "log",
        "compact",
        str(path),
        "--broker-config",
        f"log.cleaner.dedupe.buffer.size={MIN_DEDUPE}",
        "-o",
        "json",
    )
    assert result.code == 0, result.err
    [row] = result.json()
    records_after, tombstones_after = _counts(cli, path)
    assert row["passes"] == 2
    assert (row["records_read"], row["records_written"]) == (records_before, records_after)
    assert row["tombstones_removed"] == tombstones_before - tombstones_after == ABORTED_TOMBSTONES
    assert row["aborted_records_removed"] == ABORTED_TOMBSTONES + 1
    assert row["markers_removed"] == 0  # the abort marker is stamped first, removed a horizon later
    assert row["invalid_records"] == 0
    table = cli(
        "log", "compact", str(path), "--broker-config", f"log.cleaner.dedupe.buffer.size={MIN_DEDUPE}"
    )
    assert (
        table.code == 0 and "tombstones_removed" in table.out and "aborted_records_removed" not in table.out
    )
