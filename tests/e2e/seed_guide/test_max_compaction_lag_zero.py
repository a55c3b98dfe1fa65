"""Issue 8 item 3: ``max.compaction.lag.ms=0`` through real clients.

KIP-354's public-interfaces section says 0 disables the limit; Kafka 4.x rejects it (it must be at
least 1). kompakt accepts it, describes it back as ``0`` and treats it as "no limit": a partition
below its dirty ratio is not compacted however long it waits, while a control topic with a real
limit is compacted by it. The default stays Kafka's ``9223372036854775807``.
"""

from __future__ import annotations

import pytest
from confluent_kafka.cimpl import NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from kompakt.testing.broker import InProcessBroker
from tests.support.cli import run

from .conftest import (
    DEADLINE_S,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    describe_topic,
    key_values,
    produce,
    source_name,
    wait_until,
)

pytestmark = pytest.mark.clients

LONG_MAX = "9223372036854775807"
#: Compacted, but never eligible by dirty ratio: only max.compaction.lag.ms could get it cleaned.
LAZY = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99", "segment.ms": "3600000"}
RECORDS = [(b"k", b"v%d" % i) for i in range(4)]


def test_confluent_create_with_zero_is_accepted_and_disabled(
    kompakt_broker: InProcessBroker, admin: AdminClient
) -> None:
    futures = admin.create_topics(
        [
            NewTopic("lag-zero", 1, 1, config={**LAZY, "max.compaction.lag.ms": "0"}),
            NewTopic("lag-one-second", 1, 1, config={**LAZY, "max.compaction.lag.ms": "1000"}),
            NewTopic("lag-default", 1, 1, config={"cleanup.policy": "compact"}),
        ]
    )
    for future in futures.values():
        future.result(DEADLINE_S)

    entry = describe_topic(admin, "lag-zero")["max.compaction.lag.ms"]
    assert (entry.value, source_name(entry)) == ("0", "DYNAMIC_TOPIC_CONFIG")
    default = describe_topic(admin, "lag-default")["max.compaction.lag.ms"]
    assert (default.value, source_name(default)) == (LONG_MAX, "DEFAULT_CONFIG")

    (explained,) = kompakt_broker.explain("lag-zero")
    assert not explained["max_lag"]["enabled"] and explained["max_lag"]["deadline_ms"] is None
    assert explained["max_lag"]["deadline_detail"].startswith("max.compaction.lag.ms is 0, which disables it")

    # Records sit in the active segment: the control's real limit rolls and cleans it; 0 does not.
    for topic in ("lag-zero", "lag-one-second"):
        produce(kompakt_broker.bootstrap_servers, topic, RECORDS)
    kompakt_broker.advance_clock("1d")
    wait_until(lambda: len(kompakt_broker.records("lag-one-second")) == 1, "the 1 s limit compacted")
    # The control's active segment was force-rolled by the cleaner's maintenance pass, which
    # visits every partition in one go: lag-zero's turn came in that same pass.
    assert key_values(kompakt_broker, "lag-zero") == RECORDS
    assert kompakt_broker.partitions("lag-zero")[0]["segment_count"] == 1  # never force-rolled
    assert kompakt_broker.partitions("lag-zero")[0]["last_clean"] is None


def test_confluent_alter_to_zero(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("lag-alter", 1, 1, config={"cleanup.policy": "compact"})])[
        "lag-alter"
    ].result(DEADLINE_S)
    entry = ConfigEntry("max.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", "lag-alter", incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)
    assert describe_topic(admin, "lag-alter")["max.compaction.lag.ms"].value == "0"


def test_kafka_python_and_cli_accept_zero(kompakt_broker: InProcessBroker) -> None:
    bootstrap = kompakt_broker.bootstrap_servers
    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        kp_admin.create_topics([KpNewTopic("lag-kp", 1, 1, topic_configs={"max.compaction.lag.ms": "0"})])
        described = kp_admin.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "lag-kp", configs=None)], config_filter="all"
        )
        assert described["topic"]["lag-kp"]["max.compaction.lag.ms"]["value"] == "0"
    finally:
        kp_admin.close()

    created = run(bootstrap, "topic", "create", "lag-cli", "--config", "max.compaction.lag.ms=0")
    assert created.code == 0, created.stderr
    # 0 is "no limit", so a min.compaction.lag.ms above it is not a conflict.
    altered = run(bootstrap, "topic", "alter", "lag-cli", "--set", "min.compaction.lag.ms=3600000")
    assert altered.code == 0, altered.stderr
