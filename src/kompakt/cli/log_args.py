"""The offline log tools' shared argument handling, without typer.

``kompakt log compact`` runs without typer when its command line is a plain one
(:mod:`kompakt.cli.compact_cmd`), so what it shares with the other ``kompakt log`` commands lives
here rather than in :mod:`kompakt.cli.log_cmd`, which builds the typer group.
"""

from __future__ import annotations

from pathlib import Path

from kompakt.cli import output
from kompakt.cli.broker_defaults import BrokerDefaults
from kompakt.cli.output import CliUsageError
from kompakt.errors import LogDirectoryError
from kompakt.inspect.log_files import LogTarget, PartitionDir, resolve_target, topic_partitions


def log_target(path: Path, *, snapshots: bool = False) -> LogTarget:
    """What ``path`` names (a data directory, a partition, a segment); a bad one is a usage error."""
    try:
        return resolve_target(path, snapshots=snapshots)
    except LogDirectoryError as exc:
        raise CliUsageError(str(exc)) from None


def partitions_of(target: LogTarget) -> tuple[PartitionDir, ...]:
    """The topics' partitions of ``target``; naming KRaft's metadata log itself is a usage error."""
    partitions = topic_partitions(target)
    if target.partitions and not partitions and target.kind != "data":
        raise CliUsageError(
            f"{target.path} is KRaft's metadata log, not a topic: kompakt log dump "
            "--cluster-metadata-decoder shows its records"
        )
    return partitions


def parse_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    """``k=v`` pairs; anything else is a usage error naming the option."""
    result: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliUsageError(f"{option} expects name=value, got {item!r}")
        result[name.strip()] = value.strip()
    return result


def note_skipped(defaults: BrokerDefaults) -> None:
    """Name the ``--server-properties`` settings that were ignored, on stderr."""
    for names, what in (
        (defaults.skipped, "setting(s) kompakt does not use"),
        (defaults.unknown, "setting(s) unknown to Kafka 4.1"),
    ):
        if names:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            output.err_console.print(
                f"note: --server-properties: ignored {len(names)} {what}: {shown}",
                markup=False,
                highlight=False,
            )
