"""The table of a topic written by transactional producers: only committed data counts, and
nothing at or past the last stable offset (read_committed), live and offline alike."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kompakt.testing import InProcessBroker

from .table_helpers import CliResult, produce

TOPIC = "txn-table"


@pytest.fixture
def txn_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    overrides = {
        "log.cleaner.enable": "false",
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    }
    with InProcessBroker(tmp_path / "data", overrides=overrides) as b:
        b.create_topic(TOPIC, 1, cleanup_policy="compact")
        yield b


def _transactional(broker: InProcessBroker, txn_id: str) -> Any:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id, "linger.ms": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


def _value(broker: InProcessBroker, key: str) -> str | None:
    url = f"{broker.admin_url}/v1/topics/{TOPIC}/keys/{key}?partition=0"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return str(json.loads(response.read())["value"])
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return None


def test_only_committed_data_below_the_lso_counts(
    txn_broker: InProcessBroker, cli: Callable[..., CliResult]
) -> None:
    broker = txn_broker
    committed = _transactional(broker, "committed")
    committed.produce(TOPIC, key=b"k1", value=b"a", partition=0)
    committed.produce(TOPIC, key=b"k2", value=b"b", partition=0)
    committed.commit_transaction(30)
    aborted = _transactional(broker, "aborted")
    aborted.produce(TOPIC, key=b"k1", value=b"from an aborted transaction", partition=0)
    aborted.produce(TOPIC, key=b"k3", value=b"x", partition=0)
    aborted.flush(30)
    aborted.abort_transaction(30)
    produce(broker.bootstrap_servers, TOPIC, [(b"k4", b"plain")], partition=0)
    still_open = _transactional(broker, "open")
    still_open.produce(TOPIC, key=b"k5", value=b"open", partition=0)
    still_open.flush(30)
    produce(broker.bootstrap_servers, TOPIC, [(b"k6", b"after the open transaction")], partition=0)

    expected: dict[str, str | None] = {
        "k1": "a",
        "k2": "b",
        "k3": None,
        "k4": "plain",
        "k5": None,
        "k6": None,
    }
    assert {k: _value(broker, k) for k in expected} == expected
    got = cli("table", "scan", TOPIC, "--log-dir", str(broker.data_dir), "-o", "json")
    offline = {json.loads(line)["key"]: json.loads(line)["value"] for line in got.out.splitlines()}
    assert offline == {k: v for k, v in expected.items() if v is not None}

    still_open.commit_transaction(30)
    expected.update(k5="open", k6="after the open transaction")
    assert {k: _value(broker, k) for k in expected} == expected
    got = cli("table", "counts", TOPIC, "--log-dir", str(broker.data_dir), "-o", "json")
    assert json.loads(got.out)["live_keys"] == 5
