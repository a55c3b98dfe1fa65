"""EndTxn (26), v0–4: commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort to ``__transaction_state``, the markers to
every partition of the transaction, then CompleteCommit/CompleteAbort
(``TransactionCoordinator.end_transaction``). The answer is NONE once the decision is durable,
even if a marker must be retried later, as Kafka answers. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. v5 (an epoch bump per transaction, KIP-890 part 2) is not
offered.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import end_txn as m


def handle(ctx: RequestContext, request: m.EndTxnRequest) -> m.EndTxnResponse:
    coordinator = ctx.broker.txn
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = codec.ErrorCode.transactional_id_authorization_failed
    elif coordinator is None:
        error = codec.ErrorCode.coordinator_not_available
    else:
        error = coordinator.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            bool(request.committed),
        )
        if error is codec.ErrorCode.producer_fenced and ctx.api_version < 2:
            error = codec.ErrorCode.invalid_producer_epoch
    return m.EndTxnResponse(error_code=error)


SPEC = HandlerSpec(ApiKey.END_TXN, 0, 4, handle, blocking=True)
