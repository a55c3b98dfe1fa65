"""Kafka 4's metadata log read offline (issue 31, item 1).

``fixtures/kafka41_cluster`` was written by a real Apache Kafka 4.1.2 node (see its README): its
``describe_configs.json`` is what that live broker's DescribeConfigs returned just before the clean
shutdown whose directory this is. The reader, given only the directory, must find the same topics,
topic ids, partition counts and overrides, with the changes made after the newest snapshot (a topic
created, a config removed, a topic deleted) applied in order. The hand-written logs check the rules
one by one, and that damage is reported and skipped, never a crash.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.log.cluster_metadata import (
    CLUSTER_DEFAULT_ORIGIN,
    list_snapshots,
    read_cluster_metadata,
)
from kompakt.log.cluster_metadata_records import (
    MetadataRecordError,
    decode_control_record,
    decode_metadata_record,
)
from tests.support.profiles import examples

from . import metadata_log_helpers as m

FIXTURE = Path(__file__).parent / "fixtures" / "kafka41_cluster"
LOGS = FIXTURE / "logs"
DESCRIBED: dict[str, Any] = json.loads((FIXTURE / "describe_configs.json").read_text())

A = "AAAAAAAAAAAAAAAAAAAAAQ"
B = "AAAAAAAAAAAAAAAAAAAAAg"


# --------------------------------------------------------------------------------------------
# The Kafka-written directory against its live broker's DescribeConfigs


def test_topics_ids_and_partitions_are_the_live_brokers() -> None:
    meta = read_cluster_metadata(LOGS)
    assert meta is not None
    assert meta.problems == ()
    described = DESCRIBED["topics"]
    assert sorted(meta.topics) == sorted(described)
    for name, topic in meta.topics.items():
        assert topic.topic_id == described[name]["topic_id"], name
        assert topic.partitions == described[name]["partitions"], name
        assert all(replicas == (1,) for replicas in topic.replicas.values())


def test_topic_overrides_are_the_live_brokers_dynamic_topic_configs() -> None:
    meta = read_cluster_metadata(LOGS)
    assert meta is not None
    for name, topic in meta.topics.items():
        expected = {
            k: v["value"]
            for k, v in DESCRIBED["topics"][name]["configs"].items()
            if v["source"] == "DYNAMIC_TOPIC_CONFIG"
        }
        assert dict(topic.configs) == expected, name


def test_broker_overrides_are_the_live_brokers_dynamic_broker_configs() -> None:
    meta = read_cluster_metadata(LOGS)
    assert meta is not None
    assert meta.node_id == 1
    broker = DESCRIBED["broker"]
    by_source = {
        source: {k: v["value"] for k, v in broker.items() if v["source"] == source}
        for source in ("DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_BROKER_CONFIG")
    }
    # A value set at both levels shows the broker's own in DescribeConfigs; the cluster default
    # under it is in the metadata log, and is what the default layer must hold.
    cluster_default = dict(meta.broker_configs[""])
    assert {k: v for k, v in cluster_default.items() if k not in by_source["DYNAMIC_BROKER_CONFIG"]} == (
        by_source["DYNAMIC_DEFAULT_BROKER_CONFIG"]
    )
    assert cluster_default["log.cleaner.delete.retention.ms"] == "3600000"
    assert dict(meta.broker_configs["1"]) == by_source["DYNAMIC_BROKER_CONFIG"]
    effective = meta.broker_overrides()
    assert effective["log.cleaner.delete.retention.ms"] == ("7200000", "metadata log (broker 1)")
    assert effective["log.cleanup.policy"] == ("compact", CLUSTER_DEFAULT_ORIGIN)
    assert "log.retention.ms" not in effective  # set, then removed (a null ConfigRecord)


def test_changes_after_the_newest_snapshot_are_applied_in_order() -> None:
    meta = read_cluster_metadata(LOGS)
    assert meta is not None
    snapshots = list_snapshots(LOGS / "__cluster_metadata-0")
    assert meta.snapshot == snapshots[-1]
    assert meta.end_offset > meta.snapshot.end_offset
    assert "late" in meta.topics  # created after the snapshot
    assert "gone" not in meta.topics  # deleted after the snapshot
    assert "gone" in meta.deleted_topics.values()
    assert "min.compaction.lag.ms" not in meta.topics["customers"].configs  # removed after it
    assert meta.topics["customers"].configs["min.cleanable.dirty.ratio"] == "0.2"  # set after it


def test_a_damaged_newest_snapshot_falls_back_to_the_one_before(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(LOGS, logs)
    newest = list_snapshots(logs / "__cluster_metadata-0")[-1]
    data = bytearray(newest.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.path.write_bytes(bytes(data))
    meta = read_cluster_metadata(logs)
    assert meta is not None
    assert meta.snapshot is not None and meta.snapshot.end_offset < newest.end_offset
    assert any(newest.path.name in p and "not usable" in p for p in meta.problems)
    assert meta.topics == read_cluster_metadata(LOGS).topics  # type: ignore[union-attr]


def test_a_directory_without_a_metadata_log_has_no_cluster_metadata(tmp_path: Path) -> None:
    assert read_cluster_metadata(tmp_path) is None


def test_the_fixtures_records_all_decode() -> None:
    """Every record of the Kafka-written log and snapshots decodes with the declared schemas."""
    from kompakt.records.batch import iter_batches
    from kompakt.records.record import decode_records

    files = sorted((LOGS / "__cluster_metadata-0").glob("*.log")) + [
        s.path for s in list_snapshots(LOGS / "__cluster_metadata-0")
    ]
    types: set[str] = set()
    for path in files:
        for view in iter_batches(path.read_bytes()):
            for record in decode_records(view):
                assert record.value is not None
                if view.is_control:
                    assert record.key is not None
                    ctype = struct.unpack(">hh", record.key)[1]
                    decoded = decode_control_record(ctype, record.value)
                    assert decoded is not None, ctype
                    types.add(decoded["type"])
                    continue
                parsed = decode_metadata_record(record.value)
                assert parsed.data is not None, parsed
                types.add(parsed.type_name)
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "REMOVE_TOPIC_RECORD"} <= types
    assert {"SnapshotHeaderRecord", "SnapshotFooterRecord", "LeaderChangeMessage"} <= types


# --------------------------------------------------------------------------------------------
# The rules, on hand-written logs


def read(data_dir: Path) -> Any:
    meta = read_cluster_metadata(data_dir)
    assert meta is not None
    return meta


def test_removals_and_a_recreated_topic_in_order(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    m.write_log(
        tmp_path,
        [
            [
                m.topic_record("t", A),
                m.topic_config("t", "cleanup.policy", "compact"),
                m.partition_record(A, 0),
            ],
            [m.topic_config("t", "segment.bytes", "1048576"), m.topic_config("t", "segment.bytes", None)],
            [m.remove_topic(A)],
            [m.topic_record("t", B), m.partition_record(B, 0), m.partition_record(B, 1)],
            [m.topic_config("t", "retention.ms", "1000")],
        ],
    )
    meta = read(tmp_path)
    assert meta.problems == ()
    topic = meta.topics["t"]
    assert (topic.topic_id, topic.partitions) == (B, 2)
    assert dict(topic.configs) == {"retention.ms": "1000"}  # the deleted topic's configs went with it
    assert meta.deleted_topics == {A: "t"}
    assert meta.stray_reason("t", 0, A) is not None
    assert meta.stray_reason("t", 1, B) is None


def test_a_snapshot_and_the_log_after_it(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    # The log from offset 0 says x=1; the snapshot at offset 3 says x=2; the log after it x=3.
    m.write_log(
        tmp_path,
        [
            [
                m.topic_record("t", A),
                m.partition_record(A, 0),
                m.broker_config("", "log.cleanup.policy", "delete"),
            ],
            [m.broker_config("", "log.cleanup.policy", "compact,delete")],
        ],
    )
    m.write_snapshot(
        tmp_path,
        3,
        [
            m.topic_record("t", A),
            m.partition_record(A, 0),
            m.broker_config("", "log.cleanup.policy", "compact"),
        ],
    )
    meta = read(tmp_path)
    assert meta.snapshot is not None and meta.snapshot.end_offset == 3
    assert meta.broker_configs[""]["log.cleanup.policy"] == "compact,delete"  # offset 3, after the snapshot
    assert meta.end_offset == 4


def test_an_unfinished_snapshot_is_not_used(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    m.write_log(tmp_path, [[m.topic_record("t", A), m.partition_record(A, 0)]])
    m.write_snapshot(tmp_path, 2, [m.topic_record("other", B)], footer=False)
    meta = read(tmp_path)
    assert meta.snapshot is None
    assert sorted(meta.topics) == ["t"]
    assert any("no SnapshotFooter" in p for p in meta.problems)


def test_metadata_transactions_aborted_are_dropped(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    m.write_log(
        tmp_path,
        [
            [m.begin_transaction(), m.topic_record("kept", A), m.partition_record(A, 0)],
            [m.end_transaction()],
            [m.begin_transaction(), m.topic_record("aborted", B)],
            [m.abort_transaction()],
            [m.begin_transaction(), m.topic_config("kept", "retention.ms", "5")],
        ],
    )
    meta = read(tmp_path)
    assert sorted(meta.topics) == ["kept"]
    assert dict(meta.topics["kept"].configs) == {}  # the last transaction never ended
    assert any("inside a metadata transaction" in p for p in meta.problems)


def test_unknown_types_and_versions_are_reported_and_skipped(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    m.write_log(
        tmp_path,
        [
            [
                m.topic_record("t", A),
                m.frame(99, 0, b"\x00whatever"),  # a record type Kafka 4.1 does not have
                m.frame(4, 7, b"\x02\x02t\x03ab\x02x\x00"),  # ConfigRecord v7: fields unknown
                m.partition_record(A, 0),
                m.no_op(),
            ]
        ],
    )
    meta = read(tmp_path)
    assert meta.topics["t"].partitions == 1
    assert dict(meta.topics["t"].configs) == {}
    assert any("type 99" in p for p in meta.problems)
    assert any("CONFIG_RECORD version 7" in p for p in meta.problems)


def test_hostile_lengths_allocate_nothing_and_are_reported(tmp_path: Path) -> None:
    huge = m.uvarint(2**31)
    m.write_meta_properties(tmp_path)
    m.write_log(
        tmp_path,
        [
            [
                m.frame(4, 0, b"\x02" + huge + b"t"),  # a string claiming 2 GiB
                m.frame(3, 0, struct.pack(">i", 0) + m.uuid_bytes(A) + huge),  # a 2^31-element array
                m.frame(2, 0, m.cstring("t")),  # torn: no uuid
                m.frame(2, 0, m.cstring("t") + m.uuid_bytes(A) + m.NO_TAGS + b"junk"),
                m.topic_record("ok", B),
            ]
        ],
    )
    meta = read(tmp_path)
    assert sorted(meta.topics) == ["ok"]
    assert len([p for p in meta.problems if "unreadable record" in p]) == 4


def test_a_torn_log_tail_keeps_what_came_before(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    path = m.write_log(
        tmp_path, [[m.topic_record("t", A), m.partition_record(A, 0)], [m.topic_record("u", B)]]
    )
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    meta = read(tmp_path)
    assert sorted(meta.topics) == ["t"]
    assert any("not a whole batch" in p for p in meta.problems)


def test_a_corrupt_batch_ends_the_file_and_is_reported(tmp_path: Path) -> None:
    m.write_meta_properties(tmp_path)
    path = m.write_log(tmp_path, [[m.topic_record("t", A)], [m.topic_record("u", B)]])
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x55
    path.write_bytes(bytes(data))
    meta = read(tmp_path)
    assert sorted(meta.topics) == ["t"]
    assert any("CRC mismatch" in p for p in meta.problems)


def test_frame_version_zero_is_refused() -> None:
    with pytest.raises(MetadataRecordError, match="frame version 0"):
        decode_metadata_record(b"\x00\x02\x00")


@settings(max_examples=examples(200))
@given(st.binary(max_size=64))
def test_any_record_value_decodes_or_fails_with_the_format_error(value: bytes) -> None:
    with contextlib.suppress(MetadataRecordError):
        decode_metadata_record(value)


@settings(max_examples=examples(60))
@given(st.lists(st.tuples(st.integers(0, 30), st.binary(max_size=40)), max_size=12))
def test_any_framed_record_is_applied_or_reported(
    tmp_path_factory: Any, records: list[tuple[int, bytes]]
) -> None:
    data_dir = tmp_path_factory.mktemp("fuzz")
    m.write_meta_properties(data_dir)
    m.write_log(data_dir, [[m.frame(key, 0, body) for key, body in records] or [m.no_op()]])
    meta = read(data_dir)
    assert isinstance(meta.problems, tuple)
