"""Compaction of transactional data end to end: a compacted topic with committed and aborted
transactions is cleaned by kompakt's cleaner while another transaction is open.

What must hold (Kafka's cleaner rules for transactions): nothing at or past the last stable
offset is cleaned; aborted data disappears; a marker whose transaction has no data left is kept
until its delete horizon and removed by a clean after it; a read_committed consumer from offset 0
sees exactly the committed latest values, before and after each clean.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.records.control import ControlType, control_type_of
from kompakt.records.record import decode_records

from .conftest import start
from .txn_clients import create_topic, read_all, txn_producer, unique

pytestmark = pytest.mark.xdist_group("e2e-txn")


def _post(admin_url: str, path: str) -> dict[str, object]:
    request = urllib.request.Request(
        f"{admin_url}{path}", method="POST", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback admin endpoint
        result: dict[str, object] = json.loads(response.read())
        return result


def _latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    latest: dict[bytes | None, bytes | None] = {}
    for _, key, value in records:
        latest[key] = value
    return latest


def _batches(data_dir: Path, topic: str) -> list[tuple[int, str, list[tuple[bytes | None, bytes | None]]]]:
    """``(base offset, kind, records)`` of every batch in the partition's files (broker stopped)."""
    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        out = []
        partition_log = manager.get_log(topic, 0)
        for segment in partition_log.segments.values():
            for _, batch in segment.iter_batches():
                if batch.is_control:
                    marker = control_type_of(batch)
                    kind = "control:" + (marker.name if isinstance(marker, ControlType) else str(marker))
                else:
                    kind = "txn" if batch.is_transactional else "data"
                records = [(r.key, r.value) for r in decode_records(batch)] if not batch.is_control else []
                out.append((batch.base_offset, kind, records))
        return out
    finally:
        manager.close()


def test_cleaning_transactional_data_keeps_committed_latest_values(tmp_path: Path) -> None:
    broker = start(tmp_path / "data", args=("--clock", "manual"))
    try:
        bs, topic = broker.bootstrap, unique("compacted")
        create_topic(bs, topic, config={"cleanup.policy": "compact", "delete.retention.ms": "3600000"})
        producer = txn_producer(bs, unique("txn"))

        def transaction(pairs: list[tuple[bytes, bytes]], commit: bool) -> None:
            producer.begin_transaction()
            for key, value in pairs:
                producer.produce(topic, key=key, value=value)
            producer.flush(30)
            (producer.commit_transaction if commit else producer.abort_transaction)(30)

        transaction([(b"k1", b"a1"), (b"k2", b"a2")], commit=True)  # offsets 0-1, COMMIT 2
        transaction([(b"k1", b"b1"), (b"k3", b"b3")], commit=False)  # offsets 3-4, ABORT 5
        transaction([(b"k1", b"c1"), (b"k2", b"c2")], commit=True)  # offsets 6-7, COMMIT 8
        _post(broker.admin_url, f"/v1/roll?topic={topic}")  # segment [0, 9) can be cleaned
        producer.begin_transaction()
        producer.produce(topic, key=b"k1", value=b"d1")  # offset 9, open: the LSO is 9
        producer.flush(30)

        expected = {b"k1": b"c1", b"k2": b"c2"}
        before, lso = read_all(bs, topic, "read_committed")
        assert lso == 9 and _latest(before) == expected
        _post(broker.admin_url, f"/v1/roll?topic={topic}")  # the open transaction's segment rolls too
        _post(broker.admin_url, f"/v1/compact?topic={topic}&wait=true")
        after, lso = read_all(bs, topic, "read_committed")
        assert lso == 9
        assert [(k, v) for _, k, v in after] == [(b"k1", b"c1"), (b"k2", b"c2")]
        uncommitted, _ = read_all(bs, topic, "read_uncommitted")
        assert (9, b"k1", b"d1") in uncommitted  # at the LSO: not cleaned
        assert all(v not in (b"b1", b"b3", b"a1", b"a2") for _, _, v in uncommitted)

        producer.commit_transaction(30)  # COMMIT at 10; now d1 is the committed latest k1
        _post(broker.admin_url, f"/v1/roll?topic={topic}")
        _post(broker.admin_url, f"/v1/compact?topic={topic}&wait=true")  # stamps marker horizons
        _post(broker.admin_url, "/v1/clock/advance?by=2h")  # past delete.retention.ms
        _post(broker.admin_url, f"/v1/compact?topic={topic}&wait=true")
        _post(broker.admin_url, f"/v1/compact?topic={topic}&wait=true")
        final, lso = read_all(bs, topic, "read_committed")
        assert lso == 11
        assert [(k, v) for _, k, v in final] == [(b"k2", b"c2"), (b"k1", b"d1")]
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()

    batches = _batches(tmp_path / "data", topic)
    offsets = {base: kind for base, kind, _ in batches}
    # The markers of the transactions with no data left (the COMMIT at 2, the ABORT at 5) are
    # gone after their horizon; the COMMITs at 8 (c2 is left) and 10 (d1) stay with their data.
    assert 2 not in offsets and 5 not in offsets, batches
    assert offsets.get(8) == offsets.get(10) == "control:COMMIT", batches
    data = [record for _, kind, records in batches if kind == "txn" for record in records]
    assert data == [(b"k2", b"c2"), (b"k1", b"d1")]
