"""The plugin is loaded the way a user's project gets it: through the package's ``pytest11`` entry
point (``kompakt = "kompakt.testing.pytest_plugin"``), installed with kompakt."""

from __future__ import annotations

from tests.support.log_dirs import cli

__all__ = ["cli"]
