"""Fixtures of the table tests: an in-process broker with a compacted topic, the CLI in-process,
and the Kafka 4.1.2-written fixture directory copied under a ``<topic>-<partition>`` name."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kompakt.testing import InProcessBroker

from .table_helpers import FIXTURE, TOPIC, CliResult


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """``kompakt ARGS`` in-process, as the console script runs it."""
    from kompakt.cli import main as cli_main
    from kompakt.cli.output import console, err_console

    monkeypatch.setattr(console, "width", 250, raising=False)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["kompakt", *args])
        monkeypatch.setattr(console, "_file", None, raising=False)
        monkeypatch.setattr(err_console, "_file", None, raising=False)
        code = 0
        try:
            cli_main.main()
        except SystemExit as exc:
            code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


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
