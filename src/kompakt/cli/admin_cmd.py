"""``kompakt admin …``: operate a running broker through its admin HTTP endpoint.

Every command is one request to ``--admin-url`` (default ``http://127.0.0.1:9192``, or
``$KOMPAKT_ADMIN_URL``; the bearer token of an endpoint beyond loopback from
``--admin-token-file``, ``$KOMPAKT_ADMIN_TOKEN`` or ``$KOMPAKT_ADMIN_TOKEN_FILE``, an HTTPS
endpoint's private CA from ``$KOMPAKT_ADMIN_CAFILE``) and prints the answer as a table or, with
``--output json``, the endpoint's JSON unchanged. An unreachable endpoint or an error answer is
one ``error:`` line and exit code 1 (raised as a :class:`KompaktError` and printed by ``kompakt.cli.main``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer

from kompakt.admin.client import DEFAULT_ADMIN_URL, AdminClient
from kompakt.cleaner.warmup import COMPILE_ESTIMATE
from kompakt.cli.output import CliUsageError, OutputFormat, console, emit_json, emit_table, err_console

URL_OPTION = typer.Option("--admin-url", envvar="KOMPAKT_ADMIN_URL", help="The broker's admin endpoint.")
OUTPUT_OPTION = typer.Option("--output", "-o", help="table or json.")

TOKEN_FILE_OPTION = typer.Option(
    "--admin-token-file",
    envvar="KOMPAKT_ADMIN_TOKEN_FILE",
    help="A file with the endpoint's bearer token (or set $KOMPAKT_ADMIN_TOKEN); needed beyond loopback.",
)

UrlArg = Annotated[str, URL_OPTION]
TokenFileArg = Annotated[Path | None, TOKEN_FILE_OPTION]
OutputArg = Annotated[OutputFormat, OUTPUT_OPTION]
PartitionOpt = Annotated[int | None, typer.Option("--partition", "-p", help="One partition only.")]


def _iso(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def _ratio(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def partitions(
    topic: Annotated[str | None, typer.Argument(help="Only this topic.")] = None,
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Partitions with offsets, sizes, segments, dirty ratio and cleaning state."""
    data = AdminClient(admin_url, token_file=token_file).partitions(topic)
    if output is OutputFormat.JSON:
        emit_json(data)
        return
    rows = [
        {
            "partition": f"{p['topic']}-{p['partition']}",
            "policy": ",".join(p["cleanup_policy"]),
            "start": p["log_start_offset"],
            "end": p["log_end_offset"],
            "hw": p["high_watermark"],
            "bytes": p["size_bytes"],
            "segments": p["segment_count"],
            "first dirty": p["first_dirty_offset"],
            "dirty ratio": _ratio(p["dirty_ratio"]),
            "min ratio": p["min_cleanable_dirty_ratio"] if p["dirty_ratio"] is not None else None,
            "state": p["cleaning_state"],
            "uncleanable": p["uncleanable_reason"] or "",
        }
        for p in data["partitions"]
    ]
    emit_table(rows, title=f"partitions at {_iso(data['now_ms'])}")


def explain(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    partition: PartitionOpt = None,
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Why the topic's partitions are (or are not) being compacted, live."""
    data = AdminClient(admin_url, token_file=token_file).explain(topic, partition)
    if output is OutputFormat.JSON:
        emit_json(data)
        return
    for report in data["partitions"]:
        name = f"{report.get('topic', topic)}-{report.get('partition', '')}"
        verdict = report.get("verdict")
        console.print(f"[bold]{name}[/bold]" + (f": {verdict}" if verdict else ""), highlight=False)
        scalars = [
            {"field": key, "value": value}
            for key, value in report.items()
            if key not in ("topic", "partition", "verdict") and not isinstance(value, dict | list)
        ]
        if scalars:
            emit_table(scalars, ["field", "value"])
        readers = report.get("readers")
        if readers:
            console.print(f"readers: {readers['detail']}", markup=False, highlight=False)
            for group in readers["groups"]:
                console.print(f"  {group['detail']}", markup=False, highlight=False)


def readers(
    topic: Annotated[str | None, typer.Argument(help="The topic (default: every compacted topic).")] = None,
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Who holds tombstone removal, and which groups have not read the tombstones that will go."""
    data = AdminClient(admin_url, token_file=token_file).readers(topic)
    if output is OutputFormat.JSON:
        emit_json(data)
        return
    rows = [
        {
            "partition": f"{p['topic']}-{p['partition']}",
            "group": g["group"],
            "committed": g["committed_offset"],
            "unread tombstones": g["unread_tombstones"],
            "first unread": "-" if g["first_unread_offset"] is None else g["first_unread_offset"],
            "removed at": _iso(g["removal_ms"]) if g["removal_ms"] is not None else "-",
            "holds": "yes" if g["holds"] else "",
        }
        for p in data["partitions"]
        for g in p["groups"]
    ]
    emit_table(rows, title=f"readers at {_iso(data['now_ms'])}")
    for p in data["partitions"]:
        for g in p["groups"]:
            if g["unread_tombstones"]:
                console.print(g["detail"], markup=False, highlight=False)


def roll(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    partition: PartitionOpt = None,
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Roll the active segment so its records become cleanable."""
    data = AdminClient(admin_url, token_file=token_file).roll(topic, partition)
    if output is OutputFormat.JSON:
        emit_json(data)
        return
    emit_table(data["partitions"], ["topic", "partition", "rolled", "active_base_offset"])


def compact(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    partition: PartitionOpt = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Start the clean and return at once.")] = False,
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Compact now, whatever the dirty ratio (the active segment is never cleaned)."""
    client = AdminClient(admin_url, token_file=token_file)
    if not no_wait and client.partitions(topic).get("kernels_compiling"):
        err_console.print(
            f"waiting for the native kernels to finish compiling (first run only, {COMPILE_ESTIMATE}; "
            "`kompakt warmup` does it ahead of time)",
            highlight=False,
        )
    data = client.compact(topic, partition, wait=not no_wait)
    if output is OutputFormat.JSON:
        emit_json(data)
    elif no_wait:
        console.print(f"compaction of {topic} started (partitions {data['partitions']})", highlight=False)
    else:
        emit_table(
            data["partitions"],
            [
                "partition",
                "passes",
                "records_read",
                "records_written",
                "tombstones_removed",
                "bytes_read",
                "bytes_written",
                "seconds",
            ],
        )


def retry(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    partition: Annotated[int, typer.Argument(help="The partition.")],
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Clear a partition's uncleanable mark so the cleaner tries it again."""
    data = AdminClient(admin_url, token_file=token_file).retry(topic, partition)
    if output is OutputFormat.JSON:
        emit_json(data)
    elif data["cleared"]:
        console.print(f"{topic}-{partition}: cleared ({data['previous_reason']})", highlight=False)
    else:
        console.print(f"{topic}-{partition} was not marked uncleanable", highlight=False)


clock_app = typer.Typer(
    name="clock", help="The manual clock (kompakt serve --clock manual).", no_args_is_help=True
)


def _print_clock(data: dict[str, Any], output: OutputFormat) -> None:
    if output is OutputFormat.JSON:
        emit_json(data)
    else:
        console.print(f"{data['now_ms']} ({_iso(data['now_ms'])})", highlight=False)


@clock_app.command("show")
def clock_show(
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """The broker's current time for log and cleaner rules."""
    _print_clock(AdminClient(admin_url, token_file=token_file).clock(), output)


@clock_app.command("advance")
def clock_advance(
    duration: Annotated[str, typer.Argument(help="Milliseconds, or a duration such as 90s, 25h, 1h30m.")],
    admin_url: UrlArg = DEFAULT_ADMIN_URL,
    token_file: TokenFileArg = None,
    output: OutputArg = OutputFormat.TABLE,
) -> None:
    """Move the manual clock forward and wake the cleaner."""
    from kompakt.server.manual_clock import parse_duration_ms

    try:
        parse_duration_ms(duration)
    except ValueError as exc:
        raise CliUsageError(str(exc)) from None
    _print_clock(AdminClient(admin_url, token_file=token_file).advance_clock(duration), output)


def metrics(admin_url: UrlArg = DEFAULT_ADMIN_URL, token_file: TokenFileArg = None) -> None:
    """The Prometheus metrics, raw."""
    console.file.write(AdminClient(admin_url, token_file=token_file).metrics())


def register(app: typer.Typer) -> None:
    """Attach ``kompakt admin`` to the root command."""
    admin_app = typer.Typer(
        name="admin", help="Operate a running broker through its admin HTTP endpoint.", no_args_is_help=True
    )
    for name, fn in (
        ("partitions", partitions),
        ("explain", explain),
        ("readers", readers),
        ("roll", roll),
        ("compact", compact),
        ("retry", retry),
        ("metrics", metrics),
    ):
        admin_app.command(name)(fn)
    admin_app.add_typer(clock_app, name="clock")
    app.add_typer(admin_app, name="admin")
