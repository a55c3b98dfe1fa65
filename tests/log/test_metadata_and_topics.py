"""partition.metadata, meta.properties, the clean-shutdown marker and the topic store."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.errors import CorruptCheckpointError, InvalidTopicError
from kompakt.log.metadata_files import (
    MetaProperties,
    kafka_to_uuid,
    random_kafka_uuid,
    read_clean_shutdown,
    read_meta_properties,
    read_partition_metadata,
    remove_clean_shutdown,
    uuid_to_kafka,
    write_clean_shutdown,
    write_meta_properties,
    write_partition_metadata,
)
from kompakt.log.topic_store import CorruptTopicStoreError, TopicMetadata, TopicStore, validate_topic_name


@given(st.uuids())
def test_kafka_uuid_round_trip(value: uuid.UUID) -> None:
    text = uuid_to_kafka(value)
    assert len(text) == 22 and "=" not in text
    assert kafka_to_uuid(text) == value


def test_kafka_uuid_known_value_and_errors() -> None:
    assert uuid_to_kafka(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_to_kafka(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    for bad in ("short", "A" * 23, "!" * 22):
        with pytest.raises(ValueError):
            kafka_to_uuid(bad)
    fresh = random_kafka_uuid()
    assert fresh.int > 1 and not uuid_to_kafka(fresh).startswith("-")


def test_partition_metadata(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path) is None
    topic_id = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    write_partition_metadata(tmp_path, topic_id)
    assert (
        tmp_path / "partition.metadata"
    ).read_text() == f"version: 0\ntopic_id: {uuid_to_kafka(topic_id)}\n"
    assert read_partition_metadata(tmp_path) == topic_id
    with pytest.raises(ValueError):
        write_partition_metadata(tmp_path, uuid.UUID(int=0))


@pytest.mark.parametrize(
    "content",
    [
        "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "version: 0\n",
        "version: 0\ntopic: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "version: 0\ntopic_id: nope\n",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
    ],
)
def test_bad_partition_metadata(tmp_path: Path, content: str) -> None:
    (tmp_path / "partition.metadata").write_text(content)
    with pytest.raises(CorruptCheckpointError, match="partition.metadata"):
        read_partition_metadata(tmp_path)


def test_meta_properties(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None
    meta = MetaProperties(cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=0, directory_id=uuid.UUID(int=12345))
    write_meta_properties(tmp_path, meta)
    text = (tmp_path / "meta.properties").read_text()
    assert "version=1\n" in text and "cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n" in text and "node.id=0\n" in text
    assert read_meta_properties(tmp_path) == meta
    (tmp_path / "meta.properties").write_text("#\n#Tue\nnode.id=2\nversion=1\ncluster.id=abc\n")
    assert read_meta_properties(tmp_path) == MetaProperties(cluster_id="abc", node_id=2)
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=2\n")
    with pytest.raises(CorruptCheckpointError, match="meta.properties"):
        read_meta_properties(tmp_path)


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    assert read_clean_shutdown(tmp_path) is None
    write_clean_shutdown(tmp_path)
    assert json.loads((tmp_path / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": 0}
    assert read_clean_shutdown(tmp_path) == 0
    write_clean_shutdown(tmp_path, broker_epoch=7)
    assert read_clean_shutdown(tmp_path) == 7
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")
    assert read_clean_shutdown(tmp_path) == -1
    remove_clean_shutdown(tmp_path)
    assert read_clean_shutdown(tmp_path) is None
    remove_clean_shutdown(tmp_path)  # idempotent


@pytest.mark.parametrize("name", ["orders", "a.b_c-D9", "x" * 249, "_internal"])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "has space", "slash/", "ümlaut", "colon:"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_topic_store_round_trip(tmp_path: Path) -> None:
    store = TopicStore(tmp_path)
    assert store.load() == {}
    topics = {
        "orders": TopicMetadata("orders", random_kafka_uuid(), 3, {"cleanup.policy": "compact"}),
        "a.b": TopicMetadata("a.b", random_kafka_uuid(), 1),
    }
    store.save(topics)
    assert store.load() == topics
    document = json.loads((tmp_path / "kompakt-topics.json").read_text())
    assert document["version"] == 1
    assert [t["name"] for t in document["topics"]] == ["a.b", "orders"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kompakt-topics.json"]
    del topics["a.b"]
    store.save(topics)
    assert store.load() == topics


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        '{"version": 2, "topics": []}',
        '{"version": 1}',
        '{"version": 1, "topics": [{"name": "t", "topic_id": "bad", "partitions": 1, "configs": {}}]}',
        '{"version": 1, "topics": [{"name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 0,'
        ' "configs": {}}]}',
        '{"version": 1, "topics": [{"name": "t t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 1,'
        ' "configs": {}}]}',
        '{"version": 1, "topics": [{"name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 1,'
        ' "configs": {"a": 1}}]}',
    ],
)
def test_topic_store_corrupt_file(tmp_path: Path, content: str) -> None:
    (tmp_path / "kompakt-topics.json").write_text(content)
    with pytest.raises(CorruptTopicStoreError, match="kompakt-topics.json"):
        TopicStore(tmp_path).load()
