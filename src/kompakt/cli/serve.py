"""``kompakt serve``: run the broker on a data directory until SIGTERM or SIGINT.

Configuration comes from a ``server.properties`` file (``--config``) with ``--override
name=value`` on top, exactly as Kafka's ``kafka-server-start.sh --override``. A bad name or value
is one ``error:`` line and exit code 2, before anything touches the disk. Deprecated settings
print a ``warning:`` line and the broker starts anyway.

Exactly one line goes to stdout once the broker accepts connections, so scripts and tests can
wait for it (``--port 0`` picks a free port and the line names it)::

    kompakt ready: listening on 127.0.0.1:9092, data directory /abs/path (N topics, M partitions)

Logs go to stderr. On SIGTERM/SIGINT the broker stops accepting, finishes in-flight requests,
stops its services, flushes, writes checkpoints and the clean-shutdown marker, and exits 0.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from kompakt.errors import ConfigError
from kompakt.log.config import BrokerConfig
from kompakt.log.config_defs import parse_properties_file
from kompakt.server.app import AppSettings, BrokerApp

DEFAULT_DATA_DIR = Path("kompakt-data")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")  # noqa: S104 - names a wildcard, binds nothing


class UsageError(Exception):
    """A command-line or configuration problem: one line, exit code 2."""


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    """``name=value`` pairs; a pair without ``=`` or with an empty name is a usage error."""
    result: dict[str, str] = {}
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--override expects name=value, got {item!r}")
        result[name.strip()] = value.strip()
    return result


def _listener(value: str | None) -> tuple[str, int] | None:
    """Host and port of the first ``PLAINTEXT://host:port`` entry of a listeners config."""
    if not value:
        return None
    first = value.split(",")[0].strip()
    _, _, address = first.rpartition("://")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"cannot parse listener {first!r} (expected PLAINTEXT://host:port)")
    return host.strip("[]"), int(port)


def build_settings(
    data_dir: Path | None,
    host: str | None,
    port: int | None,
    config_file: Path | None,
    overrides: list[str],
) -> AppSettings:
    """Resolve the broker config and the listener, raising UsageError for anything invalid."""
    props: dict[str, str] = {}
    if config_file is not None:
        try:
            props.update(parse_properties_file(config_file))
        except OSError as exc:
            raise UsageError(f"cannot read config file {config_file}: {exc.strerror or exc}") from None
    props.update(parse_overrides(overrides))
    try:
        config = BrokerConfig.from_properties(props)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    listener = _listener(config.get_str("listeners") if config.lookup_set("listeners") else None)
    bind_host = host if host is not None else (listener[0] if listener and listener[0] else DEFAULT_HOST)
    bind_port = port if port is not None else (listener[1] if listener else DEFAULT_PORT)
    if not 0 <= bind_port <= 65535:
        raise UsageError(f"--port must be within 0..65535, got {bind_port}")
    if data_dir is None:
        configured = config.lookup_set("log.dirs") or config.lookup_set("log.dir")
        dirs = str(configured[0]).split(",") if configured is not None else []
        data_dir = Path(dirs[0].strip()) if dirs and dirs[0].strip() else DEFAULT_DATA_DIR
    advertised = _listener(config.get_str("advertised.listeners"))
    if advertised is not None:
        advertised_host, advertised_port = advertised
    else:
        advertised_host = socket.getfqdn() if bind_host in _WILDCARD_HOSTS else bind_host
        advertised_port = 0  # the bound port, filled in once listening
    return AppSettings(
        data_dir=data_dir.resolve(),
        broker_config=config,
        host=bind_host,
        port=bind_port,
        advertised_host=advertised_host,
        advertised_port=advertised_port,
    )


async def run_broker(settings: AppSettings) -> None:
    """Start, print the ready line, wait for SIGTERM/SIGINT, stop cleanly."""
    app = BrokerApp(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = await app.start()
    try:
        topics, partitions = app.summary()
        print(
            f"kompakt ready: listening on {server.host}:{server.port}, data directory "
            f"{settings.data_dir} ({topics} topics, {partitions} partitions)",
            flush=True,
        )
        await stop.wait()
    finally:
        await app.stop()
    print("kompakt stopped", file=sys.stderr, flush=True)


def serve_command(
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Data directory (default: log.dirs, else ./kompakt-data)."),
    ] = None,
    host: Annotated[str | None, typer.Option("--host", help="Listen address (default 127.0.0.1).")] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port to listen on (default 9092; 0 = any free port).")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="A server.properties file.")] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", help="Set a broker config, name=value (repeatable); wins over --config."),
    ] = None,
    admin_port: Annotated[
        int | None, typer.Option("--admin-port", help="Reserved for the admin endpoint (not available yet).")
    ] = None,
) -> None:
    """Run the broker: Kafka's wire protocol on --host:--port, logs in --data-dir."""
    try:
        settings = build_settings(data_dir, host, port, config, override or [])
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    for warning in settings.broker_config.deprecation_warnings():
        print(f"warning: {warning}", file=sys.stderr)
    if admin_port is not None:
        print("warning: --admin-port is reserved; the admin endpoint is not available yet", file=sys.stderr)
    asyncio.run(run_broker(settings))
