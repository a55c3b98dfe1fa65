"""``kompakt backup``, ``kompakt restore`` and the backup inspection commands.

* ``kompakt backup --config backup.yaml``: one run (snapshot by default, ``continuous`` until
  Ctrl-C); a later run with the same ``backup_id`` copies only new records.
* ``kompakt restore --config restore.yaml``: through the protocol (``target.bootstrap_servers``)
  or exactly into a stopped data directory (``target.data_dir``).
* ``kompakt validate-restore --config restore.yaml`` (or ``restore --dry-run``): every check of a
  restore, and what it would do, writing nothing; exit 1 when anything would stop the restore.
  Restoring lives in one place, beside ``restore``, as OSO kafka-backup has it; the old spelling
  ``kompakt backup validate-restore`` is a hidden alias that says the new one.
* ``kompakt backup list LOCATION`` and ``kompakt backup describe LOCATION/BACKUP_ID``, where a
  location is a directory or ``s3://bucket/prefix``.

Progress bars go to stderr (only on a terminal) so ``--output json`` stays parseable. A bad YAML
file is a usage error (exit 2); everything else that fails is one line and exit 1.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeRemainingColumn

from kompakt.backup.errors import BackupConfigError, BackupError
from kompakt.backup.progress import PartitionProgress
from kompakt.cli.output import (
    CliError,
    CliUsageError,
    OutputFormat,
    console,
    emit_json,
    emit_table,
    err_console,
)

backup_app = typer.Typer(
    help="Back up topics from any Kafka-compatible cluster; inspect backups.",
    no_args_is_help=False,
    invoke_without_command=True,
)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="The YAML file.")]

OutputOpt = Annotated[
    OutputFormat, typer.Option("--output", "-o", case_sensitive=False, help="table or json.")
]
EndpointOpt = Annotated[
    str | None, typer.Option("--endpoint-url", help="S3-compatible endpoint for s3:// locations.")
]


def register(app: typer.Typer) -> None:
    """Add ``backup`` (a group that is also a command), ``restore``, ``validate-restore`` and
    ``kafka-backup`` (OSO kafka-backup's command shape); idempotent."""
    if not any(group.name == "backup" for group in app.registered_groups):
        app.add_typer(backup_app, name="backup")
    if not any(group.name == "kafka-backup" for group in app.registered_groups):
        app.add_typer(oso_app, name="kafka-backup")
    commands = {command.name for command in app.registered_commands}
    if "restore" not in commands:
        app.command("restore")(restore_command)
    if "validate-restore" not in commands:
        app.command("validate-restore")(validate_restore_command)


@contextmanager
def _errors() -> Iterator[None]:
    """Config mistakes are usage errors (exit 2); other backup errors are failures (exit 1)."""
    try:
        yield
    except BackupConfigError as exc:
        raise CliUsageError(str(exc)) from None
    except BackupError as exc:
        raise CliError(str(exc)) from None


def _human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


class RichProgress:
    """One bar per partition: %, records, bytes, rate and time left (when the total is known:
    a snapshot backup knows its offsets to go, a restore its records); on stderr, only on a
    terminal."""

    def __init__(self, console: Console | None = None) -> None:
        target = console or err_console
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=16),
            TaskProgressColumn(),
            TextColumn("{task.fields[records]:>9} rec"),
            TextColumn("{task.fields[size]:>9}"),
            TextColumn("{task.fields[rate]:>11}"),
            TimeRemainingColumn(),
            console=target,
            transient=False,
            disable=not target.is_terminal,
        )
        self._tasks: dict[str, TaskID] = {}

    def begin(self, partitions: list[PartitionProgress]) -> None:
        self._progress.start()
        for part in partitions:
            self._tasks[part.name] = self._progress.add_task(
                part.name, total=part.total, records=0, size="0 B", rate="-"
            )

    def update(self, partition: PartitionProgress) -> None:
        task = self._tasks.get(partition.name)
        if task is None:
            return
        self._progress.update(
            task,
            completed=partition.done,
            records=f"{partition.records:,}",
            size=_human_bytes(partition.bytes),
            rate=f"{_human_bytes(partition.rate)}/s",
        )

    def message(self, text: str) -> None:
        err_console.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)

    def end(self) -> None:
        self._progress.stop()


def _load_backup(path: Path | None) -> Any:
    from kompakt.backup.config import load_backup_config

    if path is None:
        raise CliUsageError("--config is required (a backup.yaml)")
    with _errors():
        return load_backup_config(path)


def _load_restore(path: Path | None) -> Any:
    from kompakt.backup.config import load_restore_config

    if path is None:
        raise CliUsageError("--config is required (a restore.yaml)")
    with _errors():
        return load_restore_config(path)


@backup_app.callback()
def backup_command(
    ctx: typer.Context,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Run a backup described by --config (or use a subcommand: list, describe)."""
    if ctx.invoked_subcommand is not None:
        return
    run_backup_command(config, output)


def run_backup_command(config: Path | None, output: OutputFormat) -> None:
    """One backup run, with progress on stderr and the summary on stdout."""
    from kompakt.backup.backup import run_backup

    cfg = _load_backup(config)
    _print_notes(cfg.notes)
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if cfg.continuous:
        # Continuous mode runs until asked to stop; a stop is a clean end, not a failure.
        def _stop(_signum: int, _frame: FrameType | None) -> None:
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, _stop)
    try:
        with _errors():
            result = run_backup(cfg, progress=RichProgress(), stop=stop)
    except KeyboardInterrupt:
        raise CliError(
            "interrupted: what was copied is committed; run the same command again to resume"
        ) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    summary = result.summary()
    if output is OutputFormat.JSON:
        emit_json({**summary, "partitions": result.partitions})
        return
    emit_table(result.partitions, title=f"backup {cfg.backup_id} run {result.run.run}")
    console.print(
        f"{summary['status']}: {summary['records']:,} records, {_human_bytes(summary['source_bytes'])} read "
        f"in {summary['seconds']} s ({summary['mb_per_s']} MB/s), {_human_bytes(summary['bytes'])} stored "
        f"at {cfg.storage.open().describe()}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _print_notes(notes: Any) -> None:
    for note in notes:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)


def _print_plan(plan: Any, output: OutputFormat) -> None:
    if output is OutputFormat.JSON:
        emit_json(plan.to_json())
        return
    emit_table([t.row() for t in plan.topics], title=f"restore of {plan.backup_id} to {plan.target}")
    for group in sorted(plan.groups):
        console.print(f"consumer group {group}: offsets from the snapshot", markup=False)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    for problem in plan.problems:
        console.print(f"PROBLEM: {problem}", markup=False, highlight=False, soft_wrap=True)


def validate_restore_command(config: ConfigOpt = None, output: OutputOpt = OutputFormat.TABLE) -> None:
    """Check everything a restore needs and print what it would do; nothing is written."""
    from kompakt.backup.offline import plan_offline
    from kompakt.backup.restore import plan_restore

    cfg = _load_restore(config)
    with _errors():
        plan, _source = plan_offline(cfg) if cfg.offline else plan_restore(cfg)
    _print_plan(plan, output)
    if not plan.ok:
        raise CliError(f"validation failed: {len(plan.problems)} problem(s); the first: {plan.problems[0]}")
    if output is OutputFormat.TABLE:
        console.print("ok: the restore can run", markup=False)


@backup_app.command("validate-restore", hidden=True)
def old_validate_restore_command(config: ConfigOpt = None, output: OutputOpt = OutputFormat.TABLE) -> None:
    """The old spelling of ``kompakt validate-restore``: still works, and says the new one on
    stderr (so ``--output json`` on stdout stays parseable)."""
    err_console.print(
        "note: 'kompakt backup validate-restore' is now 'kompakt validate-restore'",
        markup=False,
        highlight=False,
    )
    validate_restore_command(config, output)


def restore_command(
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only validate (as validate-restore).")] = False,
) -> None:
    """Restore a backup described by --config: through the protocol or into a stopped data directory."""
    cfg = _load_restore(config)
    if dry_run or cfg.dry_run:
        # OSO's restore.dry_run: validate and say what would happen, write nothing.
        validate_restore_command(config, output)
        return
    from kompakt.backup.offline import run_offline_restore
    from kompakt.backup.restore import run_restore

    with _errors():
        if cfg.offline:
            result: Any = run_offline_restore(cfg, progress=RichProgress())
        else:
            result = run_restore(cfg, progress=RichProgress())
    summary = result.summary()
    if output is OutputFormat.JSON:
        emit_json({**summary, "partitions": result.partitions, "notes": result.plan.notes})
        return
    emit_table(result.partitions, title=f"restore of {cfg.backup_id} to {result.plan.target}")
    for note in result.plan.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    extra = ""
    if summary.get("erased") or summary.get("tombstoned") or summary.get("outside_window"):
        extra = (
            f"; left out {summary['erased']} erased and {summary['outside_window']} outside the window, "
            f"{summary['tombstoned']} tombstone(s) for erased keys"
        )
    console.print(
        f"restored {summary['records']:,} records ({_human_bytes(summary['bytes'])}) "
        f"in {summary['seconds']} s ({summary['mb_per_s']} MB/s){extra}",
        markup=False,
        highlight=False,
    )


def _split_location(path: str) -> tuple[str, str]:
    """``LOCATION/BACKUP_ID`` into the storage root and the id."""
    trimmed = path.rstrip("/")
    root, sep, backup_id = trimmed.rpartition("/")
    if not sep or not backup_id or root in ("s3:", "s3:/"):
        raise CliUsageError(f"{path!r} should be LOCATION/BACKUP_ID (a directory or s3://bucket/prefix)")
    return root, backup_id


@backup_app.command("list")
def list_command(
    location: Annotated[str, typer.Argument(help="A backup directory or s3://bucket/prefix.")],
    endpoint_url: EndpointOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """List the backups at a location, with their status and size."""
    from kompakt.backup.manifest import list_backups, load_manifest
    from kompakt.backup.storage import parse_location

    with _errors():
        storage = parse_location(location, endpoint_url=endpoint_url)
        rows = [load_manifest(storage, backup_id).summary() for backup_id in list_backups(storage)]
    if output is OutputFormat.JSON:
        emit_json(rows)
        return
    emit_table(rows, title=f"backups at {storage.describe()}")


@backup_app.command("describe")
def describe_command(
    path: Annotated[str, typer.Argument(help="LOCATION/BACKUP_ID (a directory or s3://bucket/prefix).")],
    endpoint_url: EndpointOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Show one backup: topics and configs, partitions with offset ranges and gaps, runs, groups."""
    from kompakt.backup.manifest import load_manifest
    from kompakt.backup.storage import parse_location

    root, backup_id = _split_location(path)
    with _errors():
        manifest = load_manifest(parse_location(root, endpoint_url=endpoint_url), backup_id)
    if output is OutputFormat.JSON:
        emit_json(manifest.to_json())
        return
    console.print(
        f"backup {manifest.backup_id}: {manifest.status}, {manifest.records:,} records, "
        f"{_human_bytes(manifest.bytes)}, {manifest.compression}, "
        f"source {manifest.source.get('bootstrap_servers')}",
        markup=False,
        highlight=False,
    )
    emit_table(
        [
            {
                "topic": t.name,
                "partitions": t.partitions,
                "cleanup.policy": t.cleanup_policy,
                "configs": ", ".join(f"{k}={v}" for k, v in sorted(t.configs.items())),
            }
            for t in manifest.topics.values()
        ],
        title="topics",
    )
    emit_table(
        [
            {
                "partition": f"{p.topic}-{p.partition}",
                "offsets": f"{p.start_offset}..{p.end_offset}",
                "records": p.records,
                "tombstones": p.tombstones,
                "gaps": len(p.gaps),
                "gap offsets": p.gap_offsets,
                "files": len(p.files),
                "bytes": p.bytes,
            }
            for p in manifest.partitions.values()
        ],
        title="partitions",
    )
    emit_table(
        [
            {
                "run": r.run,
                "mode": r.mode,
                "status": r.status,
                "records": r.records,
                "bytes": r.bytes,
                "error": r.error,
            }
            for r in manifest.runs
        ],
        title="runs",
    )
    if manifest.consumer_groups:
        emit_table(
            [
                {"group": g, "topic": t, "partition": p, "offset": o}
                for g, topics in sorted(manifest.consumer_groups.items())
                for t, parts in topics.items()
                for p, o in parts.items()
            ],
            title="consumer group offsets",
        )


# --------------------------------------------------------------------------------------------
# OSO kafka-backup's command shape: ``kafka-backup backup|restore|validate-restore --config FILE``

oso_app = typer.Typer(
    help="OSO kafka-backup's commands: backup, restore, validate-restore --config FILE; list, describe.",
    no_args_is_help=True,
)


def _oso_format(fmt: str | None) -> OutputFormat:
    if fmt in (None, "text", "table"):
        return OutputFormat.TABLE
    if fmt == "json":
        return OutputFormat.JSON
    raise CliUsageError(f"--format {fmt}: kompakt prints text or json")


OsoFormatOpt = Annotated[str | None, typer.Option("--format", "-f", help="text or json.")]


@oso_app.command("backup")
def oso_backup(config: ConfigOpt = None) -> None:
    """kafka-backup backup --config backup.yaml (kompakt backup --config)."""
    run_backup_command(config, OutputFormat.TABLE)


@oso_app.command("restore")
def oso_restore(config: ConfigOpt = None) -> None:
    """kafka-backup restore --config restore.yaml (kompakt restore --config)."""
    restore_command(config, OutputFormat.TABLE, False)


@oso_app.command("validate-restore")
def oso_validate_restore(config: ConfigOpt = None, fmt: OsoFormatOpt = None) -> None:
    """kafka-backup validate-restore --config restore.yaml [--format json]."""
    validate_restore_command(config, _oso_format(fmt))


@oso_app.command("list")
def oso_list(
    path: Annotated[str, typer.Option("--path", "-p", help="Storage location (directory or s3://...).")],
    backup_id: Annotated[str | None, typer.Option("--backup-id", "-b", help="Show this backup.")] = None,
) -> None:
    """kafka-backup list --path P [--backup-id ID]."""
    if backup_id is None:
        list_command(path, None, OutputFormat.TABLE)
    else:
        describe_command(f"{path.rstrip('/')}/{backup_id}", None, OutputFormat.TABLE)


@oso_app.command("describe")
def oso_describe(
    path: Annotated[str, typer.Option("--path", "-p", help="Storage location (directory or s3://...).")],
    backup_id: Annotated[str, typer.Option("--backup-id", "-b", help="The backup.")],
    fmt: OsoFormatOpt = None,
) -> None:
    """kafka-backup describe --path P --backup-id ID [--format json]."""
    describe_command(f"{path.rstrip('/')}/{backup_id}", None, _oso_format(fmt))
