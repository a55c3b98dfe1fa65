"""codec: decode/encode boundaries, version refusal, the ApiVersions fallback, zero-copy encoding."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey, VersionRange
from tests.support.wire import chunks_to_frame, request_frame

SUPPORTED: dict[int, VersionRange] = {
    ApiKey.API_VERSIONS: VersionRange(0, 4),
    ApiKey.JOIN_GROUP: VersionRange(0, 7),
}

JOIN = {
    "group_id": "g",
    "session_timeout": 10_000,
    "rebalance_timeout": 30_000,
    "member_id": "",
    "group_instance_id": "instance-1",
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
}


@pytest.mark.parametrize("version", range(8))
def test_join_group_request_round_trip(version: int) -> None:
    frame = request_frame(ApiKey.JOIN_GROUP, version, JOIN, correlation_id=77)
    decoded = codec.decode_request(frame, SUPPORTED)
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (11, version, 77)
    assert decoded.client_id == "test-client"
    assert decoded.body == codec.build(codec.request_class(11, version), JOIN)
    assert codec.duration_ms(decoded.body.session_timeout) == 10_000  # type: ignore[union-attr]


def test_decode_accepts_memoryview() -> None:
    frame = request_frame(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "1"}
    )
    assert codec.decode_request(memoryview(frame), SUPPORTED).api_version == 3


@pytest.mark.parametrize(("key", "version"), [(11, 8), (11, 9), (18, 5), (3, 12), (999, 0), (-1, 0)])
def test_unsupported_key_or_version_is_refused_before_parsing(key: int, version: int) -> None:
    frame = struct.pack(">hhi", key, version, 1234) + b"\xff" * 3
    with pytest.raises(codec.UnsupportedVersion) as info:
        codec.decode_request(frame, SUPPORTED)
    assert (info.value.api_key, info.value.version, info.value.correlation_id) == (key, version, 1234)


def test_every_truncation_is_malformed() -> None:
    frame = request_frame(ApiKey.JOIN_GROUP, 7, JOIN)
    for end in range(len(frame)):
        with pytest.raises(codec.MalformedRequest):
            codec.decode_request(frame[:end], SUPPORTED)


def test_unknown_tagged_field_in_body_is_malformed_not_a_crash() -> None:
    frame = request_frame(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "1"}
    )
    assert frame.endswith(b"\x00")  # the body's empty tag buffer
    tagged = frame[:-1] + b"\x01\x63\x00"  # one tag: number 99, zero bytes
    with pytest.raises(codec.MalformedRequest) as info:
        codec.decode_request(tagged, SUPPORTED)
    assert info.value.correlation_id == 1


def test_unknown_tagged_field_in_header_is_malformed() -> None:
    frame = request_frame(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "1"}
    )
    header_end = 8 + 2 + len("test-client")  # key, version, correlation id, legacy client id
    assert frame[header_end] == 0
    tagged = frame[:header_end] + b"\x01\x05\x01\x00" + frame[header_end + 1 :]
    with pytest.raises(codec.MalformedRequest):
        codec.decode_request(tagged, SUPPORTED)


def test_short_frame_is_malformed_without_correlation_id() -> None:
    with pytest.raises(codec.MalformedRequest) as info:
        codec.decode_request(b"\x00\x12\x00", SUPPORTED)
    assert info.value.correlation_id is None


def test_api_versions_fallback_is_v0_with_our_ranges() -> None:
    frame = chunks_to_frame(codec.encode_api_versions_fallback(9, SUPPORTED))
    correlation_id, response = codec.decode_response(frame, ApiKey.API_VERSIONS, 0)
    assert correlation_id == 9
    assert response.error_code == codec.ErrorCode.unsupported_version  # type: ignore[union-attr]
    ranges = {(k.api_key, k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[union-attr]
    assert ranges == {(18, 0, 4), (11, 0, 7)}


def test_api_versions_v3_response_uses_header_v0() -> None:
    response = codec.build(
        codec.response_class(ApiKey.API_VERSIONS, 3),
        {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]},
    )
    frame = chunks_to_frame(codec.encode_response(5, response))
    # Header v0 is just the correlation id: no tag buffer byte follows it.
    assert frame[:4] == b"\x00\x00\x00\x05"
    assert frame[4:6] == b"\x00\x00"  # error code straight after
    assert codec.decode_response(frame, 18, 3) == (5, response)


def test_generic_error_response_when_the_response_has_an_error_code() -> None:
    chunks = codec.encode_error_response(3, ApiKey.JOIN_GROUP, 8, codec.ErrorCode.unsupported_version)
    assert chunks is not None
    _, response = codec.decode_response(chunks_to_frame(chunks), ApiKey.JOIN_GROUP, 8)
    assert response.error_code == codec.ErrorCode.unsupported_version  # type: ignore[union-attr]


def test_no_generic_error_response_without_top_level_error_code() -> None:
    assert codec.encode_error_response(3, ApiKey.METADATA, 12, codec.ErrorCode.unsupported_version) is None
    assert codec.encode_error_response(3, 999, 0, codec.ErrorCode.unsupported_version) is None


def test_records_memoryview_passes_through_encoding_uncopied() -> None:
    records = memoryview(bytes(range(256)) * 64)
    response = codec.build(
        codec.response_class(ApiKey.FETCH, 12),
        {
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "high_watermark": 10,
                            "last_stable_offset": 10,
                            "log_start_offset": 0,
                            "aborted_transactions": [],
                            "preferred_read_replica": -1,
                            "records": records,
                        }
                    ],
                }
            ],
        },
    )
    chunks = codec.encode_response(1, response)
    assert any(chunk is records for chunk in chunks)
    _, decoded = codec.decode_response(chunks_to_frame(chunks), ApiKey.FETCH, 12)
    assert decoded.responses[0].partitions[0].records == records.tobytes()  # type: ignore[union-attr]


def test_build_rejects_a_missing_required_field() -> None:
    with pytest.raises(ValueError, match="leader"):
        codec.build(codec.response_class(ApiKey.JOIN_GROUP, 0), {"error_code": 0, "protocol_name": ""})


def test_build_converts_plain_values() -> None:
    response = codec.build(codec.response_class(ApiKey.HEARTBEAT, 4), {"error_code": 27, "throttle_time": 5})
    assert response.error_code is codec.ErrorCode.rebalance_in_progress  # type: ignore[union-attr]
    assert codec.duration_ms(response.throttle_time) == 5  # type: ignore[union-attr]


def test_encoding_a_large_response_takes_about_its_own_size() -> None:
    """kio writes field by field; the pieces are joined as they come (a list of them took about 50
    bytes of Python objects per byte of a ListOffsets answer for many partitions)."""
    partitions = [
        {"partition_index": i, "error_code": 3, "timestamp": -1, "offset": -1, "leader_epoch": -1}
        for i in range(50_000)
    ]
    values = {"topics": [{"name": "nowhere", "partitions": partitions}]}
    response = codec.build(codec.response_class(ApiKey.LIST_OFFSETS, 7), values)
    tracemalloc.start()
    try:
        chunks = codec.encode_response(9, response)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    frame = chunks_to_frame(chunks)
    assert len(chunks) <= 3
    assert peak < 3 * len(frame), f"{peak} bytes to encode a response of {len(frame)}"
    correlation_id, decoded = codec.decode_response(frame, ApiKey.LIST_OFFSETS, 7)
    assert correlation_id == 9
    assert [p.partition_index for p in decoded.topics[0].partitions] == list(range(50_000))
