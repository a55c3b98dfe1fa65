"""Fixtures of the log map tests: an in-process broker whose only compactions are explicit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.testing import InProcessBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A manual-clock broker whose cleaner threads are off, so only explicit compactions clean."""
    with InProcessBroker(tmp_path / "data", overrides={"log.cleaner.enable": "false"}) as b:
        yield b
