"""JoinGroup (11), v0–9. The answer is deferred until the rebalance completes.

v0 has no rebalance timeout (the session timeout stands in, as Kafka does); from v4 a member
without an id is answered MEMBER_ID_REQUIRED with a generated id and must join again with it
(KIP-394); v5 adds ``group_instance_id`` (KIP-345); v6 is flexible; v7 makes the protocol name
nullable and echoes the type; v8 adds the client's ``reason`` (KIP-800); v9 adds
``skip_assignment`` (KIP-814), set for a static leader that rejoined without a rebalance.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import JoinRequest, JoinResult
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Protocol(Protocol):
    name: str
    metadata: bytes


class _Request(Protocol):
    """The fields every version has; later additions are read with ``getattr``."""

    group_id: str
    session_timeout: datetime.timedelta
    member_id: str
    protocol_type: str
    protocols: Sequence[_Protocol]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> Deferred[codec.ResponsePayload]:
    req = cast(_Request, request)
    session_timeout_ms = codec.duration_ms(req.session_timeout)
    # v0 has no rebalance timeout: the session timeout stands for it (JoinGroupRequest's
    # maybeOverrideRebalanceTimeout); the view's -1 is only the schema default.
    rebalance: datetime.timedelta | None = None
    if ctx.api_version >= 1:
        rebalance = getattr(req, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=session_timeout_ms if rebalance is None else codec.duration_ms(rebalance),
        protocol_type=req.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in req.protocols),
        client_id=ctx.client_id or "",
        # Kafka records ``clientAddress().toString()``, an InetAddress without its host name:
        # "/127.0.0.1", and DescribeGroups and the stored group metadata show it that way.
        client_host=f"/{ctx.client_host}",
        require_known_member_id=ctx.api_version >= 4,
        supports_skip_assignment=ctx.api_version >= 9,
        reason=getattr(req, "reason", None),
    )
    version = ctx.api_version

    def respond(result: JoinResult) -> codec.ResponsePayload:
        return codec.build_response(
            request,
            {
                "error_code": result.error,
                "generation_id": result.generation_id,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name if version >= 7 else result.protocol_name or "",
                "leader": result.leader_id,
                "member_id": result.member_id,
                "skip_assignment": result.skip_assignment,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata,
                    }
                    for m in result.members
                ],
            },
        )

    return ctx.broker.groups.join(join).map(respond)


SPEC = HandlerSpec(ApiKey.JOIN_GROUP, 0, 9, handle)
