"""DescribeGroups (15), v0–5. Unknown groups are reported in state ``Dead`` with no error (≤ v5).

Member metadata and assignments are only shown for Stable groups, as Kafka does: in any other state
they belong to a generation that is being replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Request(Protocol):
    groups: Sequence[str]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    described = []
    for group_id in req.groups:
        description = ctx.broker.groups.describe(group_id)
        described.append(
            {
                "error_code": codec.ErrorCode.none,
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
            }
        )
    return codec.build_response(request, {"groups": described})


SPEC = HandlerSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, handle)
