"""Fixtures of the offline log tools' tests (builders and the in-process runner live in
``cli_log_helpers``, a uniquely named module, so the whole suite can import it unambiguously)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from cli_log_helpers import build, cli  # noqa: E402

__all__ = ["build", "cli"]
