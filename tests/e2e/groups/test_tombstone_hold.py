"""The reader hold end to end (beyond Kafka): real confluent-kafka consumers, compact-now over the
admin endpoint, and the broker's manual clock.

A group reads every value, commits, and then lags past ``delete.retention.ms`` while keys are
deleted. On a topic whose ``kompakt.tombstone.retain.for.groups`` names it, the group still
receives every tombstone when it comes back; on a topic that does not, it misses them, as with
Kafka. The report names the group, the count and the deadline before anything goes; the maximum
hold and deleting the group both release the hold.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kompakt.backup.backup import run_backup
from kompakt.backup.progress import NoProgress, PartitionProgress
from tests.backup.conftest import backup_config
from tests.support.log_dirs import cli  # noqa: F401 - the in-process CLI fixture
from tests.support.serve import BrokerProcess, start_broker

DEADLINE_S = 30.0
DELETE_RETENTION_MS = 60_000
MAX_HOLD_MS = 3_600_000
VALUES = 10  # keys k0..k9 at offsets 0..9
DELETED = [b"k3", b"k4", b"k5", b"k6"]  # their tombstones at offsets 10..13


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    process = start_broker(tmp_path_factory.mktemp("hold") / "data", "--clock", "manual")
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


def _call(broker: BrokerProcess, method: str, path: str) -> Any:
    post = method == "POST"
    request = urllib.request.Request(
        f"{broker.admin_url}{path}",
        method=method,
        data=b"{}" if post else None,
        headers={"Content-Type": "application/json"} if post else {},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback admin endpoint
        body = response.read()
    return json.loads(body) if path != "/metrics" else body.decode()


def _topic(broker: BrokerProcess, hold_for: str | None) -> str:
    name = f"hold-{uuid.uuid4().hex[:8]}"
    configs = {
        "cleanup.policy": "compact",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "kompakt.tombstone.max.hold.ms": str(MAX_HOLD_MS),
    }
    if hold_for is not None:
        configs["kompakt.tombstone.retain.for.groups"] = hold_for
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs)]).values():
        future.result(timeout=10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(VALUES):
        producer.produce(name, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert producer.flush(15) == 0
    return name


def _delete_keys(broker: BrokerProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for key in DELETED:
        producer.produce(topic, key=key, value=None, partition=0)
    producer.produce(topic, key=b"after", value=b"x", partition=0)  # offset 14
    assert producer.flush(15) == 0


def _read(
    broker: BrokerProcess, topic: str, group: str | None, commit: bool = False
) -> list[tuple[int, bytes, bytes | None]]:
    """Read from the group's committed offset (or from the start without a group) to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group or f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0)])  # OFFSET_INVALID: start at the committed offset
    out: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            assert time.monotonic() < deadline, f"did not reach the end of {topic}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        if commit and out:
            consumer.commit(offsets=[TopicPartition(topic, 0, out[-1][0] + 1)], asynchronous=False)
    finally:
        consumer.close()
    return out


def _compact(broker: BrokerProcess, *topics: str) -> None:
    for topic in topics:
        _call(broker, "POST", f"/v1/roll?topic={topic}")
        _call(broker, "POST", f"/v1/compact?topic={topic}&wait=true")


def _tombstones(broker: BrokerProcess, topic: str) -> list[bytes]:
    return [key for _, key, value in _read(broker, topic, None) if value is None]


def _risk(broker: BrokerProcess, topic: str, group: str) -> dict[str, Any]:
    (partition,) = _call(broker, "GET", f"/v1/readers?topic={topic}")["partitions"]
    (row,) = [g for g in partition["groups"] if g["group"] == group]
    return dict(row)


def test_a_lagging_group_named_in_the_hold_receives_every_tombstone(broker: BrokerProcess, cli: Any) -> None:  # noqa: F811 - the fixture
    suffix = uuid.uuid4().hex[:6]
    held_group, plain_group, max_group, deleted_group = (
        f"{n}-{suffix}" for n in ("held", "plain", "max", "gone")
    )
    held = _topic(broker, held_group)
    plain = _topic(broker, None)  # Kafka's behaviour
    capped = _topic(broker, max_group)
    released = _topic(broker, deleted_group)
    for topic, group in (
        (held, held_group),
        (plain, plain_group),
        (capped, max_group),
        (released, deleted_group),
    ):
        assert len(_read(broker, topic, group, commit=True)) == VALUES  # read every value, commit 10
        _delete_keys(broker, topic)
    _compact(broker, held, plain, capped, released)  # stamps the tombstones' delete horizons
    now = _call(broker, "GET", "/v1/clock")["now_ms"]

    # The report, before anything goes: the group, the count, the first offset and the deadline.
    risk = _risk(broker, plain, plain_group)
    assert (risk["unread_tombstones"], risk["first_unread_offset"], risk["holds"]) == (4, 10, False)
    assert now < risk["removal_ms"] <= now + DELETE_RETENTION_MS
    assert f"group {plain_group} has not read 4 tombstones of {plain}-0" in risk["detail"]
    assert "it must catch up by" in risk["detail"]
    held_risk = _risk(broker, held, held_group)
    assert held_risk["holds"] and held_risk["removal_ms"] == risk["removal_ms"] + MAX_HOLD_MS
    metrics = _call(broker, "GET", "/metrics")
    assert (
        f'kompakt_tombstones_unread_by_group{{group="{plain_group}",partition="0",topic="{plain}"}} 4.0'
        in metrics
    )
    assert "kompakt_tombstones_unread_first_removal_seconds{" in metrics

    (report,) = _call(broker, "GET", f"/v1/explain?topic={plain}")["partitions"]
    (row,) = [g for g in report["readers"]["groups"] if g["group"] == plain_group]
    assert (row["unread_tombstones"], row["removal_ms"]) == (4, risk["removal_ms"])
    readers = _call(broker, "GET", f"/v1/map/partition?topic={held}&partition=0")["partition"]["readers"]
    assert readers["hold_offset"] == VALUES and readers["holders"] == [[held_group, VALUES]]
    assert [(g["group"], g["unread_tombstones"], g["holds"]) for g in readers["groups"]] == [
        (held_group, 4, True)
    ]
    explained = cli(
        "log", "explain", str(broker.data_dir), "--bootstrap", broker.bootstrap, "--now", str(now)
    )
    assert explained.code == 0, explained.err
    assert f"group {plain_group} has not read 4 tombstones of {plain}-0" in explained.out
    listed = cli("admin", "readers", plain, "--admin-url", broker.admin_url)
    assert listed.code == 0, listed.err
    assert f"group {plain_group} has not read 4 tombstones of {plain}-0" in listed.out

    _call(broker, "POST", f"/v1/clock/advance?ms={2 * DELETE_RETENTION_MS}")  # the groups lag past it
    _compact(broker, held, plain, capped, released)
    assert sorted(_tombstones(broker, held)) == DELETED  # held for the named group
    assert _tombstones(broker, plain) == []  # gone, as in Kafka

    # The lagging groups come back: the named one sees every delete, the other one none.
    assert [(k, v) for _, k, v in _read(broker, held, held_group, commit=True)] == [
        *((k, None) for k in DELETED),
        (b"after", b"x"),
    ]
    assert [(k, v) for _, k, v in _read(broker, plain, plain_group)] == [(b"after", b"x")]
    _compact(broker, held)  # the group has read past them now: they go
    assert _tombstones(broker, held) == []

    # Deleting the named group releases its hold.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_consumer_groups([deleted_group], request_timeout=10).values():
        future.result(timeout=10)
    _compact(broker, released, capped)
    assert _tombstones(broker, released) == []
    assert sorted(_tombstones(broker, capped)) == DELETED  # its group still lags

    # The maximum hold releases what a group never comes back for.
    _call(broker, "POST", f"/v1/clock/advance?ms={MAX_HOLD_MS}")
    _compact(broker, capped)
    assert _tombstones(broker, capped) == []


class _WhileRunning(NoProgress):
    """At the start of the backup's copy (after it registered as a reader): move the clock past
    the horizon and compact, as a slow backup would experience it."""

    def __init__(self, broker: BrokerProcess, topic: str, group: str) -> None:
        super().__init__()
        self.broker, self.topic, self.group = broker, topic, group
        self.seen: dict[str, Any] = {}

    def begin(self, partitions: list[PartitionProgress]) -> None:
        (partition,) = _call(self.broker, "GET", f"/v1/readers?topic={self.topic}")["partitions"]
        self.seen["holders"] = partition["holders"]
        _call(self.broker, "POST", f"/v1/clock/advance?ms={2 * DELETE_RETENTION_MS}")
        _compact(self.broker, self.topic)
        self.seen["tombstones"] = sorted(_tombstones(self.broker, self.topic))


def test_a_running_backup_holds_the_deletes_it_has_not_copied(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = _topic(broker, None)  # no group named: only the backup holds
    _delete_keys(broker, topic)
    _compact(broker, topic)  # stamps the horizons
    backup_id = f"b{uuid.uuid4().hex[:6]}"
    hook = _WhileRunning(broker, topic, f"kompakt-backup-{backup_id}")
    result = run_backup(backup_config(broker, tmp_path / "store", backup_id, topics=[topic]), progress=hook)
    assert hook.seen["holders"] == [{"group": f"kompakt-backup-{backup_id}", "offset": 0}]
    assert hook.seen["tombstones"] == DELETED  # past the horizon, kept for the backup
    entry = result.manifest.partitions[(topic, 0)]
    assert entry.tombstones == len(DELETED)  # the backup copied every delete
    (partition,) = _call(broker, "GET", f"/v1/readers?topic={topic}")["partitions"]
    assert partition["holders"] == []  # the run is over: its group is gone
    _compact(broker, topic)
    assert _tombstones(broker, topic) == []


def test_the_hold_configs_go_through_alter_and_describe_configs(broker: BrokerProcess) -> None:
    topic = _topic(broker, None)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "kompakt.tombstone.retain.for.groups", "a,b", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=10)
    (entries,) = [
        f.result(timeout=10)
        for f in admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    ]
    assert entries["kompakt.tombstone.retain.for.groups"].value == "a,b"
    assert entries["kompakt.tombstone.max.hold.ms"].value == str(MAX_HOLD_MS)
    (partition,) = _call(broker, "GET", f"/v1/readers?topic={topic}")["partitions"]
    assert partition["retain_for_groups"] == ["a", "b"]
    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("kompakt.tombstone.max.hold.ms", "-5", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    with pytest.raises(Exception, match="kompakt.tombstone.max.hold.ms"):
        for future in admin.incremental_alter_configs([bad]).values():
            future.result(timeout=10)
