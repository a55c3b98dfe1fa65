"""Everything acknowledged survives a clean restart of ``kompakt serve`` (own broker, own data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from tests.support.serve import COMPACTED, prepare_data_dir, start_broker

from .helpers import DEADLINE_S, RECORDS, consume_all

pytestmark = pytest.mark.clients


def test_restart_keeps_acknowledged_records(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    prepare_data_dir(data_dir)
    broker = start_broker(data_dir)
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        errors: list[object] = []
        for key, value in RECORDS:
            producer.produce("durable", key=key, value=value, on_delivery=lambda e, _m: errors.append(e))
            producer.produce(COMPACTED, key=key, value=value, on_delivery=lambda e, _m: errors.append(e))
        assert producer.flush(DEADLINE_S) == 0 and errors == [None] * (2 * len(RECORDS))
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap)
        first_pid = (
            kp._transaction_manager.producer_id_and_epoch.producer_id if kp._transaction_manager else None
        )
        kp.send("durable", key=b"kp", value=b"x").get(timeout=DEADLINE_S)
        kp.close(timeout=DEADLINE_S)
    finally:
        assert broker.stop() == 0
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert "(2 topics, 2 partitions)" in start_broker_line(data_dir)
    restarted = start_broker(data_dir)
    try:
        expected = [*RECORDS, (b"kp", b"x")]
        assert consume_all(restarted.bootstrap, "durable", len(expected)) == expected
        assert consume_all(restarted.bootstrap, COMPACTED, len(RECORDS)) == RECORDS
        kp = KafkaProducer(bootstrap_servers=restarted.bootstrap)
        kp.send("durable", key=b"again", value=b"y").get(timeout=DEADLINE_S)
        second_pid = (
            kp._transaction_manager.producer_id_and_epoch.producer_id if kp._transaction_manager else None
        )
        kp.close(timeout=DEADLINE_S)
        if first_pid is not None and second_pid is not None:
            assert second_pid > first_pid  # producer ids never repeat across restarts
    finally:
        assert restarted.stop() == 0


def producer_id(producer: KafkaProducer) -> int:
    """The producer id kafka-python's idempotent producer got from InitProducerId (internal API)."""
    return int(producer._transaction_manager.producer_id_and_epoch.producer_id)


def start_broker_line(data_dir: Path) -> str:
    """The ready line of a broker started (and stopped) on ``data_dir``."""
    broker = start_broker(data_dir)
    try:
        return broker.ready_line
    finally:
        broker.stop()
