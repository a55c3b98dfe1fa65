"""EndTxn (26), v0–5: commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort to ``__transaction_state``, the markers to
every partition of the transaction, then CompleteCommit/CompleteAbort
(``TransactionCoordinator.end_transaction``). The answer is NONE once the decision is durable,
even if a marker must be retried later, as Kafka answers. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2.

v5 is transactions version 2 (KIP-890 part 2, Kafka's ``transactionVersionForEndTxn``): the
coordinator bumps the epoch for every commit and abort and the answer carries the producer id
and epoch the producer goes on with (a new producer id at epoch 0 once the epoch is exhausted).
A client sends v5 only when ApiVersions finalized ``transaction.version`` 2, as Kafka's does.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.txn.coordinator import EndTxnResult
from kompakt.broker.txn.metadata import TV_0, TV_2
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import end_txn as m


def handle(ctx: RequestContext, request: m.EndTxnRequest) -> m.EndTxnResponse:
    coordinator = ctx.broker.txn
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        result = EndTxnResult(codec.ErrorCode.transactional_id_authorization_failed)
    elif coordinator is None:
        result = EndTxnResult(codec.ErrorCode.coordinator_not_available)
    else:
        result = coordinator.end_transaction_result(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            bool(request.committed),
            TV_2 if ctx.api_version > 4 else TV_0,
        )
    error = result.error
    if error is codec.ErrorCode.producer_fenced and ctx.api_version < 2:
        error = codec.ErrorCode.invalid_producer_epoch
    return m.EndTxnResponse(
        error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch
    )


SPEC = HandlerSpec(ApiKey.END_TXN, 0, 5, handle, blocking=True)
