"""Rendering command results: rich tables for people, ``--output json`` for programs.

Every command builds plain data (lists of dicts) and hands it here, so the two formats always
carry the same information. Errors are raised as :class:`CliError` (exit 1) or
:class:`CliUsageError` (exit 2) and printed as one line by ``kompakt.cli.main``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from rich.console import Console
from rich.table import Table

from kompakt.errors import OperatorError

console = Console()
err_console = Console(stderr=True)


class OutputFormat(str, Enum):
    TABLE = "table"
    JSON = "json"


class CliError(OperatorError):
    """A command failed: one line on stderr, exit code 1."""


class CliUsageError(OperatorError):
    """The command line is wrong (bad option value, missing config): one line, exit code 2."""


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (bytes are not allowed here: callers decide encodings)."""
    console.file.write(json.dumps(data, indent=2, default=str) + "\n")


def emit_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, title: str | None = None
) -> None:
    """Print ``rows`` as a table with ``columns`` (default: the keys of the first row)."""
    cols = list(columns) if columns is not None else (list(rows[0].keys()) if rows else [])
    table = Table(title=title, show_lines=False)
    for col in cols:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in cols))
    console.print(table)


def emit(
    rows: Sequence[Mapping[str, Any]],
    fmt: OutputFormat,
    columns: Sequence[str] | None = None,
    title: str | None = None,
) -> None:
    """Print ``rows`` in the chosen format."""
    if fmt is OutputFormat.JSON:
        emit_json(list(rows))
    else:
        emit_table(rows, columns, title)
