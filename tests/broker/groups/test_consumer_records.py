"""KIP-848 records in __consumer_offsets: Kafka 4's bytes, round trips, and malformed input."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.broker.groups import consumer_records as rec

T = uuid.UUID("0123456789abcdef0123456789abcdef")


def test_group_metadata_bytes_match_kafka() -> None:
    key = rec.encode_key(rec.group_key(rec.CONSUMER_GROUP_METADATA, "g"))
    assert key == b"\x00\x03\x00\x01g"
    # version 0, epoch 5, one tagged field: tag 0, size 8, the hash
    assert rec.encode_value(rec.GroupMetadataValue(5, 258)) == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x01\x00\x08" + (258).to_bytes(8, "big")
    )
    assert rec.encode_value(rec.GroupMetadataValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"


def test_current_assignment_bytes_match_kafka() -> None:
    value = rec.CurrentMemberAssignmentValue(3, 2, 1, {T: frozenset({1, 0})}, {})
    assert rec.encode_value(value) == (
        b"\x00\x00"
        + b"\x00\x00\x00\x03"
        + b"\x00\x00\x00\x02"
        + b"\x01"
        + b"\x02"
        + T.bytes
        + b"\x03"
        + b"\x00\x00\x00\x00\x00\x00\x00\x01"
        + b"\x00"
        + b"\x01"
        + b"\x00"
    )
    assert rec.encode_key(rec.member_key(8, "g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"


values = st.one_of(
    st.builds(rec.GroupMetadataValue, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)),
    st.builds(
        rec.MemberMetadataValue,
        st.none() | st.text(),
        st.none() | st.text(),
        st.text(),
        st.text(),
        st.lists(st.text(), max_size=3).map(tuple),
        st.none() | st.text(),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.sampled_from(["uniform", "range"]),
    ),
    st.builds(rec.TargetAssignmentMetadataValue, st.integers(-(2**31), 2**31 - 1)),
    st.builds(
        rec.TargetAssignmentMemberValue,
        st.dictionaries(st.uuids(), st.frozensets(st.integers(0, 1000), min_size=1), max_size=3),
    ),
)
TYPES = {
    rec.GroupMetadataValue: rec.CONSUMER_GROUP_METADATA,
    rec.MemberMetadataValue: rec.CONSUMER_GROUP_MEMBER_METADATA,
    rec.TargetAssignmentMetadataValue: rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    rec.TargetAssignmentMemberValue: rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
}


@given(values)
def test_values_round_trip(value: rec.ConsumerGroupRecordValue) -> None:
    assert rec.decode_value(TYPES[type(value)], rec.encode_value(value)) == value


@given(st.binary(max_size=64), st.sampled_from(sorted(rec.CONSUMER_GROUP_RECORD_TYPES)))
def test_garbage_is_refused_cleanly(data: bytes, record_type: int) -> None:
    with contextlib.suppress(rec.ConsumerRecordFormatError):
        rec.decode_value(record_type, data)


def test_a_huge_count_is_refused_before_allocating() -> None:
    # TargetAssignmentMember value claiming 2^32 - 2 topics in six bytes
    with pytest.raises(rec.ConsumerRecordFormatError, match="array of"):
        rec.decode_value(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, b"\x00\x00\xff\xff\xff\xff\x0f")


def test_keys_round_trip_and_other_types_are_not_consumer_keys() -> None:
    key = rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "grp", "member-1")
    assert rec.decode_key(rec.encode_key(key)) == key
    assert rec.decode_key(b"\x00\x02\x00\x01g") is None  # a classic GroupMetadataKey
