"""Fixtures of the log tests: the in-process runner of the offline tools (tests.support.log_dirs)."""

from __future__ import annotations

from tests.support.log_dirs import cli

__all__ = ["cli"]
