"""Drive handlers with real wire bytes (encode request → dispatch → encode response → decode)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol import codec


def request_bytes(api_key: int, version: int, values: Mapping[str, object], correlation_id: int = 1) -> bytes:
    body = codec.build(codec.request_class(api_key, version), values)
    return codec.encode_request(body, correlation_id, "test-client")


def decode(result: Any, api_key: int, version: int, correlation_id: int = 1) -> Any:
    data = b"".join(bytes(c) for c in codec.encode_response(correlation_id, result))
    _, response = codec.decode_response(data[4:], api_key, version)
    return response


def dispatch(dispatcher: Dispatcher, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    """The handler's raw result: a response, a Deferred, or None."""
    request = dispatcher.decode(request_bytes(api_key, version, values)[4:])
    return dispatcher.call(dispatcher.context(request, "127.0.0.1"), request.body)


def call(dispatcher: Dispatcher, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    """Dispatch and return the decoded response (a Deferred must already be settled)."""
    result = dispatch(dispatcher, api_key, version, values)
    if isinstance(result, Deferred):
        result = result.result()
    assert result is not None
    return decode(result, api_key, version)


def produce_values(topic: str, partition: int, records: bytes, acks: int = -1) -> dict[str, object]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_values(
    partitions: list[tuple[str, int, int]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    isolation_level: int = 0,
) -> dict[str, object]:
    topics: dict[str, list[dict[str, object]]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes,
            }
        )
    return {
        "cluster_id": None,
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
