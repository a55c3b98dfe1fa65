"""Backup and restore through a running kompakt broker: compacted topics with gaps, tombstones,
empty values, configs, consumer groups, incremental runs, the time window and erasure."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kompakt.backup.backup import run_backup
from kompakt.backup.kafka import KAFKA_ADMIN
from kompakt.backup.manifest import load_manifest
from kompakt.backup.restore import ORIGINAL_OFFSET_HEADER, run_restore
from kompakt.backup.storage import FilesystemStorage
from tests.support.serve import BrokerProcess

from .conftest import (
    COMPACT_CONFIGS,
    CompactedSource,
    admin,
    backup_config,
    consume_all,
    create_topic,
    latest_by_key,
    produce,
    restore_config,
)

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]


def _topic_configs(broker: BrokerProcess, topic: str) -> dict[str, str]:
    client = admin(broker)
    futures = client.describe_configs([KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.TOPIC, topic)])
    entries = next(iter(futures.values())).result(timeout=10)
    return {name: e.value for name, e in entries.items() if not e.is_default}


def _commit(broker: BrokerProcess, group: str, topic: str, offset: int) -> None:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


def _committed(broker: BrokerProcess, group: str, topic: str) -> int:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    finally:
        consumer.close()


def test_compacted_round_trip(compacted: CompactedSource, tmp_path: Path) -> None:
    broker, source = compacted.broker, compacted.records["rt-src"]
    anchor = source[len(source) // 2]
    _commit(broker, "rt-group", "rt-src", anchor.offset)

    result = run_backup(backup_config(broker, tmp_path, "rt", topics=["rt-src"]))
    manifest = result.manifest
    assert manifest.status == "complete"
    entry = manifest.partitions[("rt-src", 0)]
    assert entry.records == len(source)
    assert entry.gaps, "a compacted topic has gaps"
    covered = {r.offset for r in source} | {o for a, b in entry.gaps for o in range(a, b + 1)}
    assert covered == set(range(entry.start_offset, entry.end_offset))
    topic = manifest.topics["rt-src"]
    assert topic.configs == COMPACT_CONFIGS
    assert topic.cleanup_policy == "compact"
    assert manifest.consumer_groups["rt-group"] == {"rt-src": {"0": anchor.offset}}

    restored = run_restore(
        restore_config(
            broker,
            tmp_path,
            "rt",
            restore={
                "topic_mapping": {"rt-src": "rt-dst"},
                "consumer_groups": "snapshot",
                "record_original_offsets": True,
            },
        )
    )
    assert restored.records == len(source)
    target = consume_all(broker, "rt-dst")
    want = latest_by_key(source)
    assert latest_by_key(target) == want
    assert want[b"k3"] is None and want[b"k4"] == b""  # a tombstone and an empty value survived
    assert [r.key for r in target if r.value is None] == [r.key for r in source if r.value is None]
    assert {r.key for r in target if r.value == b""} == {b"k4", b"k6"}
    for got, orig in zip(target, source, strict=True):
        assert (got.key, got.value, got.timestamp) == (orig.key, orig.value, orig.timestamp)
        assert dict(got.headers)[ORIGINAL_OFFSET_HEADER] == str(orig.offset).encode()
        assert [h for h in got.headers if h[0] != ORIGINAL_OFFSET_HEADER] == list(orig.headers)
    assert _topic_configs(broker, "rt-dst") == COMPACT_CONFIGS
    # The group resumes at the same record, at its new offset.
    new_offset = _committed(broker, "rt-group", "rt-dst")
    resumed = next(r for r in target if r.offset == new_offset)
    assert dict(resumed.headers)[ORIGINAL_OFFSET_HEADER] == str(anchor.offset).encode()


def test_incremental_backup_copies_only_new_records(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "inc", 1)
    produce(broker, "inc", [(f"a{i}".encode(), b"x" * 10) for i in range(50)])
    config = backup_config(broker, tmp_path, "inc", topics=["inc"], backup={"compression": "lz4"})
    first = run_backup(config)
    assert (first.run.records, first.run.run) == (50, 1)
    again = run_backup(config)
    assert again.run.records == 0
    produce(broker, "inc", [(f"b{i}".encode(), b"y") for i in range(30)])
    third = run_backup(config)
    assert (third.run.records, third.run.run) == (30, 3)
    manifest = load_manifest(FilesystemStorage(tmp_path), "inc")
    entry = manifest.partitions[("inc", 0)]
    assert [(f.first_offset, f.last_offset, f.run) for f in entry.files] == [(0, 49, 1), (50, 79, 3)]
    assert (entry.records, entry.end_offset, entry.gaps) == (80, 80, [])
    assert [r.ranges["inc-0"] for r in manifest.runs] == [[0, 50], [50, 50], [50, 80]]


def test_point_in_time_and_erasure(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "pit", 1)
    base = 1_700_000_000_000
    produce(broker, "pit", [(f"u{i % 5}".encode(), f"v{i}".encode(), base + i * 1000) for i in range(40)])
    run_backup(backup_config(broker, tmp_path, "pit", topics=["pit"], backup={"compression": "none"}))

    run_restore(
        restore_config(
            broker,
            tmp_path,
            "pit",
            restore={
                "topic_mapping": {"pit": "pit-window"},
                "time_window_start": base + 10_000,
                "time_window_end": base + 19_000,
            },
        )
    )
    window = consume_all(broker, "pit-window")
    assert [r.timestamp for r in window] == [base + i * 1000 for i in range(10, 20)]

    result = run_restore(
        restore_config(
            broker,
            tmp_path,
            "pit",
            restore={
                "topic_mapping": {"pit": "pit-drop"},
                "erasure": {"keys": ["u1", "u3"], "on_match": "drop"},
            },
        )
    )
    dropped = consume_all(broker, "pit-drop")
    assert result.counts.erased == 16
    assert {r.key for r in dropped} == {b"u0", b"u2", b"u4"} and len(dropped) == 24

    keys_file = tmp_path / "erase.txt"
    keys_file.write_text("# erasure requests\nu2\n")
    run_restore(
        restore_config(
            broker,
            tmp_path,
            "pit",
            restore={
                "topic_mapping": {"pit": "pit-tomb"},
                "erasure": {"keys_file": str(keys_file), "on_match": "tombstone"},
            },
        )
    )
    tomb = consume_all(broker, "pit-tomb")
    u2 = [r for r in tomb if r.key == b"u2"]
    assert len(u2) == 1 and u2[0].value is None and u2[0].headers == ()
    assert len(tomb) == 40 - 8 + 1
