"""DescribeCluster (60), v0–1: this node, the cluster id, and itself as controller.

Only kafka-python uses it (others describe the cluster through Metadata). v1 adds
``endpoint_type``: a broker answers only for brokers (1); asking it for controllers (2) gets
UNSUPPORTED_ENDPOINT_TYPE, as Kafka's brokers answer.
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

BROKERS_ENDPOINT = 1


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    broker = ctx.broker
    endpoint_type: int = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint_type != BROKERS_ENDPOINT:
        return codec.build_response(
            request,
            {
                "error_code": codec.ErrorCode.unsupported_endpoint_type,
                "error_message": f"The request was sent to an endpoint of type {endpoint_type}, "
                f"but we wanted an endpoint of type {BROKERS_ENDPOINT}",
                "endpoint_type": endpoint_type,
                "cluster_id": broker.cluster_id,
                "controller_id": -1,
                "brokers": [],
            },
        )
    return codec.build_response(
        request,
        {
            "error_code": codec.ErrorCode.none,
            "error_message": None,
            "endpoint_type": BROKERS_ENDPOINT,
            "cluster_id": broker.cluster_id,
            "controller_id": broker.node_id,
            "brokers": [
                {
                    "broker_id": broker.node_id,
                    "host": broker.advertised_host,
                    "port": broker.advertised_port,
                    "rack": None,
                }
            ],
        },
    )


SPEC = HandlerSpec(ApiKey.DESCRIBE_CLUSTER, 0, 1, handle)
