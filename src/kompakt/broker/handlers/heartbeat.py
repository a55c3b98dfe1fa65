"""Heartbeat (12), v0–4: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import heartbeat as m


def handle(ctx: RequestContext, request: m.HeartbeatRequest) -> m.HeartbeatResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return m.HeartbeatResponse(error_code=codec.ErrorCode.group_authorization_failed)
    error = ctx.broker.groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return m.HeartbeatResponse(error_code=error)


SPEC = HandlerSpec(ApiKey.HEARTBEAT, 0, 4, handle)
