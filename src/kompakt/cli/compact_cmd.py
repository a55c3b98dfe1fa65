"""``kompakt log compact``: what the command does, without typer.

The typer command (:mod:`kompakt.cli.log_cmd`) calls :func:`run_compact`, and so does
:mod:`kompakt.cli.main` directly for a plain command line (``COMPACT_OPTIONS``), as it does for
``kompakt serve``: the command then starts without typer and the other command groups (0.3-0.4 s
of a fresh process on the 2-core development machine, against a clean of 0.9 s on the anchor
workload). With ``--output json`` nothing of rich's progress display is imported either.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kompakt.cli import output as out
from kompakt.cli.broker_defaults import resolve_broker_defaults
from kompakt.cli.kafka_dir import load_metadata, note_hidden_internal, stray_partitions
from kompakt.cli.log_args import log_target, note_skipped, parse_pairs, partitions_of
from kompakt.cli.output import CliError, CliUsageError, OutputFormat, emit_json, emit_table
from kompakt.cli.warmup_cmd import announce_kernel_compile
from kompakt.config.tables import TOPIC_CONFIGS
from kompakt.errors import ConfigError, LogDirectoryError
from kompakt.inspect.log_files import is_empty_internal

COMPACT_OPTIONS: dict[str, tuple[str, bool]] = {
    "--config": ("config", True),
    "--broker-config": ("broker_configs", True),
    "--server-properties": ("server_properties", False),
    "--output": ("output", False),
    "-o": ("output", False),
}
"""``flag: (run_compact's keyword, repeatable)``; every option takes a value. The typer command's
options, checked against it by tests/cli/test_compact_fast_path.py."""


def compact_arguments(tokens: list[str]) -> dict[str, Any] | None:
    """``run_compact``'s keyword arguments for a plain ``compact`` command line (what follows
    ``log compact``), else None and typer parses it (help, ``--``, an unknown, repeated or
    malformed option, a value that looks like an option, a path missing or given twice)."""
    values: dict[str, Any] = {}
    rest = list(tokens)
    while rest:
        token = rest.pop(0)
        if not token.startswith("-"):
            if "path" in values or not token:
                return None
            values["path"] = Path(token)
            continue
        flag, equals, value = token.partition("=")
        if flag not in COMPACT_OPTIONS or (equals and not flag.startswith("--")):
            return None
        if not equals:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        name, repeatable = COMPACT_OPTIONS[flag]
        if repeatable:
            values.setdefault(name, []).append(value)
        elif name in values:
            return None
        elif name == "server_properties":
            if not value:
                return None
            values[name] = Path(value)
        elif name == "output":
            if value not in {f.value for f in OutputFormat}:
                return None
            values[name] = OutputFormat(value)
    return values if "path" in values else None


class _NoProgress:
    """What ``--output json`` shows of the progress: nothing (rich's Progress with ``disable``
    draws nothing too; this one spares importing it)."""

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def update(self, *args: Any, **kwargs: Any) -> None:
        pass

    def advance(self, *args: Any, **kwargs: Any) -> None:
        pass


@contextmanager
def _progress(*, quiet: bool) -> Iterator[Any]:
    if quiet:
        yield _NoProgress()
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TaskProgressColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeRemainingColumn(),
        console=out.console,
        transient=False,
    ) as progress:
        yield progress


def run_compact(
    path: Path,
    config: list[str] | None = None,
    broker_configs: list[str] | None = None,
    server_properties: Path | None = None,
    output: OutputFormat = OutputFormat.TABLE,
) -> None:
    """Compact a stopped directory with the broker's cleaner code (refuses a directory in use)."""
    from kompakt.cleaner.offline import compact_directory
    from kompakt.clock import SystemClock
    from kompakt.records.memory import keep_freed_memory

    keep_freed_memory()  # this process compacts and exits: freed memory is worth keeping

    target = log_target(path)
    if target.kind == "segment":
        raise CliUsageError("compact needs a data directory or a partition directory, not a segment file")
    partitions = partitions_of(target)
    overrides = parse_pairs(config, "--config")
    for name in overrides:
        if name not in TOPIC_CONFIGS:
            raise CliUsageError(f"--config: unknown topic config {name!r}")
    metadata = load_metadata(target.data_dir)
    stray_partitions(metadata, partitions)
    defaults = resolve_broker_defaults(
        server_properties=server_properties,
        data_dir=target.data_dir,
        broker_config_items=broker_configs,
        cluster_metadata=metadata,
    )
    broker = defaults.config
    note_skipped(defaults)
    announce_kernel_compile()
    with _progress(quiet=output is OutputFormat.JSON) as progress:
        overall = progress.add_task("partitions", total=len(partitions), detail="")
        current: dict[str, Any] = {}

        def on_partition(log: Any) -> None:
            if "task" in current:
                progress.update(current["task"], completed=current["total"])
            # The offsets a compaction covers: from the log start to the active segment (never cleaned).
            current["start"] = log.log_start_offset
            current["total"] = max(1, log.active_segment.base_offset - log.log_start_offset)
            current["task"] = progress.add_task(f"  {log.name}", total=current["total"], detail="pass 1")
            current["passes"] = 0
            progress.advance(overall)

        def on_pass(log: Any, result: Any) -> None:
            current["passes"] += 1
            progress.update(
                current["task"],
                completed=min(current["total"], result.end_offset - current["start"]),
                detail=f"pass {current['passes']} to offset {result.end_offset}",
            )

        try:
            results = compact_directory(
                target.path,
                clock=SystemClock(),
                broker_config=broker,
                config_overrides=overrides or None,
                on_partition=on_partition,
                on_pass=on_pass,
                cluster_metadata=metadata,
            )
        except ConfigError as exc:
            raise CliUsageError(str(exc)) from None
        except LogDirectoryError as exc:
            raise CliError(str(exc)) from None
        if "task" in current:
            progress.update(current["task"], completed=current["total"])
        progress.update(overall, completed=len(partitions))
    rows = [
        {
            "partition": f"{r.topic}-{r.partition}",
            "bytes_before": r.bytes_before,
            "bytes_after": r.bytes_after,
            "bytes_reclaimed": r.bytes_reclaimed,
            "records_read": r.records_read,
            "records_written": r.records_written,
            "tombstones_removed": r.tombstones_removed,
            "passes": r.passes,
            "seconds": round(r.seconds, 3),
            "end_offset": r.end_offset,
            "invalid_records": r.invalid_records,
            "markers_removed": r.markers_removed,
            "aborted_records_removed": r.aborted_records_removed,
        }
        for r in results
    ]
    if output is OutputFormat.JSON:
        emit_json(rows)
        return
    if not rows:
        out.console.print(
            "no compacted partitions (cleanup.policy without compact): nothing done", markup=False
        )
        return
    hidden = [f"{r.topic}-{r.partition}" for r in results if is_empty_internal(r.topic, r.bytes_before)]
    note_hidden_internal(hidden)
    # The table keeps to the columns an operator reads first; JSON has every count.
    shown = [r for r in rows if r["partition"] not in hidden]
    emit_table(shown, columns=list(rows[0])[:10], title=f"compacted {target.path}")
