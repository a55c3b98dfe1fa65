"""The ``kompakt`` command line.

Each command group lives in its own module and is registered here. Errors surface as one clear
line and a non-zero exit code (2 for usage, 1 for failure); ``--debug`` shows the traceback.

``kompakt serve`` starts fast: a plain, valid ``serve`` command line (``[--debug] serve`` and its
options, each given once or, for the repeatable ones, several times) is parsed here from
``serve_command``'s own typer annotations and the command is called directly, without importing the
other command groups or building typer's pydantic validators (together about 0.2 s). Anything else
(``--help``, an unknown or malformed option, ``--version``) goes through typer as usual, so help
and error messages are typer's.
"""

from __future__ import annotations

import logging
import re
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

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


_INT = re.compile(r"-?[0-9]+")


def _option_converters(
    command: Callable[..., object],
) -> dict[str, tuple[str, Callable[[str], object], bool]]:
    """``--flag -> (parameter, converter, repeatable)`` for a command whose options are simple.

    Empty when some parameter is not a plain typer option of type str, int, Path or list[str].
    """
    options: dict[str, tuple[str, Callable[[str], object], bool]] = {}
    for name, hint in typing.get_type_hints(command, include_extras=True).items():
        if name == "return":
            continue
        if typing.get_origin(hint) is not typing.Annotated:
            return {}
        base, *extras = typing.get_args(hint)
        info = next((e for e in extras if isinstance(e, typer.models.OptionInfo)), None)
        if info is None or info.envvar is not None or info.callback is not None:
            return {}
        decls = [
            d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str) and d.startswith("--")
        ]
        args = [a for a in typing.get_args(base) if a is not type(None)] or [base]
        kind = args[0] if len(args) == 1 else None
        repeatable = typing.get_origin(kind) is list and typing.get_args(kind) == (str,)
        converter: Callable[[str], object]
        if repeatable or kind is str:
            converter = str
        elif kind is int:
            converter = _parse_int
        elif kind is Path:
            converter = Path
        else:
            return {}
        for decl in decls or [f"--{name.replace('_', '-')}"]:
            options[decl] = (name, converter, repeatable)
    return options


def _parse_int(value: str) -> int:
    if not _INT.fullmatch(value):
        raise ValueError(value)
    return int(value)


def _fast_serve_arguments(argv: Sequence[str]) -> tuple[bool, dict[str, object]] | None:
    """``(debug, keyword arguments of serve_command)`` for a plain serve command line, else None."""
    debug = False
    position = 0
    while position < len(argv) and argv[position] == "--debug":
        debug = True
        position += 1
    if position >= len(argv) or argv[position] != "serve":
        return None
    options = _option_converters(serve_command)
    if not options:
        return None
    values: dict[str, object] = {}
    rest = list(argv[position + 1 :])
    while rest:
        token = rest.pop(0)
        flag, equals, value = token.partition("=")
        if flag not in options:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        name, converter, repeatable = options[flag]
        try:
            converted = converter(value)
        except ValueError:
            return None
        if repeatable:
            existing = values.setdefault(name, [])
            assert isinstance(existing, list)
            existing.append(converted)
        elif name in values:
            return None
        else:
            values[name] = converted
    return debug, values


def _run_serve_directly(argv: Sequence[str]) -> bool:
    """Run ``serve`` without typer when the command line is a plain one; False when it is not."""
    parsed = _fast_serve_arguments(argv)
    if parsed is None:
        return False
    debug, values = parsed
    _root(debug=debug, version=False)
    try:
        serve_command(**values)  # type: ignore[arg-type]
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # what click does with it
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    return True


def main() -> None:
    """Console-script entry point: kompakt errors become one line and exit code 1 (2 for usage)."""
    try:
        if _run_serve_directly(sys.argv[1:]):
            return
        _register()
        app(standalone_mode=True)
    except KompaktError as exc:
        if _state["debug"]:
            raise
        from kompakt.cli.output import CliUsageError, err_console  # rich: only when there is an error

        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2 if isinstance(exc, CliUsageError) else 1)


if __name__ == "__main__":
    main()
