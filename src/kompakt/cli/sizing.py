"""``kompakt sizing``: offset-map memory for N unique keys, with Kafka's (and kompakt's) arithmetic.

The cleaner's offset map stores 24 bytes per key (a 16-byte digest and an 8-byte offset) in
``log.cleaner.dedupe.buffer.size`` bytes shared by ``log.cleaner.threads`` threads, and fills a
map only up to ``log.cleaner.io.buffer.load.factor``. So one pass covers
``floor(floor(buffer / threads / 24) × load factor)`` keys; a dirty section with more distinct keys
is cleaned in several passes. The defaults (128 MiB, 1 thread, 0.9) give 5,033,164 keys per pass.

With ``--log-dir`` the three settings are the ones that directory's broker runs with, each shown with
where it came from: a Kafka 4 directory's metadata log (the dynamic cluster default and this
broker's own, ``kafka-configs --entity-type brokers --alter``), a kompakt directory's
``kompakt-broker-dynamic.json``, ``--server-properties``, else Kafka's default; a flag given on the
command line wins over all of them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from kompakt.cleaner.sizing import SLOT_BYTES, keys_per_pass
from kompakt.cli.output import CliUsageError, OutputFormat, console, emit_json, emit_table
from kompakt.errors import LogDirectoryError

DEFAULT_BUFFER = 128 * 1024 * 1024
DEFAULT_THREADS = 1
DEFAULT_LOAD_FACTOR = 0.9


def register(app: typer.Typer) -> None:
    """Add ``sizing`` (idempotent)."""
    if any(command.name == "sizing" for command in app.registered_commands):
        return
    app.command("sizing")(sizing_command)


def sizing(keys: int, threads: int, buffer: int, load_factor: float) -> dict[str, Any]:
    """Every number ``kompakt sizing`` prints, as one dict (the JSON output)."""
    per_thread = buffer // threads
    slots = per_thread // SLOT_BYTES
    per_pass = keys_per_pass(buffer, threads, load_factor)
    needed_slots = math.ceil(keys / load_factor)
    default_per_pass = keys_per_pass(DEFAULT_BUFFER, DEFAULT_THREADS, DEFAULT_LOAD_FACTOR)
    return {
        "keys": keys,
        "bytes_per_key": SLOT_BYTES,
        "raw_bytes": keys * SLOT_BYTES,
        "bytes_with_load_factor": needed_slots * SLOT_BYTES,
        "buffer_for_one_pass": needed_slots * SLOT_BYTES * threads,
        "dedupe_buffer_size": buffer,
        "threads": threads,
        "load_factor": load_factor,
        "buffer_per_thread": per_thread,
        "slots_per_thread": slots,
        "keys_per_pass": per_pass,
        "passes": math.ceil(keys / per_pass) if per_pass > 0 else None,
        "default_keys_per_pass": default_per_pass,
    }


def _mib(n: int) -> str:
    return f"{n:,} B ({n / 1024 / 1024:.1f} MiB)"


_SETTINGS = (
    ("log.cleaner.threads", "--threads"),
    ("log.cleaner.dedupe.buffer.size", "--dedupe-buffer-size"),
    ("log.cleaner.io.buffer.load.factor", "--load-factor"),
)


def _directory_settings(
    log_dir: Path, server_properties: Path | None
) -> tuple[tuple[int, int, float], dict[str, str]]:
    """The cleaner settings of the broker whose log directory ``log_dir`` is, with their origins."""
    from kompakt.cli.broker_defaults import resolve_broker_defaults
    from kompakt.cli.kafka_dir import load_metadata
    from kompakt.inspect.log_files import resolve_target

    try:
        data_dir = resolve_target(log_dir).data_dir
    except LogDirectoryError as exc:
        raise CliUsageError(f"--log-dir: {exc}") from None
    if data_dir is None:
        raise CliUsageError(f"--log-dir: {log_dir} is not in a data directory")
    defaults = resolve_broker_defaults(
        server_properties=server_properties, data_dir=data_dir, cluster_metadata=load_metadata(data_dir)
    )
    broker = defaults.config
    values = (
        broker.log_cleaner_threads,
        broker.log_cleaner_dedupe_buffer_size,
        broker.log_cleaner_io_buffer_load_factor,
    )
    return values, {name: defaults.origins.get(name, "Kafka default") for name, _ in _SETTINGS}


def sizing_command(
    keys: Annotated[int, typer.Option("--keys", help="Number of unique keys in the dirty section.")],
    threads: Annotated[int | None, typer.Option("--threads", help="log.cleaner.threads (default 1).")] = None,
    dedupe_buffer_size: Annotated[
        int | None,
        typer.Option(
            "--dedupe-buffer-size", help="log.cleaner.dedupe.buffer.size in bytes (default 128 MiB)."
        ),
    ] = None,
    load_factor: Annotated[
        float | None, typer.Option("--load-factor", help="log.cleaner.io.buffer.load.factor (default 0.9).")
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option(
            "--log-dir",
            help="Take the three settings from this log directory's broker: a Kafka 4 directory's "
            "metadata log, a kompakt directory's dynamic configs; the flags above win.",
        ),
    ] = None,
    server_properties: Annotated[
        Path | None,
        typer.Option("--server-properties", help="With --log-dir: the broker's server.properties."),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="table or json.")
    ] = OutputFormat.TABLE,
) -> None:
    """Offset-map memory for N unique keys and how many cleaning passes they take."""
    if server_properties is not None and log_dir is None:
        raise CliUsageError("--server-properties goes with --log-dir")
    base: tuple[int, int, float] = (DEFAULT_THREADS, DEFAULT_BUFFER, DEFAULT_LOAD_FACTOR)
    origins = {name: "Kafka default" for name, _ in _SETTINGS}
    if log_dir is not None:
        base, origins = _directory_settings(log_dir, server_properties)
    given = (threads, dedupe_buffer_size, load_factor)
    for (name, flag), value in zip(_SETTINGS, given, strict=True):
        if value is not None:
            origins[name] = flag
    threads = base[0] if threads is None else threads
    dedupe_buffer_size = base[1] if dedupe_buffer_size is None else dedupe_buffer_size
    load_factor = base[2] if load_factor is None else load_factor
    if keys < 0:
        raise CliUsageError("--keys must be >= 0")
    if threads < 1:
        raise CliUsageError("--threads must be >= 1")
    if dedupe_buffer_size < SLOT_BYTES:
        raise CliUsageError(f"--dedupe-buffer-size must be at least {SLOT_BYTES} bytes")
    if not 0.0 < load_factor <= 1.0:
        raise CliUsageError("--load-factor must be in (0, 1]")
    result = sizing(keys, threads, dedupe_buffer_size, load_factor)
    result["sources"] = origins
    if output is OutputFormat.JSON:
        emit_json(result)
        return
    passes = result["passes"]
    emit_table(
        [
            {"": "unique keys", "value": f"{keys:,}"},
            {"": "memory, 24 B per key", "value": _mib(result["raw_bytes"])},
            {"": f"memory at load factor {load_factor}", "value": _mib(result["bytes_with_load_factor"])},
            {
                "": f"dedupe buffer for one pass ({threads} threads)",
                "value": _mib(result["buffer_for_one_pass"]),
            },
            {"": "buffer per thread", "value": _mib(result["buffer_per_thread"])},
            {"": "keys per pass", "value": f"{result['keys_per_pass']:,}"},
            {"": "passes needed", "value": "map too small" if passes is None else f"{passes:,}"},
        ],
        title="offset map sizing",
    )
    if log_dir is not None or any(v is not None for v in given):
        emit_table(
            [
                {"setting": name, "value": str(value), "from": origins[name]}
                for (name, _), value in zip(
                    _SETTINGS, (threads, dedupe_buffer_size, load_factor), strict=True
                )
            ],
            title="cleaner settings",
        )
    console.print(
        f"the default buffer (128 MiB, 1 thread, load factor 0.9) holds "
        f"{result['default_keys_per_pass']:,} keys per pass",
        markup=False,
        highlight=False,
    )
