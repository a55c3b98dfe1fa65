"""ListGroups (16), v0–5. v4 adds a states filter and each group's state; v5 (KIP-848) adds a types
filter and each group's type ("classic" for the groups of the classic protocol). Filters are
case-insensitive and empty means all, as in Kafka's ``GroupMetadataManager.listGroups``.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import list_groups as m


def handle(ctx: RequestContext, request: m.ListGroupsRequest) -> m.ListGroupsResponse:
    listings = ctx.broker.groups.list_groups(request.states_filter, request.types_filter)
    # KafkaApis: DESCRIBE on the cluster lists every group, otherwise those the caller may DESCRIBE.
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        listings = [
            g for g in listings if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return m.ListGroupsResponse(
        error_code=codec.ErrorCode.none,
        groups=[
            m.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listings
        ],
    )


SPEC = HandlerSpec(ApiKey.LIST_GROUPS, 0, 5, handle)
