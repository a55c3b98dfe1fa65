"""``kompakt serve``: run the broker on a data directory until SIGTERM or SIGINT.

Configuration comes from a ``server.properties`` file (``--config``) with ``--override
name=value`` on top, exactly as Kafka's ``kafka-server-start.sh --override``. A bad name or value
is one ``error:`` line and exit code 2, before anything touches the disk. Deprecated settings
print a ``warning:`` line and the broker starts anyway; so do Kafka broker configs kompakt accepts
but does not act on (``num.io.threads`` and the like): one ``warning:`` line names them all.

Exactly one line goes to stdout once the broker accepts connections, so scripts and tests can
wait for it (``--port 0`` picks a free port and the line names it)::

    kompakt ready: listening on 127.0.0.1:9092, data directory /abs/path (N topics, M partitions), admin http://127.0.0.1:9192

The admin HTTP endpoint (JSON operations and ``/metrics``, see ``kompakt.server.admin_http``)
listens on ``--admin-host`` (loopback by default) and ``--admin-port`` (default 9192; 0 picks a
free port, and is the default when ``--port`` is 0 so that test brokers never collide; -1 runs no
endpoint). Bound beyond loopback it needs a bearer token (``admin.auth.token`` or
``admin.auth.token.file``) and refuses to start without one; ``admin.ssl.keystore.*`` makes it
HTTPS (see ``kompakt.server.admin_access``).

``--clock manual`` is a testing mode: the wall-clock time of log and cleaner rules (segment rolls,
retention, compaction lags, tombstone delete horizons, LogAppendTime) starts at the real time and
then moves only through the admin endpoint (``kompakt admin clock advance 25h``); protocol
timeouts (group sessions, long polls) keep real time. The ready line then ends with
``, clock manual``.

``--compaction-chaos SEED`` is a testing mode too: after appends to compacted topics the broker
rolls and cleans them at random legal moments, seeded, as if months had passed
(:mod:`kompakt.server.compaction_chaos`); the cleaner threads are off unless the configuration sets
``log.cleaner.enable``, so every clean is the seed's. The ready line ends with
``, compaction chaos seed SEED``.

An address that is taken is one line and exit code 1, before the data directory is created::

    error: 127.0.0.1:9092 is in use; pass --port to use another port (0 picks a free one)

Logs go to stderr. On SIGTERM/SIGINT the broker stops accepting, finishes in-flight requests,
stops its services, flushes, writes checkpoints and the clean-shutdown marker, and exits 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import re
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kompakt.cli.logging_setup import state
from kompakt.clock import Clock, SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import parse_properties_file
from kompakt.errors import ConfigError
from kompakt.server.ports import DEFAULT_ADMIN_PORT

if TYPE_CHECKING:
    # The server loads when the broker starts, not for every other command (main.py imports
    # this module for its fast serve path): about 0.3 s off each `kompakt` invocation.
    from kompakt.server.app import AppSettings
    from kompakt.server.listener import BindError

DEFAULT_DATA_DIR = Path("kompakt-data")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
DEFAULT_ADMIN_HOST = "127.0.0.1"
CLOCK_MODES = ("system", "manual")
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


def _check_sasl(config: BrokerConfig, sasl_listeners: list[str]) -> None:
    """GSSAPI (Kafka's default mechanism) or a bad JAAS config on a SASL listener stops the
    broker before it binds, rather than at a client's first handshake."""
    from kompakt.broker.sasl.service import listener_settings as sasl_settings

    for name in sasl_listeners:
        try:
            sasl_settings(config, name)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None


def _broker_config(
    config_file: Path | None, overrides: list[str], compaction_chaos: int | None
) -> BrokerConfig:
    """The broker config from ``--config`` and ``--override`` (the later wins, as in Kafka)."""
    props: dict[str, str] = {}
    if config_file is not None:
        try:
            props.update(parse_properties_file(config_file))
        except OSError as exc:
            raise UsageError(f"cannot read config file {config_file}: {exc.strerror or exc}") from None
    props.update(parse_overrides(overrides))
    if compaction_chaos is not None:
        # Every clean is the seed's (deterministic), unless the configuration asks for threads too.
        props.setdefault("log.cleaner.enable", "false")
    try:
        return BrokerConfig.from_properties(props)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _configured_data_dir(config: BrokerConfig) -> Path:
    """The first of ``log.dirs`` (or ``log.dir``), else the embedded default: one broker serves one
    data directory."""
    configured_dirs = config.lookup_set("log.dirs") or config.lookup_set("log.dir")
    dirs = str(configured_dirs[0]).split(",") if configured_dirs is not None else []
    return Path(dirs[0].strip()) if dirs and dirs[0].strip() else DEFAULT_DATA_DIR


def build_settings(
    data_dir: Path | None,
    host: str | None,
    port: int | None,
    config_file: Path | None,
    overrides: list[str],
    admin_host: str | None = None,
    admin_port: int | None = None,
    compaction_chaos: int | None = None,
) -> AppSettings:
    """Resolve the broker config, the listener and the admin endpoint, raising UsageError for
    anything invalid."""
    config = _broker_config(config_file, overrides, compaction_chaos)
    from kompakt.server.app import AppSettings, admin_security, listener_settings, require_authentication

    try:
        listeners = list(listener_settings(config))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if not listeners:
        raise UsageError("listeners has no listener to serve (only controller.listener.names ones)")
    _check_sasl(
        config, [listener.name for listener in listeners if listener.security_protocol.startswith("SASL_")]
    )
    configured = config.lookup_set("listeners") is not None
    first = listeners[0]
    bind_host = host if host is not None else (first.host if configured and first.host else DEFAULT_HOST)
    if host is None and configured and not first.host:
        bind_host = "0.0.0.0"  # noqa: S104 - Kafka binds every interface for an empty host
    bind_port = port if port is not None else (first.port if configured else DEFAULT_PORT)
    if not 0 <= bind_port <= 65535:
        raise UsageError(f"--port must be within 0..65535, got {bind_port}")
    if admin_port is None:
        admin_port = 0 if bind_port == 0 else DEFAULT_ADMIN_PORT
    if not -1 <= admin_port <= 65535:
        raise UsageError(f"--admin-port must be within 0..65535 (or -1 for none), got {admin_port}")
    if data_dir is None:
        data_dir = _configured_data_dir(config)
    # --host/--port move the first listener (the only one unless `listeners` names several).
    advertised_host = first.advertised_host or (
        socket.getfqdn() if bind_host in _WILDCARD_HOSTS else bind_host
    )
    first = dataclasses.replace(
        first,
        host=bind_host,
        port=bind_port,
        advertised_host=advertised_host,
        label="kafka" if not configured or len(listeners) == 1 else first.name,
    )
    listeners[0] = first
    for index, other in enumerate(listeners[1:], start=1):
        if not other.advertised_host:
            shown = socket.getfqdn() if other.host in _WILDCARD_HOSTS else other.host
            listeners[index] = dataclasses.replace(other, advertised_host=shown)

    settings = AppSettings(
        data_dir=data_dir.resolve(),
        broker_config=config,
        host=bind_host,
        port=bind_port,
        advertised_host=advertised_host,
        advertised_port=first.advertised_port,
        admin_host=admin_host or DEFAULT_ADMIN_HOST,
        admin_port=None if admin_port == -1 else admin_port,
        listeners=tuple(listeners),
        listeners_require_auth=configured and require_authentication(listeners),
        compaction_chaos_seed=compaction_chaos,
    )
    if settings.admin_port is not None:
        try:
            admin_security(settings)  # no token where one is needed, an unreadable key: before any disk
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    return settings


def build_clock(mode: str) -> Clock:
    """The broker clock for ``--clock``: the system clock, or a manual clock starting now."""
    if mode == "system":
        return SystemClock()
    if mode == "manual":
        from kompakt.server.manual_clock import ManualClock

        return ManualClock()
    raise UsageError(f"--clock must be one of {', '.join(CLOCK_MODES)}, got {mode!r}")


async def run_broker(settings: AppSettings, clock: Clock | None = None) -> None:
    """Start, print the ready line, wait for SIGTERM/SIGINT, stop cleanly."""
    from kompakt.server.app import BrokerApp
    from kompakt.server.manual_clock import ManualClock

    app = BrokerApp(settings, clock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = await app.start()
    # Everything allocated so far lives as long as the broker: keep it out of the collector's
    # full passes, which otherwise walk every module, schema class and partition object.
    gc.freeze()
    try:
        topics, partitions = app.summary()
        extra = f", admin {app.admin_server.url}" if app.admin_server is not None else ""
        if isinstance(app.clock, ManualClock):
            extra += ", clock manual"
        if settings.compaction_chaos_seed is not None:
            extra += f", compaction chaos seed {settings.compaction_chaos_seed}"
        print(
            f"kompakt ready: listening on {server.describe_listeners()}, data directory "
            f"{settings.data_dir} ({topics} topics, {partitions} partitions){extra}",
            flush=True,
        )
        await stop.wait()
    finally:
        await app.stop()
    print("kompakt stopped", file=sys.stderr, flush=True)


_INT = re.compile(r"-?[0-9]+")


def _parse_int(value: str) -> int:
    if not _INT.fullmatch(value):
        raise ValueError(value)
    return int(value)


#: ``kompakt serve``'s options: flag -> (parameter of :func:`run_serve`, converter, repeatable).
#: The fast start parses plain command lines with this table; the typer command in
#: ``kompakt.cli.serve_command`` declares the same options with their help (a test checks they
#: agree), so ``kompakt serve --help`` and unusual command lines get typer's handling.
SERVE_OPTIONS: dict[str, tuple[str, Callable[[str], object], bool]] = {
    "--data-dir": ("data_dir", Path, False),
    "--host": ("host", str, False),
    "--port": ("port", _parse_int, False),
    "--config": ("config", Path, False),
    "--override": ("override", str, True),
    "--admin-port": ("admin_port", _parse_int, False),
    "--admin-host": ("admin_host", str, False),
    "--clock": ("clock", str, False),
    "--compaction-chaos": ("compaction_chaos", _parse_int, False),
}


def run_serve(
    data_dir: Path | None = None,
    host: str | None = None,
    port: int | None = None,
    config: Path | None = None,
    override: list[str] | None = None,
    admin_port: int | None = None,
    admin_host: str | None = None,
    clock: str = "system",
    compaction_chaos: int | None = None,
) -> None:
    """Run the broker until SIGTERM/SIGINT; a usage error is one ``error:`` line and exit code 2."""
    try:
        settings = build_settings(
            data_dir, host, port, config, override or [], admin_host, admin_port, compaction_chaos
        )
        broker_clock = build_clock(clock)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    for warning in settings.broker_config.deprecation_warnings():
        print(f"warning: {warning}", file=sys.stderr)
    inert = settings.broker_config.inert_config_warning()
    if inert is not None:
        print(f"warning: {inert}", file=sys.stderr)
    from kompakt.server.listener import BindError

    try:
        asyncio.run(run_broker(settings, broker_clock))
    except BindError as exc:
        if state["debug"]:
            raise
        print(f"error: {bind_error_line(exc)}", file=sys.stderr)
        raise SystemExit(1) from None


#: The option that moves each listener, for the one-line error when its port is taken.
_PORT_OPTIONS = {
    "kafka": "--port",
    "admin": "--admin-port",
}


def bind_error_line(error: BindError) -> str:
    """``127.0.0.1:9092 is in use; pass --port …``: the address, and the option that moves it."""
    if not error.in_use:
        return str(error)
    if error.listener not in _PORT_OPTIONS:  # a listener of `listeners`: its entry moves it
        return f"{error} (listener {error.listener}); change its port in listeners (0 picks a free one)"
    option = _PORT_OPTIONS[error.listener]
    extra = ", -1 runs none" if option == "--admin-port" else ""
    return f"{error}; pass {option} to use another port (0 picks a free one{extra})"
