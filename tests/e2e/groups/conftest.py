"""Brokers for the group and admin tests with real clients: ``kompakt serve`` subprocesses.

``groups_broker`` is shared by the session; ``delayed_broker`` keeps Kafka's default initial
rebalance delay (3 s) so that a client's first JoinGroup stays parked long enough for the client
to change its mind, which is how librdkafka comes to discard a JoinGroup answer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.serve import BrokerProcess, start_broker


@pytest.fixture(scope="session")
def groups_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("e2e-groups") / "data")
    yield broker
    assert broker.stop() == 0, broker.stderr_path.read_text()


@pytest.fixture(scope="module")
def delayed_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(
        tmp_path_factory.mktemp("e2e-delayed") / "data", "--override", "group.initial.rebalance.delay.ms=3000"
    )
    yield broker
    assert broker.stop() == 0, broker.stderr_path.read_text()
