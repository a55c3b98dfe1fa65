"""FindCoordinator (10), v0–4: this single broker coordinates every group.

v1 adds ``key_type``; v4 batches keys (``coordinator_keys``). Only group keys (key_type 0) are
served; kompakt has no transaction coordinator, so a transaction key (key_type 1) is refused with
INVALID_REQUEST rather than COORDINATOR_NOT_AVAILABLE, which clients would retry until they time out.
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

_GROUP_KEY_TYPE = 0


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, object]:
    if key_type != _GROUP_KEY_TYPE:
        return {
            "key": key,
            "error_code": codec.ErrorCode.invalid_request,
            "error_message": f"key type {key_type} is not supported by this broker (groups only)",
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    broker = ctx.broker
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
