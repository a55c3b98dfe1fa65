"""FindCoordinator (10), v0–4: this single broker coordinates every group and transaction.

v1 adds ``key_type`` (0 group, 1 transactional id); v4 batches keys (``coordinator_keys``).
Other key types (share groups, 2 in v6) are refused with INVALID_REQUEST. A transaction key
on a broker without a transaction coordinator (no storage) gets COORDINATOR_NOT_AVAILABLE. An
empty key is answered with this broker, as Kafka 4.1 answers it (InitProducerId then refuses
the empty id with INVALID_REQUEST).
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

_GROUP_KEY_TYPE = 0
_TRANSACTION_KEY_TYPE = 1


def _error(key: str, code: codec.ErrorCode, message: str) -> dict[str, object]:
    return {"key": key, "error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, object]:
    broker = ctx.broker
    if key_type not in (_GROUP_KEY_TYPE, _TRANSACTION_KEY_TYPE):
        return _error(
            key, codec.ErrorCode.invalid_request, f"key type {key_type} is not supported by this broker"
        )
    if key_type == _TRANSACTION_KEY_TYPE and broker.txn is None:
        return _error(
            key, codec.ErrorCode.coordinator_not_available, "this broker has no transaction coordinator"
        )
    return {
        "key": key,
        "error_code": codec.ErrorCode.none,
        "error_message": None,
        "node_id": broker.node_id,
        "host": broker.advertised_host,
        "port": broker.advertised_port,
    }


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    key_type: int = getattr(request, "key_type", _GROUP_KEY_TYPE)
    if ctx.api_version >= 4:
        keys: tuple[str, ...] = getattr(request, "coordinator_keys", ())
        return codec.build_response(request, {"coordinators": [_coordinator(ctx, k, key_type) for k in keys]})
    key: str = getattr(request, "key", "")
    return codec.build_response(request, _coordinator(ctx, key, key_type))


SPEC = HandlerSpec(ApiKey.FIND_COORDINATOR, 0, 4, handle)
