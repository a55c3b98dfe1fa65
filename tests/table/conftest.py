"""Fixtures of the table tests: an in-process broker with a compacted topic, the CLI in-process,
and the Kafka 4.1.2-written fixture directory copied under a ``<topic>-<partition>`` name."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.testing import InProcessBroker
from tests.support.log_dirs import cli

from .table_helpers import FIXTURE, TOPIC

__all__ = ["cli"]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A manual-clock broker without cleaner threads and a 3-partition compacted topic."""
    with InProcessBroker(tmp_path / "data", overrides={"log.cleaner.enable": "false"}) as b:
        b.create_topic(TOPIC, 3, cleanup_policy="compact", delete_retention_ms=1000)
        yield b


@pytest.fixture
def kafka_dirs(tmp_path: Path) -> dict[str, Path]:
    """``before`` and ``after`` of the Kafka-written fixture, each as ``<dir>/fixture-0``."""
    out = {}
    for name in ("before", "after"):
        target = tmp_path / name / "fixture-0"
        shutil.copytree(FIXTURE / name, target)
        out[name] = target.parent
    return out
