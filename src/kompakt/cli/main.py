"""The ``kompakt`` command line.

Errors surface as one clear line and a non-zero exit code (2 for usage, 1 for failure); ``--debug``
shows the traceback. Each subcommand lives in its own module; this one wires them together.
"""

from __future__ import annotations

import logging
import sys

import typer

from kompakt import __version__
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

_DEBUG = False


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logging."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    global _DEBUG
    _DEBUG = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if version:
        typer.echo(f"kompakt {__version__}")
        raise typer.Exit(0)


def main() -> None:
    """Console-script entry point: run the app, turning kompakt errors into one line and exit 1."""
    try:
        app(standalone_mode=True)
    except KompaktError as exc:
        if _DEBUG:
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
