"""Helpers for protocol and dispatch tests: build request frames from mappings, unwrap responses."""

from __future__ import annotations

from collections.abc import Mapping

from kompakt.protocol import codec


def request_frame(api_key: int, version: int, values: Mapping[str, object], correlation_id: int = 1) -> bytes:
    """A request frame *without* its size prefix, as FrameReader would hand it over."""
    body = codec.build(codec.request_class(api_key, version), values)
    return codec.encode_request(body, correlation_id, "test-client")[4:]


def chunks_to_frame(chunks: codec.Chunks) -> bytes:
    """Join encoded response chunks, check the size prefix, and strip it."""
    data = b"".join(bytes(c) for c in chunks)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return data[4:]
