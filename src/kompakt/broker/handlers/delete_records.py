"""DeleteRecords (21), v0–2: raise partitions' log start offsets (``AdminClient.deleteRecords``).

Per partition, as Kafka's ``ReplicaManager.deleteRecordsOnLocalLog`` and
``Partition.deleteRecordsOnLeader`` answer: an unknown partition is UNKNOWN_TOPIC_OR_PARTITION,
an internal topic INVALID_TOPIC_EXCEPTION, an offset of -1 means
the high watermark, and any other negative offset or one above the high watermark is
OFFSET_OUT_OF_RANGE. The answer's low watermark is the partition's log start offset afterwards
(-1 on error). Records below it are unreadable at once (Fetch answers OFFSET_OUT_OF_RANGE,
ListOffsets earliest names the new start); whole segments below it go at the next retention pass.

Two differences from Kafka, on purpose. A topic with ``cleanup.policy=compact`` can be trimmed:
Kafka's ``UnifiedLog.deleteRecords`` answers POLICY_VIOLATION unless the policy includes
``delete``, which leaves no way to drop the head of a compacted changelog (replaying a table from a
known point, discarding records written by a bug) short of deleting the topic. Trimming is the
log-start-offset pass of retention, which runs for compacted topics too, and the cleaner starts
from the new log start; nothing else about compaction changes. And the new start offsets are written to
``log-start-offset-checkpoint`` before the answer goes out, so a crash right after an acknowledged
DeleteRecords cannot bring the deleted records back (Kafka writes that file every
``log.flush.start.offset.checkpoint.interval.ms``).
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import OFFSETS_TOPIC, HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.errors import KompaktError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import delete_records as m

#: ``DeleteRecordsRequest.HIGH_WATERMARK``: delete everything below the high watermark.
HIGH_WATERMARK = -1
#: ``DeleteRecordsResponse.INVALID_LOW_WATERMARK``.
INVALID_LOW_WATERMARK = -1
#: Kafka's ``Topic.isInternal``: topics clients may not trim.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})


def _delete(ctx: RequestContext, topic: str, partition: int, offset: int) -> tuple[int, codec.ErrorCode]:
    """``(low_watermark, error)`` for one partition."""
    if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, topic):
        return INVALID_LOW_WATERMARK, codec.ErrorCode.topic_authorization_failed
    try:
        partition_log = ctx.broker.logs.get_log(topic, partition)
        if topic in INTERNAL_TOPICS:
            return INVALID_LOW_WATERMARK, codec.ErrorCode.invalid_topic_exception
        target = partition_log.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            return INVALID_LOW_WATERMARK, codec.ErrorCode.offset_out_of_range
        partition_log.increment_log_start_offset(target)
        return partition_log.log_start_offset, codec.ErrorCode.none
    except KompaktError as exc:
        return INVALID_LOW_WATERMARK, error_code_for(exc)


def handle(ctx: RequestContext, request: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
    answer = []
    advanced = False
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            low_watermark, error = _delete(ctx, topic.name, p.partition_index, p.offset)
            advanced = advanced or error is codec.ErrorCode.none
            partitions.append(
                m.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low_watermark, error_code=error
                )
            )
        answer.append(m.DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    if advanced:
        ctx.broker.logs.checkpoint_log_start_offsets()
    return m.DeleteRecordsResponse(topics=answer)


SPEC = HandlerSpec(ApiKey.DELETE_RECORDS, 0, 2, handle, blocking=True)
