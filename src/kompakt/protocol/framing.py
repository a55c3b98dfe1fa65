"""Sans-IO splitter for Kafka's length-prefixed frames.

Every Kafka request is ``int32 size`` followed by ``size`` bytes. :class:`FrameReader` takes whatever
chunks the transport delivers and hands back complete frames (without the size prefix). It does no
I/O, so it is tested byte by byte and the server only glues it to a socket.

A size that is negative or larger than ``socket.request.max.bytes`` is a protocol violation that can
not be answered (there is no correlation id yet), so it raises :class:`FrameTooLarge` and the server
closes the connection, as Kafka does with its ``InvalidReceiveException``.

Copies: when the internal buffer is empty, frames that lie entirely inside one received ``bytes``
chunk are returned as memoryview slices of it (the chunk is immutable, so this is safe); only a frame
split across chunks is assembled in a ``bytearray`` and returned as ``bytes``.
"""

from __future__ import annotations

import struct

from kompakt.errors import KompaktError

_SIZE = struct.Struct(">i")

#: Kafka's default ``socket.request.max.bytes`` (100 MiB).
DEFAULT_MAX_FRAME_BYTES = 104_857_600


class FrameTooLarge(KompaktError):
    """A frame size prefix that is negative or above the configured maximum."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        super().__init__(f"frame size {size} outside 0..{max_frame_bytes}")
        self.size = size
        self.max_frame_bytes = max_frame_bytes


class FrameReader:
    """Accumulates received bytes and yields complete frames, in order.

    Not thread-safe: one reader per connection, fed from one task.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must not be negative")
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | memoryview]:
        """Add received bytes; return every frame they complete (possibly none).

        Raises :class:`FrameTooLarge` as soon as a bad size prefix is seen; the reader is unusable
        afterwards (the connection must be closed).
        """
        frames: list[bytes | memoryview] = []
        if not self._buffer and isinstance(data, bytes):
            position = self._split_immutable(data, frames)
            self._buffer += memoryview(data)[position:]
            return frames
        self._buffer += data
        position = 0
        buffer = self._buffer
        while len(buffer) - position >= _SIZE.size:
            (size,) = _SIZE.unpack_from(buffer, position)
            self._check_size(size)
            end = position + _SIZE.size + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[position + _SIZE.size : end]))
            position = end
        if position:
            del buffer[:position]
        return frames

    def _split_immutable(self, data: bytes, frames: list[bytes | memoryview]) -> int:
        """Slice whole frames straight out of an immutable chunk; return where the tail starts."""
        view = memoryview(data)
        position = 0
        while len(data) - position >= _SIZE.size:
            (size,) = _SIZE.unpack_from(data, position)
            self._check_size(size)
            end = position + _SIZE.size + size
            if end > len(data):
                break
            frames.append(view[position + _SIZE.size : end])
            position = end
        return position

    def _check_size(self, size: int) -> None:
        if size < 0 or size > self._max_frame_bytes:
            raise FrameTooLarge(size, self._max_frame_bytes)
