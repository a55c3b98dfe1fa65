"""DescribeProducers (61), v0: a partition's active producers (KIP-664).

Per producer the partition's own state (``PartitionLog.producer_state``): its epoch, last
sequence and timestamp, the coordinator epoch of its last marker, and the first offset of its
open transaction (-1 when none): the view ``kafka-transactions.sh describe-producers`` shows, and
the way to find a transaction that pins a partition's LSO.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.errors import KompaktError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_producers as m


def _partition(ctx: RequestContext, topic: str, partition: int) -> m.PartitionResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic):
        return m.PartitionResponse(
            partition_index=partition,
            error_code=codec.ErrorCode.topic_authorization_failed,
            error_message=None,
            active_producers=[],
        )
    try:
        partition_log = ctx.broker.logs.get_log(topic, partition)
        with partition_log.lock:
            producers = [
                m.ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=-1
                    if entry.current_txn_first_offset is None
                    else entry.current_txn_first_offset,
                )
                for entry in sorted(
                    partition_log.producer_state.producers.values(), key=lambda e: e.producer_id
                )
            ]
    except KompaktError as exc:
        return m.PartitionResponse(
            partition_index=partition,
            error_code=error_code_for(exc),
            error_message=str(exc),
            active_producers=[],
        )
    return m.PartitionResponse(
        partition_index=partition, error_code=codec.ErrorCode.none, active_producers=producers
    )


def handle(ctx: RequestContext, request: m.DescribeProducersRequest) -> m.DescribeProducersResponse:
    return m.DescribeProducersResponse(
        topics=[
            m.TopicResponse(name=t.name, partitions=[_partition(ctx, t.name, p) for p in t.partition_indexes])
            for t in request.topics
        ]
    )


SPEC = HandlerSpec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle, blocking=True)
