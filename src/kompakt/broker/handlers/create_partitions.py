"""CreatePartitions (37), v0–3: grow a topic's partition count, or only validate the growth.

Partitions can only be added (Kafka's INVALID_PARTITIONS otherwise); a manual assignment must
name one replica set per new partition, each holding only this broker. Each topic is answered on
its own; a topic named twice fails with INVALID_REQUEST.
"""

from __future__ import annotations

from kompakt.broker import topic_admin
from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.per_item import answer_each
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import create_partitions as m


def _failure(topic: m.CreatePartitionsTopic, error: topic_admin.AdminError) -> m.CreatePartitionsTopicResult:
    return m.CreatePartitionsTopicResult(name=topic.name, error_code=error.code, error_message=error.message)


def handle(ctx: RequestContext, request: m.CreatePartitionsRequest) -> m.CreatePartitionsResponse:
    broker = ctx.broker

    def grow(topic: m.CreatePartitionsTopic) -> m.CreatePartitionsTopicResult:
        if not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            raise topic_admin.AdminError(
                codec.ErrorCode.topic_authorization_failed, "The topic authorization is failed."
            )
        assignments = (
            None if topic.assignments is None else [[int(b) for b in a.broker_ids] for a in topic.assignments]
        )
        topic_admin.create_partitions(
            broker.logs,
            broker.node_id,
            topic.name,
            int(topic.count),
            assignments,
            validate_only=request.validate_only,
        )
        return m.CreatePartitionsTopicResult(name=topic.name, error_code=codec.ErrorCode.none)

    results = answer_each(
        request.topics, lambda topic: topic.name, grow, _failure, duplicate="Duplicate topic name."
    )
    return m.CreatePartitionsResponse(results=results)


SPEC = HandlerSpec(ApiKey.CREATE_PARTITIONS, 0, 3, handle, blocking=True)
