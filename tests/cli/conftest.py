"""Fixtures of the CLI tests: a ``kompakt serve`` subprocess for the cluster commands, and the
directory builders and in-process runner of the offline log tools (:mod:`tests.support.log_dirs`).

How a command is run (in-process, or as the real ``kompakt`` program) is :mod:`tests.support.cli`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.log_dirs import build, cli
from tests.support.serve import BrokerProcess, start_broker

__all__ = ["build", "cli"]


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("cli-cluster") / "data")
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()
