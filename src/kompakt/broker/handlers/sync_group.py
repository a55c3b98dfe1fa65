"""SyncGroup (14), v0–5. Followers wait (deferred) until the leader sends the assignments.

v3 adds ``group_instance_id``; v4 is flexible; v5 carries and echoes the protocol type and name.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import SyncResult
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import sync_group as m


def handle(ctx: RequestContext, request: m.SyncGroupRequest) -> Deferred[m.SyncGroupResponse]:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return Deferred.resolved(
            m.SyncGroupResponse(
                error_code=codec.ErrorCode.group_authorization_failed,
                protocol_type=None,
                protocol_name=None,
                assignment=b"",
            )
        )
    deferred = ctx.broker.groups.sync(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: a.assignment for a in request.assignments},
    )

    def respond(result: SyncResult) -> m.SyncGroupResponse:
        return m.SyncGroupResponse(
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    return deferred.map(respond)


SPEC = HandlerSpec(ApiKey.SYNC_GROUP, 0, 5, handle)
