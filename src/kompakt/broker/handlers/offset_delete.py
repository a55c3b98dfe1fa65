"""OffsetDelete (47), v0 (KIP-496): remove a group's committed offsets for some partitions.

As Kafka's ``KafkaApis.handleOffsetDeleteRequest``: a topic that does not exist answers
UNKNOWN_TOPIC_OR_PARTITION for each of its partitions, and so does a partition that does not
exist; the rest go to the coordinator (:meth:`GroupCoordinator.delete_offsets`), whose group-level
error, when it has one, is the whole answer.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import offset_delete as m


def handle(ctx: RequestContext, request: m.OffsetDeleteRequest) -> m.OffsetDeleteResponse:
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return m.OffsetDeleteResponse(error_code=codec.ErrorCode.group_authorization_failed, topics=[])
    answered: dict[str, list[tuple[int, codec.ErrorCode]]] = {}
    valid: list[tuple[str, list[int]]] = []
    for topic in request.topics:
        if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name):
            denied = codec.ErrorCode.topic_authorization_failed
            answered.setdefault(topic.name, []).extend((p.partition_index, denied) for p in topic.partitions)
            continue
        exists = [
            p.partition_index
            for p in topic.partitions
            if ctx.broker.partition_exists(topic.name, p.partition_index)
        ]
        missing = [p.partition_index for p in topic.partitions if p.partition_index not in exists]
        if missing:
            answered.setdefault(topic.name, []).extend(
                (p, codec.ErrorCode.unknown_topic_or_partition) for p in missing
            )
        if exists:
            valid.append((topic.name, exists))
    error, results = ctx.broker.groups.delete_offsets(request.group_id, valid)
    if error is not codec.ErrorCode.none:
        return m.OffsetDeleteResponse(error_code=error, topics=[])
    for name, partitions in results:
        answered.setdefault(name, []).extend(partitions)
    return m.OffsetDeleteResponse(
        error_code=codec.ErrorCode.none,
        topics=[
            m.OffsetDeleteResponseTopic(
                name=name,
                partitions=[
                    m.OffsetDeleteResponsePartition(partition_index=p, error_code=e) for p, e in partitions
                ],
            )
            for name, partitions in answered.items()
        ],
    )


SPEC = HandlerSpec(ApiKey.OFFSET_DELETE, 0, 0, handle)
