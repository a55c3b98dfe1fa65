"""Every ``__consumer_offsets`` record kompakt writes, in Kafka 4.1's bytes: golden bytes, round
trips, and malformed input refused cleanly (``records/schemas.py``, ``records/placement.py``,
``records/consumer_protocol.py``)."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.broker.groups.records import consumer_protocol as cp
from kompakt.broker.groups.records import schemas as rec
from kompakt.broker.groups.records.placement import java_string_hashcode, partition_for
from kompakt.broker.groups.records.schemas import (
    CommittedOffset,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

T = uuid.UUID("0123456789abcdef0123456789abcdef")
OFFSET_KEY = OffsetCommitKey("g", "tp", 3)

# ------------------------------------------------------------------------------------------------- placement


def test_java_hashcode_and_partition() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # the famous MIN_VALUE string
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    # "é" is one UTF-16 unit (0xE9); "😀" is two surrogate units (0xD83D, 0xDE00).
    assert java_string_hashcode("é") == 0xE9
    assert java_string_hashcode("😀") == 0xD83D * 31 + 0xDE00
    assert partition_for("hello", 50) == 99162322 % 50


# ------------------------------------------------------------------------------------------- classic records


def test_offset_commit_key_bytes() -> None:
    assert encode_key(OFFSET_KEY) == bytes.fromhex("00010001670002747000000003")
    assert decode_key(encode_key(OFFSET_KEY)) == OFFSET_KEY


def test_group_metadata_key_bytes() -> None:
    assert encode_key(GroupMetadataKey("grp")) == bytes.fromhex("00020003677270")
    assert decode_key(encode_key(GroupMetadataKey("grp"))) == GroupMetadataKey("grp")
    assert decode_key(bytes.fromhex("000b000167")) is None  # a share group's record type: not kept


def test_offset_commit_value_v3_bytes() -> None:
    entry = CommittedOffset(offset=42, leader_epoch=5, metadata="md", commit_timestamp_ms=1000)
    expected = bytes.fromhex(
        "0003"  # version
        "000000000000002a"  # offset
        "00000005"  # leader epoch
        "0002"
        "6d64"  # metadata
        "00000000000003e8"  # commit timestamp
    )
    assert encode_value(entry) == expected
    assert decode_value(OFFSET_KEY, expected) == entry


def test_offset_commit_value_v1_with_expiry() -> None:
    entry = CommittedOffset(7, 9, "", 1000, expire_timestamp_ms=2000)
    expected = bytes.fromhex("00010000000000000007000000000000000003e800000000000007d0")
    assert encode_value(entry) == expected
    # v1 has no leader epoch: it reads back as -1, as in Kafka
    assert decode_value(OFFSET_KEY, expected) == CommittedOffset(7, -1, "", 1000, 2000)
    # v0: offset, metadata, commit timestamp
    v0 = bytes.fromhex("0000000000000000000700017800000000000003e8")
    assert decode_value(OFFSET_KEY, v0) == CommittedOffset(7, -1, "x", 1000, None)


def test_group_metadata_value_v3_bytes() -> None:
    member = MemberMetadata("m", None, "c", "h", 300, 100, b"\x01", b"")
    record = GroupMetadataValue("consumer", 4, "range", "m", 5000, (member,))
    expected = (
        bytes.fromhex("0003")
        + struct.pack(">h", 8)
        + b"consumer"
        + struct.pack(">i", 4)
        + struct.pack(">h", 5)
        + b"range"
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">q", 5000)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">h", -1)
        + struct.pack(">h", 1)
        + b"c"
        + struct.pack(">h", 1)
        + b"h"
        + struct.pack(">i", 300)
        + struct.pack(">i", 100)
        + struct.pack(">i", 1)
        + b"\x01"
        + struct.pack(">i", 0)
    )
    key = GroupMetadataKey("g")
    assert encode_value(record) == expected
    assert decode_value(key, expected) == record
    empty = GroupMetadataValue("consumer", 0, None, None, -1, ())
    assert decode_value(key, encode_value(empty)) == empty


# ------------------------------------------------------------------------------------------- KIP-848 records


def test_group_metadata_bytes_match_kafka() -> None:
    key = encode_key(rec.group_key(rec.CONSUMER_GROUP_METADATA, "g"))
    assert key == b"\x00\x03\x00\x01g"
    # version 0, epoch 5, one tagged field: tag 0, size 8, the hash
    assert encode_value(rec.ConsumerGroupMetadataValue(5, 258)) == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x01\x00\x08" + (258).to_bytes(8, "big")
    )
    assert encode_value(rec.ConsumerGroupMetadataValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"


def test_current_assignment_bytes_match_kafka() -> None:
    value = rec.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, {T: frozenset({1, 0})}, {})
    assert encode_value(value) == (
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
    assert encode_key(rec.member_key(8, "g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"


def test_member_metadata_tag_0_as_kafka_writes_it() -> None:
    """Kafka's generated writer always writes tag 0 of ConsumerGroupMemberMetadataValue: a null
    ClassicMemberMetadata (a member of the consumer protocol) is the one-byte null marker."""
    consumer = rec.ConsumerGroupMemberMetadataValue(None, None, "c", "h", ("t",), None, 5, "uniform")
    assert encode_value(consumer).endswith(b"\x01\x00\x01\x00")  # one tag: 0, size 1, null
    classic_metadata = rec.ClassicMemberMetadata(10_000, (("range", b"\x00\x01"),))
    classic = rec.ConsumerGroupMemberMetadataValue(
        None, None, "c", "h", ("t",), "", 5, None, classic_metadata
    )
    tail = (
        b"\x01\x00"  # one tag: 0
        + b"\x11"  # its size: the struct and its presence byte
        + b"\x01"  # present
        + struct.pack(">i", 10_000)
        + b"\x02"  # one protocol
        + b"\x06range"
        + b"\x03\x00\x01"
        + b"\x00"  # the protocol's tags
        + b"\x00"  # the struct's tags
    )
    assert encode_value(classic).endswith(tail)
    key = rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, "g", "m")
    assert decode_value(key, encode_value(consumer)) == consumer
    assert decode_value(key, encode_value(classic)) == classic


values = st.one_of(
    st.builds(
        rec.ConsumerGroupMetadataValue, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
    ),
    st.builds(
        rec.ConsumerGroupMemberMetadataValue,
        st.none() | st.text(),
        st.none() | st.text(),
        st.text(),
        st.text(),
        st.lists(st.text(), max_size=3).map(tuple),
        st.none() | st.text(),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.sampled_from(["uniform", "range"]),
        st.none()
        | st.builds(
            rec.ClassicMemberMetadata,
            st.integers(-(2**31), 2**31 - 1),
            st.lists(st.tuples(st.text(), st.binary(max_size=8)), max_size=2).map(tuple),
        ),
    ),
    st.builds(rec.ConsumerGroupTargetAssignmentMetadataValue, st.integers(-(2**31), 2**31 - 1)),
    st.builds(
        rec.ConsumerGroupTargetAssignmentMemberValue,
        st.dictionaries(st.uuids(), st.frozensets(st.integers(0, 1000), min_size=1), max_size=3),
    ),
)
TYPES = {
    rec.ConsumerGroupMetadataValue: rec.CONSUMER_GROUP_METADATA,
    rec.ConsumerGroupMemberMetadataValue: rec.CONSUMER_GROUP_MEMBER_METADATA,
    rec.ConsumerGroupTargetAssignmentMetadataValue: rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    rec.ConsumerGroupTargetAssignmentMemberValue: rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
}


@given(values)
def test_values_round_trip(value: rec.ConsumerGroupRecordValue) -> None:
    assert rec.decode_consumer_value(TYPES[type(value)], encode_value(value)) == value


@given(st.binary(max_size=64), st.sampled_from(sorted(rec.CONSUMER_GROUP_RECORD_TYPES)))
def test_garbage_is_refused_cleanly(data: bytes, record_type: int) -> None:
    with contextlib.suppress(rec.GroupRecordFormatError):
        rec.decode_consumer_value(record_type, data)


@given(st.binary(max_size=64))
def test_garbage_keys_and_classic_values_are_refused_cleanly(data: bytes) -> None:
    with contextlib.suppress(rec.GroupRecordFormatError):
        decode_key(data)
    for key in (OFFSET_KEY, GroupMetadataKey("g")):
        with contextlib.suppress(rec.GroupRecordFormatError):
            decode_value(key, data)


def test_a_huge_count_is_refused_before_allocating() -> None:
    # TargetAssignmentMember value claiming 2^32 - 2 topics in six bytes
    with pytest.raises(rec.GroupRecordFormatError, match="array of"):
        rec.decode_consumer_value(
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, b"\x00\x00\xff\xff\xff\xff\x0f"
        )
    # GroupMetadataValue v3 claiming 2^31 - 1 members
    huge = encode_value(GroupMetadataValue("consumer", 1, None, None))[:-4] + struct.pack(">i", 2**31 - 1)
    with pytest.raises(rec.GroupRecordFormatError, match="array of"):
        decode_value(GroupMetadataKey("g"), huge)


def test_keys_round_trip() -> None:
    key = rec.member_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "grp", "member-1")
    assert decode_key(encode_key(key)) == key
    assert decode_key(b"\x00\x02\x00\x01g") == GroupMetadataKey("g")


# ---------------------------------------------------------------------------- the embedded consumer protocol


def test_consumer_protocol_subscription_and_assignment() -> None:
    subscription = cp.Subscription(("a", "b"), None, (("a", (0, 1)),), 4, "rack")
    data = cp.encode_subscription(subscription)
    assert cp.decode_subscription(data) == subscription
    assert cp.version_of(data) == 3
    # v0 (librdkafka's eager consumers): topics and user data only
    v0 = cp.encode_subscription(cp.Subscription(("t",)), version=0)
    assert v0 == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert cp.decode_subscription(v0) == cp.Subscription(("t",))
    assignment = cp.encode_assignment({"t": [2, 0], "empty": []}, version=1)
    assert assignment == (
        b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00"
        b"\x00\x00\x00\x02" + b"\xff\xff\xff\xff"
    )
    assert cp.decode_assignment(assignment) == ((("t", (0, 2)),), None)
    assert cp.decode_assignment(b"") == ((), None)
