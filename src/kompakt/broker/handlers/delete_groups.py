"""DeleteGroups (42), v0–2: removes empty groups and their committed offsets (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import delete_groups as m


def handle(ctx: RequestContext, request: m.DeleteGroupsRequest) -> m.DeleteGroupsResponse:
    results = ctx.broker.groups.delete_groups(list(request.groups_names))
    return m.DeleteGroupsResponse(
        results=[m.DeletableGroupResult(group_id=group_id, error_code=error) for group_id, error in results]
    )


SPEC = HandlerSpec(ApiKey.DELETE_GROUPS, 0, 2, handle)
