"""The typer application: every command group, ``--debug`` and ``--version``.

Each command group lives in its own module and is registered here (``kompakt.cli.commands``).
``kompakt.cli.main`` loads this module for every command line except a plain ``kompakt serve``.
"""

from __future__ import annotations

import typer

from kompakt import __version__
from kompakt.cli.logging_setup import configure
from kompakt.cli.serve_command import serve_command

app = typer.Typer(
    name="kompakt",
    help="A Kafka-compatible event log with Apache Kafka's log compaction, made visible.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("serve")(serve_command)


def _print_version(value: bool) -> None:
    """Eager, so ``kompakt --version`` works without a command after it."""
    if value:
        typer.echo(f"kompakt {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logging."),
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    configure(debug=debug)


_registered = False


def register_commands() -> None:
    """Attach the command groups once; each module exposes ``register(app)``.

    ``main()`` calls this on every command line, and can run many times in one process (the
    in-process CLI tests, a program embedding kompakt). typer appends a group on every
    ``add_typer`` and builds every appended group on every call, so registering again each time
    made each command line slower than the last (about 35 s after 100 of them on a loaded machine).
    """
    global _registered
    if _registered:
        return
    from kompakt.cli import commands

    for register in commands.REGISTRARS:
        register(app)
    _registered = True
