"""DeleteGroups (42), v0–2: removes empty groups and their committed offsets (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import delete_groups as m


def handle(ctx: RequestContext, request: m.DeleteGroupsRequest) -> m.DeleteGroupsResponse:
    names = list(request.groups_names)
    allowed = [name for name in names if ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, name)]
    errors = dict(ctx.broker.groups.delete_groups(allowed)) if allowed else {}
    return m.DeleteGroupsResponse(
        results=[
            m.DeletableGroupResult(
                group_id=name, error_code=errors.get(name, codec.ErrorCode.group_authorization_failed)
            )
            for name in names
        ]
    )


SPEC = HandlerSpec(ApiKey.DELETE_GROUPS, 0, 2, handle)
