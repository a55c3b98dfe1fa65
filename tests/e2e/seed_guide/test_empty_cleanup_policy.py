"""Issue 8 item 2: ``cleanup.policy`` as an empty list is valid and means no cleanup at all.

As the backup guide states for current Kafka: a topic whose policy is the empty list keeps every
segment forever (no time or size retention) and is never compacted (every duplicate stays). The
topic is created through confluent-kafka and through ``kompakt topic create --config
cleanup.policy=``, described back as ``""``, then driven with the fixture's manual clock next to
two control topics that prove time really passed: a ``delete`` topic with the same retention is
trimmed, and a ``compact`` topic with the same records is compacted.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.cimpl import NewTopic

from kompakt.testing.broker import BrokerOperationError, InProcessBroker
from tests.support.cli import run

from .conftest import (
    DEADLINE_S,
    AdminClient,
    describe_topic,
    key_values,
    produce,
    source_name,
    wait_for_log_start,
    wait_until,
)

pytestmark = pytest.mark.clients

ROUNDS = 3
KEYS = (b"k1", b"k2")
#: Every round rewrites the same two keys: a compacted copy keeps 2 records, a kept copy all 6.
RECORDS = [(key, b"round-%d" % r) for r in range(ROUNDS) for key in KEYS]
SMALL = {
    "retention.ms": "1000",
    "retention.bytes": "1",
    "segment.ms": "100",
    "min.compaction.lag.ms": "0",
    "min.cleanable.dirty.ratio": "0.01",
}


@pytest.fixture
def kompakt_broker_config() -> dict[str, str]:
    # Time/size retention of non-compacted logs runs every 50 ms of real time (the rules it applies
    # read the manual clock); the cleaner already backs off only 50 ms in the fixture.
    return {"log.retention.check.interval.ms": "50", "log.initial.task.delay.ms": "0"}


def fill(broker: InProcessBroker, topic: str) -> None:
    """Produce ``RECORDS`` one round per segment, so every round is in a rolled segment."""
    for r in range(ROUNDS):
        produce(broker.bootstrap_servers, topic, RECORDS[r * len(KEYS) : (r + 1) * len(KEYS)])
        broker.roll(topic)


def offsets(broker: InProcessBroker, topic: str) -> tuple[int, int, int]:
    (info,) = broker.partitions(topic)
    return info["log_start_offset"], info["log_end_offset"], info["segment_count"]


def check_kept_forever(broker: InProcessBroker, topic: str) -> None:
    """After time passes, the empty-policy topic still has every segment and every duplicate,
    while the same-configured ``delete`` and ``compact`` controls did clean up."""
    before = offsets(broker, topic)
    assert before == (0, len(RECORDS), ROUNDS + 1)

    broker.advance_clock("2h")  # far beyond retention.ms, segment.ms and delete.retention.ms
    wait_for_log_start(broker, "control-delete", len(RECORDS), "delete control trimmed")
    wait_until(lambda: len(broker.records("control-compact")) == len(KEYS), "compact control compacted")
    # A second retention pass starts only after the first finished with every log: produce and
    # roll the control again, move time on and wait for that trim too.
    produce(broker.bootstrap_servers, "control-delete", RECORDS[:1])
    broker.roll("control-delete")
    broker.advance_clock("2h")
    wait_for_log_start(broker, "control-delete", len(RECORDS) + 1, "second trim")

    assert offsets(broker, topic) == before
    assert key_values(broker, topic) == RECORDS
    (info,) = broker.partitions(topic)
    assert info["cleanup_policy"] == []
    assert info["last_clean"] is None and not info["uncleanable"]


def create_controls(admin: AdminClient) -> None:
    futures = admin.create_topics(
        [
            NewTopic("control-delete", 1, 1, config={**SMALL, "cleanup.policy": "delete"}),
            NewTopic("control-compact", 1, 1, config={**SMALL, "cleanup.policy": "compact"}),
        ]
    )
    for future in futures.values():
        future.result(DEADLINE_S)


def test_empty_policy_through_confluent_kafka(kompakt_broker: InProcessBroker, admin: AdminClient) -> None:
    topic = "keep-all"
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={**SMALL, "cleanup.policy": ""})])
    futures[topic].result(DEADLINE_S)
    create_controls(admin)

    entry = describe_topic(admin, topic)["cleanup.policy"]
    assert (entry.value, source_name(entry)) == ("", "DYNAMIC_TOPIC_CONFIG")
    assert not entry.is_default

    for name in (topic, "control-delete", "control-compact"):
        fill(kompakt_broker, name)
    check_kept_forever(kompakt_broker, topic)


def test_empty_policy_through_the_cli(kompakt_broker: InProcessBroker, admin: AdminClient) -> None:
    bootstrap = kompakt_broker.bootstrap_servers
    topic = "keep-all-cli"
    extra = [arg for name, value in SMALL.items() for arg in ("--config", f"{name}={value}")]
    created = run(
        bootstrap, "topic", "create", topic, "--config", "cleanup.policy=", *extra, "--output", "json"
    )
    assert created.code == 0, created.stderr
    assert json.loads(created.stdout)["configs"]["cleanup.policy"] == ""
    create_controls(admin)

    described = run(bootstrap, "topic", "describe", topic, "--output", "json")
    assert described.code == 0, described.stderr
    (policy,) = [c for c in json.loads(described.stdout)["configs"] if c["name"] == "cleanup.policy"]
    assert policy["value"] == "" and policy["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert describe_topic(admin, topic)["cleanup.policy"].value == ""

    for name in (topic, "control-delete", "control-compact"):
        fill(kompakt_broker, name)
    check_kept_forever(kompakt_broker, topic)


def test_alter_to_empty_policy_stops_compaction(kompakt_broker: InProcessBroker) -> None:
    """A compacted topic altered to the empty list is no longer cleaned, and says why."""
    bootstrap = kompakt_broker.bootstrap_servers
    created = run(bootstrap, "topic", "create", "was-compacted", "--config", "cleanup.policy=compact")
    assert created.code == 0, created.stderr
    altered = run(bootstrap, "topic", "alter", "was-compacted", "--set", "cleanup.policy=")
    assert altered.code == 0, altered.stderr
    produce(bootstrap, "was-compacted", RECORDS)
    kompakt_broker.roll("was-compacted")

    (explained,) = kompakt_broker.explain("was-compacted")
    assert explained["verdict"] == 'not compacting: cleanup.policy is "" (keep forever)'
    assert not explained["eligible"]
    with pytest.raises(BrokerOperationError, match='cleanup.policy=""; only compacted topics are cleaned'):
        kompakt_broker.compact_now("was-compacted")
    assert key_values(kompakt_broker, "was-compacted") == RECORDS
