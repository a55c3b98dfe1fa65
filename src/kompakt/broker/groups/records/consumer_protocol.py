"""The embedded consumer protocol: what a classic consumer puts in JoinGroup and gets from SyncGroup.

A classic member of protocol type ``consumer`` sends a ConsumerProtocolSubscription as each
protocol's metadata and receives a ConsumerProtocolAssignment (Kafka's ``ConsumerProtocol``, schemas
in ``clients/src/main/resources/common/message/ConsumerProtocol*.json``). The broker never needs
them for a classic group, but KIP-848's online migration does: a classic member of a consumer group
is reconciled from the topics it subscribes to and the partitions it owns, and is answered its
partitions in this format; converting a group between the two protocols reads and writes them.

Both are non-flexible: an int16 version, then the fields. A newer version than kompakt knows is
read as the newest one it knows, as Kafka reads it (new versions only append fields).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kompakt.broker.groups.records.schemas import GroupRecordFormatError
from kompakt.broker.schema_reader import SchemaReader
from kompakt.broker.schema_writer import SchemaWriter

SUBSCRIPTION_VERSION = 3
#: ``topic -> partitions``, by topic name as the embedded protocol carries them.
TopicPartitions = Mapping[str, Sequence[int]]


@dataclass(frozen=True, slots=True)
class Subscription:
    """ConsumerProtocolSubscription v0-3."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


def version_of(data: bytes) -> int:
    """The version a subscription or assignment was written with (0 when unreadable)."""
    return int.from_bytes(data[:2], "big", signed=True) if len(data) >= 2 else 0


def decode_subscription(data: bytes) -> Subscription:
    reader = SchemaReader(data, GroupRecordFormatError)
    version = min(reader.i16(), SUBSCRIPTION_VERSION)
    if version < 0:
        raise GroupRecordFormatError(f"unsupported ConsumerProtocolSubscription version {version}")
    topics = tuple(reader.classic_string() for _ in range(reader.bounded_count(reader.i32(), 2)))
    user_data = _nullable_bytes(reader)
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id, rack_id = -1, None
    if version >= 1:
        owned = _topic_partitions(reader)
    if version >= 2:
        generation_id = reader.i32()
    if version >= 3:
        rack_id = reader.nullable_classic_string()
    return Subscription(topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], bytes | None]:
    """ConsumerProtocolAssignment: ``(assigned partitions by topic, user data)``; empty bytes are
    the empty assignment of a member that never synced."""
    if not data:
        return (), None
    reader = SchemaReader(data, GroupRecordFormatError)
    if reader.i16() < 0:
        raise GroupRecordFormatError("negative ConsumerProtocolAssignment version")
    return _topic_partitions(reader), _nullable_bytes(reader)


def encode_assignment(partitions: TopicPartitions, version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``version`` (the member's subscription's), topics and
    partitions sorted."""
    w = SchemaWriter().i16(max(0, min(version, SUBSCRIPTION_VERSION)))
    topics = sorted(t for t, parts in partitions.items() if parts)
    w.i32(len(topics))
    for topic in topics:
        parts = sorted(partitions[topic])
        w.classic_string(topic).i32(len(parts))
        for partition in parts:
            w.i32(partition)
    return w.i32(-1).finish()  # no user data


def encode_subscription(subscription: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """A ConsumerProtocolSubscription (tests and tools write one as a client would)."""
    w = SchemaWriter().i16(version).i32(len(subscription.topics))
    for topic in subscription.topics:
        w.classic_string(topic)
    if subscription.user_data is None:
        w.i32(-1)
    else:
        w.int32_bytes(subscription.user_data)
    if version >= 1:
        w.i32(len(subscription.owned_partitions))
        for topic, parts in subscription.owned_partitions:
            w.classic_string(topic).i32(len(parts))
            for partition in parts:
                w.i32(partition)
    if version >= 2:
        w.i32(subscription.generation_id)
    if version >= 3:
        w.nullable_classic_string(subscription.rack_id)
    return w.finish()


def _nullable_bytes(reader: SchemaReader) -> bytes | None:
    length = reader.i32()
    return None if length < 0 else reader.take(length)


def _topic_partitions(reader: SchemaReader) -> tuple[tuple[str, tuple[int, ...]], ...]:
    result = []
    for _ in range(reader.bounded_count(reader.i32(), 2 + 4)):
        topic = reader.classic_string()
        result.append((topic, tuple(reader.i32() for _ in range(reader.bounded_count(reader.i32(), 4)))))
    return tuple(result)
