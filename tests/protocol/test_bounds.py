"""The bounds check in front of kio: hostile lengths and counts are malformed requests, never an
aborted interpreter or a huge allocation, and valid requests pass it unchanged.

Anything that could abort the interpreter is decoded in a child process (``isolated_decoder``), so
a regression fails the test with the frame that did it instead of killing the pytest worker.
"""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kompakt.protocol import bounds, codec
from kompakt.protocol.apis import ApiKey
from tests.support.profiles import examples

from .fuzzing import (
    SERVED,
    SUPPORTED,
    length_mutations,
    populated,
    register_kio_strategies,
    request_frame,
    uvarint,
)
from .isolated import IsolatedDecoder

register_kio_strategies()

# Examples of every served version: 2 under the quick profile (``make test``, derandomized), scaled under
# ``make fuzz`` (fresh random ones); KOMPAKT_PROTOCOL_FUZZ_EXAMPLES=N runs N.
_EXAMPLES = int(os.environ.get("KOMPAKT_PROTOCOL_FUZZ_EXAMPLES", examples(2)))

#: A count of 2^32 - 2 elements (uvarint 2^32 - 1, the compact encoding adds one).
HUGE_COUNT = b"\xff\xff\xff\xff\x0f"


def header_v2(api_key: int, version: int) -> bytes:
    """Request header v2: key, version, correlation id 1, client id "c", no tagged fields."""
    return struct.pack(">hhih", api_key, version, 1, 1) + b"c" + b"\x00"


#: The frames of issue 14: ~40 bytes each, a first array whose count asks kio for 34 GB.
ISSUE_FRAMES = {
    "metadata_v12": header_v2(ApiKey.METADATA, 12) + HUGE_COUNT + b"\x00" * 20,
    "produce_v9": header_v2(ApiKey.PRODUCE, 9)
    + b"\x00"  # transactional id: null
    + struct.pack(">hi", 1, 30_000)  # acks, timeout
    + HUGE_COUNT
    + b"\x00" * 20,
    "create_topics_v5": header_v2(ApiKey.CREATE_TOPICS, 5) + HUGE_COUNT + b"\x00" * 20,
    "fetch_v12": header_v2(ApiKey.FETCH, 12)
    + struct.pack(">iiiibii", -1, 500, 1, 52_428_800, 0, 0, -1)  # replica id .. session epoch
    + HUGE_COUNT
    + b"\x00" * 20,
}


def decode_here(decoder: IsolatedDecoder, frame: bytes) -> codec.DecodedRequest:
    """``decode_request`` in this process, for the exception's details, once a child process has
    decoded ``frame`` without dying: a regression that aborts the interpreter then fails the test
    (:class:`~.isolated.DecoderDied`) instead of killing the pytest worker."""
    decoder.decode([frame])
    return codec.decode_request(frame, SUPPORTED)


@pytest.mark.parametrize("name", sorted(ISSUE_FRAMES))
def test_issue_frames_are_malformed_not_an_abort(isolated_decoder: IsolatedDecoder, name: str) -> None:
    frame = ISSUE_FRAMES[name]
    assert (
        struct.pack(">hhih", 3, 12, 1, 1) + b"c\x00" + HUGE_COUNT + b"\x00" * 20
        == ISSUE_FRAMES["metadata_v12"]
    )
    [outcome] = isolated_decoder.decode([frame])
    assert outcome.startswith("malformed ")
    assert (
        "tried to allocate a collection of size 4294967294, but there are only 20 bytes remaining" in outcome
    )


def test_issue_frame_error_carries_the_correlation_id(isolated_decoder: IsolatedDecoder) -> None:
    with pytest.raises(codec.MalformedRequest) as info:
        decode_here(isolated_decoder, ISSUE_FRAMES["fetch_v12"])
    assert info.value.correlation_id == 1
    assert isinstance(info.value.__cause__, bounds.FrameBoundsError)
    assert "FetchRequest.topics" in str(info.value)


# --------------------------------------------------------------------------------------------------
# Every served version: a request with every field on the wire passes unchanged, and every one of its
# length fields set to an extreme value gives MalformedRequest or a correct decode.


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_populated_request_passes_the_check_unchanged(api_key: int, version: int) -> None:
    body = populated(codec.request_class(api_key, version))
    frame = request_frame(body)
    assert codec.request_checker(api_key, version).check(frame) == len(frame)
    assert codec.decode_request(frame, SUPPORTED).body == body
    assert codec.length_fields(frame), "every request has at least the client id's length"


@pytest.mark.parametrize("api_key", sorted({key for key, _ in SERVED}))
def test_every_length_field_of_every_version_survives_extreme_values(
    isolated_decoder: IsolatedDecoder, api_key: int
) -> None:
    cases: list[tuple[str, bytes]] = []
    for key, version in SERVED:
        if key == api_key:
            frame = request_frame(populated(codec.request_class(key, version)))
            cases += [(f"v{version} {description}", data) for description, data in length_mutations(frame)]
    outcomes = isolated_decoder.decode([data for _, data in cases])
    bad = [(description, outcome) for (description, _), outcome in zip(cases, outcomes, strict=True)]
    bad = [(description, outcome) for description, outcome in bad if not _acceptable(outcome)]
    assert not bad
    assert any("FrameBoundsError" in outcome for outcome in outcomes), "the check itself refused none"


def _acceptable(outcome: str) -> bool:
    return outcome == "ok" or outcome.startswith("malformed ")


@pytest.mark.hypothesis  # the @given test is built inside, per version; ``make fuzz`` selects this mark
@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_generated_requests_pass_and_their_mutations_are_refused(
    isolated_decoder: IsolatedDecoder, api_key: int, version: int
) -> None:
    cls = codec.request_class(api_key, version)

    @settings(
        max_examples=_EXAMPLES,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(st.from_type(cls))
    def check(body: codec.RequestPayload) -> None:
        frame = request_frame(body)
        assert codec.request_checker(api_key, version).check(frame) == len(frame)
        try:
            assert codec.decode_request(frame, SUPPORTED).body == body
        except codec.MalformedRequest as exc:
            # kio cannot read back some values its own strategies make (a retention time of
            # 400 million days overflows ``timedelta``); the bounds check must not be the cause.
            assert not isinstance(exc.__cause__, bounds.FrameBoundsError), exc
        cases = length_mutations(frame)
        outcomes = isolated_decoder.decode([data for _, data in cases])
        bad = [(d, o) for (d, _), o in zip(cases, outcomes, strict=True) if not _acceptable(o)]
        assert not bad

    check()


# --------------------------------------------------------------------------------------------------
# The rules of the check, one by one.

API_VERSIONS_V3 = {"client_software_name": "a", "client_software_version": "1"}
SOFTWARE_NAME = "ApiVersionsRequest.client_software_name"


def field_named(frame: bytes, name: str) -> bounds.LengthField:
    return next(mark for mark in codec.length_fields(frame) if mark.name == name)


def frame_of(api_key: int, version: int, values: dict[str, object]) -> bytes:
    return request_frame(codec.build(codec.request_class(api_key, version), values))


def test_string_longer_than_the_frame_is_refused(isolated_decoder: IsolatedDecoder) -> None:
    frame = frame_of(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
    client_id, name = field_named(frame, "RequestHeader.client_id"), field_named(frame, SOFTWARE_NAME)
    hostile = frame[: name.position] + uvarint(2**32 - 1) + frame[name.position + 1 :]
    with pytest.raises(
        codec.MalformedRequest, match=r"client_software_name: length 4294967294, but there are only"
    ):
        decode_here(isolated_decoder, hostile)
    header_hostile = frame[: client_id.position] + b"\x7f\xff" + frame[client_id.position + 2 :]
    with pytest.raises(codec.MalformedRequest, match=r"RequestHeader.client_id: length 32767"):
        decode_here(isolated_decoder, header_hostile)


def test_legacy_array_counts_are_bounded_and_negative_ones_refused(isolated_decoder: IsolatedDecoder) -> None:
    frame = frame_of(ApiKey.METADATA, 4, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    topics = next(m for m in codec.length_fields(frame) if m.role == "array")
    assert (topics.encoding, topics.width) == ("int32", 4)
    for count, message in [
        (2**31 - 1, r"tried to allocate a collection of size 2147483647"),
        (-2, r"negative length -2"),
    ]:
        hostile = (
            frame[: topics.position] + count.to_bytes(4, "big", signed=True) + frame[topics.position + 4 :]
        )
        with pytest.raises(codec.MalformedRequest, match=message):
            decode_here(isolated_decoder, hostile)
    null = frame[: topics.position] + b"\xff\xff\xff\xff" + frame[topics.position + 4 :]
    null = null[: topics.position + 4] + null[topics.position + 4 + 2 + 1 :]  # drop the one topic
    assert decode_here(isolated_decoder, null).body.topics is None  # type: ignore[attr-defined]


def test_null_in_a_non_nullable_string_is_refused(isolated_decoder: IsolatedDecoder) -> None:
    frame = frame_of(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
    name = field_named(frame, SOFTWARE_NAME)
    hostile = frame[: name.position] + b"\x00" + frame[name.position + 2 :]
    with pytest.raises(codec.MalformedRequest, match="null in a non-nullable field"):
        decode_here(isolated_decoder, hostile)


def test_tagged_field_size_must_match_its_value(isolated_decoder: IsolatedDecoder) -> None:
    frame = frame_of(ApiKey.FETCH, 12, populated_fetch_values(cluster_id="abc"))
    body_tags = [m for m in codec.length_fields(frame) if m.role == "tag-size"][-1]
    assert body_tags.name == "FetchRequest tagged fields: tag 0"
    assert frame[body_tags.position] == 4  # the compact string "abc": a length byte and 3 bytes
    for size in (3, 5, 200):
        hostile = frame[: body_tags.position] + bytes([size]) + frame[body_tags.position + 1 :]
        with pytest.raises(codec.MalformedRequest, match="FetchRequest tagged fields: tag 0"):
            decode_here(isolated_decoder, hostile)
    assert decode_here(isolated_decoder, frame).body.cluster_id == "abc"  # type: ignore[attr-defined]


def populated_fetch_values(cluster_id: str) -> dict[str, object]:
    return {
        "cluster_id": cluster_id,
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1024,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_too_many_tagged_fields_and_overlong_varints_are_refused(isolated_decoder: IsolatedDecoder) -> None:
    frame = frame_of(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
    assert frame.endswith(b"\x00")
    with pytest.raises(codec.MalformedRequest, match="ApiVersionsRequest tagged fields: 4294967295 tags"):
        decode_here(isolated_decoder, frame[:-1] + uvarint(2**32 - 1))
    with pytest.raises(codec.MalformedRequest, match="varint longer than five bytes"):
        decode_here(isolated_decoder, frame[:-1] + b"\xff\xff\xff\xff\xff\x01")


def test_bytes_after_the_body_are_ignored_as_before(isolated_decoder: IsolatedDecoder) -> None:
    frame = frame_of(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
    assert (
        decode_here(isolated_decoder, frame + b"\x01\x02").body == decode_here(isolated_decoder, frame).body
    )


def test_fixed_size_elements_are_checked_with_one_multiplication(isolated_decoder: IsolatedDecoder) -> None:
    """An array of int32 (ForgottenTopic.partitions) may claim as many elements as the bytes left
    hold, no more: one more is refused before any element is read."""
    values = populated_fetch_values(cluster_id="c") | {
        "forgotten_topics_data": [{"topic": "t", "partitions": [1, 2, 3]}]
    }
    frame = frame_of(ApiKey.FETCH, 12, values)
    partitions = field_named(frame, "ForgottenTopic.partitions")
    tail = len(frame) - partitions.position - 1
    assert tail >= 12
    fits = tail // 4
    with pytest.raises(
        codec.MalformedRequest, match=f"collection of size {fits + 1}, but there are only {tail} bytes"
    ):
        decode_here(
            isolated_decoder,
            frame[: partitions.position] + uvarint(fits + 2) + frame[partitions.position + 1 :],
        )
