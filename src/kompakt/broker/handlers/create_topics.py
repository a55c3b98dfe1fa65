"""CreateTopics (19), v2–7: create topics with partitions and config overrides, or only validate.

Each topic succeeds or fails on its own (see :func:`kompakt.broker.topic_admin.create_topic` for the
rules). v5+ answers with the partition count, replication factor and every config of the topic
(so clients need no DescribeConfigs round trip); v7 adds the topic id. A topic named twice in one
request fails with INVALID_REQUEST, as in Kafka, and is not created.
"""

from __future__ import annotations

from collections import Counter

from kompakt.broker import topic_admin
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.config.describe import ConfigEntry
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def _config(entry: ConfigEntry) -> dict[str, object]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": int(entry.source),
        "is_sensitive": entry.sensitive,
    }


def _failure(name: str, error: topic_admin.AdminError) -> dict[str, object]:
    return {
        "name": name,
        "topic_id": topic_admin.ZERO_UUID,
        "error_code": error.code,
        "error_message": error.message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }


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
                dup = topic_admin.AdminError(codec.ErrorCode.invalid_request, "Duplicate topic name.")
                results.append(_failure(name, dup))
            continue
        try:
            created = topic_admin.create_topic(
                broker.logs,
                broker.broker_config,
                broker.node_id,
                name,
                int(topic.num_partitions),
                int(topic.replication_factor),
                [(int(a.partition_index), [int(b) for b in a.broker_ids]) for a in topic.assignments],
                [(c.name, c.value) for c in topic.configs],
                validate_only=validate_only,
            )
        except Exception as exc:  # noqa: BLE001 - every failure answers this topic only
            results.append(_failure(name, topic_admin.as_admin_error(exc)))
            continue
        results.append(
            {
                "name": name,
                "topic_id": created.topic_id,
                "error_code": codec.ErrorCode.none,
                "error_message": None,
                "num_partitions": created.num_partitions,
                "replication_factor": created.replication_factor,
                "configs": [_config(entry) for entry in created.configs],
            }
        )
    return codec.build_response(request, {"topics": results})


SPEC = HandlerSpec(ApiKey.CREATE_TOPICS, 2, 7, handle, blocking=True)
