"""DeleteGroups (42), v0–2: removes empty groups and their committed offsets (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Request(Protocol):
    groups_names: Sequence[str]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    results = ctx.broker.groups.delete_groups(list(req.groups_names))
    return codec.build_response(
        request, {"results": [{"group_id": group_id, "error_code": error} for group_id, error in results]}
    )


SPEC = HandlerSpec(ApiKey.DELETE_GROUPS, 0, 2, handle)
