"""OffsetForLeaderEpoch (23), v2–4: the end offset of a leader epoch, for offset validation.

Every partition has had exactly one leader epoch, 0, so the answer is simple and matches what
Kafka's leader-epoch cache gives for its latest epoch: epoch 0 → ``(0, log end offset)``; any
other requested epoch (newer than ours, or -1) → ``(-1, -1)`` (UNDEFINED_EPOCH and
UNDEFINED_EPOCH_OFFSET, error NONE). ``current_leader_epoch`` (the fencing check) must be -1
or 0: a larger one is UNKNOWN_LEADER_EPOCH. librdkafka uses exactly v2 for consumer position
validation and only truncates when the end offset is below its position, which never happens
here because positions never pass the high watermark, and HW = LEO on a single node.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.errors import KompaktError
from kompakt.log.partition_log import LEADER_EPOCH
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import offset_for_leader_epoch as m


def _partition(ctx: RequestContext, topic: str, p: m.OffsetForLeaderPartition) -> m.EpochEndOffset:
    entry = m.EpochEndOffset(error_code=codec.ErrorCode.none, partition=p.partition)
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
        entry.error_code = codec.ErrorCode.topic_authorization_failed
        return entry
    try:
        partition_log = ctx.broker.logs.get_log(topic, p.partition)
        if p.current_leader_epoch > LEADER_EPOCH:
            entry.error_code = codec.ErrorCode.unknown_leader_epoch
        elif p.leader_epoch == LEADER_EPOCH:
            entry.leader_epoch, entry.end_offset = LEADER_EPOCH, partition_log.log_end_offset
    except KompaktError as exc:
        entry.error_code = error_code_for(exc)
    return entry


def handle(ctx: RequestContext, request: m.OffsetForLeaderEpochRequest) -> m.OffsetForLeaderEpochResponse:
    return m.OffsetForLeaderEpochResponse(
        topics=[
            m.OffsetForLeaderTopicResult(
                topic=topic.topic, partitions=[_partition(ctx, topic.topic, p) for p in topic.partitions]
            )
            for topic in request.topics
        ]
    )


SPEC = HandlerSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, handle)
