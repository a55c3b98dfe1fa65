"""Zigzag varints: the known encodings Kafka's format relies on, limits and error paths."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.errors import CorruptRecordError
from kompakt.records.varint import (
    decode_varint,
    encode_varint,
    varint_size,
    zigzag_decode,
    zigzag_encode,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert varint_size(value) == len(encoded)


def test_int32_zigzag_matches_the_32_bit_formula() -> None:
    # Kafka encodes int fields with (n << 1) ^ (n >> 31); for int32 values the 64-bit form agrees.
    for n in (-(2**31), -12345, -1, 0, 1, 12345, 2**31 - 1):
        assert zigzag_encode(n) == ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF


def test_decode_at_offset_and_limit() -> None:
    buf = b"\xaa" + encode_varint(-300) + encode_varint(7)
    value, pos = decode_varint(buf, 1)
    assert value == -300
    assert decode_varint(buf, pos) == (7, len(buf))


def test_truncated_varint_raises() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"", 0)
    # The limit cuts a varint that the buffer itself would complete.
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x01", 0, 1)


def test_overlong_varint_raises() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80" * 10 + b"\x00", 0)


def test_tenth_byte_high_bits_are_dropped_like_java() -> None:
    value, pos = decode_varint(b"\xff" * 9 + b"\x7f", 0)
    assert pos == 10
    assert -(2**63) <= value < 2**63


@given(INT64)
def test_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert varint_size(value) == len(encoded)
    assert zigzag_decode(zigzag_encode(value)) == value
    assert len(encoded) <= 10


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_int32_values_fit_five_bytes(value: int) -> None:
    assert len(encode_varint(value)) <= 5


@given(st.lists(INT64, max_size=20))
def test_concatenated_stream(values: list[int]) -> None:
    buf = b"".join(encode_varint(v) for v in values)
    pos = 0
    out = []
    for _ in values:
        v, pos = decode_varint(buf, pos)
        out.append(v)
    assert out == values
    assert pos == len(buf)
