"""The example of docs/pytest.md, verbatim."""

from __future__ import annotations

from confluent_kafka import Producer


def test_deleted_users_disappear(kompakt_broker):
    kompakt_broker.create_topic("users", **{"cleanup.policy": "compact", "delete.retention.ms": "3600000"})
    producer = Producer({"bootstrap.servers": kompakt_broker.bootstrap_servers})
    producer.produce("users", key=b"alice", value=b"v1")
    producer.produce("users", key=b"alice", value=b"v2")
    producer.produce("users", key=b"alice", value=None)  # a tombstone
    assert producer.flush(10) == 0

    kompakt_broker.roll("users")  # make the records cleanable
    kompakt_broker.compact_now("users")  # dedupes; stamps the tombstone's delete horizon
    [tombstone] = kompakt_broker.records("users")
    assert tombstone.key == b"alice" and tombstone.value is None

    kompakt_broker.advance_clock("2h")  # past delete.retention.ms ...
    kompakt_broker.compact_now("users")  # ... so the next clean removes it
    assert kompakt_broker.records("users") == []
