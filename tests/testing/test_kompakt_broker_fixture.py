"""The ``kompakt_broker`` fixture as a user's test would use it (the issue's acceptance test)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kompakt.log.config import BrokerConfig
from kompakt.testing import BrokerOperationError, InProcessBroker

TOPIC = "users"


def produce(bootstrap: str, items: list[tuple[bytes, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in items:
        producer.produce(TOPIC, key=key, value=value)
    assert producer.flush(10) == 0


def test_a_tombstone_goes_after_delete_retention(kompakt_broker: InProcessBroker) -> None:
    started = time.monotonic()
    kompakt_broker.create_topic(TOPIC, **{"cleanup.policy": "compact", "delete.retention.ms": "3600000"})
    produce(kompakt_broker.bootstrap_servers, [(b"alice", b"v1"), (b"alice", b"v2"), (b"alice", None)])
    kompakt_broker.roll(TOPIC)

    first = kompakt_broker.compact_now(TOPIC)
    assert first[0]["tombstones_removed"] == 0  # the first clean stamps the delete horizon
    stored = kompakt_broker.records(TOPIC)
    assert [(r.offset, r.key, r.value) for r in stored] == [(2, b"alice", None)]
    assert stored[0].is_tombstone

    kompakt_broker.advance_clock(3_600_000 + 1)
    second = kompakt_broker.compact_now(TOPIC)
    assert second[0]["tombstones_removed"] == 1
    assert kompakt_broker.records(TOPIC) == []
    # No sleeping and no waiting for the cleaner's schedule: both cleans together took less than
    # one cleaner backoff, let alone delete.retention.ms (well under a second on an idle machine,
    # as the README says; a loaded one stretches the work itself past a second).
    assert time.monotonic() - started < BrokerConfig().log_cleaner_backoff_ms / 1000


def test_underscored_configs_explain_and_errors(kompakt_broker: InProcessBroker) -> None:
    kompakt_broker.create_topic(TOPIC, 2, cleanup_policy="compact", segment_ms=60_000)
    partitions = kompakt_broker.partitions(TOPIC)
    assert [p["partition"] for p in partitions] == [0, 1]
    assert partitions[0]["cleanup_policy"] == ["compact"]
    reports = kompakt_broker.explain(TOPIC)
    assert [r["partition"] for r in reports] == [0, 1]
    assert all(r["verdict"] for r in reports)
    with pytest.raises(BrokerOperationError, match="already exists"):
        kompakt_broker.create_topic(TOPIC)
    with pytest.raises(BrokerOperationError, match="unknown topic"):
        kompakt_broker.roll("missing")
    kompakt_broker.create_topic("plain")
    with pytest.raises(BrokerOperationError, match="only compacted topics"):
        kompakt_broker.compact_now("plain")
    assert kompakt_broker.advance_clock("1h") == kompakt_broker.now_ms()
    assert "kompakt_partition_segments" in kompakt_broker.metrics()
    assert kompakt_broker.admin_url.startswith("http://127.0.0.1:")


def test_records_keep_headers_and_timestamps(kompakt_broker: InProcessBroker) -> None:
    kompakt_broker.create_topic(TOPIC)
    producer = Producer({"bootstrap.servers": kompakt_broker.bootstrap_servers})
    producer.produce(TOPIC, key=b"k", value=b"", headers=[("h", b"1"), ("n", None)], timestamp=1234)
    assert producer.flush(10) == 0
    (record,) = kompakt_broker.records(TOPIC, 0)
    assert (record.offset, record.key, record.value, record.timestamp) == (0, b"k", b"", 1234)
    assert record.headers == (("h", b"1"), ("n", None))
    assert not record.is_tombstone


def test_small_segments_take_internal_segment_bytes_as_in_kafka(kompakt_broker: InProcessBroker) -> None:
    """Issue 28: ``segment.bytes`` below 1 MiB is refused with Kafka 4.1's message, so a test that
    passes here does not fail in production; Kafka's internal ``internal.segment.bytes`` gives a
    test its small segments (and is listed by DescribeConfigs only on a topic that sets it)."""
    with pytest.raises(BrokerOperationError, match="Value must be at least 1048576"):
        kompakt_broker.create_topic("tiny", segment_bytes=16384)
    kompakt_broker.create_topic(TOPIC, cleanup_policy="compact", internal_segment_bytes=200)
    for i in range(6):  # one batch each: a segment rolls before the batch that would overfill it
        produce(kompakt_broker.bootstrap_servers, [(b"k%d" % i, b"v" * 100)])
    (partition,) = kompakt_broker.partitions(TOPIC)
    assert partition["segment_count"] >= 5
