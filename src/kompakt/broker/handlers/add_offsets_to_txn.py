"""AddOffsetsToTxn (25), v0–4: a consumer group's offsets join the producer's transaction.

As in Kafka, this adds the group's ``__consumer_offsets`` partition to the transaction, so the
transaction's markers reach it and its TxnOffsetCommit records become visible on COMMIT.
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.groups import OFFSETS_TOPIC, partition_for
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import add_offsets_to_txn as m


def offsets_partitions(ctx: RequestContext) -> int:
    """The partition count that places groups in ``__consumer_offsets`` (the topic's, once it exists)."""
    logs = ctx.broker.log_manager
    if logs is None:
        return ctx.broker.broker_config.offsets_topic_num_partitions
    meta = logs.topics().get(OFFSETS_TOPIC)
    return meta.partitions if meta is not None else logs.broker_config.offsets_topic_num_partitions


def handle(ctx: RequestContext, request: m.AddOffsetsToTxnRequest) -> m.AddOffsetsToTxnResponse:
    coordinator = ctx.broker.txn
    group_id = request.group_id
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = codec.ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        error = codec.ErrorCode.group_authorization_failed
    elif coordinator is None:
        error = codec.ErrorCode.coordinator_not_available
    elif not group_id:
        error = codec.ErrorCode.invalid_group_id
    else:
        partition = (OFFSETS_TOPIC, partition_for(group_id, offsets_partitions(ctx)))
        error = coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            [partition],
        )
        if error is codec.ErrorCode.producer_fenced and ctx.api_version < 2:
            error = codec.ErrorCode.invalid_producer_epoch
    return m.AddOffsetsToTxnResponse(error_code=error)


SPEC = HandlerSpec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle, blocking=True)
