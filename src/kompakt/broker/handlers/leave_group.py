"""LeaveGroup (13), v0–5. v0–2 name one member; v3+ batch members (static ones by instance id); v5 adds
a ``reason`` per member (KIP-800).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _SingleMemberRequest(Protocol):
    """v0–2."""

    group_id: str
    member_id: str


class _MemberIdentity(Protocol):
    member_id: str
    group_instance_id: str | None


class _BatchRequest(Protocol):
    """v3+."""

    group_id: str
    members: Sequence[_MemberIdentity]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    if ctx.api_version < 3:
        # Kafka's LeaveGroupResponse for v0-2: the group-level error, else the one member's.
        single = cast(_SingleMemberRequest, request)
        error, results = ctx.broker.groups.leave(single.group_id, [(single.member_id, None)])
        if error is codec.ErrorCode.none and results:
            error = results[0][2]
        return codec.build_response(request, {"error_code": error})
    batch = cast(_BatchRequest, request)
    members = [(m.member_id, m.group_instance_id) for m in batch.members]
    error, results = ctx.broker.groups.leave(batch.group_id, members)
    return codec.build_response(
        request,
        {
            "error_code": error,
            "members": [
                {"member_id": member_id, "group_instance_id": instance_id, "error_code": member_error}
                for member_id, instance_id, member_error in results
            ],
        },
    )


SPEC = HandlerSpec(ApiKey.LEAVE_GROUP, 0, 5, handle)
