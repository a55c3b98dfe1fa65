"""Rendering command results: rich tables for people, ``--output json`` for programs.

Every command builds plain data (lists of dicts) and hands it here, so the two formats always
carry the same information. Errors are raised as :class:`CliError` (exit 1) or
:class:`CliUsageError` (exit 2) and printed as one line by ``kompakt.cli.main``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

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


def _table(title: str | None, cols: list[str], cells: list[list[str]], style: box.Box) -> Table:
    table = Table(title=title, show_lines=False, box=style)
    for col in cols:
        table.add_column(col, overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def emit_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, title: str | None = None
) -> None:
    """Print ``rows`` as a table with ``columns`` (default: the keys of the first row).

    A table never breaks a value across lines to fit the width (80 columns in a pipe): if it
    does not fit with its borders, it is drawn without them, and if it still does not fit, each
    row is printed as one ``column value, column value`` paragraph, wrapped between values.
    """
    cols = list(columns) if columns is not None else (list(rows[0].keys()) if rows else [])
    cells = [["" if row.get(c) is None else str(row.get(c)) for c in cols] for row in rows]
    width = console.width
    unbounded = console.options.update(max_width=1_000_000)
    for style in (box.HEAVY_HEAD, box.SIMPLE_HEAD):
        table = _table(title, cols, cells, style)
        if console.measure(table, options=unbounded).maximum <= width:
            console.print(table)
            return
    _emit_paragraphs(title, cols, cells)


def _emit_paragraphs(title: str | None, cols: list[str], cells: list[list[str]]) -> None:
    """Rows as wrapped paragraphs: the first column names the row, the rest follow it."""
    if title:
        console.print(title, markup=False, highlight=False, style="italic")
    names = [c.replace(" ", "_") for c in cols]
    for row in cells:
        head = f"{names[0]} {row[0]}" if names else ""
        rest = ", ".join(f"{c} {v}" for c, v in zip(names[1:], row[1:], strict=True) if v != "")
        text = textwrap.fill(
            f"{head}: {rest}" if rest else head,
            width=max(20, console.width),
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        console.print(Text(text), highlight=False, soft_wrap=True)


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


KAFKA_URL_SCHEME = "kafka://"


def bootstrap_value(value: str | None) -> str | None:
    """A cluster named the one way everywhere: ``HOST:PORT[,HOST:PORT...]`` or the URL form
    ``kafka://HOST:PORT[,...]`` that ``table`` sources use, given to any ``--bootstrap-server``
    (a topic after the address belongs in the command's own argument, so it is refused)."""
    if value is None or not value.startswith(KAFKA_URL_SCHEME):
        return value
    address, _, rest = value[len(KAFKA_URL_SCHEME) :].partition("/")
    if not address or rest.strip("/"):
        raise CliUsageError(f"{value!r}: give kafka://HOST:PORT (no topic) or HOST:PORT")
    return address
