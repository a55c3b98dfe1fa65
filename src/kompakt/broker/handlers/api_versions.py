"""ApiVersions (18), v0–4: the ranges come from the handler table, never from a second list.

Requests above v4 never reach this handler: the dispatcher answers them with the v0-format
UNSUPPORTED_VERSION fallback so the client can retry at a version we know.
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import api_versions as m


def handle(ctx: RequestContext, request: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
    return m.ApiVersionsResponse(
        error_code=codec.ErrorCode.none,
        api_keys=[
            m.ApiVersion(api_key=key, min_version=r.min_version, max_version=r.max_version)
            for key, r in sorted(ctx.api_versions.items())
        ],
    )


SPEC = HandlerSpec(ApiKey.API_VERSIONS, 0, 4, handle)
