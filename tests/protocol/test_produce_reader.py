"""Produce bodies read with their records left in the frame decode to exactly what kio's reader
gives, for every served version, for frames with unknown tagged fields, and for every hostile
length that the bounds check lets through; the records are views of the frame, not copies."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from kompakt.protocol import bounds, codec, produce_reader
from kompakt.protocol.apis import ApiKey
from tests.support.profiles import examples

from .fuzzing import length_mutations, populated, register_kio_strategies, request_frame, uvarint

register_kio_strategies()

VERSIONS = list(produce_reader.VERSIONS)


def _kio_body(frame: bytes) -> codec.RequestPayload:
    _, version, _ = codec.peek(frame)
    body_class = codec.request_class(ApiKey.PRODUCE, version)
    _, header_size = entity_reader(body_class.__header_schema__)(frame, 0)
    body, _ = entity_reader(body_class)(frame, header_size)
    return body


def _fast_body(frame: bytes) -> codec.RequestPayload:
    _, version, _ = codec.peek(frame)
    body_class = codec.request_class(ApiKey.PRODUCE, version)
    _, header_size = entity_reader(body_class.__header_schema__)(frame, 0)
    return produce_reader.read_produce(frame, header_size, version)


def _plain(body: object) -> object:
    """The body as nested tuples, records as bytes: comparable across both readers."""
    return (
        body.transactional_id,  # type: ignore[attr-defined]
        int(body.acks),  # type: ignore[attr-defined]
        body.timeout,  # type: ignore[attr-defined]
        tuple(
            (
                topic.name,
                tuple(
                    (int(p.index), None if p.records is None else bytes(p.records))
                    for p in topic.partition_data
                ),
            )
            for topic in body.topic_data  # type: ignore[attr-defined]
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_same_body_as_kio(version: int, data: st.DataObject) -> None:
    body = data.draw(st.from_type(codec.request_class(ApiKey.PRODUCE, version)))
    frame = request_frame(body)
    bounds_checked = codec.decode_request(frame, {ApiKey.PRODUCE: codec.VersionRange(3, 9)})
    assert _plain(_fast_body(frame)) == _plain(_kio_body(frame)) == _plain(bounds_checked.body)


@pytest.mark.parametrize("version", VERSIONS)
def test_records_are_views_of_the_frame(version: int) -> None:
    frame = bytearray(request_frame(populated(codec.request_class(ApiKey.PRODUCE, version))))
    # As the server hands it over: a read-only view of the buffer the frame was received into.
    decoded = codec.decode_request(memoryview(frame).toreadonly(), {ApiKey.PRODUCE: codec.VersionRange(3, 9)})
    records = decoded.body.topic_data[0].partition_data[0].records  # type: ignore[attr-defined]
    assert isinstance(records, memoryview) and records.readonly
    at = bytes(frame).index(bytes(records))
    frame[at] ^= 0xFF  # the view sees the frame's bytes, so nothing was copied
    assert records[0] == frame[at]


@pytest.mark.parametrize("level", ["partition", "topic", "request"])
def test_unknown_tagged_fields_are_refused_as_kio_refuses_them(level: str) -> None:
    """v9 with a tagged field (Produce defines none): the bounds check refuses the frame before
    either reader sees it, and each reader on its own refuses it too."""
    tag = uvarint(1) + uvarint(7) + uvarint(3) + b"xyz"  # one tagged field: tag 7, three bytes
    records = b"R" * 61
    frame = (
        struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 1)
        + b"c\x00"  # client id, header tags
        + uvarint(0)  # transactional id: null
        + struct.pack(">hi", -1, 1500)
        + uvarint(2)  # one topic
        + uvarint(4)
        + b"top"
        + uvarint(2)  # one partition
        + struct.pack(">i", 3)
        + uvarint(len(records) + 1)
        + records
        + (tag if level == "partition" else b"\x00")
        + (tag if level == "topic" else b"\x00")
        + (tag if level == "request" else b"\x00")
    )
    for reader in (_kio_body, _fast_body):
        with pytest.raises((KeyError, ValueError)):
            reader(frame)
    with pytest.raises(codec.MalformedRequest, match="unknown tag 7"):
        codec.decode_request(frame, {ApiKey.PRODUCE: codec.VersionRange(3, 9)})


@pytest.mark.parametrize("version", VERSIONS)
def test_hostile_lengths_the_check_lets_through_decode_alike(version: int) -> None:
    """Every extreme value of every length field: where the bounds check passes a frame, both
    readers give the same body or both refuse it."""
    frame = request_frame(populated(codec.request_class(ApiKey.PRODUCE, version)))
    checker = codec.request_checker(ApiKey.PRODUCE, version)
    passed = 0
    for description, mutated in length_mutations(frame):
        try:
            checker.check(mutated)
        except bounds.FrameBoundsError:
            continue
        passed += 1
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
