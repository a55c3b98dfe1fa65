"""Online migration of a live group between the classic and the consumer protocol (KIP-848).

Kafka 4.1 converts a group in place, with ``group.consumer.migration.policy`` (``upgrade``,
``downgrade``, ``bidirectional`` or ``disabled``) deciding which ways are allowed:

* **Upgrade** (``convertToConsumerGroup``, ``ConsumerGroup.fromClassicGroup``): a member of the
  consumer protocol heartbeats to a classic group whose members use the embedded consumer
  protocol. The classic group is tombstoned and a consumer group written in its place: epoch =
  the classic generation, each classic member a member at that epoch, Stable, owning (and
  targeted with) the partitions of its last SyncGroup assignment. The heartbeat then joins the
  new group as usual, which bumps the epoch and makes the classic members rejoin and reconcile.
* **Downgrade** (``convertToClassicGroup``, ``ClassicGroup.fromConsumerGroup``): when the last
  member of the consumer protocol leaves or is fenced and only classic members remain, the
  consumer group is tombstoned and a classic group written: Stable, generation = the group epoch,
  the members' target assignments as their SyncGroup assignments; it then rebalances.

Either way the conversion is one batch: one type's tombstones, then the other's records, so a
restart replays into exactly one group. These functions only build the records (they read the
group they convert and change nothing); the coordinator appends and replays them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kompakt.broker.groups.classic.group import ClassicGroup, ClassicGroupMember, GroupState
from kompakt.broker.groups.config import ConsumerGroupConfig
from kompakt.broker.groups.consumer.group import ConsumerGroup, ConsumerGroupMember, topic_hash
from kompakt.broker.groups.consumer.reconciliation import MemberAssignmentState, MemberState, OwnedPartitions
from kompakt.broker.groups.errors import GroupIdNotFoundError
from kompakt.broker.groups.records import consumer_protocol
from kompakt.broker.groups.records import schemas as rec
from kompakt.broker.groups.result import Downgrade

#: Topic name -> (topic id, partition count).
Topics = Mapping[str, tuple[uuid.UUID, int]]


@dataclass(frozen=True, slots=True)
class Conversion:
    records: list[rec.GroupRecord]
    note: Downgrade


def by_topic_name(assignment: rec.Assignment, topics: Topics) -> dict[str, list[int]]:
    """An assignment by topic id as the embedded consumer protocol carries it (by name); partitions
    of a topic that no longer exists are left out."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {names[t]: sorted(parts) for t, parts in assignment.items() if t in names and parts}


def by_topic_id(
    partitions: Iterable[tuple[str, Sequence[int]]], topics: Topics
) -> dict[uuid.UUID, frozenset[int]]:
    """Partitions by topic name as a KIP-848 assignment (unknown topics are left out)."""
    result: dict[uuid.UUID, frozenset[int]] = {}
    for name, parts in partitions:
        if name in topics and parts:
            topic_id = topics[name][0]
            result[topic_id] = result.get(topic_id, frozenset()) | frozenset(parts)
    return result


def owned_partitions(partitions: Iterable[tuple[str, Sequence[int]]], topics: Topics) -> OwnedPartitions:
    """A classic member's owned partitions (its subscription's) as a heartbeat would report them."""
    return [(topic_id, tuple(sorted(parts))) for topic_id, parts in by_topic_id(partitions, topics).items()]


# ----------------------------------------------------------------------------------------------
# Upgrade: classic -> consumer


def check_upgrade(group: ClassicGroup, config: ConsumerGroupConfig) -> None:
    """Kafka's ``validateOnlineUpgrade``: a refused upgrade answers GROUP_ID_NOT_FOUND."""
    group_id = group.group_id
    if config.migration_policy not in ("upgrade", "bidirectional"):
        raise GroupIdNotFoundError(
            f"Cannot upgrade classic group {group_id} to consumer group because online upgrade is disabled."
        )
    if not group.uses_consumer_protocol():
        raise GroupIdNotFoundError(
            f"Cannot upgrade classic group {group_id} to consumer group because the group does not use the "
            "consumer embedded protocol."
        )
    if len(group.members) > config.max_size:
        raise GroupIdNotFoundError(
            f"Cannot upgrade classic group {group_id} to consumer group because the group size exceeds the "
            "consumer group maximum size."
        )


def to_consumer_group(group: ClassicGroup, topics: Topics) -> tuple[list[rec.GroupRecord], ConsumerGroup]:
    """The records that replace a classic group by a consumer group (the classic tombstone first,
    then Kafka's ``createConsumerGroupRecords``), and that consumer group as their replay builds it."""
    generation = group.generation_id
    members: list[ConsumerGroupMember] = []
    for classic in group.members.values():
        try:
            members.append(_consumer_member(group, classic, topics))
        except rec.GroupRecordFormatError as exc:
            raise GroupIdNotFoundError(
                f"Cannot upgrade classic group {group.group_id} to consumer group because the embedded "
                "consumer "
                f"protocol is malformed: {exc}."
            ) from exc
    names = {n for m in members for n in m.subscribed_topic_names}
    group_id = group.group_id
    records: list[rec.GroupRecord] = [(rec.GroupMetadataKey(group_id), None)]
    consumer: list[rec.GroupRecord] = []
    consumer += [
        (rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group_id, m.member_id), m.metadata_value())
        for m in members
    ]
    consumer.append(
        (
            rec.group_key(rec.CONSUMER_GROUP_METADATA, group_id),
            rec.ConsumerGroupMetadataValue(generation, topic_hash(topics, names)),
        )
    )
    consumer += [
        (
            rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, m.member_id),
            rec.ConsumerGroupTargetAssignmentMemberValue(m.assignment.assigned_partitions),
        )
        for m in members
    ]
    consumer.append(
        (
            rec.group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
            rec.ConsumerGroupTargetAssignmentMetadataValue(generation),
        )
    )
    consumer += [
        (
            rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id),
            m.assignment_value(),
        )
        for m in members
    ]
    converted = ConsumerGroup(group_id)
    for key, value in consumer:
        assert isinstance(key, rec.ConsumerGroupRecordKey) and not isinstance(
            value, (rec.CommittedOffset, rec.GroupMetadataValue)
        )
        converted.replay(key, value)
    return records + consumer, converted


def _consumer_member(group: ClassicGroup, member: ClassicGroupMember, topics: Topics) -> ConsumerGroupMember:
    """``ConsumerGroup.fromClassicGroup`` for one member: Stable at the group's generation, owning
    the partitions of its last assignment (none if it never synced)."""
    partitions, user_data = consumer_protocol.decode_assignment(member.assignment)
    if user_data:
        raise GroupIdNotFoundError(
            f"Cannot upgrade classic group {group.group_id} to consumer group because an unsupported custom "
            "assignor is in use. Please refer to the documentation or switch to a default assignor before "
            "re-attempting the upgrade."
        )
    metadata = member.metadata_for(group.protocol_name) if group.protocol_name else member.protocols[0][1]
    subscription = consumer_protocol.decode_subscription(metadata)
    generation = group.generation_id
    return ConsumerGroupMember(
        member_id=member.member_id,
        instance_id=member.group_instance_id,
        rack_id=subscription.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        subscribed_topic_regex="",
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        classic_member_metadata=rec.ClassicMemberMetadata(member.session_timeout_ms, member.protocols),
        assignment=MemberAssignmentState(
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            assigned_partitions=by_topic_id(partitions, topics),
        ),
    )


# ----------------------------------------------------------------------------------------------
# Downgrade: consumer -> classic


def consumer_group_tombstones(group: ConsumerGroup) -> list[rec.GroupRecord]:
    """Every record of a consumer group, tombstoned (``ConsumerGroup.createGroupTombstoneRecords``)."""
    gid = group.group_id
    ids = list(group.members)
    records: list[rec.GroupRecord] = []
    records += [(rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, m), None) for m in ids]
    records += [(rec.member_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, m), None) for m in ids]
    records.append((rec.group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid), None))
    records += [(rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, gid, m), None) for m in ids]
    records.append((rec.group_key(rec.CONSUMER_GROUP_PARTITION_METADATA, gid), None))
    records.append((rec.group_key(rec.CONSUMER_GROUP_METADATA, gid), None))
    return records


def to_classic_group(group: ConsumerGroup, leaving: set[str], topics: Topics, now_ms: int) -> Conversion:
    """The records that replace a consumer group by a classic group of its remaining (classic)
    members: the consumer group's tombstones, then the classic group's GroupMetadata record."""
    classic = ClassicGroup(
        group.group_id, state=GroupState.STABLE, generation_id=group.group_epoch, protocol_type="consumer"
    )
    protocols: dict[str, tuple[tuple[str, bytes], ...]] = {}
    for member_id, member in group.members.items():
        metadata = member.classic_member_metadata
        if member_id in leaving or metadata is None:
            continue
        protocols[member_id] = metadata.supported_protocols
        classic.add(
            ClassicGroupMember(
                member_id=member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                session_timeout_ms=metadata.session_timeout_ms,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                protocol_type="consumer",
                protocols=metadata.supported_protocols,
            )
        )
    classic.protocol_name = classic.select_protocol()
    for joined in classic.members.values():
        joined.assignment = consumer_protocol.encode_assignment(
            by_topic_name(group.target_of(joined.member_id), topics),
            consumer_protocol.version_of(joined.metadata_for(classic.protocol_name)),
        )
    records = consumer_group_tombstones(group)
    records.append((rec.GroupMetadataKey(group.group_id), classic.metadata_value(now_ms)))
    return Conversion(records, Downgrade(group.group_id, protocols))
