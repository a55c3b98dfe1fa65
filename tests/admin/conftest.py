"""In-process brokers for the admin endpoint tests (manual clock by default), with helpers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.testing import InProcessBroker
from tests.support.produce import produce

__all__ = ["COMPACTED", "produce"]

COMPACTED = "compacted"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A manual-clock broker whose cleaner threads are off, so only explicit compactions clean."""
    with InProcessBroker(tmp_path / "data", overrides={"log.cleaner.enable": "false"}) as b:
        b.create_topic(COMPACTED, 2, cleanup_policy="compact", delete_retention_ms=1000)
        yield b


@pytest.fixture
def real_clock_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path / "data-real", manual_clock=False) as b:
        yield b
