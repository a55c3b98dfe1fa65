"""DescribeGroups (15), v0–6, as Kafka's ``describeGroups`` answers it.

Member metadata and assignments are only shown for Stable groups, as Kafka does: in any other state
they belong to a generation that is being replaced. A group that does not exist is state ``Dead``
with no error up to v5; v6 adds GROUP_ID_NOT_FOUND and a message. v3+ may ask for the authorized
operations (KIP-430), which without an authorizer are all of a group's, on every group answered
without an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.authorized_operations import GROUP_AUTHORIZED_OPERATIONS, NOT_REQUESTED
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Request(Protocol):
    groups: Sequence[str]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    include_operations: bool = ctx.api_version >= 3 and getattr(
        request, "include_authorized_operations", False
    )
    described = []
    for group_id in req.groups:
        description = ctx.broker.groups.describe(group_id)
        entry: dict[str, object] = {
            "error_code": codec.ErrorCode.none,
            "error_message": None,
            "group_id": group_id,
            "group_state": description.state,
            "protocol_type": description.protocol_type,
            "protocol_data": description.protocol_data,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata,
                    "member_assignment": m.assignment,
                }
                for m in description.members
            ],
            "authorized_operations": NOT_REQUESTED,
        }
        if not description.exists and ctx.api_version >= 6:
            entry["error_code"] = codec.ErrorCode.group_id_not_found
            entry["error_message"] = f"Group {group_id} not found."
        elif include_operations:
            entry["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS
        described.append(entry)
    return codec.build_response(request, {"groups": described})


SPEC = HandlerSpec(ApiKey.DESCRIBE_GROUPS, 0, 6, handle)
