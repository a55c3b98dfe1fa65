"""ConsumerGroupHeartbeat (68), v0–1: the KIP-848 consumer group protocol.

One request joins (member epoch 0), heartbeats, reconciles and leaves (-1; -2 for a static member's
temporary leave); see :mod:`kompakt.broker.groups.consumer.heartbeat`. v1 (KIP-1082) requires the
client to generate its member id. An error answers with the error code and message only, as Kafka's
``GroupCoordinatorService`` does; when ``group.coordinator.rebalance.protocols`` leaves out
``consumer``, every heartbeat is refused with UNSUPPORTED_VERSION.

A subscription regex is matched against every topic name (RE2, linear time:
:mod:`kompakt.broker.client_regex`). The handler runs in a worker thread and resolves the group's
regexes before it takes the coordinator's lock, so a regex over many topics delays neither other
connections nor the group requests the event loop serves.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.consumer.heartbeat import HeartbeatRequest
from kompakt.broker.groups.consumer.reconciliation import owned_from_request
from kompakt.broker.groups.errors import GroupError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Request(Protocol):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout: datetime.timedelta
    subscribed_topic_names: Sequence[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Sequence[object] | None


def _error(
    request: codec.RequestPayload, error: codec.ErrorCode, message: str | None
) -> codec.ResponsePayload:
    return codec.build_response(
        request, {"error_code": error, "error_message": message, "member_epoch": 0, "heartbeat_interval": 0}
    )


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    if "consumer" not in ctx.broker.broker_config.get_list("group.coordinator.rebalance.protocols"):
        return _error(
            request, codec.ErrorCode.unsupported_version, "The consumer group protocol is disabled."
        )
    heartbeat = HeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=codec.duration_ms(req.rebalance_timeout),
        subscribed_topic_names=(
            tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None
        ),
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),  # v1+
        server_assignor=req.server_assignor,
        owned_partitions=owned_from_request(req.topic_partitions),
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
    )
    groups = ctx.broker.groups
    groups.prepare_consumer_group_heartbeat(heartbeat)
    try:
        result = groups.consumer_group_heartbeat(heartbeat, ctx.api_version)
    except GroupError as exc:
        return _error(request, error_code_for(exc), str(exc))
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(parts)}
                for topic_id, parts in sorted(result.assignment.items())
            ]
        }
    return codec.build_response(
        request,
        {
            "error_code": codec.ErrorCode.none,
            "error_message": None,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )


SPEC = HandlerSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle, blocking=True)
