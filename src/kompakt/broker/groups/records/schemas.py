"""Every record of ``__consumer_offsets``: Kafka 4.1's key and value schemas, byte for byte.

These are the coordinator records of Kafka's ``group-coordinator/src/main/resources/common/message``
(``GroupCoordinatorRecordHelpers`` builds them), so a data directory is readable by Kafka's tools
and the other way round. A key starts with an int16: the key *version* for the classic records
(0-1 offset commit, 2 group metadata) and the *record type* (the schema's ``apiKey``) for the
KIP-848 ones, then the key's fields in the classic, non-flexible encoding. A value starts with an
int16 version. A removed offset, member or group is a tombstone (null value) for its key.

=====  ===========================================  =============================================
key    key fields                                    value
=====  ===========================================  =============================================
0, 1   OffsetCommitKey (group, topic, partition)     OffsetCommitValue v3, or v1 with an explicit
                                                     expiry (reads v0-v3)
2      GroupMetadataKey (group)                      GroupMetadataValue v3: a classic group after
                                                     a rebalance (reads v0-v3)
3      ConsumerGroupMetadataKey (group)              epoch; tag 0: metadata hash (KIP-1101)
4      ConsumerGroupPartitionMetadataKey             pre-4.1 topic metadata (4.1 writes only its
                                                     tombstone, and so does kompakt)
5      ConsumerGroupMemberMetadataKey (g., member)   subscription, client, rebalance timeout; tag 0:
                                                     ClassicMemberMetadata of a classic member
6      ConsumerGroupTargetAssignmentMetadataKey      assignment epoch
7      ConsumerGroupTargetAssignmentMemberKey (m.)   the member's target partitions
8      ConsumerGroupCurrentMemberAssignmentKey (m.)  member epoch, state, owned and revoking
16     ConsumerGroupRegularExpressionKey (regex)     resolved topics (read and skipped)
=====  ===========================================  =============================================

Classic values (0-2) are non-flexible: int16-length strings, int32-length bytes; KIP-848 values
are flexible (compact strings and arrays, a tagged-field section at the end of every struct). One
writer (:class:`~kompakt.broker.schema_writer.SchemaWriter`) encodes them all; the one reader
(:class:`~kompakt.broker.schema_reader.SchemaReader`) checks every length and count against the
bytes left before it allocates, and a malformed record raises :class:`GroupRecordFormatError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kompakt.broker.schema_reader import SchemaReader
from kompakt.broker.schema_writer import SchemaWriter
from kompakt.errors import KompaktError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

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
#: Record types whose key is ``(group id, member id)`` (the regular expression's is the regex).
MEMBER_KEYED_TYPES = frozenset(
    {
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        CONSUMER_GROUP_REGULAR_EXPRESSION,
    }
)
CONSUMER_GROUP_RECORD_TYPES = GROUP_KEYED_TYPES | MEMBER_KEYED_TYPES

#: The version of every KIP-848 value.
CONSUMER_VALUE_VERSION = 0

#: A member's partitions: topic id -> partition indexes.
Assignment = Mapping[uuid.UUID, frozenset[int]]


class GroupRecordFormatError(KompaktError):
    """A ``__consumer_offsets`` key or value that does not parse as its Kafka schema."""


# ----------------------------------------------------------------------------------------------
# Keys


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """A classic group's metadata."""

    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecordKey:
    """A KIP-848 key: its record type, the group, and the member id (or regex) when the type has one."""

    record_type: int
    group: str
    member_id: str | None = None


GroupRecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey


def group_key(record_type: int, group: str) -> ConsumerGroupRecordKey:
    return ConsumerGroupRecordKey(record_type, group)


def member_key(record_type: int, group: str, member_id: str) -> ConsumerGroupRecordKey:
    return ConsumerGroupRecordKey(record_type, group, member_id)


# ----------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """OffsetCommitValue: one committed position, as OffsetFetch returns it."""

    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int
    #: An explicit expiry from OffsetCommit v2-v4 ``retention_time``; ``None`` uses the broker's retention.
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a GroupMetadataValue."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """What Kafka persists about a classic group after each rebalance."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    """The group epoch and (4.1, tagged) the subscribed topics' hash."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """How a member of a consumer group that speaks the classic protocol joined: its session timeout
    and its JoinGroup protocols ``(name, metadata)`` in its order of preference."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    """What the member subscribed to and how it identifies itself."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: None for a member of the consumer protocol.
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    """The epoch the target assignment was computed for."""

    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    """One member's partitions in the target assignment."""

    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """Where the member's reconciliation stands."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    """Pre-4.1 topic metadata: only its presence matters (4.1 tombstones it)."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """Read for completeness, not used (regular expressions are resolved on every heartbeat)."""


ConsumerGroupRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupRegularExpressionValue
)
GroupRecordValue = CommittedOffset | GroupMetadataValue | ConsumerGroupRecordValue

#: One record: its key and its value (None is a tombstone).
GroupRecord = tuple[GroupRecordKey, GroupRecordValue | None]


# ----------------------------------------------------------------------------------------------
# Encoding


def encode_key(key: GroupRecordKey) -> bytes:
    w = SchemaWriter()
    if isinstance(key, OffsetCommitKey):
        w.i16(OFFSET_COMMIT_KEY_VERSION).classic_string(key.group).classic_string(key.topic)
        return w.i32(key.partition).finish()
    if isinstance(key, GroupMetadataKey):
        return w.i16(GROUP_METADATA_KEY_VERSION).classic_string(key.group).finish()
    w.i16(key.record_type).classic_string(key.group)
    if key.record_type in MEMBER_KEYED_TYPES:
        if key.member_id is None:
            raise ValueError(f"record type {key.record_type} needs a member id")
        w.classic_string(key.member_id)
    return w.finish()


def encode_value(value: GroupRecordValue) -> bytes:
    if isinstance(value, CommittedOffset):
        return _offset_commit_value(value)
    if isinstance(value, GroupMetadataValue):
        return _group_metadata_value(value)
    w = SchemaWriter().i16(CONSUMER_VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.i32(value.epoch)
        # A tagged field is written only when it is not its default.
        w.tagged_fields(
            {0: SchemaWriter().i64(value.metadata_hash).finish()} if value.metadata_hash else None
        )
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        _member_metadata_value(w, value)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.i32(value.assignment_epoch).tagged_fields()
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _topic_partitions(w, value.partitions)
        w.tagged_fields()
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w.i32(value.member_epoch).i32(value.previous_member_epoch).i8(value.state)
        _topic_partitions(w, value.assigned_partitions)
        _topic_partitions(w, value.partitions_pending_revocation)
        w.tagged_fields()
    else:
        raise ValueError(f"kompakt does not write {type(value).__name__} records")
    return w.finish()


def _offset_commit_value(entry: CommittedOffset) -> bytes:
    """Version 3, or version 1 when the entry carries an explicit expire timestamp (Kafka's
    choice). The metadata is a non-nullable string: a null is stored as "" as Kafka does."""
    metadata = entry.metadata or ""
    w = SchemaWriter()
    if entry.expire_timestamp_ms is not None:
        w.i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY).i64(entry.offset).classic_string(metadata)
        return w.i64(entry.commit_timestamp_ms).i64(entry.expire_timestamp_ms).finish()
    w.i16(OFFSET_COMMIT_VALUE_VERSION).i64(entry.offset).i32(entry.leader_epoch).classic_string(metadata)
    return w.i64(entry.commit_timestamp_ms).finish()


def _group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = SchemaWriter().i16(GROUP_METADATA_VALUE_VERSION).classic_string(value.protocol_type)
    w.i32(value.generation).nullable_classic_string(value.protocol).nullable_classic_string(value.leader)
    w.i64(value.current_state_timestamp_ms).i32(len(value.members))
    for m in value.members:
        w.classic_string(m.member_id).nullable_classic_string(m.group_instance_id)
        w.classic_string(m.client_id).classic_string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms)
        w.int32_bytes(m.subscription).int32_bytes(m.assignment)
    return w.finish()


def _member_metadata_value(w: SchemaWriter, value: ConsumerGroupMemberMetadataValue) -> None:
    w.compact_nullable_string(value.instance_id).compact_nullable_string(value.rack_id)
    w.compact_string(value.client_id).compact_string(value.client_host)
    w.compact_array_count(len(value.subscribed_topic_names))
    for name in value.subscribed_topic_names:
        w.compact_string(name)
    w.compact_nullable_string(value.subscribed_topic_regex).i32(value.rebalance_timeout_ms)
    w.compact_nullable_string(value.server_assignor)
    # Kafka's generated writer always writes tag 0 of this record: a nullable struct whose default
    # is an empty struct, so a null (a member of the consumer protocol) is a one-byte null marker.
    w.tagged_fields({0: encode_classic_member_metadata(value.classic_member_metadata)})


def encode_classic_member_metadata(metadata: ClassicMemberMetadata | None) -> bytes:
    """The ClassicMemberMetadata struct as tag 0 holds it: a presence varint, then the struct."""
    if metadata is None:
        return b"\x00"
    w = SchemaWriter().uvarint(1).i32(metadata.session_timeout_ms)
    w.compact_array_count(len(metadata.supported_protocols))
    for name, protocol_metadata in metadata.supported_protocols:
        w.compact_string(name).compact_bytes(protocol_metadata).tagged_fields()
    return w.tagged_fields().finish()


def _topic_partitions(w: SchemaWriter, assignment: Assignment) -> None:
    """``[]TopicPartitions``: topic id, partitions, tags; topics and partitions in sorted order."""
    w.compact_array_count(len(assignment))
    for topic_id in sorted(assignment):
        partitions = sorted(assignment[topic_id])
        w.uuid(topic_id).compact_array_count(len(partitions))
        for partition in partitions:
            w.i32(partition)
        w.tagged_fields()


# ----------------------------------------------------------------------------------------------
# Decoding


def decode_key(data: bytes) -> GroupRecordKey | None:
    """Parse a key; None for record types kompakt does not keep (share and streams groups)."""
    reader = SchemaReader(data, GroupRecordFormatError)
    version = reader.i16()
    key: GroupRecordKey
    if version in (0, 1):
        key = OffsetCommitKey(reader.classic_string(), reader.classic_string(), reader.i32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(reader.classic_string())
    elif version in CONSUMER_GROUP_RECORD_TYPES:
        group = reader.classic_string()
        member_id = reader.classic_string() if version in MEMBER_KEYED_TYPES else None
        key = ConsumerGroupRecordKey(version, group, member_id)
    else:
        return None
    reader.expect_end()
    return key


def decode_value(key: GroupRecordKey, data: bytes) -> GroupRecordValue:
    """Parse the value of ``key``'s schema; raises :class:`GroupRecordFormatError` when malformed."""
    reader = SchemaReader(data, GroupRecordFormatError)
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_commit(reader)
    if isinstance(key, GroupMetadataKey):
        return _decode_group_metadata(reader)
    return decode_consumer_value(key.record_type, data)


def _decode_offset_commit(reader: SchemaReader) -> CommittedOffset:
    """Versions 0-4. Version 4 is flexible (compact metadata string, tagged fields: the topic id,
    which is not kept); Kafka 4.1 writes it, kompakt writes version 3."""
    version = reader.i16()
    if not 0 <= version <= 4:
        raise GroupRecordFormatError(f"unsupported OffsetCommitValue version {version}")
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.compact_string() if version >= 4 else reader.classic_string()
    commit_ts = reader.i64()
    expire_ts = reader.i64() if version == 1 else None
    if version >= 4:
        reader.tagged_fields()
    if expire_ts is not None and expire_ts < 0:
        expire_ts = None
    return CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts)


def _decode_group_metadata(reader: SchemaReader) -> GroupMetadataValue:
    """Versions 0-3."""
    version = reader.i16()
    if not 0 <= version <= 3:
        raise GroupRecordFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = reader.classic_string()
    generation = reader.i32()
    protocol = reader.nullable_classic_string()
    leader = reader.nullable_classic_string()
    state_ts = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.bounded_count(reader.i32(), 2 + 2 + 2 + 4 + 4 + 4)):
        member_id = reader.classic_string()
        instance_id = reader.nullable_classic_string() if version >= 3 else None
        client_id = reader.classic_string()
        client_host = reader.classic_string()
        session_timeout = reader.i32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, reader.i32()
        subscription = reader.int32_bytes()
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                reader.int32_bytes(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def decode_consumer_value(record_type: int, data: bytes) -> ConsumerGroupRecordValue:
    """Parse a KIP-848 value of ``record_type``."""
    reader = SchemaReader(data, GroupRecordFormatError)
    version = reader.i16()
    if version != CONSUMER_VALUE_VERSION:
        raise GroupRecordFormatError(f"unsupported version {version} of record type {record_type}")
    value: ConsumerGroupRecordValue
    if record_type == CONSUMER_GROUP_METADATA:
        epoch = reader.i32()
        tags = reader.tagged_fields()
        metadata_hash = 0
        if 0 in tags:
            if len(tags[0]) != 8:
                raise GroupRecordFormatError("metadata hash tag is not 8 bytes")
            metadata_hash = SchemaReader(tags[0], GroupRecordFormatError).i64()
        value = ConsumerGroupMetadataValue(epoch, metadata_hash)
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        value = _decode_member_metadata(reader)
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = ConsumerGroupTargetAssignmentMetadataValue(reader.i32())
        reader.tagged_fields()
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = ConsumerGroupTargetAssignmentMemberValue(_decode_topic_partitions(reader))
        reader.tagged_fields()
    elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        member_epoch = reader.i32()
        previous_epoch = reader.i32()
        state = reader.i8()
        assigned = _decode_topic_partitions(reader)
        revoking = _decode_topic_partitions(reader)
        reader.tagged_fields()
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch, previous_epoch, state, assigned, revoking
        )
    elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
        return ConsumerGroupPartitionMetadataValue()
    elif record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        return ConsumerGroupRegularExpressionValue()
    else:
        raise GroupRecordFormatError(f"unknown consumer-group record type {record_type}")
    reader.expect_end()
    return value


def _decode_member_metadata(reader: SchemaReader) -> ConsumerGroupMemberMetadataValue:
    instance_id = reader.compact_nullable_string()
    rack_id = reader.compact_nullable_string()
    client_id = reader.compact_string()
    client_host = reader.compact_string()
    names = tuple(reader.compact_string() for _ in range(reader.compact_array_count(1)))
    regex = reader.compact_nullable_string()
    rebalance_timeout_ms = reader.i32()
    server_assignor = reader.compact_nullable_string()
    classic = reader.tagged_fields().get(0)
    return ConsumerGroupMemberMetadataValue(
        instance_id,
        rack_id,
        client_id,
        client_host,
        names,
        regex,
        rebalance_timeout_ms,
        server_assignor,
        None if classic is None else decode_classic_member_metadata(classic),
    )


def decode_classic_member_metadata(data: bytes) -> ClassicMemberMetadata | None:
    reader = SchemaReader(data, GroupRecordFormatError)
    if reader.uvarint() == 0:
        return None
    session_timeout_ms = reader.i32()
    protocols: list[tuple[str, bytes]] = []
    for _ in range(reader.compact_array_count(1 + 1 + 1)):
        name = reader.compact_string()
        protocols.append((name, reader.compact_bytes()))
        reader.tagged_fields()
    reader.tagged_fields()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def _decode_topic_partitions(reader: SchemaReader) -> dict[uuid.UUID, frozenset[int]]:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(reader.compact_array_count(16 + 1 + 1)):
        topic_id = uuid.UUID(bytes=reader.take(16))
        partitions = [reader.i32() for _ in range(reader.compact_array_count(4))]
        reader.tagged_fields()
        if partitions:
            result[topic_id] = result.get(topic_id, frozenset()) | frozenset(partitions)
    return result
