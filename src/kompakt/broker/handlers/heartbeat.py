"""Heartbeat (12), v0–4: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Request(Protocol):
    group_id: str
    generation_id: int
    member_id: str


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    error = ctx.broker.groups.heartbeat(
        req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)
    )
    return codec.build_response(request, {"error_code": error})


SPEC = HandlerSpec(ApiKey.HEARTBEAT, 0, 4, handle)
