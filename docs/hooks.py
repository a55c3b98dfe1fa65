"""mkdocs hook: the pages' generated parts, rendered from the code at build time.

A page marks where each goes with an HTML comment, so the Markdown source stays readable on
GitHub too: ``<!-- generated:cli-reference -->`` (every command's ``--help``,
:mod:`kompakt.cli.reference`), ``<!-- generated:topic-config-table -->`` and
``<!-- generated:broker-config-table -->`` (:mod:`kompakt.config.doc`, from the config
definitions). The build fails on a marker it does not know.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_MARKER = re.compile(r"<!-- generated:([a-z-]+) -->")


def _generators() -> dict[str, Callable[[], str]]:
    from kompakt.cli.reference import cli_reference
    from kompakt.config.doc import broker_config_table, topic_config_table

    return {
        "cli-reference": cli_reference,
        "topic-config-table": topic_config_table,
        "broker-config-table": broker_config_table,
    }


def on_page_markdown(markdown: str, **_kwargs: Any) -> str:
    if "<!-- generated:" not in markdown:
        return markdown
    generators = _generators()

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in generators:
            raise ValueError(f"unknown generated section {name!r} (known: {', '.join(generators)})")
        return generators[name]()

    return _MARKER.sub(expand, markdown)
