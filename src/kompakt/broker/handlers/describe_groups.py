"""DescribeGroups (15), v0–6, as Kafka's ``describeGroups`` answers it.

Member metadata and assignments are only shown for Stable groups, as Kafka does: in any other state
they belong to a generation that is being replaced. A group that does not exist is state ``Dead``
with no error up to v5; v6 adds GROUP_ID_NOT_FOUND and a message. v3+ may ask for the authorized
operations (KIP-430), which without an authorizer are all of a group's, on every group answered
without an error.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.authorized_operations import NOT_REQUESTED, authorized_operations
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_groups as m


def _described(ctx: RequestContext, group_id: str, include_operations: bool) -> m.DescribedGroup:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return m.DescribedGroup(
            error_code=codec.ErrorCode.group_authorization_failed,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
            authorized_operations=NOT_REQUESTED,
        )
    description = ctx.broker.groups.describe(group_id)
    entry = m.DescribedGroup(
        error_code=codec.ErrorCode.none,
        group_id=group_id,
        group_state=description.state,
        protocol_type=description.protocol_type,
        protocol_data=description.protocol_data,
        members=[
            m.DescribedGroupMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata,
                member_assignment=member.assignment,
            )
            for member in description.members
        ],
        authorized_operations=NOT_REQUESTED,
    )
    if not description.exists and ctx.api_version >= 6:
        entry.error_code = codec.ErrorCode.group_id_not_found
        entry.error_message = f"Group {group_id} not found."
    elif include_operations:
        entry.authorized_operations = authorized_operations(ctx, ResourceType.GROUP, group_id)
    return entry


def handle(ctx: RequestContext, request: m.DescribeGroupsRequest) -> m.DescribeGroupsResponse:
    include_operations = ctx.api_version >= 3 and request.include_authorized_operations
    return m.DescribeGroupsResponse(
        groups=[_described(ctx, group_id, include_operations) for group_id in request.groups]
    )


SPEC = HandlerSpec(ApiKey.DESCRIBE_GROUPS, 0, 6, handle)
