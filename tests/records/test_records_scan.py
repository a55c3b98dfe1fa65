"""Varints and batch-header scanning over hand-built segment bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.records import native
from kompakt.records import scan as k
from tests.support.handbuilt_batches import Rec, encode_batch, varint


def u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.uint8)


INT_EDGES = [0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31)]
LONG_EDGES = [*INT_EDGES, 2**63 - 1, -(2**63), 2**40, -(2**40)]


@pytest.mark.parametrize("value", LONG_EDGES)
def test_varint_long_round_trip(value: int) -> None:
    enc = varint(value)
    assert len(enc) <= 10
    assert native.varint_size(value) == len(enc)
    out = np.zeros(16, dtype=np.uint8)
    assert native.write_varint(out, 0, value) == len(enc)
    assert out[: len(enc)].tobytes() == enc
    assert tuple(native.read_varint(u8(enc), 0, len(enc), 10)) == (value, len(enc))


@pytest.mark.parametrize("value", INT_EDGES)
def test_varint_int_fits_five_bytes(value: int) -> None:
    enc = varint(value)
    assert len(enc) <= 5
    assert tuple(native.read_varint(u8(enc), 0, len(enc), 5)) == (value, len(enc))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_long_any(value: int) -> None:
    enc = varint(value)
    assert tuple(native.read_varint(u8(enc + b"\xff"), 0, len(enc) + 1, 10)) == (value, len(enc))


def test_varint_overruns_and_overlong() -> None:
    enc = varint(2**40)  # 6 bytes
    assert native.read_varint(u8(enc), 0, len(enc) - 1, 10)[1] == -1  # stops at the limit
    assert native.read_varint(u8(enc), 0, len(enc), 5)[1] == -1  # too long for an int
    assert native.read_varint(u8(b"\x80" * 11), 0, 11, 10)[1] == -1  # too long for a long
    assert native.read_varint(u8(b""), 0, 0, 5)[1] == -1


def three_batches() -> list[bytes]:
    return [
        encode_batch(
            0, [Rec(b"a", b"1"), Rec(b"b", b"2")], producer_id=7, producer_epoch=3, base_sequence=11
        ),
        encode_batch(2, [Rec(b"k", None)], attributes=0x10 | 0x08, leader_epoch=5, base_timestamp=-1),
        encode_batch(9, [], last_offset_delta=4, max_timestamp=77),
    ]


def test_scan_clean_end_reads_every_field() -> None:
    parts = three_batches()
    buf = u8(b"".join(parts))
    t = k.scan_batches(buf)
    assert len(t) == 3
    assert t.stop_reason is k.StopReason.END and t.stop_position == len(buf)
    assert t.position.tolist() == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert t.size.tolist() == [len(p) for p in parts]
    assert t.base_offset.tolist() == [0, 2, 9]
    assert t.last_offset_delta.tolist() == [1, 0, 4]
    assert t.last_offset.tolist() == [1, 2, 13]
    assert t.attributes.tolist() == [0, 0x18, 0]
    assert t.partition_leader_epoch.tolist() == [0, 5, 0]
    assert t.base_timestamp.tolist() == [1000, -1, 1000]
    assert t.max_timestamp.tolist() == [1000, -1, 77]
    assert t.producer_id.tolist() == [7, -1, -1]
    assert t.producer_epoch.tolist() == [3, -1, -1]
    assert t.base_sequence.tolist() == [11, -1, -1]
    assert t.records_count.tolist() == [2, 1, 0]
    assert t.magic.tolist() == [2, 2, 2]
    assert t.size[2] == 61
    assert k.batch_crcs_ok(buf, t).all()


def test_scan_respects_start_and_end() -> None:
    parts = three_batches()
    raw = b"".join(parts)
    buf = u8(raw)
    t = k.scan_batches(buf, len(parts[0]), len(parts[0]) + len(parts[1]))
    assert t.base_offset.tolist() == [2] and t.stop_reason is k.StopReason.END
    with pytest.raises(ValueError):
        k.scan_batches(buf, 5, 2)


@pytest.mark.parametrize("cut", [1, 12, 16, 17, 60, 61, -1])
def test_scan_partial_tail(cut: int) -> None:
    parts = three_batches()
    whole = parts[0] + parts[1]
    buf = u8(whole + parts[0][:cut] if cut > 0 else whole + parts[0][:cut])
    t = k.scan_batches(buf)
    assert len(t) == 2
    assert t.stop_reason is k.StopReason.PARTIAL and t.stop_position == len(whole)


def test_scan_bad_magic_and_bad_size() -> None:
    parts = three_batches()
    bad_magic = bytearray(parts[1])
    bad_magic[16] = 1
    t = k.scan_batches(u8(parts[0] + bytes(bad_magic) + parts[2]))
    assert len(t) == 1 and t.stop_reason is k.StopReason.BAD_MAGIC and t.stop_position == len(parts[0])
    bad_size = bytearray(parts[1])
    bad_size[8:12] = (48).to_bytes(4, "big")  # size 60 < 61
    t = k.scan_batches(u8(parts[0] + bytes(bad_size)))
    assert len(t) == 1 and t.stop_reason is k.StopReason.BAD_SIZE
    negative = bytearray(parts[1])
    negative[8:12] = (-5).to_bytes(4, "big", signed=True)
    assert k.scan_batches(u8(bytes(negative))).stop_reason is k.StopReason.BAD_SIZE


def test_scan_empty_buffer() -> None:
    t = k.scan_batches(np.zeros(0, dtype=np.uint8))
    assert len(t) == 0 and t.stop_reason is k.StopReason.END and t.stop_position == 0


def test_crc_detects_a_flipped_byte_but_not_leader_epoch() -> None:
    parts = three_batches()
    raw = bytearray(b"".join(parts))
    raw[len(parts[0]) + 63] ^= 1  # inside batch 1's records
    raw[12] ^= 0xFF  # batch 0's leader epoch lies outside the CRC
    buf = u8(bytes(raw))
    assert k.batch_crcs_ok(buf, k.scan_batches(buf)).tolist() == [True, False, True]
