"""Kafka's frame rule: every request is ``int32 size`` then ``size`` bytes, within a limit.

A size that is negative or larger than ``socket.request.max.bytes`` is a protocol violation that can
not be answered (there is no correlation id yet), so the reader raises :class:`FrameTooLarge` and the
server closes the connection, as Kafka does with its ``InvalidReceiveException``.

The bytes are split into frames in one place, where they arrive:
``kompakt.server.connection.FrameProtocol`` receives a large frame straight into a buffer of its
own and cuts small ones out of its receive buffer (its tests: ``tests/server/test_frame_protocol.py``).
"""

from __future__ import annotations

from kompakt.errors import KompaktError

#: Kafka's default ``socket.request.max.bytes`` (100 MiB).
DEFAULT_MAX_FRAME_BYTES = 104_857_600


class FrameTooLarge(KompaktError):
    """A frame size prefix that is negative or above the configured maximum."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        super().__init__(f"frame size {size} outside 0..{max_frame_bytes}")
        self.size = size
        self.max_frame_bytes = max_frame_bytes
