"""Small identity files: ``partition.metadata``, ``meta.properties`` and ``.kafka_cleanshutdown``.

``<partition dir>/partition.metadata`` (Kafka's ``PartitionMetadataFile``), exactly two lines::

    version: 0
    topic_id: <topic id>

``<data dir>/meta.properties`` (Kafka's KRaft layout, Java properties text)::

    version=1
    cluster.id=<22 char id>
    node.id=0
    directory.id=<22 char id>

``<data dir>/.kafka_cleanshutdown``: JSON ``{"version":0,"brokerEpoch":<n>}``, written after a
clean shutdown and removed at startup; its presence lets recovery skip the full scan.

Kafka ids (topic, cluster, directory) are 16-byte UUIDs printed as URL-safe base64 without
padding: 22 characters. The all-zero UUID means "no id" and is never valid in a file.
All writes are atomic (temp file, fsync, rename, fsync directory).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from kompakt.config.defs import parse_properties_text
from kompakt.errors import CorruptCheckpointError
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps, atomic_write_bytes, delete_file, fsync_dir

PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

ZERO_UUID = uuid.UUID(int=0)
ONE_UUID = uuid.UUID(int=1)  # Kafka reserves it for the cluster metadata topic


def uuid_to_kafka(value: uuid.UUID) -> str:
    """The 22-character URL-safe base64 form Kafka prints."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def kafka_to_uuid(text: str) -> uuid.UUID:
    """Parse Kafka's 22-character form; anything else raises ValueError."""
    if len(text) != 22:
        raise ValueError(f"Kafka UUID {text!r} must be 22 base64 characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise ValueError(f"Kafka UUID {text!r} is not URL-safe base64") from None
    if len(raw) != 16 or uuid_to_kafka(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"Kafka UUID {text!r} does not encode 16 bytes")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """A fresh id as Kafka makes them: never zero/one, never printed with a leading ``-``."""
    while True:
        candidate = uuid.uuid4()
        if candidate not in (ZERO_UUID, ONE_UUID) and not uuid_to_kafka(candidate).startswith("-"):
            return candidate


# ---- partition.metadata --------------------------------------------------------------------


def write_partition_metadata(
    partition_dir: str | Path, topic_id: uuid.UUID, file_ops: FileOps = DEFAULT_FILE_OPS
) -> None:
    if topic_id == ZERO_UUID:
        raise ValueError("the zero UUID is not a valid topic id")
    path = Path(partition_dir) / PARTITION_METADATA_FILE
    atomic_write_bytes(path, f"version: 0\ntopic_id: {uuid_to_kafka(topic_id)}\n".encode(), file_ops)


def read_partition_metadata(partition_dir: str | Path) -> uuid.UUID | None:
    """The partition's topic id, or None if the file does not exist yet."""
    path = Path(partition_dir) / PARTITION_METADATA_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"Partition metadata file ({path}) is not UTF-8 text") from None
    if len(lines) != 2 or lines[0].strip() != "version: 0":
        raise CorruptCheckpointError(f"Unrecognized version or layout of partition metadata file ({path})")
    key, _, value = lines[1].partition(": ")
    try:
        if key != "topic_id":
            raise ValueError(key)
        topic_id = kafka_to_uuid(value.strip())
    except ValueError:
        raise CorruptCheckpointError(
            f"Malformed line in partition metadata file ({path}): '{lines[1]}'"
        ) from None
    if topic_id == ZERO_UUID:
        raise CorruptCheckpointError(f"Partition metadata file ({path}) holds the zero topic id")
    return topic_id


# ---- meta.properties -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaProperties:
    """The identity of a data directory: which cluster and node it belongs to."""

    cluster_id: str
    node_id: int
    directory_id: uuid.UUID | None = None
    version: int = 1


def write_meta_properties(data_dir: str | Path, meta: MetaProperties) -> None:
    lines = ["#", "#Written by kompakt", f"version={meta.version}", f"cluster.id={meta.cluster_id}"]
    lines.append(f"node.id={meta.node_id}" if meta.version >= 1 else f"broker.id={meta.node_id}")
    if meta.directory_id is not None:
        lines.append(f"directory.id={uuid_to_kafka(meta.directory_id)}")
    atomic_write_bytes(Path(data_dir) / META_PROPERTIES_FILE, ("\n".join(lines) + "\n").encode())


def read_meta_properties(data_dir: str | Path) -> MetaProperties | None:
    """The data dir's identity, or None for a fresh directory without the file."""
    path = Path(data_dir) / META_PROPERTIES_FILE
    try:
        props = parse_properties_text(path.read_bytes().decode("latin-1"))
    except FileNotFoundError:
        return None
    try:
        version = int(props["version"])
        if version not in (0, 1):
            raise ValueError(f"unsupported version {version}")
        node_key = "node.id" if version == 1 else "broker.id"
        directory_id = props.get("directory.id")
        return MetaProperties(
            version=version,
            cluster_id=props["cluster.id"],
            node_id=int(props[node_key]),
            directory_id=kafka_to_uuid(directory_id) if directory_id else None,
        )
    except (KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"Invalid meta.properties file ({path}): {exc}") from None


# ---- .kafka_cleanshutdown ------------------------------------------------------------------


def write_clean_shutdown(data_dir: str | Path, broker_epoch: int = 0) -> None:
    payload = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    atomic_write_bytes(Path(data_dir) / CLEAN_SHUTDOWN_FILE, payload.encode())


def read_clean_shutdown(data_dir: str | Path) -> int | None:
    """None when there is no marker; else the broker epoch, or -1 for an unreadable marker.

    An older Kafka wrote an empty marker; it still means "clean shutdown", as in Kafka.
    """
    path = Path(data_dir) / CLEAN_SHUTDOWN_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        epoch = json.loads(raw)["brokerEpoch"]
    except (ValueError, KeyError, TypeError):
        return -1
    return epoch if isinstance(epoch, int) else -1


def remove_clean_shutdown(data_dir: str | Path) -> None:
    """Remove the marker durably, so a crash from here on forces recovery at the next start."""
    delete_file(Path(data_dir) / CLEAN_SHUTDOWN_FILE)
    fsync_dir(data_dir)
