"""The admin APIs of issue 16 through real admin clients.

confluent-kafka (librdkafka 2.16): DeleteRecords, ListGroups v5 with a types filter, DescribeGroups
and DescribeCluster with authorized operations, broker-resource AlterConfigs of a Kafka config
kompakt does not act on, and ``message.format.version`` on CreateTopics and AlterConfigs.
kafka-python 3.0: OffsetDelete (confluent-kafka's Python binding has no call for it) and the admin
removal of a static member (LeaveGroup v3+ by instance id).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import MemberToRemove

from tests.support.serve import BrokerProcess, start_broker

pytestmark = pytest.mark.clients

TIMEOUT_S = 20.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker: BrokerProcess, name: str, partitions: int = 1, **config: str) -> None:
    client = admin(broker)  # held: a collected AdminClient destroys its pending requests
    client.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(TIMEOUT_S)


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, key=f"k{i % 4}".encode(), value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def wait_for(predicate: Callable[[], bool], consumers: list[Consumer]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, "not reached before the deadline"
        for c in consumers:
            c.poll(0.05)


def test_delete_records_moves_the_low_watermark(groups_broker: BrokerProcess) -> None:
    topic, compacted = unique("dr"), unique("dr-compact")
    create(groups_broker, topic)
    create(groups_broker, compacted, **{"cleanup.policy": "compact"})  # Kafka refuses; the issue wants it
    produce(groups_broker, topic, 10)
    produce(groups_broker, compacted, 10)
    client = admin(groups_broker)
    futures = client.delete_records([TopicPartition(topic, 0, 4), TopicPartition(compacted, 0, 7)])
    assert sorted(f.result(TIMEOUT_S).low_watermark for f in futures.values()) == [4, 7]
    consumer = Consumer(
        {
            "bootstrap.servers": groups_broker.bootstrap,
            "group.id": unique("dr-reader"),
            "auto.offset.reset": "earliest",
        }
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S) == (4, 10)
        assert consumer.get_watermark_offsets(TopicPartition(compacted, 0), timeout=TIMEOUT_S) == (7, 10)
        consumer.assign([TopicPartition(topic, 0, 0)])  # below the new start: reset to it
        first = None
        deadline = time.monotonic() + TIMEOUT_S
        while first is None and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                first = msg.offset()
        assert first == 4
    finally:
        consumer.close()
    above = client.delete_records([TopicPartition(topic, 0, 99)])
    with pytest.raises(KafkaException) as info:
        next(iter(above.values())).result(TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_list_groups_with_types_and_describe_with_operations(groups_broker: BrokerProcess) -> None:
    topic, group = unique("lg"), unique("lg-group")
    create(groups_broker, topic)
    consumer = Consumer({"bootstrap.servers": groups_broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        wait_for(lambda: bool(consumer.assignment()), [consumer])
        client = admin(groups_broker)
        classic = client.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(TIMEOUT_S)
        listed = {g.group_id: g for g in classic.valid}
        assert listed[group].type == ConsumerGroupType.CLASSIC
        modern = client.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(TIMEOUT_S)
        assert group not in {g.group_id for g in modern.valid}
        (described,) = client.describe_consumer_groups([group], include_authorized_operations=True).values()
        operations = set(described.result(TIMEOUT_S).authorized_operations)
        assert operations == {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
        cluster = client.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
        assert AclOperation.IDEMPOTENT_WRITE in set(cluster.authorized_operations)
    finally:
        consumer.close()


def test_offset_delete_through_kafka_python(groups_broker: BrokerProcess) -> None:
    subscribed, other, group = unique("od-a"), unique("od-b"), unique("od-group")
    create(groups_broker, subscribed)
    create(groups_broker, other)
    consumer = Consumer(
        {"bootstrap.servers": groups_broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.subscribe([subscribed])
    client = KafkaAdminClient(bootstrap_servers=groups_broker.bootstrap)
    try:
        wait_for(lambda: bool(consumer.assignment()), [consumer])
        consumer.commit(
            offsets=[TopicPartition(subscribed, 0, 3), TopicPartition(other, 0, 5)], asynchronous=False
        )
        results = client.delete_group_offsets(
            group, [KafkaPythonPartition(subscribed, 0), KafkaPythonPartition(other, 0)]
        )
        errors = {tp.topic: error.__name__ for tp, error in results.items()}
        assert errors == {subscribed: "GroupSubscribedToTopicError", other: "NoError"}
        remaining = client.list_group_offsets(group)[group]
        assert {tp.topic: meta.offset for tp, meta in remaining.items()} == {subscribed: 3}
    finally:
        consumer.close()
        client.close()


def test_admin_removes_a_static_member_by_instance_id(groups_broker: BrokerProcess) -> None:
    topic, group = unique("static-rm"), unique("static-rm-group")
    create(groups_broker, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": groups_broker.bootstrap,
            "group.id": group,
            "group.instance.id": "pod-1",
            "session.timeout.ms": 30_000,
        }
    )
    consumer.subscribe([topic])
    client = KafkaAdminClient(bootstrap_servers=groups_broker.bootstrap)
    try:
        wait_for(lambda: bool(consumer.assignment()), [consumer])
    finally:
        consumer.close()  # static: no LeaveGroup, the member stays until its session runs out
    try:
        before = client.describe_groups([group])[group]
        assert [m["group_instance_id"] for m in before["members"]] == ["pod-1"]
        removed = client.remove_group_members(
            group, [MemberToRemove(group_instance_id="pod-1", reason="scaled in")]
        )
        assert [error.__name__ for error in removed.values()] == ["NoError"]
        after = client.describe_groups([group])[group]
        assert (after["group_state"], after["members"]) == ("Empty", [])
    finally:
        client.close()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
@pytest.mark.parametrize("incremental", [True, False])
def test_broker_alter_of_sasl_kerberos_min_time_before_relogin(
    groups_broker: BrokerProcess, incremental: bool
) -> None:
    client = admin(groups_broker)
    name, value = "sasl.kerberos.min.time.before.relogin", "58000" if incremental else "59000"
    if incremental:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
        client.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    else:
        resource = ConfigResource(ResourceType.BROKER, "0", set_config={name: value})
        client.alter_configs([resource])[resource].result(TIMEOUT_S)
    probe = ConfigResource(ResourceType.BROKER, "0")
    described = client.describe_configs([probe])[probe].result(TIMEOUT_S)[name]
    assert (described.value, described.source) == (value, ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_message_format_version_on_create_topics_and_alter_configs(groups_broker: BrokerProcess) -> None:
    topic = unique("mfv")
    create(groups_broker, topic, **{"message.format.version": "0.10.0"})
    client = admin(groups_broker)
    entry = ConfigEntry("message.format.version", "2.8", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    client.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    probe = ConfigResource(ResourceType.TOPIC, topic)
    described = client.describe_configs([probe])[probe].result(TIMEOUT_S)["message.format.version"]
    assert (described.value, described.source) == ("2.8", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    produce(groups_broker, topic, 3)  # ignored: records are still written and read as batches v2
    consumer = Consumer({"bootstrap.servers": groups_broker.bootstrap, "group.id": unique("mfv-reader")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S) == (0, 3)
    finally:
        consumer.close()


def test_serve_names_the_inert_kafka_configs_in_one_warning_line(tmp_path: Path) -> None:
    broker = start_broker(
        tmp_path / "data",
        *("--override", "num.io.threads=16", "--override", "process.roles=broker,controller"),
        *("--override", "log.cleaner.threads=1", "--override", "group.max.size=1"),
    )
    topic = unique("max-size")
    try:
        client = admin(broker)
        probe = ConfigResource(ResourceType.BROKER, "0")
        entry = client.describe_configs([probe])[probe].result(TIMEOUT_S)["num.io.threads"]
        assert (entry.value, entry.source) == ("16", ConfigSource.STATIC_BROKER_CONFIG.value)
        create(broker, topic, 2)
        first = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic})
        second = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic})
        try:
            first.subscribe([topic])
            wait_for(lambda: bool(first.assignment()), [first])
            second.subscribe([topic])  # group.max.size is one kompakt acts on
            errors: list[KafkaError] = []
            deadline = time.monotonic() + TIMEOUT_S
            while not errors and time.monotonic() < deadline:
                first.poll(0.05)
                msg = second.poll(0.1)
                if msg is not None and msg.error() is not None:
                    errors.append(msg.error())
            assert [e.code() for e in errors] == [KafkaError.GROUP_MAX_SIZE_REACHED]
        finally:
            first.close()
            second.close()
    finally:
        assert broker.stop() == 0
    warnings = [line for line in broker.stderr_path.read_text().splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: kompakt accepts but does not act on these Kafka broker configs: num.io.threads, "
        "process.roles (DescribeConfigs documents each one)"
    ]
