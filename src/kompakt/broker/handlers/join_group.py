"""JoinGroup (11), v0–9. The answer is deferred until the rebalance completes.

v0 has no rebalance timeout (the session timeout stands in, as Kafka does); from v4 a member
without an id is answered MEMBER_ID_REQUIRED with a generated id and must join again with it
(KIP-394); v5 adds ``group_instance_id`` (KIP-345); v6 is flexible; v7 makes the protocol name
nullable and echoes the type; v8 adds the client's ``reason`` (KIP-800); v9 adds
``skip_assignment`` (KIP-814), set for a static leader that rejoined without a rebalance.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import JoinRequest, JoinResult
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import join_group as m


def handle(ctx: RequestContext, request: m.JoinGroupRequest) -> Deferred[m.JoinGroupResponse]:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return Deferred.resolved(
            m.JoinGroupResponse(
                error_code=codec.ErrorCode.group_authorization_failed,
                generation_id=-1,
                protocol_type=None,
                protocol_name=None if ctx.api_version >= 7 else "",
                leader="",
                member_id=request.member_id,
                members=[],
            )
        )
    session_timeout_ms = codec.duration_ms(request.session_timeout)
    version = ctx.api_version
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        session_timeout_ms=session_timeout_ms,
        # v0 has no rebalance timeout: the session timeout stands for it (JoinGroupRequest's
        # maybeOverrideRebalanceTimeout); the view's -1 there is only the schema default.
        rebalance_timeout_ms=session_timeout_ms
        if version == 0
        else codec.duration_ms(request.rebalance_timeout),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        client_id=ctx.client_id or "",
        # Kafka records ``clientAddress().toString()``, an InetAddress without its host name:
        # "/127.0.0.1", and DescribeGroups and the stored group metadata show it that way.
        client_host=f"/{ctx.client_host}",
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=request.reason,
    )

    def respond(result: JoinResult) -> m.JoinGroupResponse:
        return m.JoinGroupResponse(
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name if version >= 7 else result.protocol_name or "",
            leader=result.leader_id,
            member_id=result.member_id,
            skip_assignment=result.skip_assignment,
            members=[
                m.JoinGroupResponseMember(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    metadata=member.metadata,
                )
                for member in result.members
            ],
        )

    return ctx.broker.groups.join(join).map(respond)


SPEC = HandlerSpec(ApiKey.JOIN_GROUP, 0, 9, handle)
