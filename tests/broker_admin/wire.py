"""Drive handlers with real wire bytes through the dispatcher, without a socket."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol import codec


def call(dispatcher: Dispatcher, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    """Encode a request, dispatch it, encode and decode the answer; return the decoded response."""
    body = codec.build(codec.request_class(api_key, version), values)
    frame = codec.encode_request(body, 7, "admin-test")
    request = dispatcher.decode(frame[4:])
    result = dispatcher.call(dispatcher.context(request, "127.0.0.1"), request.body)
    if isinstance(result, Deferred):
        result = result.result()
    assert result is not None
    data = b"".join(bytes(c) for c in codec.encode_response(request.correlation_id, result))
    correlation_id, response = codec.decode_response(data[4:], api_key, version)
    assert correlation_id == 7
    return response
