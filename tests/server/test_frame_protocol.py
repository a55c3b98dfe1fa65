"""The connection's frame reader: frames cut from any split of the stream, large ones in place."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from kompakt.protocol.framing import FrameTooLarge
from kompakt.server.connection import FrameProtocol
from tests.support.wire import framed


class FakeTransport:
    def __init__(self) -> None:
        self.protocol: object = None
        self.paused = False
        self.pauses = 0

    def set_protocol(self, protocol: object) -> None:
        self.protocol = protocol

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False


class Stream(asyncio.Protocol):
    def __init__(self) -> None:
        self.lost: list[Exception | None] = []

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


def receive(protocol: FrameProtocol, data: bytes, rng: random.Random) -> None:
    """Deliver ``data`` the way the selector transport does, in random-sized receives."""
    view = memoryview(data)
    while view:
        target = protocol.get_buffer(-1)
        n = min(len(target), len(view), rng.choice((1, 3, 700, 70_000, 1 << 20)))
        target[:n] = view[:n]
        view = view[n:]
        protocol.buffer_updated(n)


@pytest.mark.parametrize("seed", range(5))
def test_frames_survive_any_split(seed: int) -> None:
    rng = random.Random(seed)
    payloads = [rng.randbytes(rng.choice((0, 5, 1000, 65_535, 65_536, 300_000))) for _ in range(40)]
    payloads[10:10] = [rng.randbytes(3_000_000) for _ in range(3)]  # beyond the read-ahead

    async def scenario() -> list[bytes]:
        protocol = FrameProtocol(Stream(), 10**7)
        transport = FakeTransport()
        protocol.attach(transport, b"", at_eof=False)  # type: ignore[arg-type]
        got: list[bytes] = []
        data = framed(payloads)
        receive(protocol, data, rng)
        protocol.eof_received()
        while frames := await protocol.next_frames():
            got.extend(bytes(f) for f in frames)
        assert transport.pauses >= 1 and not transport.paused  # read-ahead pauses, taking resumes
        return got

    assert asyncio.run(scenario()) == payloads


def test_buffered_bytes_of_the_stream_reader_come_first() -> None:
    async def scenario() -> list[bytes]:
        protocol = FrameProtocol(Stream(), 1000)
        protocol.attach(FakeTransport(), framed([b"a", b"bc"]) + b"\0\0", at_eof=False)  # type: ignore[arg-type]
        receive(protocol, b"\0\1d", random.Random(0))
        return [bytes(f) for f in await protocol.next_frames()]

    assert asyncio.run(scenario()) == [b"a", b"bc", b"d"]


def test_oversized_frame_fails_after_the_frames_before_it() -> None:
    async def scenario() -> None:
        protocol = FrameProtocol(Stream(), 100)
        transport = FakeTransport()
        protocol.attach(transport, b"", at_eof=False)  # type: ignore[arg-type]
        receive(protocol, framed([b"ok"]) + struct.pack(">i", 101), random.Random(0))
        assert [bytes(f) for f in await protocol.next_frames()] == [b"ok"]
        assert transport.paused
        with pytest.raises(FrameTooLarge):
            await protocol.next_frames()

    asyncio.run(scenario())


def test_connection_lost_ends_the_stream_and_reaches_the_stream_protocol() -> None:
    async def scenario() -> None:
        stream = Stream()
        protocol = FrameProtocol(stream, 100)
        protocol.attach(FakeTransport(), b"", at_eof=False)  # type: ignore[arg-type]
        # The loss arrives while next_frames waits: it runs once the read below has suspended.
        asyncio.get_running_loop().call_soon(protocol.connection_lost, None)
        assert await protocol.next_frames() == []
        assert stream.lost == [None]

    asyncio.run(scenario())
