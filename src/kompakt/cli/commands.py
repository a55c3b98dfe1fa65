"""The registry of command groups: each entry is a ``register(app)`` function of a CLI module.

A new command group is one module with a ``register(app: typer.Typer) -> None`` function, listed
here once.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

Registrar = Callable[[typer.Typer], None]

REGISTRARS: list[Registrar] = []
