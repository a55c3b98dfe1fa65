"""OffsetFetch (9), v1–9.

v2 makes ``topics`` nullable (null = every partition the group committed) and adds a top-level error
code; v5 returns the committed leader epoch; v7 adds ``require_stable``: a partition with a
transactional commit still undecided answers UNSTABLE_OFFSET_COMMIT (retriable), as Kafka does, so
an exactly-once consumer never starts from an offset its producer's transaction may still move;
v8 batches groups; v9 (KIP-848) names the consumer-group member and its epoch, checked as Kafka's
``ConsumerGroup.validateOffsetFetch`` does (STALE_MEMBER_EPOCH). A partition without a committed
offset answers offset -1 and no error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.errors import GroupError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import offset_fetch as m


class _Topic(Protocol):
    """A requested topic, in v1–7 (``OffsetFetchRequestTopic``) and v8+ (``…Topics``) alike."""

    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class _Fetched:
    """One partition's answer, before it takes the shape of the version asked."""

    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: codec.ErrorCode


def _fetched(
    ctx: RequestContext, group_id: str, topics: Sequence[_Topic] | None, require_stable: bool
) -> dict[str, list[_Fetched]]:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    by_topic: dict[str, list[_Fetched]] = {}
    groups = ctx.broker.groups
    for topic, partition, committed in groups.fetch_offsets(group_id, wanted):
        if require_stable and groups.has_pending_transactional(group_id, topic, partition):
            fetched = _Fetched(partition, -1, -1, "", codec.ErrorCode.unstable_offset_commit)
        elif committed is None:
            fetched = _Fetched(partition, -1, -1, "", codec.ErrorCode.none)
        else:
            fetched = _Fetched(
                partition,
                committed.offset,
                committed.leader_epoch,
                committed.metadata or "",
                codec.ErrorCode.none,
            )
        by_topic.setdefault(topic, []).append(fetched)
    for topic_request in topics or ():
        by_topic.setdefault(topic_request.name, [])
    # KafkaApis: all topics means those the caller may DESCRIBE; a named one it may not is
    # answered TOPIC_AUTHORIZATION_FAILED without its offsets.
    for topic in list(by_topic):
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            continue
        if topics is None:
            del by_topic[topic]
            continue
        denied = codec.ErrorCode.topic_authorization_failed
        by_topic[topic] = [
            _Fetched(p, -1, -1, "", denied) for t in topics if t.name == topic for p in t.partition_indexes
        ]
    return by_topic


def _group(
    ctx: RequestContext, group: m.OffsetFetchRequestGroup, require_stable: bool
) -> m.OffsetFetchResponseGroup:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
        return m.OffsetFetchResponseGroup(
            group_id=group.group_id, topics=[], error_code=codec.ErrorCode.group_authorization_failed
        )
    try:
        ctx.broker.groups.validate_offset_fetch(group.group_id, group.member_id, group.member_epoch)
    except GroupError as exc:
        return m.OffsetFetchResponseGroup(group_id=group.group_id, topics=[], error_code=error_code_for(exc))
    topics = [
        m.OffsetFetchResponseTopics(
            name=name,
            partitions=[
                m.OffsetFetchResponsePartitions(
                    partition_index=f.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for f in partitions
            ],
        )
        for name, partitions in _fetched(ctx, group.group_id, group.topics, require_stable).items()
    ]
    return m.OffsetFetchResponseGroup(group_id=group.group_id, topics=topics, error_code=codec.ErrorCode.none)


def handle(ctx: RequestContext, request: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
    if ctx.api_version >= 8:
        return m.OffsetFetchResponse(groups=[_group(ctx, g, request.require_stable) for g in request.groups])
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return m.OffsetFetchResponse(topics=[], error_code=codec.ErrorCode.group_authorization_failed)
    topics = [
        m.OffsetFetchResponseTopic(
            name=name,
            partitions=[
                m.OffsetFetchResponsePartition(
                    partition_index=f.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for f in partitions
            ],
        )
        for name, partitions in _fetched(
            ctx, request.group_id, request.topics, request.require_stable
        ).items()
    ]
    return m.OffsetFetchResponse(topics=topics, error_code=codec.ErrorCode.none)


SPEC = HandlerSpec(ApiKey.OFFSET_FETCH, 1, 9, handle)
