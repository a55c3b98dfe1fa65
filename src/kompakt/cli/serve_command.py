"""``kompakt serve`` as a typer command: options with their help, calling :func:`run_serve`.

Only ``--help`` and command lines the fast start does not take (see ``kompakt.cli.main``) load this
module and typer; a plain ``kompakt serve ...`` starts without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kompakt.cli.serve import run_serve
from kompakt.server.ports import DEFAULT_ADMIN_PORT


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
        int | None,
        typer.Option(
            "--admin-port",
            help=f"Admin HTTP endpoint port (default {DEFAULT_ADMIN_PORT}; 0 = any free port, "
            "the default with --port 0; -1 = none).",
        ),
    ] = None,
    admin_host: Annotated[
        str | None,
        typer.Option(
            "--admin-host",
            help="Admin endpoint address (default 127.0.0.1; beyond loopback it needs admin.auth.token).",
        ),
    ] = None,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            help="'system', or 'manual' (testing mode: log and cleaner time moves only via the admin "
            "endpoint; protocol timeouts keep real time).",
        ),
    ] = "system",
    compaction_chaos: Annotated[
        int | None,
        typer.Option(
            "--compaction-chaos",
            help="SEED: testing mode, roll and clean compacted topics at random legal moments as "
            "records arrive (deterministic per seed; the cleaner threads are off unless configured).",
        ),
    ] = None,
) -> None:
    """Run the broker: Kafka's wire protocol on --host:--port, logs in --data-dir."""
    run_serve(data_dir, host, port, config, override, admin_port, admin_host, clock, compaction_chaos)
