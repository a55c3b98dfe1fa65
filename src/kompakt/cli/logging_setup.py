"""Logging and the ``--debug`` switch, shared by the fast ``serve`` start and the typer app."""

from __future__ import annotations

import logging
import sys

#: ``debug``: show tracebacks instead of one-line errors (set by ``--debug``).
state = {"debug": False}


def configure(*, debug: bool) -> None:
    state["debug"] = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
