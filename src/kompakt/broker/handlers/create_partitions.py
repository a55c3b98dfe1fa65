"""CreatePartitions (37), v0–3: grow a topic's partition count, or only validate the growth.

Partitions can only be added (Kafka's INVALID_PARTITIONS otherwise); a manual assignment must
name one replica set per new partition, each holding only this broker. Each topic is answered on
its own; a topic named twice fails with INVALID_REQUEST.
"""

from __future__ import annotations

from collections import Counter

from kompakt.broker import topic_admin
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    broker = ctx.broker
    validate_only: bool = getattr(request, "validate_only", False)
    topics = getattr(request, "topics", ())
    counts = Counter(topic.name for topic in topics)
    results: list[dict[str, object]] = []
    reported: set[str] = set()
    for topic in topics:
        name: str = topic.name
        if counts[name] > 1:
            if name not in reported:
                reported.add(name)
                results.append(
                    {
                        "name": name,
                        "error_code": codec.ErrorCode.invalid_request,
                        "error_message": "Duplicate topic name.",
                    }
                )
            continue
        assignments = (
            None if topic.assignments is None else [[int(b) for b in a.broker_ids] for a in topic.assignments]
        )
        try:
            topic_admin.create_partitions(
                broker.logs, broker.node_id, name, int(topic.count), assignments, validate_only=validate_only
            )
        except Exception as exc:  # noqa: BLE001 - every failure answers this topic only
            error = topic_admin.as_admin_error(exc)
            results.append({"name": name, "error_code": error.code, "error_message": error.message})
            continue
        results.append({"name": name, "error_code": codec.ErrorCode.none, "error_message": None})
    return codec.build_response(request, {"results": results})


SPEC = HandlerSpec(ApiKey.CREATE_PARTITIONS, 0, 3, handle, blocking=True)
