"""Helpers that drive handlers with real wire bytes, without a socket."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol import codec


def request_bytes(api_key: int, version: int, values: Mapping[str, object], correlation_id: int = 1) -> bytes:
    """A complete request frame, size prefix included."""
    body = codec.build(codec.request_class(api_key, version), values)
    return codec.encode_request(body, correlation_id, "test-client")


def call(dispatcher: Dispatcher, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    """Encode a request, dispatch it, encode and decode the answer; return the decoded response."""
    request = dispatcher.decode(request_bytes(api_key, version, values)[4:])
    result = dispatcher.call(dispatcher.context(request, "127.0.0.1"), request.body)
    if isinstance(result, Deferred):
        result = result.result()
    assert result is not None
    data = b"".join(bytes(c) for c in codec.encode_response(request.correlation_id, result))
    _, response = codec.decode_response(data[4:], api_key, version)
    return response
