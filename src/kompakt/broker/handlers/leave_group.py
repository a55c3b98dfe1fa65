"""LeaveGroup (13), v0–5. v0–2 name one member; v3+ batch members (static ones by instance id); v5 adds
a ``reason`` per member (KIP-800).
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import leave_group as m


def handle(ctx: RequestContext, request: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return m.LeaveGroupResponse(error_code=codec.ErrorCode.group_authorization_failed)
    if ctx.api_version < 3:
        # Kafka's LeaveGroupResponse for v0-2: the group-level error, else the one member's.
        error, results = ctx.broker.groups.leave(request.group_id, [(request.member_id, None)])
        if error is codec.ErrorCode.none and results:
            error = results[0][2]
        return m.LeaveGroupResponse(error_code=error)
    members = [(member.member_id, member.group_instance_id) for member in request.members]
    error, results = ctx.broker.groups.leave(request.group_id, members)
    return m.LeaveGroupResponse(
        error_code=error,
        members=[
            m.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=member_error)
            for member_id, instance_id, member_error in results
        ],
    )


SPEC = HandlerSpec(ApiKey.LEAVE_GROUP, 0, 5, handle)
