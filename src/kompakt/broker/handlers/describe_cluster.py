"""DescribeCluster (60), v0–2: this node, the cluster id, and itself as controller.

As Kafka's ``AuthHelper.computeDescribeClusterResponse``: v1 adds ``endpoint_type``, and a broker
answers only for brokers (1); asking it for controllers (2) is MISMATCHED_ENDPOINT_TYPE, any other
type UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at v0, which cannot ask). With
``include_cluster_authorized_operations`` the answer lists every cluster operation (KIP-430, no
authorizer). v2 adds ``include_fenced_brokers`` and ``is_fenced``; this broker is never fenced.
"""

from __future__ import annotations

from kompakt.broker.authorized_operations import NOT_REQUESTED, cluster_authorized_operations
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_cluster as m

BROKERS_ENDPOINT = 1
CONTROLLERS_ENDPOINT = 2
_ENDPOINT_NAMES = {BROKERS_ENDPOINT: "BROKER", CONTROLLERS_ENDPOINT: "CONTROLLER"}


def _refusal(ctx: RequestContext, endpoint_type: int) -> m.DescribeClusterResponse | None:
    if endpoint_type == BROKERS_ENDPOINT:
        return None
    if endpoint_type not in _ENDPOINT_NAMES:
        code = codec.ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}"
    else:
        code = codec.ErrorCode.mismatched_endpoint_type
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
            f"{_ENDPOINT_NAMES[endpoint_type]}"
        )
    return m.DescribeClusterResponse(
        error_code=codec.ErrorCode.invalid_request if ctx.api_version == 0 else code,
        error_message=message,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id="",
        controller_id=-1,
        brokers=[],
        cluster_authorized_operations=NOT_REQUESTED,
    )


def handle(ctx: RequestContext, request: m.DescribeClusterRequest) -> m.DescribeClusterResponse:
    broker = ctx.broker
    refused = _refusal(ctx, request.endpoint_type)
    if refused is not None:
        return refused
    host, port = broker.endpoint(ctx.session.listener_name)
    return m.DescribeClusterResponse(
        error_code=codec.ErrorCode.none,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[
            m.DescribeClusterBroker(
                broker_id=broker.node_id,
                host=host,
                port=port,
                rack=None,
                is_fenced=False,
            )
        ],
        cluster_authorized_operations=(
            cluster_authorized_operations(ctx)
            if request.include_cluster_authorized_operations
            else NOT_REQUESTED
        ),
    )


SPEC = HandlerSpec(ApiKey.DESCRIBE_CLUSTER, 0, 2, handle)
