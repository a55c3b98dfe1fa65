"""Tables in an 80-column pipe, and the whole-directory explain summary (issue 17).

Run as the real program with stdout a pipe, where rich draws at 80 columns: before, a wide table
(``log dump``'s twelve columns, explain's segments) folded every value into fragments
(``1796…`` / ``2995…``); now a table that does not fit drops its borders, then turns into one
wrapped paragraph per row, and no value is ever cut.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from kompakt.inspect.explain import iso_ms
from tests.support.log_dirs import HOUR, T0, DirBuilder, keys

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def kompakt(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def directory(tmp_path: Path) -> Path:
    b = DirBuilder(tmp_path / "data")
    kept = b.topic("orders-delete")
    b.put(kept, keys(5))
    compacted = b.topic("user-profiles", cleanup_policy="compact")
    b.put(compacted, keys(10))
    compacted.roll()
    b.put(compacted, keys(10))
    compacted.roll()
    b.put(compacted, keys(2, prefix="z"))
    young = b.topic("sessions", cleanup_policy="compact", min_compaction_lag_ms=str(HOUR))
    b.put(young, keys(4))
    young.roll()
    b.put(young, keys(1))
    return b.close()


def assert_fits(text: str) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide, too_wide


def test_explain_of_a_directory_starts_with_a_summary_and_fits_80_columns(tmp_path: Path) -> None:
    data = directory(tmp_path)
    out = kompakt("log", "explain", str(data), "--now", str(T0 + 1000))
    assert_fits(out)
    head = out.split("\n\n")[0]
    assert "3 partitions, 1 eligible to clean now" in head
    for partition, verdict in [
        ("orders-delete-0", "not compacting"),
        ("user-profiles-0", "will be cleaned at the next cleaner pass"),
        ("sessions-0", "not eligible until"),
    ]:
        line = next(line for line in head.splitlines() if partition in line)
        assert verdict in line, line
    reports: list[dict[str, Any]] = json.loads(
        kompakt("log", "explain", str(data), "--now", str(T0 + 1000), "-o", "json")
    )
    # Every time the report prints comes out whole, never folded across lines.
    printed = set(ISO.findall(out))
    for report in reports:
        for segment in report["segments"]:
            if segment["largest_timestamp_ms"] not in (None, -1):
                assert iso_ms(segment["largest_timestamp_ms"]) in printed
    only = kompakt("log", "explain", str(data), "--now", str(T0 + 1000), "--summary")
    assert "effective configs" not in only and "user-profiles-0" in only


def test_dump_fits_80_columns_without_cutting_values(tmp_path: Path) -> None:
    data = directory(tmp_path)
    out = kompakt("log", "dump", str(data / "user-profiles-0"))
    assert_fits(out)
    dumped = json.loads(kompakt("log", "dump", str(data / "user-profiles-0"), "-o", "json"))
    for batch in dumped[0]["batches"]:
        assert f"offsets {batch['base_offset']}..{batch['last_offset']}" in out
        assert str(batch["max_timestamp"]) in out
