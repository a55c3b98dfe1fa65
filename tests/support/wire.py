"""Kafka wire frames for tests: build requests from mappings, drive the dispatcher, read frames.

One helper for every test that speaks the protocol, with or without a socket: a request is built
with the codec from a plain mapping (``codec.build``), framed with its 4-byte size prefix as a
client sends it, decoded by the dispatcher, answered, and the answer encoded and decoded again,
so a handler is always exercised through the same bytes a real client would see.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol import codec

CLIENT_ID = "test-client"


def size_prefixed(payload: bytes) -> bytes:
    """``payload`` with the int32 size prefix every Kafka frame carries."""
    return struct.pack(">i", len(payload)) + payload


def framed(payloads: Iterable[bytes]) -> bytes:
    """Several frames back to back, as one stream of bytes."""
    return b"".join(size_prefixed(p) for p in payloads)


def request_bytes(api_key: int, version: int, values: Mapping[str, object], correlation_id: int = 1) -> bytes:
    """A complete request frame, size prefix included."""
    body = codec.build(codec.request_class(api_key, version), values)
    return codec.encode_request(body, correlation_id, CLIENT_ID)


def request_frame(api_key: int, version: int, values: Mapping[str, object], correlation_id: int = 1) -> bytes:
    """A request frame *without* its size prefix, as the server's frame splitter hands it over."""
    return request_bytes(api_key, version, values, correlation_id)[4:]


def chunks_to_frame(chunks: codec.Chunks) -> bytes:
    """Join encoded response chunks, check the size prefix, and strip it."""
    data = b"".join(bytes(c) for c in chunks)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return data[4:]


def decode(result: Any, api_key: int, version: int, correlation_id: int = 1) -> Any:
    """Encode a handler's response as the server would and decode it as a client would."""
    data = b"".join(bytes(c) for c in codec.encode_response(correlation_id, result))
    answered_id, response = codec.decode_response(data[4:], api_key, version)
    assert answered_id == correlation_id
    return response


def dispatch(dispatcher: Dispatcher, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    """The handler's raw result: a response, a Deferred, or None."""
    request = dispatcher.decode(request_frame(api_key, version, values))
    return dispatcher.call(dispatcher.context(request, "127.0.0.1"), request.body)


def call(dispatcher: Dispatcher, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    """Dispatch and return the decoded response (a Deferred must already be settled)."""
    result = dispatch(dispatcher, api_key, version, values)
    if isinstance(result, Deferred):
        result = result.result()
    assert result is not None
    return decode(result, api_key, version)


async def read_frame(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """One size-prefixed frame from a socket, without its prefix; each read bounded by ``timeout_s``."""
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout_s))[0]
    return await asyncio.wait_for(reader.readexactly(size), timeout_s)


def produce_values(topic: str, partition: int, records: bytes, acks: int = -1) -> dict[str, object]:
    """A Produce request's fields for one partition."""
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
    """A Fetch request's fields for ``(topic, partition, offset)`` triples."""
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
