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

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.consumer.heartbeat import HeartbeatRequest
from kompakt.broker.groups.consumer.reconciliation import owned_from_request
from kompakt.broker.groups.errors import GroupError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import consumer_group_heartbeat as m


def _error(error: codec.ErrorCode, message: str | None) -> m.ConsumerGroupHeartbeatResponse:
    return m.ConsumerGroupHeartbeatResponse(
        error_code=error, error_message=message, member_epoch=0, heartbeat_interval=0
    )


def handle(ctx: RequestContext, request: m.ConsumerGroupHeartbeatRequest) -> m.ConsumerGroupHeartbeatResponse:
    if "consumer" not in ctx.broker.broker_config.get_list("group.coordinator.rebalance.protocols"):
        return _error(codec.ErrorCode.unsupported_version, "The consumer group protocol is disabled.")
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(codec.ErrorCode.group_authorization_failed, None)
    if any(
        not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        for name in request.subscribed_topic_names or ()
    ):
        # KafkaApis answers the bare code: naming the topics would disclose them.
        return _error(codec.ErrorCode.topic_authorization_failed, None)
    heartbeat = HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=codec.duration_ms(request.rebalance_timeout),
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None
        ),
        subscribed_topic_regex=request.subscribed_topic_regex,  # v1+
        server_assignor=request.server_assignor,
        owned_partitions=owned_from_request(request.topic_partitions),
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
    )
    groups = ctx.broker.groups
    groups.prepare_consumer_group_heartbeat(heartbeat)
    try:
        result = groups.consumer_group_heartbeat(heartbeat, ctx.api_version)
    except GroupError as exc:
        return _error(error_code_for(exc), str(exc))
    assignment = None
    if result.assignment is not None:
        assignment = m.Assignment(
            topic_partitions=[
                m.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
                for topic_id, parts in sorted(result.assignment.items())
            ]
        )
    return m.ConsumerGroupHeartbeatResponse(
        error_code=codec.ErrorCode.none,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


SPEC = HandlerSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle, blocking=True)
