# ruff: noqa: E501  (guide lines are kept whole, as printed)
"""The backup guide: OSO kafka-backup's own YAML files and commands, run through kompakt (issue 17).

``kafka-backup backup --config backup.yaml``, ``kafka-backup validate-restore --config
restore.yaml`` and ``kafka-backup restore --config restore.yaml`` become ``kompakt kafka-backup
...``; ``kompakt backup``, ``kompakt restore`` and ``kompakt validate-restore`` take the same
files. The files in ``oso/`` are OSO's, unchanged (see ``oso/SOURCES.md``); only their hosts and
paths are replaced when a test writes them out. Before issue 17, OSO's example restore file
failed with ``unknown key(s) consumer_group_strategy, ...``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kompakt.backup.config import load_backup_config, load_restore_config
from kompakt.testing.broker import InProcessBroker

from .runner import GuideRunner

pytestmark = pytest.mark.clients

OSO = Path(__file__).parent / "oso"
DEADLINE_S = 20.0
TOPICS = ("orders", "payments", "events-clicks")


def records_of(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes | None, bytes | None, list]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[bytes | None, bytes | None, list]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < expected:
            assert time.monotonic() < deadline, f"only {out}"
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            out.append((msg.key(), msg.value(), list(msg.headers() or [])))
        return out
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBroker, InProcessBroker]]:
    root = tmp_path_factory.mktemp("backup-guide")
    with InProcessBroker(root / "source") as source, InProcessBroker(root / "target") as target:
        for topic in TOPICS:
            source.create_topic(topic, **{"cleanup.policy": "compact"})
        producer = Producer({"bootstrap.servers": source.bootstrap_servers})
        for topic in TOPICS:
            producer.produce(topic, key=b"a", value=b"1")
            producer.produce(topic, key=b"b", value=b"")
            producer.produce(topic, key=b"a", value=None)  # a tombstone
        assert producer.flush(10) == 0
        yield source, target


@pytest.fixture
def guide(
    clusters: tuple[InProcessBroker, InProcessBroker],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> GuideRunner:
    runner = GuideRunner(capsys, monkeypatch)
    runner.replacements = {
        "backup.yaml": str(tmp_path / "backup.yaml"),
        "restore.yaml": str(tmp_path / "restore.yaml"),
    }
    return runner


def write(name: str, dest: Path, replacements: dict[str, str], header: str = "") -> Path:
    text = header + (OSO / name).read_text()
    for old, new in replacements.items():
        text = text.replace(old, new)
    dest.write_text(text)
    return dest


def test_osos_example_backup_and_restore_files_run_as_they_are(
    guide: GuideRunner, clusters: tuple[InProcessBroker, InProcessBroker], tmp_path: Path
) -> None:
    source, target = clusters
    store = tmp_path / "store"
    write(
        "example-backup.yaml",
        tmp_path / "backup.yaml",
        {"localhost:9092": source.bootstrap_servers, "/var/lib/kafka-backup/data": str(store)},
    )
    backed = guide.ok("kafka-backup backup --config backup.yaml")
    assert "note: backup.segment_max_interval_ms has no effect in kompakt" in backed.err
    assert "complete: 9 records" in backed.out
    write(
        "example-restore.yaml",
        tmp_path / "restore.yaml",
        {"localhost:9092": target.bootstrap_servers, "/var/lib/kafka-backup/data": str(store)},
    )
    checked = guide.ok("kafka-backup validate-restore --config restore.yaml")
    assert "ok: the restore can run" in checked.out
    assert "restore.max_concurrent_partitions has no effect in kompakt" in checked.out
    guide.ok("kompakt validate-restore --config restore.yaml")  # the same check, top level
    guide.ok("kafka-backup restore --config restore.yaml")
    for topic in TOPICS:
        restored = records_of(target.bootstrap_servers, topic, 3)
        assert [(k, v) for k, v, _ in restored] == [(b"a", b"1"), (b"b", b""), (b"a", None)]
        # include_original_offset_header: true -> OSO's headers, binary little-endian.
        for offset, (_k, _v, headers) in enumerate(restored):
            named = dict(headers)
            assert named["x-original-offset"] == offset.to_bytes(8, "little", signed=True)
            assert named["x-source-partition"] == (0).to_bytes(4, "little", signed=True)
            assert len(named["x-original-timestamp"] or b"") == 8
        configs = target.partitions(topic)
        assert configs, topic


def test_osos_basic_backup_example(
    guide: GuideRunner, clusters: tuple[InProcessBroker, InProcessBroker], tmp_path: Path
) -> None:
    source, _target = clusters
    write(
        "basic-backup.yaml",
        tmp_path / "backup.yaml",
        {"kafka:9092": source.bootstrap_servers, "/data/backups": str(tmp_path / "store")},
    )
    backed = guide.ok("kafka-backup backup --config backup.yaml")
    assert "complete: 6 records" in backed.out  # orders and payments
    described = guide.ok(
        f"kafka-backup describe --path {tmp_path / 'store'} --backup-id daily-backup --format json"
    )
    assert '"cleanup_policy": "compact"' in described.out
    assert "daily-backup" in guide.ok(f"kafka-backup list --path {tmp_path / 'store'}").out


def test_osos_restore_options_block_is_checked_and_explained(
    guide: GuideRunner, clusters: tuple[InProcessBroker, InProcessBroker], tmp_path: Path
) -> None:
    """The reference page's whole ``restore:`` block: every key is accepted, and validate-restore
    says what cannot work here (three replicas on one broker) before anything is written."""
    source, target = clusters
    store = tmp_path / "store"
    write(
        "basic-backup.yaml",
        tmp_path / "backup.yaml",
        {"kafka:9092": source.bootstrap_servers, "/data/backups": str(store)},
    )
    guide.ok("kafka-backup backup --config backup.yaml")
    header = (
        'mode: restore\nbackup_id: "daily-backup"\n'
        f"target:\n  bootstrap_servers:\n    - {target.bootstrap_servers}\n"
        f'storage:\n  backend: filesystem\n  path: "{store}"\n\n'
    )
    write(
        "restore-options.yaml",
        tmp_path / "restore.yaml",
        {"/tmp/offset-mapping.json": str(tmp_path / "offsets.json")},
        header,
    )
    checked = guide.run("kafka-backup validate-restore --config restore.yaml")
    assert checked.code == 1
    assert (
        "cannot create topic 'orders_restored': Replication factor: 3 larger than available brokers: 1"
        in checked.out
    )
    assert "consumer_groups lists groups but reset_consumer_offsets is false" in checked.out
    assert "partition mapping 0->0, 1->2" in checked.out
    assert not (tmp_path / "offsets.json").exists()


def test_every_oso_example_file_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "BACKUP_DATE": "20241201",
        "CLUSTER_NAME": "prod",
        "KAFKA_PASSWORD": "s3cret",
        "DR_KAFKA_PASSWORD": "dr-s3cret",
    }.items():
        monkeypatch.setenv(name, value)
    prod = load_backup_config(OSO / "production-s3-backup.yaml")
    assert prod.backup_id == "prod-backup-20241201" and prod.storage.prefix == "production/prod"
    assert prod.client_config["security.protocol"] == "SASL_SSL"
    assert prod.client_config["sasl.mechanism"] == "SCRAM-SHA-256"
    assert prod.client_config["sasl.password"] == "s3cret"
    assert prod.checkpoint_interval_ms == 60_000 and prod.compression_level == 5
    assert prod.source_cluster_id == "prod-us-west-2"
    pitr = load_restore_config(OSO / "pitr-restore.yaml")
    assert (pitr.time_window_start, pitr.time_window_end) == (1701424800000, 1701439200000)
    assert pitr.topic_mapping == {"orders": "orders_restored"}
    assert pitr.consumer_groups == "snapshot" and pitr.group_names == {"order-processor", "analytics-service"}
    assert pitr.oso_offset_headers  # header-based puts OSO's headers on the records
    dr = load_restore_config(OSO / "dr-restore.yaml")
    assert dr.produce_batch_size == 5000 and dr.client_config["sasl.username"] == "restore-service"
    assert any("max_concurrent_partitions has no effect" in note for note in dr.notes)
    basic = load_backup_config(OSO / "basic-backup.yaml")
    assert basic.topics.include == ("orders", "payments")
    example = load_backup_config(OSO / "example-backup.yaml")
    assert example.segment_max_bytes == 134217728 and "__transaction_state" in example.topics.exclude


def test_osos_restore_keys_act(
    guide: GuideRunner, clusters: tuple[InProcessBroker, InProcessBroker], tmp_path: Path
) -> None:
    """partition_mapping, source_partitions, topic_mapping, produce_acks, a rate limit, the manual
    consumer-group strategy and offset_report, in one restore through the protocol."""
    source, target = clusters
    source.create_topic("multi", partitions=3, **{"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": source.bootstrap_servers})
    for partition in range(3):
        producer.produce("multi", key=f"k{partition}".encode(), value=b"v", partition=partition)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": source.bootstrap_servers, "group.id": "ops", "enable.auto.commit": False}
    )
    consumer.commit(offsets=[TopicPartition("multi", 2, 1)], asynchronous=False)
    consumer.close()
    store = tmp_path / "store"
    (tmp_path / "backup.yaml").write_text(
        f"mode: backup\nbackup_id: multi-1\nsource:\n  bootstrap_servers: [{source.bootstrap_servers}]\n"
        f"  topics:\n    include: [multi]\nstorage:\n  backend: filesystem\n  path: {store}\n"
    )
    guide.ok("kafka-backup backup --config backup.yaml")
    report = tmp_path / "offsets.json"
    (tmp_path / "restore.yaml").write_text(
        f"mode: restore\nbackup_id: multi-1\ntarget:\n  bootstrap_servers: [{target.bootstrap_servers}]\n"
        f"storage:\n  backend: filesystem\n  path: {store}\n"
        "restore:\n  topic_mapping:\n    multi: multi_dr\n  source_partitions: [0, 2]\n"
        "  partition_mapping:\n    2: 1\n  produce_acks: 1\n  rate_limit_records_per_sec: 1000\n"
        "  consumer_group_strategy: manual\n  reset_consumer_offsets: true\n  consumer_groups: [ops]\n"
        f"  offset_report: {report}\n"
    )
    guide.ok("kafka-backup restore --config restore.yaml")
    assert [(k, v) for k, v, _ in records_of(target.bootstrap_servers, "multi_dr", 1)] == [(b"k0", b"v")]
    moved = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": f"c-{time.monotonic_ns()}"})
    moved.assign([TopicPartition("multi_dr", 1, OFFSET_BEGINNING)])
    deadline = time.monotonic() + DEADLINE_S
    msg = None
    while msg is None or msg.error() is not None:
        assert time.monotonic() < deadline
        msg = moved.poll(0.2)
    assert (msg.key(), msg.partition()) == (b"k2", 1)
    low, high = moved.get_watermark_offsets(TopicPartition("multi_dr", 2), timeout=10)
    moved.close()
    assert (low, high) == (0, 0)  # source partition 1 was not restored
    written = json.loads(report.read_text())
    assert written["consumer_groups"] == {"ops": {"multi_dr": {"1": 1}}}
    assert written["consumer_offsets_committed"] is False
    admin_groups = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": "ops"})
    committed = admin_groups.committed([TopicPartition("multi_dr", 1)], timeout=10)
    admin_groups.close()
    assert committed[0].offset < 0  # manual: reported, not committed
