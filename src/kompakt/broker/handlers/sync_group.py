"""SyncGroup (14), v0–5. Followers wait (deferred) until the leader sends the assignments.

v3 adds ``group_instance_id``; v4 is flexible; v5 carries and echoes the protocol type and name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import SyncResult
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Assignment(Protocol):
    member_id: str
    assignment: bytes


class _Request(Protocol):
    group_id: str
    generation_id: int
    member_id: str
    assignments: Sequence[_Assignment]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> Deferred[codec.ResponsePayload]:
    req = cast(_Request, request)
    deferred = ctx.broker.groups.sync(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in req.assignments},
    )

    def respond(result: SyncResult) -> codec.ResponsePayload:
        return codec.build_response(
            request,
            {
                "error_code": result.error,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name,
                "assignment": result.assignment,
            },
        )

    return deferred.map(respond)


SPEC = HandlerSpec(ApiKey.SYNC_GROUP, 0, 5, handle)
