"""InitProducerId (22), v0–5: producer ids for idempotent and transactional producers.

Without a transactional id the id comes from ``ProducerIdManager`` (persisted in blocks, never
reused across restarts), epoch 0; a v3+ request carrying the id and epoch we issued bumps the
epoch (KIP-360), which lets a producer reset its sequences after an error without a new id.

With a transactional id the transaction coordinator answers (``TransactionCoordinator
.init_producer_id``): the id's producer id with its epoch bumped, which fences every older
instance; an Ongoing transaction of the id is aborted first and the client is told
CONCURRENT_TRANSACTIONS, so it retries. PRODUCER_FENCED (v4+) is INVALID_PRODUCER_EPOCH for
older clients, as Kafka answers. v6 (two-phase commit, KIP-939) is not offered.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import init_producer_id as m


def _answer(error: codec.ErrorCode, pid: int = -1, epoch: int = -1) -> m.InitProducerIdResponse:
    return m.InitProducerIdResponse(error_code=error, producer_id=pid, producer_epoch=epoch)


def handle(ctx: RequestContext, request: m.InitProducerIdRequest) -> m.InitProducerIdResponse:
    transactional_id = request.transactional_id
    producer_id, producer_epoch = request.producer_id, request.producer_epoch
    broker = ctx.broker
    # KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id; an idempotent
    # producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    if transactional_id is not None:
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return _answer(codec.ErrorCode.transactional_id_authorization_failed)
    elif not (
        ctx.authorized_cluster(AclOperation.IDEMPOTENT_WRITE)
        or ctx.authorized_by_type(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _answer(codec.ErrorCode.cluster_authorization_failed)
    if transactional_id is None:
        manager = broker.producer_ids
        if manager is None:
            return _answer(codec.ErrorCode.coordinator_not_available)
        pid, epoch = manager.init_producer(producer_id, producer_epoch)
        return _answer(codec.ErrorCode.none, pid, epoch)
    coordinator = broker.txn
    if coordinator is None:
        return _answer(codec.ErrorCode.coordinator_not_available)
    expected = (producer_id, producer_epoch) if producer_id >= 0 else None
    result = coordinator.init_producer_id(
        transactional_id, codec.duration_ms(request.transaction_timeout), expected
    )
    error = result.error
    if error is codec.ErrorCode.producer_fenced and ctx.api_version < 4:
        error = codec.ErrorCode.invalid_producer_epoch
    return _answer(error, result.producer_id, result.producer_epoch)


SPEC = HandlerSpec(ApiKey.INIT_PRODUCER_ID, 0, 5, handle, blocking=True)
