"""The ``kompakt`` command line.

Each command group lives in its own module and is registered here. Errors surface as one clear
line and a non-zero exit code (2 for usage, 1 for failure); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import logging
import sys

import typer

from kompakt import __version__
from kompakt.cli.output import CliUsageError, err_console
from kompakt.cli.serve import serve_command
from kompakt.errors import KompaktError

app = typer.Typer(
    name="kompakt",
    help="A Kafka-compatible event log with Apache Kafka's log compaction, made visible.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("serve")(serve_command)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logging."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    _state["debug"] = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if version:
        typer.echo(f"kompakt {__version__}")
        raise typer.Exit(0)


def _register() -> None:
    """Attach the command groups; each module exposes ``register(app)``."""
    from kompakt.cli import commands

    for register in commands.REGISTRARS:
        register(app)


def main() -> None:
    """Console-script entry point: kompakt errors become one line and exit code 1 (2 for usage)."""
    _register()
    try:
        app(standalone_mode=True)
    except KompaktError as exc:
        if _state["debug"]:
            raise
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2 if isinstance(exc, CliUsageError) else 1)


if __name__ == "__main__":
    main()
