"""ListOffsets (2), v1–7: earliest, latest, max timestamp, and offset by time.

Timestamps: -2 → the log start offset; -1 → the high watermark (the LSO for read_committed,
v2+); -3 → the offset and time of the largest timestamp (v7, KIP-734); ≥ 0 → the first offset
whose timestamp is ≥ it (``PartitionLog.offset_for_timestamp``). Nothing found → offset -1 and
timestamp -1, error NONE, as Kafka answers. Earliest and latest answer timestamp -1. v1 has a
single offset per partition (the v0 offset list is gone); the builder drops the fields a version
lacks, so one body serves every version. The leader epoch (v4+) is 0, as Metadata reports.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.errors import KompaktError
from kompakt.log.partition_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import list_offsets as m

READ_COMMITTED = 1
_SPECIAL = (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP)


def _partition(
    ctx: RequestContext, topic: str, p: m.ListOffsetsPartition, read_committed: bool
) -> m.ListOffsetsPartitionResponse:
    entry = m.ListOffsetsPartitionResponse(
        partition_index=p.partition_index, error_code=codec.ErrorCode.none, leader_epoch=0
    )
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
        entry.error_code, entry.leader_epoch = codec.ErrorCode.topic_authorization_failed, -1
        return entry
    try:
        partition_log = ctx.broker.logs.get_log(topic, p.partition_index)
        if p.timestamp >= 0 or p.timestamp in _SPECIAL:
            found = partition_log.offset_for_timestamp(p.timestamp, read_committed=read_committed)
        else:
            found = None  # a negative timestamp this version does not define
        if found is not None:
            entry.offset, entry.timestamp = found
    except KompaktError as exc:
        entry.error_code, entry.leader_epoch = error_code_for(exc), -1
    return entry


def handle(ctx: RequestContext, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
    read_committed = request.isolation_level == READ_COMMITTED
    return m.ListOffsetsResponse(
        topics=[
            m.ListOffsetsTopicResponse(
                name=topic.name,
                partitions=[_partition(ctx, topic.name, p, read_committed) for p in topic.partitions],
            )
            for topic in request.topics
        ]
    )


SPEC = HandlerSpec(ApiKey.LIST_OFFSETS, 1, 7, handle, blocking=True)
