"""Progress with % and time left where the total is known, and the backup's rate (issue 17)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from kompakt.backup.backup import BackupResult
from kompakt.backup.manifest import Manifest, RunEntry
from kompakt.backup.progress import PartitionProgress
from kompakt.cli.backup_cmd import RichProgress
from kompakt.cli.cluster import progress
from kompakt.cli.output import OutputFormat


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120, color_system=None), out


def test_a_known_total_shows_percent_and_time_left() -> None:
    console, out = terminal()
    with progress(200, console=console) as bar:
        task = bar.add_task("consuming", total=200)
        bar.update(task, completed=100)
        bar.refresh()
    shown = out.getvalue()
    assert "100/200" in shown and "50%" in shown
    assert "-:--:--" in shown or "0:00:0" in shown  # rich's time-left column


def test_backup_and_restore_bars_show_percent() -> None:
    console, out = terminal()
    reporter = RichProgress(console)
    part = PartitionProgress("orders", 0, total=1000)
    reporter.begin([part])
    part.done, part.records, part.bytes = 250, 250, 25_000
    reporter.update(part)
    reporter.end()
    shown = out.getvalue()
    assert "orders-0" in shown and "25%" in shown and "250 rec" in shown


def test_the_backup_rate_is_of_the_bytes_read_not_the_compressed_bytes_stored() -> None:
    manifest = Manifest(
        backup_id="b", created_ms=0, updated_ms=0, status="complete", source={}, compression="zstd"
    )
    run = RunEntry(run=1, started_ms=0, finished_ms=1, mode="snapshot", status="complete")
    run.records, run.bytes = 1000, 2_000_000  # stored, compressed
    result = BackupResult(manifest, run, [{"partition": "t-0", "records": 1000, "bytes": 10_000_000}], 2.0)
    summary = result.summary()
    assert summary["source_bytes"] == 10_000_000 and summary["bytes"] == 2_000_000
    assert summary["mb_per_s"] == 5.0  # 10 MB read in 2 s; the stored bytes would say 1.0


LONG_NOTE = (
    "restore.checkpoint_interval_secs has no effect in kompakt: see checkpoint_state, which is "
    "written after every partition"
)


def test_backup_and_restore_notes_stay_one_line_in_an_80_column_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrapped note breaks a ``grep`` for it (``... see \\ncheckpoint_state``)."""
    from kompakt.cli import backup_cmd

    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(backup_cmd, "err_console", Console(file=err, width=80))
    monkeypatch.setattr(backup_cmd, "console", Console(file=out, width=80))
    RichProgress(Console(file=io.StringIO())).message(LONG_NOTE)
    assert err.getvalue() == f"note: {LONG_NOTE}\n"
    plan = SimpleNamespace(
        topics=[], backup_id="b", target="t", groups=[], notes=[LONG_NOTE], problems=[LONG_NOTE]
    )
    backup_cmd._print_plan(plan, OutputFormat.TABLE)
    assert out.getvalue() == f"note: {LONG_NOTE}\nPROBLEM: {LONG_NOTE}\n"
