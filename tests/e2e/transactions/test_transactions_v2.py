"""Transactions version 2 (KIP-890 part 2) against a served broker, compared with Kafka 4.1.2.

``fixtures/kafka41_tv2_java_producer.json`` (next to the coordinator's unit tests) is what Kafka
4.1.2 left on disk after ``tests/fixtures_src/TxnDiff.java`` (Kafka's own Java producer 4.1: six
transactions of three records, the third and fifth aborted, the fourth with a transactional
offset commit) ran against it, captured and normalised by :mod:`tests.support.txn_capture`
(``tests/fixtures_src/capture_txn_v2.py`` regenerates it). The same Java program against kompakt
leaves the identical capture; without a JVM here, the test drives kompakt with
:mod:`tests.support.tv2_producer`, which sends the Java producer's requests (its capture
against Kafka 4.1.2 is the same too), and compares: batches, epochs, sequences, markers and
their epochs, the ``__transaction_state`` records and the producer-state snapshots.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.protocol.apis import ApiKey
from tests.support.serve import BrokerProcess, launch
from tests.support.tv2_producer import Tv2Producer, run_java_scenario
from tests.support.txn_capture import capture

from .txn_clients import create_topic, read_all

pytestmark = pytest.mark.xdist_group("e2e-txn")

FIXTURES = Path(__file__).parents[2] / "broker" / "txn" / "fixtures"
FIXTURE = FIXTURES / "kafka41_tv2_java_producer.json"
FIXTURE_V1 = FIXTURES / "kafka41_tv1_java_producer.json"
TOPIC, TXN_ID, GROUP = "tv2", "tv2-app", "tv2-group"
#: As the Kafka run: one __transaction_state partition, Kafka's 50 offsets partitions.
OVERRIDES = (
    "group.initial.rebalance.delay.ms=0",
    "transaction.state.log.num.partitions=1",
    "offsets.topic.num.partitions=50",
)


def _serve(data_dir: Path, *extra: str) -> BrokerProcess:
    args = [word for item in (*OVERRIDES, *extra) for word in ("--override", item)]
    return launch(data_dir, *args)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = _serve(tmp_path / "data")
    yield broker
    broker.stop()


def test_the_java_producers_transactions_leave_what_kafka_41_leaves(served: BrokerProcess) -> None:
    create_topic(served.bootstrap, TOPIC)
    with Tv2Producer("127.0.0.1", served.port, "probe") as probe:
        assert probe.finalized_transaction_version() == 2
    run_java_scenario("127.0.0.1", served.port, TOPIC, TXN_ID, GROUP)

    committed, lso = read_all(served.bootstrap, TOPIC, "read_committed")
    assert [(offset, value) for offset, _, value in committed] == [
        (o, f"t{t}-{i}".encode())
        for t, first in ((0, 0), (1, 4), (3, 12), (5, 20))
        for i, o in enumerate(range(first, first + 3))
    ]
    assert lso == 24

    assert served.stop() == 0, served.stderr_path.read_text()
    got = capture(served.data_dir, TOPIC, TXN_ID, GROUP)
    expected = json.loads(FIXTURE.read_text())
    # The epoch climbs by one per commit and abort, the markers carry the bumped epoch.
    assert [b["epoch"] for b in got["data"] if "control" in b] == [1, 2, 3, 4, 5, 6]
    assert got["data"] == expected["data"]
    assert got["group_offsets"] == expected["group_offsets"]
    assert got["transaction_state"] == expected["transaction_state"]
    assert got["snapshots"] == expected["snapshots"]


def test_a_v1_only_broker_runs_the_java_producers_transactions_as_kafka_41_at_version_1(
    tmp_path: Path,
) -> None:
    """``transaction.version=1`` (Kafka: ``kafka-features downgrade --feature transaction.version=1``):
    the Java producer then uses AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v4, one epoch
    throughout; the fixture is Kafka 4.1.2 downgraded so, running the same Java program."""
    broker = _serve(tmp_path / "data", "transaction.version=1")
    try:
        create_topic(broker.bootstrap, TOPIC)
        with Tv2Producer("127.0.0.1", broker.port, "probe") as probe:
            assert probe.finalized_transaction_version() == 1
            r = probe.conn.call(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            )
            assert ("transaction.version", 0, 2) in [
                (f.name, f.min_version, f.max_version) for f in r.supported_features
            ]
        run_java_scenario("127.0.0.1", broker.port, TOPIC, TXN_ID, GROUP, transaction_version=1)
        committed, lso = read_all(broker.bootstrap, TOPIC, "read_committed")
        assert (len(committed), lso) == (12, 24)
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()
    got = capture(broker.data_dir, TOPIC, TXN_ID, GROUP)
    expected = json.loads(FIXTURE_V1.read_text())
    assert {b["epoch"] for b in got["data"]} == {0}
    assert got == expected
