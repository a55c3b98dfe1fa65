"""FindCoordinator (10), v0–4: this single broker coordinates every group and transaction.

v1 adds ``key_type`` (0 group, 1 transactional id); v4 batches keys (``coordinator_keys``).
Other key types (share groups, 2 in v6) are refused with INVALID_REQUEST. A transaction key
on a broker without a transaction coordinator (no storage) gets COORDINATOR_NOT_AVAILABLE. An
empty key is answered with this broker, as Kafka 4.1 answers it (InitProducerId then refuses
the empty id with INVALID_REQUEST).
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import find_coordinator as m

_GROUP_KEY_TYPE = 0
_TRANSACTION_KEY_TYPE = 1


def _error(key: str, code: codec.ErrorCode, message: str) -> m.Coordinator:
    return m.Coordinator(key=key, error_code=code, error_message=message, node_id=-1, host="", port=-1)


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> m.Coordinator:
    broker = ctx.broker
    if key_type not in (_GROUP_KEY_TYPE, _TRANSACTION_KEY_TYPE):
        return _error(
            key, codec.ErrorCode.invalid_request, f"key type {key_type} is not supported by this broker"
        )
    if key_type == _GROUP_KEY_TYPE and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _error(key, codec.ErrorCode.group_authorization_failed, "Group authorization failed.")
    if key_type == _TRANSACTION_KEY_TYPE and not ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return _error(
            key,
            codec.ErrorCode.transactional_id_authorization_failed,
            "Transactional Id authorization failed.",
        )
    if key_type == _TRANSACTION_KEY_TYPE and broker.txn is None:
        return _error(
            key, codec.ErrorCode.coordinator_not_available, "this broker has no transaction coordinator"
        )
    host, port = broker.endpoint(ctx.session.listener_name)
    return m.Coordinator(
        key=key, error_code=codec.ErrorCode.none, node_id=broker.node_id, host=host, port=port
    )


def handle(ctx: RequestContext, request: m.FindCoordinatorRequest) -> m.FindCoordinatorResponse:
    if ctx.api_version >= 4:
        return m.FindCoordinatorResponse(
            coordinators=[_coordinator(ctx, key, request.key_type) for key in request.coordinator_keys]
        )
    one = _coordinator(ctx, request.key, request.key_type)
    return m.FindCoordinatorResponse(
        error_code=one.error_code,
        error_message=one.error_message,
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )


SPEC = HandlerSpec(ApiKey.FIND_COORDINATOR, 0, 4, handle)
