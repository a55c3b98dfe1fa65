"""DescribeTransactions (65), v0: the coordinator's state of each transactional id (KIP-664).

An unknown (or expiring) id is TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST. The
start time is -1 for a transaction that has not started, as Kafka answers.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_transactions as m


def _state(ctx: RequestContext, transactional_id: str) -> m.TransactionState:
    coordinator = ctx.broker.txn
    if coordinator is None or not ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return m.TransactionState(
            error_code=codec.ErrorCode.coordinator_not_available
            if coordinator is None
            else codec.ErrorCode.transactional_id_authorization_failed,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout=0,
            transaction_start_time=-1,
            producer_id=-1,
            producer_epoch=-1,
            topics=[],
        )
    d = coordinator.describe(transactional_id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in d.partitions:
        # Kafka lists only the partitions of topics the caller may DESCRIBE.
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            continue
        by_topic.setdefault(topic, []).append(partition)
    return m.TransactionState(
        error_code=d.error,
        transactional_id=transactional_id,
        transaction_state=d.state,
        transaction_timeout=d.timeout_ms,
        transaction_start_time=d.start_time_ms,  # -1 (not started) stays -1 on the wire
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        topics=[m.TopicData(topic=topic, partitions=parts) for topic, parts in by_topic.items()],
    )


def handle(ctx: RequestContext, request: m.DescribeTransactionsRequest) -> m.DescribeTransactionsResponse:
    return m.DescribeTransactionsResponse(
        transaction_states=[_state(ctx, i) for i in request.transactional_ids]
    )


SPEC = HandlerSpec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, handle)
