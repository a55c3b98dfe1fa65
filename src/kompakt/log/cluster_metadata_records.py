"""The records of KRaft's metadata log (``__cluster_metadata``), declared from Kafka's schemas.

Kafka 4 keeps every topic, partition and config of a cluster in the metadata log, not in
``meta.properties`` or a file per topic. Each record's value is framed by Kafka's
``MetadataRecordSerde``: an unsigned varint frame version (1), the record type (the schema's
``apiKey``) and its version as unsigned varints, then the message in Kafka's flexible encoding
(compact strings and arrays, a tagged-field section after every struct). The schemas are the JSON
files of Kafka 4.1's ``metadata`` module (``common/metadata/*Record.json``), declared here as data:
one :class:`F` per field with the versions it exists in, whether it may be null, and its tag when it
is a tagged field. The KRaft control records (``LeaderChange``, ``SnapshotHeader``/``Footer``,
``KRaftVersion``, ``Voters``) are declared beside them for ``kompakt log dump``; Kafka reads their
values at version 0.

Decoding goes through :class:`~kompakt.records.schema_reader.SchemaReader`, so every length and
count is checked against the bytes that are left before anything is allocated. A record type or
version this table does not know is not guessed at: :func:`decode_metadata_record` returns it
undecoded (``data`` None) for the caller to report and skip, since a newer Kafka may add types and
versions (a field added in a new version would shift every field after it).

The decoded ``data`` uses Kafka's JSON names (``topicId``, ``resourceName``), uuids in Kafka's
22-character form and bytes as base64, as Kafka's dump tool prints them (``MetadataJsonConverters``).
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kompakt.errors import CorruptRecordError
from kompakt.log.metadata_files import uuid_to_kafka
from kompakt.records.schema_reader import SchemaReader


class MetadataRecordError(CorruptRecordError):
    """A metadata log record whose bytes do not parse as its declared schema."""


#: The only frame version Kafka writes and reads (``AbstractApiMessageSerde.DEFAULT_FRAME_VERSION``).
FRAME_VERSION: Final = 1

#: ``ConfigRecord.resourceType`` values (Kafka's ``ConfigResource.Type``).
RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4


@dataclass(frozen=True, slots=True)
class F:
    """One field of a schema: ``type`` is a primitive, ``[]<primitive>``, ``[]`` (an array of the
    struct ``fields``) or ``struct``; ``since`` the first version that has it; ``nullable`` the
    first version where it may be null; ``tag`` set for a tagged field (absent means ``default``)."""

    name: str
    type: str
    since: int = 0
    nullable: int | None = None
    tag: int | None = None
    default: Any = None
    fields: tuple[F, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordSchema:
    api_key: int
    name: str
    max_version: int
    fields: tuple[F, ...]
    type_name: str
    """Kafka's ``MetadataRecordType`` name: ``TopicRecord`` -> ``TOPIC_RECORD``."""


def _record(api_key: int, name: str, max_version: int, fields: tuple[F, ...]) -> RecordSchema:
    type_name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()
    return RecordSchema(api_key, name, max_version, fields, type_name)


_SCHEMAS: Final = (
    _record(
        0,
        "RegisterBrokerRecord",
        3,
        (
            F("brokerId", "int32"),
            F("isMigratingZkBroker", "bool", since=2),
            F("incarnationId", "uuid"),
            F("brokerEpoch", "int64"),
            F(
                "endPoints",
                "[]",
                fields=(
                    F("name", "string"),
                    F("host", "string"),
                    F("port", "uint16"),
                    F("securityProtocol", "int16"),
                ),
            ),
            F(
                "features",
                "[]",
                fields=(
                    F("name", "string"),
                    F("minSupportedVersion", "int16"),
                    F("maxSupportedVersion", "int16"),
                ),
            ),
            F("rack", "string", nullable=0),
            F("fenced", "bool"),
            F("inControlledShutdown", "bool", since=1),
            F("logDirs", "[]uuid", since=3, tag=0),
        ),
    ),
    _record(
        1,
        "UnregisterBrokerRecord",
        0,
        (
            F("brokerId", "int32"),
            F("brokerEpoch", "int64"),
        ),
    ),
    _record(
        2,
        "TopicRecord",
        0,
        (
            F("name", "string"),
            F("topicId", "uuid"),
        ),
    ),
    _record(
        3,
        "PartitionRecord",
        2,
        (
            F("partitionId", "int32"),
            F("topicId", "uuid"),
            F("replicas", "[]int32"),
            F("isr", "[]int32"),
            F("removingReplicas", "[]int32"),
            F("addingReplicas", "[]int32"),
            F("leader", "int32"),
            F("leaderRecoveryState", "int8", tag=0, default=0),
            F("leaderEpoch", "int32"),
            F("partitionEpoch", "int32"),
            F("directories", "[]uuid", since=1),
            F("eligibleLeaderReplicas", "[]int32", since=2, nullable=2, tag=1, default=None),
            F("lastKnownElr", "[]int32", since=2, nullable=2, tag=2, default=None),
        ),
    ),
    _record(
        4,
        "ConfigRecord",
        0,
        (
            F("resourceType", "int8"),
            F("resourceName", "string"),
            F("name", "string"),
            F("value", "string", nullable=0),
        ),
    ),
    _record(
        5,
        "PartitionChangeRecord",
        2,
        (
            F("partitionId", "int32"),
            F("topicId", "uuid"),
            F("isr", "[]int32", nullable=0, tag=0, default=None),
            F("leader", "int32", tag=1, default=-2),
            F("replicas", "[]int32", nullable=0, tag=2, default=None),
            F("removingReplicas", "[]int32", nullable=0, tag=3, default=None),
            F("addingReplicas", "[]int32", nullable=0, tag=4, default=None),
            F("leaderRecoveryState", "int8", tag=5, default=-1),
            F("directories", "[]uuid", since=1, nullable=1, tag=8, default=None),
            F("eligibleLeaderReplicas", "[]int32", since=2, nullable=2, tag=6, default=None),
            F("lastKnownElr", "[]int32", since=2, nullable=2, tag=7, default=None),
        ),
    ),
    _record(
        7,
        "FenceBrokerRecord",
        0,
        (
            F("id", "int32"),
            F("epoch", "int64"),
        ),
    ),
    _record(
        8,
        "UnfenceBrokerRecord",
        0,
        (
            F("id", "int32"),
            F("epoch", "int64"),
        ),
    ),
    _record(9, "RemoveTopicRecord", 0, (F("topicId", "uuid"),)),
    _record(
        10,
        "DelegationTokenRecord",
        0,
        (
            F("owner", "string"),
            F("requester", "string"),
            F("renewers", "[]string"),
            F("issueTimestamp", "int64"),
            F("maxTimestamp", "int64"),
            F("expirationTimestamp", "int64"),
            F("tokenId", "string"),
        ),
    ),
    _record(
        11,
        "UserScramCredentialRecord",
        0,
        (
            F("name", "string"),
            F("mechanism", "int8"),
            F("salt", "bytes"),
            F("storedKey", "bytes"),
            F("serverKey", "bytes"),
            F("iterations", "int32"),
        ),
    ),
    _record(
        12,
        "FeatureLevelRecord",
        0,
        (
            F("name", "string"),
            F("featureLevel", "int16"),
        ),
    ),
    _record(
        14,
        "ClientQuotaRecord",
        0,
        (
            F(
                "entity",
                "[]",
                fields=(
                    F("entityType", "string"),
                    F("entityName", "string", nullable=0),
                ),
            ),
            F("key", "string"),
            F("value", "float64"),
            F("remove", "bool"),
        ),
    ),
    _record(
        15,
        "ProducerIdsRecord",
        0,
        (
            F("brokerId", "int32"),
            F("brokerEpoch", "int64"),
            F("nextProducerId", "int64"),
        ),
    ),
    _record(
        17,
        "BrokerRegistrationChangeRecord",
        2,
        (
            F("brokerId", "int32"),
            F("brokerEpoch", "int64"),
            F("fenced", "int8", tag=0),
            F("inControlledShutdown", "int8", since=1, tag=1),
            F("logDirs", "[]uuid", since=2, tag=2),
        ),
    ),
    _record(
        18,
        "AccessControlEntryRecord",
        0,
        (
            F("id", "uuid"),
            F("resourceType", "int8"),
            F("resourceName", "string"),
            F("patternType", "int8"),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permissionType", "int8"),
        ),
    ),
    _record(19, "RemoveAccessControlEntryRecord", 0, (F("id", "uuid"),)),
    _record(20, "NoOpRecord", 0, ()),
    _record(21, "ZkMigrationStateRecord", 0, (F("zkMigrationState", "int8"),)),
    _record(
        22,
        "RemoveUserScramCredentialRecord",
        0,
        (
            F("name", "string"),
            F("mechanism", "int8"),
        ),
    ),
    _record(23, "BeginTransactionRecord", 0, (F("name", "string", nullable=0, tag=0, default=None),)),
    _record(24, "EndTransactionRecord", 0, ()),
    _record(25, "AbortTransactionRecord", 0, (F("reason", "string", nullable=0, tag=0, default=None),)),
    _record(26, "RemoveDelegationTokenRecord", 0, (F("tokenId", "string"),)),
    _record(
        27,
        "RegisterControllerRecord",
        0,
        (
            F("controllerId", "int32"),
            F("incarnationId", "uuid"),
            F("zkMigrationReady", "bool"),
            F(
                "endPoints",
                "[]",
                fields=(
                    F("name", "string"),
                    F("host", "string"),
                    F("port", "uint16"),
                    F("securityProtocol", "int16"),
                ),
            ),
            F(
                "features",
                "[]",
                fields=(
                    F("name", "string"),
                    F("minSupportedVersion", "int16"),
                    F("maxSupportedVersion", "int16"),
                ),
            ),
        ),
    ),
    _record(28, "ClearElrRecord", 0, (F("topicName", "string"),)),
)

#: Every metadata record type of Kafka 4.1, by api key.
METADATA_RECORDS: Final[Mapping[int, RecordSchema]] = {s.api_key: s for s in _SCHEMAS}

#: The KRaft control records' values (read at version 0), by control type name.
CONTROL_RECORDS: Final[Mapping[str, tuple[F, ...]]] = {
    "LeaderChangeMessage": (
        F("version", "int16"),
        F("leaderId", "int32"),
        F(
            "voters",
            "[]",
            fields=(
                F("voterId", "int32"),
                F("voterDirectoryId", "uuid", since=1),
            ),
        ),
        F(
            "grantingVoters",
            "[]",
            fields=(
                F("voterId", "int32"),
                F("voterDirectoryId", "uuid", since=1),
            ),
        ),
    ),
    "SnapshotHeaderRecord": (
        F("version", "int16"),
        F("lastContainedLogTimestamp", "int64"),
    ),
    "SnapshotFooterRecord": (F("version", "int16"),),
    "KRaftVersionRecord": (
        F("version", "int16"),
        F("kRaftVersion", "int16"),
    ),
    "VotersRecord": (
        F("version", "int16"),
        F(
            "voters",
            "[]",
            fields=(
                F("voterId", "int32"),
                F("voterDirectoryId", "uuid"),
                F(
                    "endpoints",
                    "[]",
                    fields=(
                        F("name", "string"),
                        F("host", "string"),
                        F("port", "uint16"),
                    ),
                ),
                F(
                    "kRaftVersionFeature",
                    "struct",
                    fields=(
                        F("minSupportedVersion", "int16"),
                        F("maxSupportedVersion", "int16"),
                    ),
                ),
            ),
        ),
    ),
}

#: Control types of KRaft's control records (Kafka's ``ControlRecordType``) -> their schema.
CONTROL_TYPES: Final[Mapping[int, str]] = {
    2: "LeaderChangeMessage",
    3: "SnapshotHeaderRecord",
    4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord",
    6: "VotersRecord",
}

_MIN_BYTES: Final[Mapping[str, int]] = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "bool": 1,
    "float64": 8,
    "uuid": 16,
    "string": 1,
    "bytes": 1,
    "struct": 1,  # at least its tagged-field count
}
_EMPTY: Final[Mapping[str, Any]] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "bool": False,
    "float64": 0.0,
    "string": "",
}


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One decoded metadata record; ``data`` is None for a type or version this table lacks."""

    api_key: int
    version: int
    type_name: str
    data: dict[str, Any] | None


def _primitive(reader: SchemaReader, kind: str, nullable: bool) -> Any:
    if kind == "int8":
        return reader.i8()
    if kind == "int16":
        return reader.i16()
    if kind == "int32":
        return reader.i32()
    if kind == "int64":
        return reader.i64()
    if kind == "uint16":
        return reader.uint16()
    if kind == "bool":
        return reader.boolean()
    if kind == "float64":
        return reader.float64()
    if kind == "uuid":
        return uuid_to_kafka(uuid.UUID(bytes=reader.uuid()))
    if kind == "string":
        return reader.compact_nullable_string() if nullable else reader.compact_string()
    if kind == "bytes":
        raw = reader.compact_nullable_bytes()
        if raw is None and not nullable:
            raise reader.error(f"null where bytes are required at byte {reader.pos}")
        return None if raw is None else base64.b64encode(raw).decode("ascii")
    raise reader.error(f"unknown field type {kind!r}")  # a declaration error, not data


def _field(reader: SchemaReader, field: F, version: int) -> Any:
    nullable = field.nullable is not None and version >= field.nullable
    if field.type == "struct":
        return _struct(reader, field.fields, version)
    if not field.type.startswith("[]"):
        return _primitive(reader, field.type, nullable)
    element = field.type[2:] or "struct"
    raw = reader.uvarint()
    if raw == 0:
        if not nullable:
            raise reader.error(f"null where an array is required at byte {reader.pos}")
        return None
    count = reader.bounded_count(raw - 1, _MIN_BYTES[element])
    if element == "struct":
        return [_struct(reader, field.fields, version) for _ in range(count)]
    return [_primitive(reader, element, False) for _ in range(count)]


def _absent(field: F) -> Any:
    """The value of a tagged field that is not in the record: its declared default."""
    if field.default is not None or field.nullable is not None:
        return field.default
    if field.type.startswith("[]"):
        return []
    return _EMPTY.get(field.type)


def _struct(reader: SchemaReader, fields: tuple[F, ...], version: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    tagged: list[F] = []
    for field in fields:
        if version < field.since:
            continue
        if field.tag is not None:
            tagged.append(field)
            continue
        data[field.name] = _field(reader, field, version)
    raw_tags = reader.tagged_fields()
    for field in tagged:
        raw = raw_tags.get(field.tag)  # type: ignore[arg-type]
        if raw is None:
            data[field.name] = _absent(field)
            continue
        inner = SchemaReader(raw, reader.error)
        data[field.name] = _field(inner, field, version)
        inner.expect_end()
    return data


def metadata_record_type(value: bytes) -> tuple[int, int]:
    """The ``(api key, version)`` of a metadata record's value, from its frame alone: a reader that
    applies a few types skips the others (most of a metadata log: NoOps, broker heartbeats'
    registration changes) without decoding them."""
    if len(value) >= 3 and value[0] == FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
        return value[1], value[2]  # every api key and version so far is one varint byte
    reader = SchemaReader(value, MetadataRecordError)
    return _frame(reader)


def _frame(reader: SchemaReader) -> tuple[int, int]:
    frame = reader.uvarint()
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"unknown metadata frame version {frame} (only {FRAME_VERSION} exists)")
    api_key = reader.uvarint()
    return api_key, reader.uvarint()


def decode_metadata_record(value: bytes) -> MetadataRecord:
    """A metadata log record's value; raises :class:`MetadataRecordError` when its bytes are
    malformed, returns ``data`` None for a type or version Kafka 4.1 does not have."""
    reader = SchemaReader(value, MetadataRecordError)
    api_key, version = _frame(reader)
    schema = METADATA_RECORDS.get(api_key)
    if schema is None:
        return MetadataRecord(api_key, version, f"UNKNOWN_RECORD_TYPE_{api_key}", None)
    if version > schema.max_version:
        return MetadataRecord(api_key, version, schema.type_name, None)
    data = _struct(reader, schema.fields, version)
    reader.expect_end()
    return MetadataRecord(api_key, version, schema.type_name, data)


def decode_control_record(control_type: int, value: bytes | None) -> dict[str, Any] | None:
    """A KRaft control record's value (``LeaderChange``, ``SnapshotHeader`` ...) at version 0, or
    None for a control type that has no such schema (a transaction marker, an unknown type)."""
    name = CONTROL_TYPES.get(control_type)
    if name is None or value is None:
        return None
    reader = SchemaReader(value, MetadataRecordError)
    data = _struct(reader, CONTROL_RECORDS[name], 0)
    reader.expect_end()
    return {"type": name, "data": data}


def without_default_tags(fields: tuple[F, ...], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as Kafka's generated ``JsonConverter`` writes it: a tagged field only when its
    value differs from its default (``DumpLogSegments --cluster-metadata-decoder`` prints that),
    nested structs likewise."""
    out: dict[str, Any] = {}
    by_name = {f.name: f for f in fields}
    for name, value in data.items():
        field = by_name.get(name)
        if field is None:
            out[name] = value
            continue
        if field.tag is not None and value == _absent(field):
            continue
        if field.fields and isinstance(value, list):
            value = [without_default_tags(field.fields, v) if isinstance(v, Mapping) else v for v in value]
        elif field.fields and isinstance(value, Mapping):
            value = without_default_tags(field.fields, value)
        out[name] = value
    return out
