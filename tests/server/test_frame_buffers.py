"""Receive buffers of large frames are reused only when nothing still views them."""

from __future__ import annotations

from kompakt.server.connection import _FrameBuffers


def test_a_released_frame_buffer_serves_the_next_frame_of_similar_size() -> None:
    buffers = _FrameBuffers()
    first = buffers.take(1_000_000)
    assert len(first) >= 1_000_000
    first[:5] = b"hello"
    buffers.give(memoryview(first)[:1_000_000])
    again = buffers.take(999_000)
    assert again is first


def test_a_buffer_with_a_live_view_is_never_handed_out_again() -> None:
    buffers = _FrameBuffers()
    buffer = buffers.take(1_000_000)
    buffer[:5] = b"kept!"
    frame = memoryview(buffer)[:1_000_000]
    records = frame[0:5]  # a request that kept a slice of its frame
    buffers.give(frame)
    fresh = buffers.take(1_000_000)
    assert fresh is not buffer
    fresh[:5] = b"other"
    assert bytes(records) == b"kept!"


def test_small_and_huge_buffers_are_not_kept() -> None:
    buffers = _FrameBuffers()
    small = bytearray(70_000)
    huge = buffers.take(3 * 1024 * 1024)
    buffers.give(memoryview(small))
    buffers.give(memoryview(huge))
    assert buffers.take(60_000) is not small
    assert buffers.take(3 * 1024 * 1024) is not huge
