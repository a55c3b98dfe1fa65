"""The ``kompakt`` command line's entry point.

Errors surface as one clear line and a non-zero exit code (2 for usage, 1 for failure);
``--debug`` shows the traceback.

``kompakt serve`` starts fast: a plain, valid ``serve`` command line (``[--debug] serve`` and its
options, each given once or, for the repeatable ones, several times) is parsed here with
``SERVE_OPTIONS`` and the broker runs without typer, click or the other command groups being
imported (about 0.2 s, plus 25 ms for typer itself). ``kompakt log compact`` likewise
(``COMPACT_OPTIONS`` in :mod:`kompakt.cli.compact_cmd`), because an offline compaction of a
large log is timed from the command's start. Anything else (``--help``, an unknown or
malformed option, ``--version``, every other command) goes through the typer app in
``kompakt.cli.app``, so help and error messages are typer's. Each fast path imports its own
command's modules only once the command line has named it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from kompakt.cli.logging_setup import configure, state
from kompakt.errors import KompaktError


def _command_start(argv: Sequence[str], command: Sequence[str]) -> tuple[bool, int] | None:
    """``(debug, index after the command's words)`` when ``argv`` is ``[--debug]... command ...``."""
    debug = False
    position = 0
    while position < len(argv) and argv[position] == "--debug":
        debug = True
        position += 1
    end = position + len(command)
    if list(argv[position:end]) != list(command):
        return None
    return debug, end


def _fast_serve_arguments(argv: Sequence[str]) -> tuple[bool, dict[str, object]] | None:
    """``(debug, keyword arguments of run_serve)`` for a plain serve command line, else None."""
    start = _command_start(argv, ["serve"])
    if start is None:
        return None
    from kompakt.cli.serve import SERVE_OPTIONS

    debug, position = start
    options = SERVE_OPTIONS
    values: dict[str, object] = {}
    rest = list(argv[position:])
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
    from kompakt.cli.serve import run_serve

    debug, values = parsed
    configure(debug=debug)
    try:
        run_serve(**values)  # type: ignore[arg-type]
    except KeyboardInterrupt:  # what click does with it
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    return True


def _fast_compact_arguments(argv: Sequence[str]) -> tuple[bool, dict[str, Any]] | None:
    """``(debug, keyword arguments of run_compact)`` for a plain ``log compact`` command line."""
    start = _command_start(argv, ["log", "compact"])
    if start is None:
        return None
    from kompakt.cli.compact_cmd import compact_arguments

    debug, position = start
    values = compact_arguments(list(argv[position:]))
    return None if values is None else (debug, values)


def _run_compact_directly(argv: Sequence[str]) -> bool:
    """Run ``log compact`` without typer when the command line is a plain one; False otherwise."""
    parsed = _fast_compact_arguments(argv)
    if parsed is None:
        return False
    from kompakt.cli.compact_cmd import run_compact

    debug, values = parsed
    configure(debug=debug)
    try:
        run_compact(**values)
    except KeyboardInterrupt:  # what click's standalone mode does with these
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)
    return True


def main() -> None:
    """Console-script entry point: kompakt errors become one line and exit code 1 (2 for usage)."""
    try:
        if _run_serve_directly(sys.argv[1:]) or _run_compact_directly(sys.argv[1:]):
            return
        from kompakt.cli.app import app, register_commands

        register_commands()
        app(standalone_mode=True)
    except KompaktError as exc:
        if state["debug"]:
            raise
        from kompakt.cli.output import CliUsageError, err_console  # rich: only when there is an error

        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2 if isinstance(exc, CliUsageError) else 1)


if __name__ == "__main__":
    main()
