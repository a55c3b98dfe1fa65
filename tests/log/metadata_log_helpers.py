"""Writing a KRaft metadata log by hand, for tests of the offline reader.

The encodings follow Kafka's (``MetadataRecordSerde`` framing, flexible messages) but are written
here independently of :mod:`kompakt.log.cluster_metadata_records`, so a test checks the reader
against bytes it did not produce. Kafka-written bytes are in ``fixtures/kafka41_cluster``.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from pathlib import Path

from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, control_key

METADATA_DIR = "__cluster_metadata-0"


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def cstring(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return uvarint(len(data) + 1) + data


def uuid_bytes(kafka_id: str) -> bytes:
    return base64.urlsafe_b64decode(kafka_id + "==")


def int32_array(values: Sequence[int]) -> bytes:
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


NO_TAGS = b"\x00"


def frame(api_key: int, version: int, body: bytes) -> bytes:
    return uvarint(1) + uvarint(api_key) + uvarint(version) + body


def topic_record(name: str, topic_id: str) -> bytes:
    return frame(2, 0, cstring(name) + uuid_bytes(topic_id) + NO_TAGS)


def partition_record(topic_id: str, partition: int, replicas: Sequence[int] = (1,)) -> bytes:
    body = (
        struct.pack(">i", partition)
        + uuid_bytes(topic_id)
        + int32_array(replicas)  # replicas
        + int32_array(replicas)  # isr
        + int32_array(())  # removing
        + int32_array(())  # adding
        + struct.pack(">iii", replicas[0], 0, 0)  # leader, leader epoch, partition epoch
        + NO_TAGS
    )
    return frame(3, 0, body)


def config_record(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    body = struct.pack(">b", resource_type) + cstring(resource) + cstring(name) + cstring(value) + NO_TAGS
    return frame(4, 0, body)


def topic_config(topic: str, name: str, value: str | None) -> bytes:
    return config_record(2, topic, name, value)


def broker_config(broker: str, name: str, value: str | None) -> bytes:
    return config_record(4, broker, name, value)


def remove_topic(topic_id: str) -> bytes:
    return frame(9, 0, uuid_bytes(topic_id) + NO_TAGS)


def begin_transaction() -> bytes:
    return frame(23, 0, NO_TAGS)


def end_transaction() -> bytes:
    return frame(24, 0, NO_TAGS)


def abort_transaction() -> bytes:
    return frame(25, 0, NO_TAGS)


def no_op() -> bytes:
    return frame(20, 0, NO_TAGS)


def data_batch(values: Sequence[bytes], base_offset: int) -> bytes:
    return build_batch([SimpleRecord(None, v, 0) for v in values], base_offset=base_offset)


def control_batch(control_type: ControlType, value: bytes, base_offset: int) -> bytes:
    record = SimpleRecord(control_key(control_type), value, 0)
    return build_batch([record], base_offset=base_offset, is_control=True)


def write_log(
    data_dir: Path, batches: Sequence[Sequence[bytes]], *, base_offset: int = 0, name: str | None = None
) -> Path:
    """One ``.log`` segment holding one batch per entry of ``batches``; returns its path."""
    directory = data_dir / METADATA_DIR
    directory.mkdir(parents=True, exist_ok=True)
    offset = base_offset
    out = bytearray()
    for values in batches:
        out += data_batch(values, offset)
        offset += len(values)
    path = directory / (name or f"{base_offset:020d}.log")
    path.write_bytes(bytes(out))
    return path


def write_snapshot(data_dir: Path, end_offset: int, values: Sequence[bytes], *, footer: bool = True) -> Path:
    """A ``<end_offset>-<epoch>.checkpoint`` snapshot: header, the records, footer."""
    directory = data_dir / METADATA_DIR
    directory.mkdir(parents=True, exist_ok=True)
    out = control_batch(ControlType.SNAPSHOT_HEADER, struct.pack(">hq", 0, 0) + NO_TAGS, 0)
    out += data_batch(values, 1)
    if footer:
        out += control_batch(ControlType.SNAPSHOT_FOOTER, struct.pack(">h", 0) + NO_TAGS, 1 + len(values))
    path = directory / f"{end_offset:020d}-{1:010d}.checkpoint"
    path.write_bytes(out)
    return path


def write_meta_properties(data_dir: Path, node_id: int = 1) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "meta.properties").write_text(f"version=1\ncluster.id=abc\nnode.id={node_id}\n")
