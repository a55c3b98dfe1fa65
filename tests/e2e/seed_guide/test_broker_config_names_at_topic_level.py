"""Issue 8 item 1: the compaction guide's broker config names at topic level, through real clients.

The guide creates a topic with ``--config log.cleaner.min.cleanable.ratio=0.3`` and alters one with
``--add-config log.cleaner.min.compaction.lag.ms=3600000``. Both are broker names: the broker
answers INVALID_CONFIG, and its message names the topic-level config to use instead. (The CLI
path is covered in ``tests/cli``; here the same requests come from confluent-kafka and
kafka-python, and from ``kompakt topic`` against the in-process broker.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.cimpl import NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidConfigurationError

from kompakt.testing.broker import InProcessBroker
from tests.support.cli import run

from .conftest import (
    DEADLINE_S,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    describe_topic,
    source_name,
)

pytestmark = pytest.mark.clients

RATIO_HINT = "did you mean min.cleanable.dirty.ratio?"
LAG_HINT = "did you mean min.compaction.lag.ms?"


@pytest.fixture
def kp_admin(kompakt_broker: InProcessBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kompakt_broker.bootstrap_servers)
    yield client
    client.close()


def confluent_error(future: object) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(DEADLINE_S)  # type: ignore[attr-defined]
    error: KafkaError = raised.value.args[0]
    return error


def test_confluent_create_with_the_guides_ratio_name(admin: AdminClient) -> None:
    topic = "guide-create"
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"log.cleaner.min.cleanable.ratio": "0.3"})])
    error = confluent_error(futures[topic])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Unknown topic config name: log.cleaner.min.cleanable.ratio" in error.str()
    assert RATIO_HINT in error.str()
    assert topic not in admin.list_topics(timeout=DEADLINE_S).topics

    # The name the hint gives works, and is described back as a topic override.
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"min.cleanable.dirty.ratio": "0.3"})])
    futures[topic].result(DEADLINE_S)
    entry = describe_topic(admin, topic)["min.cleanable.dirty.ratio"]
    assert (entry.value, source_name(entry)) == ("0.3", "DYNAMIC_TOPIC_CONFIG")


def test_confluent_alter_with_the_guides_lag_name(admin: AdminClient) -> None:
    topic = "guide-alter"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)

    entry = ConfigEntry(
        "log.cleaner.min.compaction.lag.ms", "3600000", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    error = confluent_error(admin.incremental_alter_configs([resource])[resource])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert LAG_HINT in error.str()

    assert describe_topic(admin, topic)["min.compaction.lag.ms"].value == "0"  # nothing changed


def test_kafka_python_create_and_alter_with_the_guides_names(kp_admin: KafkaAdminClient) -> None:
    with pytest.raises(InvalidConfigurationError) as raised:
        kp_admin.create_topics(
            [KpNewTopic("guide-kp", 1, 1, topic_configs={"log.cleaner.min.cleanable.ratio": "0.3"})]
        )
    assert RATIO_HINT in str(raised.value)

    kp_admin.create_topics([KpNewTopic("guide-kp", 1, 1)])
    # kafka-python checks names against DescribeConfigs itself unless told not to; the broker's
    # own answer is what the guide's user sees from kafka-configs.sh.
    result = kp_admin.alter_configs(
        [
            KpConfigResource(
                ConfigResourceType.TOPIC, "guide-kp", configs={"log.cleaner.min.compaction.lag.ms": "3600000"}
            )
        ],
        raise_on_unknown=False,
    )
    message = result["topic"]["guide-kp"]
    assert message.startswith("[Error 40] InvalidConfigurationError: ")
    assert "Unknown topic config name: log.cleaner.min.compaction.lag.ms" in message
    assert LAG_HINT in message


def test_cli_against_the_in_process_broker(kompakt_broker: InProcessBroker) -> None:
    bootstrap = kompakt_broker.bootstrap_servers
    created = run(
        bootstrap, "topic", "create", "guide-cli", "--config", "log.cleaner.min.cleanable.ratio=0.3"
    )
    assert created.code == 1
    assert "INVALID_CONFIG" in created.stderr and RATIO_HINT in created.stderr

    assert run(bootstrap, "topic", "create", "guide-cli").code == 0
    altered = run(
        bootstrap, "topic", "alter", "guide-cli", "--set", "log.cleaner.min.compaction.lag.ms=3600000"
    )
    assert altered.code == 1
    assert "INVALID_CONFIG" in altered.stderr and LAG_HINT in altered.stderr
