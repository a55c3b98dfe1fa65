"""The CLI reference of the documentation site, rendered from the commands themselves.

``docs/hooks.py`` (a mkdocs hook) puts :func:`cli_reference` into ``docs/cli.md`` at build time, so
the reference cannot drift from the code: every visible command, in the order ``kompakt --help``
lists them, with the help text its ``--help`` prints (typer's for kompakt's own commands,
argparse's for the Kafka-spelled tools, which take Kafka's flags).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer.main
from typer.testing import CliRunner

from kompakt.cli.app import app, register_commands

#: A terminal as wide as the site's code blocks, without colour or cursor codes.
_HELP_ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Every visible command path, groups before their subcommands (hidden aliases left out)."""
    if path:
        yield path
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            if not getattr(sub, "hidden", False):
                yield from _walk(sub, (*path, name))


def command_paths() -> list[tuple[str, ...]]:
    """``("serve",)``, ``("log", "explain")``...: what the reference has one section for."""
    register_commands()
    return list(_walk(typer.main.get_command(app), ()))


def help_text(path: tuple[str, ...]) -> str:
    """What ``kompakt PATH --help`` prints, trailing spaces trimmed."""
    register_commands()
    result = CliRunner().invoke(app, [*path, "--help"], env=_HELP_ENV)
    if result.exit_code != 0:
        raise RuntimeError(f"kompakt {' '.join(path)} --help failed: {result.output}")
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    return "\n".join(lines).strip("\n")


def cli_reference() -> str:
    """Markdown: one section per command, its ``--help`` in a code block."""
    parts = []
    for path in command_paths():
        level = "#" * min(len(path) + 1, 4)
        parts.append(f"{level} kompakt {' '.join(path)}\n\n```text\n{help_text(path)}\n```\n")
    return "\n".join(parts)
