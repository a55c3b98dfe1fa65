"""InitProducerId (22), v0–4: producer ids for idempotent (non-transactional) producers.

kafka-python's default producer is idempotent and calls this first, so it must work. Ids come
from ``ProducerIdManager`` (persisted in blocks, never reused across restarts), epoch 0; a v3+
request carrying the id and epoch we issued bumps the epoch (KIP-360), which lets a producer
reset its sequences after an error without a new id.

Transactions are not implemented. A transactional producer first asks FindCoordinator for a
transaction coordinator, which is refused with INVALID_REQUEST; should one still send a
transactional id here it gets INVALID_REQUEST too, a non-retriable error, so it fails at once
instead of retrying COORDINATOR_NOT_AVAILABLE until its timeout.
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    transactional_id: str | None = getattr(request, "transactional_id", None)
    manager = ctx.broker.producer_ids
    if transactional_id is not None or manager is None:
        return codec.build_response(
            request,
            {"error_code": codec.ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1},
        )
    producer_id, epoch = manager.init_producer(
        getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1)
    )
    return codec.build_response(
        request, {"error_code": codec.ErrorCode.none, "producer_id": producer_id, "producer_epoch": epoch}
    )


SPEC = HandlerSpec(ApiKey.INIT_PRODUCER_ID, 0, 4, handle, blocking=True)
