"""The session's shared ``kompakt serve`` subprocess for the real-client tests.

The process itself (start on ``--port 0``, ready line, SIGTERM on teardown) is
:mod:`tests.support.serve`, shared with the CLI, backup and seed-guide tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.serve import BrokerProcess, prepare_data_dir, start_broker


@pytest.fixture(scope="session")
def kompakt_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("clients") / "data"
    prepare_data_dir(data_dir)
    broker = start_broker(data_dir)
    yield broker
    assert broker.stop() == 0, broker.stderr_path.read_text()
