"""ApiVersions (18), v0–4: the ranges come from the handler table, never from a second list.

Requests above v4 never reach this handler: the dispatcher answers them with the v0-format
UNSUPPORTED_VERSION fallback so the client can retry at a version we know.
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    return codec.build_response(
        request,
        {
            "error_code": codec.ErrorCode.none,
            "api_keys": [
                {"api_key": key, "min_version": r.min_version, "max_version": r.max_version}
                for key, r in sorted(ctx.api_versions.items())
            ],
            "throttle_time": 0,
        },
    )


SPEC = HandlerSpec(ApiKey.API_VERSIONS, 0, 4, handle)
