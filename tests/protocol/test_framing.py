"""FrameReader: splitting, partial frames, size limits."""

from __future__ import annotations

import struct

import pytest

from kompakt.protocol.framing import FrameReader, FrameTooLarge
from tests.support.wire import size_prefixed as frame


def as_bytes(frames: list[bytes | memoryview]) -> list[bytes]:
    return [bytes(f) for f in frames]


def test_several_frames_in_one_chunk() -> None:
    reader = FrameReader(100)
    assert as_bytes(reader.feed(frame(b"a") + frame(b"bc") + frame(b""))) == [b"a", b"bc", b""]
    assert reader.buffered_bytes == 0


def test_frame_split_byte_by_byte() -> None:
    reader = FrameReader(100)
    data = frame(b"hello") + frame(b"world")
    out: list[bytes] = []
    for i in range(len(data)):
        out += as_bytes(reader.feed(data[i : i + 1]))
    assert out == [b"hello", b"world"]
    assert reader.buffered_bytes == 0


def test_partial_tail_is_kept_for_the_next_chunk() -> None:
    reader = FrameReader(100)
    data = frame(b"first") + frame(b"second")
    assert as_bytes(reader.feed(data[:12])) == [b"first"]
    assert reader.buffered_bytes == 3
    assert as_bytes(reader.feed(data[12:])) == [b"second"]


def test_whole_frames_from_bytes_are_zero_copy_views() -> None:
    data = frame(b"x" * 10)
    (out,) = FrameReader(100).feed(data)
    assert isinstance(out, memoryview)
    assert out.obj is data


def test_bytearray_and_memoryview_input() -> None:
    reader = FrameReader(100)
    assert as_bytes(reader.feed(bytearray(frame(b"ab")))) == [b"ab"]
    assert as_bytes(reader.feed(memoryview(frame(b"cd")))) == [b"cd"]


def test_frame_at_the_limit_is_accepted() -> None:
    assert as_bytes(FrameReader(4).feed(frame(b"1234"))) == [b"1234"]


@pytest.mark.parametrize("size", [5, 2**31 - 1, -1, -(2**31)])
def test_bad_sizes_raise(size: int) -> None:
    with pytest.raises(FrameTooLarge):
        FrameReader(4).feed(struct.pack(">i", size))


def test_bad_size_after_buffered_data_raises() -> None:
    reader = FrameReader(4)
    reader.feed(b"\x00")
    with pytest.raises(FrameTooLarge):
        reader.feed(b"\x00\x00\x09")
