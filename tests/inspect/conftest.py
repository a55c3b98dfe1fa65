"""Fixtures of the explain and log map tests: the offline log-directory builders and runner
(:mod:`tests.support.log_dirs`), and an in-process broker whose only compactions are explicit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.testing import InProcessBroker
from tests.support.log_dirs import build, cli

__all__ = ["build", "cli"]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A manual-clock broker whose cleaner threads are off, so only explicit compactions clean."""
    with InProcessBroker(tmp_path / "data", overrides={"log.cleaner.enable": "false"}) as b:
        yield b
