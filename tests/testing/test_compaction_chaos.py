"""Compaction chaos: ``kompakt serve --compaction-chaos SEED`` and the fixture's option.

Records produced one request at a time to a compacted topic; with chaos the log is rolled and
cleaned as they arrive (superseded values and, a chaos-clock horizon later, tombstones gone), what
a reader gets is still the latest value per key, and the same seed gives the same files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from kompakt.testing import InProcessBroker
from kompakt.testing.compaction_log import LogRecord
from kompakt.testing.replay_check import latest_values
from tests.support.serve import launch

pytest_plugins = ["pytester"]

TOPIC = "state"


def produce_one_by_one(bootstrap: str, n: int = 120) -> dict[bytes, bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    expected: dict[bytes, bytes] = {}
    for i in range(n):
        key = f"k{i % 9}".encode()
        value = None if i % 10 == 9 else f"v{i}".encode()
        producer.produce(TOPIC, key=key, value=value)
        assert producer.flush(10) == 0
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value
    return expected


Stored = list[tuple[int, bytes | None, bytes | None]]


def chaos_run(
    data_dir: Path, seed: int
) -> tuple[Stored, dict[bytes, bytes], dict[tuple[str, int], tuple[int, int]]]:
    with InProcessBroker(data_dir, compaction_chaos=seed) as broker:
        broker.create_topic(TOPIC, cleanup_policy="compact", delete_retention_ms=60_000)
        expected = produce_one_by_one(broker.bootstrap_servers)
        stored = [(r.offset, r.key, r.value) for r in broker.records(TOPIC)]
        return stored, expected, broker.chaos_counts()


def test_chaos_compacts_as_records_arrive_legally_and_deterministically(tmp_path: Path) -> None:
    stored, expected, counts = chaos_run(tmp_path / "a", seed=11)
    rolls, cleans = counts[(TOPIC, 0)]
    assert rolls > 20 and cleans > 20
    assert len(stored) < 120  # superseded values are gone ...
    assert not any(
        value is None for _offset, _key, value in stored[: len(stored) // 2]
    )  # ... and old tombstones
    records = [LogRecord(o, k, v, 0) for o, k, v in stored]
    assert latest_values(records) == expected  # what compaction promises, kept

    again, _, counts_again = chaos_run(tmp_path / "b", seed=11)
    assert again == stored and counts_again == counts  # the same seed, the same compactions
    other, _, _ = chaos_run(tmp_path / "c", seed=12)
    assert other != stored


def test_no_chaos_without_a_seed(kompakt_broker: InProcessBroker) -> None:
    kompakt_broker.create_topic(TOPIC, cleanup_policy="compact")
    produce_one_by_one(kompakt_broker.bootstrap_servers, 20)
    assert kompakt_broker.chaos_counts() == {}
    assert len(kompakt_broker.records(TOPIC)) == 20


class TestTheFixtureOption:
    @pytest.fixture
    def kompakt_compaction_chaos(self) -> int | None:
        return 5

    def test_a_seed_from_the_fixture(self, kompakt_broker: InProcessBroker) -> None:
        kompakt_broker.create_topic(TOPIC, cleanup_policy="compact")
        produce_one_by_one(kompakt_broker.bootstrap_servers, 40)
        assert kompakt_broker.chaos_counts()[(TOPIC, 0)][1] > 0


def test_the_pytest_command_line_option(pytester: pytest.Pytester) -> None:
    # In process: a child interpreter importing kompakt anew takes minutes on a loaded machine.
    pytester.makepyfile(
        test_user="def test_chaos(kompakt_broker):\n"
        "    assert kompakt_broker.app.settings.compaction_chaos_seed == 42\n"
        "    assert kompakt_broker.app.settings.broker_config.get_bool('log.cleaner.enable') is False\n"
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--kompakt-compaction-chaos=42")
    result.assert_outcomes(passed=1)


def test_serve_flag(tmp_path: Path) -> None:
    broker = launch(tmp_path / "data", "--compaction-chaos", "7")
    try:
        assert broker.ready_line.endswith(", compaction chaos seed 7")
    finally:
        assert broker.stop() == 0
