"""The KIP-848 consumer-group records of ``__consumer_offsets``: Kafka 4's schemas, byte for byte.

These are not protocol messages (kio does not know them): they are the coordinator records of
Kafka's ``group-coordinator/src/main/resources/common/message/ConsumerGroup*.json``, written by
``GroupCoordinatorRecordHelpers``. A key is an int16 *record type* (the schema's ``apiKey``) then
the key's fields in the classic, non-flexible encoding (int16-length strings); a value is an int16
version (0 for every type here) then the value's fields in the flexible encoding (uvarint-length
compact strings and arrays, a tagged-field section at the end of every struct). A removed member or
group is a tombstone (null value) for its keys, so the log cleaner forgets it.

=====  ============================================  ==========================================
type   key (group id, then ...)                      value
=====  ============================================  ==========================================
3      ConsumerGroupMetadataKey                      epoch; tag 0: metadata hash (KIP-1101)
4      ConsumerGroupPartitionMetadataKey             topic metadata (Kafka < 4.1; 4.1 writes only
                                                     its tombstone, and so does kompakt)
5      ConsumerGroupMemberMetadataKey (member id)    subscription, client, rebalance timeout
6      ConsumerGroupTargetAssignmentMetadataKey      assignment epoch
7      ConsumerGroupTargetAssignmentMemberKey (m.)   the member's target partitions
8      ConsumerGroupCurrentMemberAssignmentKey (m.)  member epoch, state, owned and revoking
16     ConsumerGroupRegularExpressionKey (regex)     resolved topics (read and skipped here)
=====  ============================================  ==========================================

Decoding checks every length and count against the bytes that are left before it builds anything,
and raises :class:`ConsumerRecordFormatError` for anything short, negative or unknown; unknown
tagged fields are skipped by their declared size, as Kafka's generated readers do.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kompakt.broker.schema_reader import SchemaReader
from kompakt.errors import KompaktError

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16

#: Record types whose key is ``(group id)`` only.
GROUP_KEYED_TYPES = frozenset(
    {CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA}
)
#: Record types whose key is ``(group id, member id)``.
MEMBER_KEYED_TYPES = frozenset(
    {
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    }
)
CONSUMER_GROUP_RECORD_TYPES = GROUP_KEYED_TYPES | MEMBER_KEYED_TYPES | {CONSUMER_GROUP_REGULAR_EXPRESSION}

VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: A member's partitions: topic id -> partition indexes.
Assignment = Mapping[uuid.UUID, frozenset[int]]


class ConsumerRecordFormatError(KompaktError):
    """A consumer-group record key or value that does not parse as its Kafka schema."""


def freeze_assignment(
    partitions: Mapping[uuid.UUID, Sequence[int] | frozenset[int] | set[int]],
) -> dict[uuid.UUID, frozenset[int]]:
    """A normalised assignment: no empty topics, frozen partition sets."""
    return {topic: frozenset(parts) for topic, parts in partitions.items() if parts}


# ----------------------------------------------------------------------------------------------
# Keys


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecordKey:
    """A decoded key: its record type, the group, and the member id (or regex) when the type has one."""

    record_type: int
    group_id: str
    member_id: str | None = None


def _classic_string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_key(key: ConsumerGroupRecordKey) -> bytes:
    """The key bytes: int16 record type, group id, then the member id (or regex) if the type has one."""
    out = _I16.pack(key.record_type) + _classic_string(key.group_id)
    if key.record_type in MEMBER_KEYED_TYPES or key.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        if key.member_id is None:
            raise ValueError(f"record type {key.record_type} needs a member id")
        out += _classic_string(key.member_id)
    return out


def group_key(record_type: int, group_id: str) -> ConsumerGroupRecordKey:
    return ConsumerGroupRecordKey(record_type, group_id)


def member_key(record_type: int, group_id: str, member_id: str) -> ConsumerGroupRecordKey:
    return ConsumerGroupRecordKey(record_type, group_id, member_id)


def decode_key(data: bytes) -> ConsumerGroupRecordKey | None:
    """Parse a consumer-group key; None when the record type is not one of the consumer group's."""
    reader = SchemaReader(data, ConsumerRecordFormatError)
    record_type = reader.i16()
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    group_id = reader.classic_string()
    member_id = None
    if record_type not in GROUP_KEYED_TYPES:
        member_id = reader.classic_string()
    reader.expect_end()
    return ConsumerGroupRecordKey(record_type, group_id, member_id)


# ----------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """ConsumerGroupMetadataValue: the group epoch and (4.1, tagged) the subscribed topics' hash."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """ConsumerGroupMemberMetadataValue: what the member subscribed to and how it identifies itself."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: The raw ClassicMemberMetadata struct (tag 0) of a classic-protocol member, kept as written.
    classic_member_metadata: bytes | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentMetadataValue:
    """ConsumerGroupTargetAssignmentMetadataValue: the epoch the target assignment was computed for."""

    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    """ConsumerGroupTargetAssignmentMemberValue: one member's partitions in the target assignment."""

    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentValue:
    """ConsumerGroupCurrentMemberAssignmentValue: where the member's reconciliation stands."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    """ConsumerGroupPartitionMetadataValue (pre-4.1): only its presence matters (4.1 tombstones it)."""


@dataclass(frozen=True, slots=True)
class RegularExpressionValue:
    """ConsumerGroupRegularExpressionValue: read for completeness, not used (regexes resolve live)."""


ConsumerGroupRecordValue = (
    GroupMetadataValue
    | MemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
    | PartitionMetadataValue
    | RegularExpressionValue
)


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = [_I16.pack(VALUE_VERSION)]

    def uvarint(self, value: int) -> None:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self.parts.append(bytes(out))

    def i8(self, value: int) -> None:
        self.parts.append(_I8.pack(value))

    def i32(self, value: int) -> None:
        self.parts.append(_I32.pack(value))

    def i64(self, value: int) -> None:
        self.parts.append(_I64.pack(value))

    def string(self, value: str | None) -> None:
        if value is None:
            self.uvarint(0)
            return
        data = value.encode()
        self.uvarint(len(data) + 1)
        self.parts.append(data)

    def uuid(self, value: uuid.UUID) -> None:
        self.parts.append(value.bytes)

    def no_tags(self) -> None:
        self.uvarint(0)

    def topic_partitions(self, assignment: Assignment) -> None:
        """``[]TopicPartitions``: topic id, partitions, tags; topics and partitions in sorted order."""
        self.uvarint(len(assignment) + 1)
        for topic_id in sorted(assignment):
            self.uuid(topic_id)
            partitions = sorted(assignment[topic_id])
            self.uvarint(len(partitions) + 1)
            for partition in partitions:
                self.i32(partition)
            self.no_tags()

    def finish(self) -> bytes:
        return b"".join(self.parts)


def encode_value(value: ConsumerGroupRecordValue) -> bytes:
    """Version 0 of the value's schema."""
    w = _Writer()
    if isinstance(value, GroupMetadataValue):
        w.i32(value.epoch)
        if value.metadata_hash != 0:  # a tagged field is written only when it is not its default
            w.uvarint(1)
            w.uvarint(0)
            w.uvarint(8)
            w.i64(value.metadata_hash)
        else:
            w.no_tags()
    elif isinstance(value, MemberMetadataValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.uvarint(len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            w.string(name)
        w.string(value.subscribed_topic_regex)
        w.i32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic_member_metadata is not None:
            w.uvarint(1)
            w.uvarint(0)
            w.uvarint(len(value.classic_member_metadata))
            w.parts.append(value.classic_member_metadata)
        else:
            w.no_tags()
    elif isinstance(value, TargetAssignmentMetadataValue):
        w.i32(value.assignment_epoch)
        w.no_tags()
    elif isinstance(value, TargetAssignmentMemberValue):
        w.topic_partitions(value.partitions)
        w.no_tags()
    elif isinstance(value, CurrentMemberAssignmentValue):
        w.i32(value.member_epoch)
        w.i32(value.previous_member_epoch)
        w.i8(value.state)
        w.topic_partitions(value.assigned_partitions)
        w.topic_partitions(value.partitions_pending_revocation)
        w.no_tags()
    else:
        raise ValueError(f"kompakt does not write {type(value).__name__} records")
    return w.finish()


def _topic_partitions(reader: SchemaReader) -> dict[uuid.UUID, frozenset[int]]:
    """A compact array of ``(topic id, partitions)`` (the assignment fields of the member records)."""
    result: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(reader.compact_array_count(16 + 1 + 1)):
        topic_id = uuid.UUID(bytes=reader.take(16))
        partitions = [reader.i32() for _ in range(reader.compact_array_count(4))]
        reader.tagged_fields()
        if partitions:
            result[topic_id] = result.get(topic_id, frozenset()) | frozenset(partitions)
    return result


def decode_value(record_type: int, data: bytes) -> ConsumerGroupRecordValue:
    """Parse a value of ``record_type``; raises :class:`ConsumerRecordFormatError` when malformed."""
    reader = SchemaReader(data, ConsumerRecordFormatError)
    version = reader.i16()
    if version != VALUE_VERSION:
        raise ConsumerRecordFormatError(f"unsupported version {version} of record type {record_type}")
    value: ConsumerGroupRecordValue
    if record_type == CONSUMER_GROUP_METADATA:
        epoch = reader.i32()
        tags = reader.tagged_fields()
        metadata_hash = 0
        if 0 in tags:
            if len(tags[0]) != 8:
                raise ConsumerRecordFormatError("metadata hash tag is not 8 bytes")
            metadata_hash = int(_I64.unpack(tags[0])[0])
        value = GroupMetadataValue(epoch, metadata_hash)
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        instance_id = reader.compact_nullable_string()
        rack_id = reader.compact_nullable_string()
        client_id = reader.compact_string()
        client_host = reader.compact_string()
        names = tuple(reader.compact_string() for _ in range(reader.compact_array_count(1)))
        regex = reader.compact_nullable_string()
        rebalance_timeout_ms = reader.i32()
        server_assignor = reader.compact_nullable_string()
        classic = reader.tagged_fields().get(0)
        value = MemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            regex,
            rebalance_timeout_ms,
            server_assignor,
            classic,
        )
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = TargetAssignmentMetadataValue(reader.i32())
        reader.tagged_fields()
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMemberValue(_topic_partitions(reader))
        reader.tagged_fields()
    elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        member_epoch = reader.i32()
        previous_epoch = reader.i32()
        state = reader.i8()
        assigned = _topic_partitions(reader)
        revoking = _topic_partitions(reader)
        reader.tagged_fields()
        value = CurrentMemberAssignmentValue(member_epoch, previous_epoch, state, assigned, revoking)
    elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
        return PartitionMetadataValue()
    elif record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        return RegularExpressionValue()
    else:
        raise ConsumerRecordFormatError(f"unknown consumer-group record type {record_type}")
    reader.expect_end()
    return value
