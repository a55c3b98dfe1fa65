"""``kompakt log replay-check PATH|kafka://…/TOPIC --app module:function``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kompakt.testing import InProcessBroker
from kompakt.testing.compaction_log import LogBuilder
from kompakt.testing.compactions import Compactor

APP = """
import json

def latest(records):
    state = {}
    for r in records:
        if r.value is None:
            state.pop(r.key, None)
        else:
            state[r.key] = r.value
    return state

def naive(records):
    orders = {}
    for r in records:
        e = json.loads(r.value)
        if e["type"] == "updated" and r.key not in orders:
            raise KeyError(f"update of {r.key!r} before its creation")
        orders[r.key] = e["total"]
    return orders

def same_keys(expected, actual):
    return set(expected) == set(actual)
"""


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A module of the current directory, as a user's would be."""
    name = f"replay_app_{request.node.name.replace('-', '_').replace('[', '_').replace(']', '_')}"
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def orders_dir(root: Path) -> Path:
    log = LogBuilder()
    for key, kind, total in [
        ("o1", "created", 1),
        ("o2", "created", 2),
        ("o1", "updated", 3),
        ("o2", "updated", 4),
    ]:
        log.append((key, json.dumps({"type": kind, "total": total})))
    compactor = Compactor(log.build(topic="orders"), root / "work")
    return compactor.run((), root / "data").partition_dir


def test_a_safe_app_passes_and_a_naive_one_fails_with_its_variant(
    cli: Any, tmp_path: Path, app_module: str
) -> None:
    partition = orders_dir(tmp_path)
    ok = cli("log", "replay-check", str(partition), "--app", f"{app_module}:latest")
    assert ok.code == 0, ok.err
    assert "orders-0" in ok.out and "exhaustive" in ok.out and "ok" in ok.out

    bad = cli("log", "replay-check", str(partition.parent), "--app", f"{app_module}:naive")
    assert bad.code == 1
    assert "DIFFERS" in bad.out
    assert "pass 1: clean [0, 3) at t0" in bad.out
    assert "offset 0: key='o1'" in bad.out
    assert "the state differs on a legal compaction of" in bad.err

    compared = cli(
        "log", "replay-check", str(partition), "--app", f"{app_module}:naive",
        "--compare", f"{app_module}:same_keys", "-o", "json",
    )  # fmt: skip
    assert compared.code == 1  # compare does not excuse an exception
    document = json.loads(compared.out)
    assert document["ok"] is False and document["partitions"][0]["result"] == "DIFFERS"


def test_usage_errors(cli: Any, tmp_path: Path, app_module: str) -> None:
    partition = orders_dir(tmp_path)
    missing = cli("log", "replay-check", str(partition), "--app", "no_such_module:f")
    assert missing.code == 2 and "cannot import 'no_such_module'" in missing.err
    view = cli("log", "replay-check", str(partition), "--app", f"{app_module}:latest", "--view", "nope")
    assert view.code == 2 and "--view must be" in view.err


def test_a_topic_on_a_cluster(cli: Any, kompakt_broker: InProcessBroker, app_module: str) -> None:
    kompakt_broker.create_topic("cdc", 2, cleanup_policy="compact")
    producer = Producer({"bootstrap.servers": kompakt_broker.bootstrap_servers, "linger.ms": 0})
    for i in range(10):
        producer.produce("cdc", key=f"row{i % 3}".encode(), value=f"{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    spec = f"kafka://{kompakt_broker.bootstrap_servers}/cdc"
    result = cli("log", "replay-check", spec, "--app", f"{app_module}:latest", "-o", "json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["ok"] is True
    assert [p["records"] for p in document["partitions"]] == [5, 5]
