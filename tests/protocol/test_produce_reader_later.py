"""Produce v10-12 (the versions librdkafka 2.x sends) read with their records left in the frame:
the same bodies as kio's reader, and records that are views of the frame, writable when the frame
is (the server's own buffer for a large request), so that the log sets offsets without a copy."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kompakt.protocol import bounds, codec, produce_reader
from kompakt.protocol.apis import ApiKey
from tests.support.profiles import examples
from tests.support.wire import request_bytes

from .fuzzing import length_mutations, populated, register_kio_strategies, request_frame
from .test_produce_reader import _fast_body, _kio_body, _plain

register_kio_strategies()

LATER = list(produce_reader.LATER_SAME_LAYOUT)
SERVED = {ApiKey.PRODUCE: codec.VersionRange(3, 12)}


def test_the_later_versions_are_read_by_the_frame_reader() -> None:
    assert all(produce_reader.reads(version) for version in range(3, 13))
    assert not produce_reader.reads(2) and not produce_reader.reads(13)


@pytest.mark.parametrize("version", LATER)
@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_same_body_as_kio(version: int, data: st.DataObject) -> None:
    body = data.draw(st.from_type(codec.request_class(ApiKey.PRODUCE, version)))
    frame = request_frame(body)
    bounds_checked = codec.decode_request(frame, SERVED)
    assert _plain(_fast_body(frame)) == _plain(_kio_body(frame)) == _plain(bounds_checked.body)


@pytest.mark.parametrize("version", LATER)
def test_hostile_lengths_the_check_lets_through_decode_alike(version: int) -> None:
    frame = request_frame(populated(codec.request_class(ApiKey.PRODUCE, version)))
    checker = codec.request_checker(ApiKey.PRODUCE, version)
    for description, mutated in length_mutations(frame):
        try:
            checker.check(mutated)
        except bounds.FrameBoundsError:
            continue
        outcomes = []
        for reader in (_kio_body, _fast_body):
            try:
                outcomes.append(_plain(reader(mutated)))
            except Exception as exc:  # noqa: BLE001 - either reader may refuse it
                outcomes.append(type(exc).__name__ != "")
        kio_outcome, fast_outcome = outcomes
        assert (kio_outcome is True) == (fast_outcome is True), description
        if kio_outcome is not True:
            assert kio_outcome == fast_outcome, description


@pytest.mark.parametrize("version", [3, 9, *LATER])
@pytest.mark.parametrize("writable", [True, False], ids=["writable-frame", "read-only-frame"])
def test_records_are_views_of_the_frame_writable_as_the_frame_is(version: int, writable: bool) -> None:
    frame = bytearray(request_frame(populated(codec.request_class(ApiKey.PRODUCE, version))))
    view = memoryview(frame) if writable else memoryview(frame).toreadonly()
    decoded = codec.decode_request(view, SERVED)
    records = decoded.body.topic_data[0].partition_data[0].records  # type: ignore[attr-defined]
    assert isinstance(records, memoryview) and records.readonly is not writable
    at = bytes(frame).index(bytes(records))
    frame[at] ^= 0xFF  # the view sees the frame's bytes, so nothing was copied
    assert records[0] == frame[at]


def test_a_writable_frame_of_another_api_decodes_as_a_read_only_one() -> None:
    """kio's readers refuse writable buffers; only Produce keeps the frame writable."""
    values = {"topics": [{"name": "t" * 200}] * 3, "allow_auto_topic_creation": False}
    values |= {"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    frame = bytearray(request_bytes(ApiKey.METADATA, 9, values)[4:])  # without the size prefix
    decoded = codec.decode_request(memoryview(frame), {ApiKey.METADATA: codec.VersionRange(0, 12)})
    assert [t.name for t in decoded.body.topics] == ["t" * 200] * 3  # type: ignore[attr-defined]
