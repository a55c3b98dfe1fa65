"""The connection's frame reader: frames cut from any split of the stream, large ones in place."""

from __future__ import annotations

import random
import struct

from kompakt.protocol.framing import FrameTooLarge
from kompakt.server.connection import FrameProtocol
from tests.support.wire import framed


class FakeTransport:
    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default  # a plaintext transport: no ssl_object

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False


class Collector(FrameProtocol):
    """Takes the frames as soon as they are ready, as the connection's task does."""

    def __init__(self, max_frame_bytes: int, *, take: bool = True) -> None:
        super().__init__(max_frame_bytes)
        self.transport_ = FakeTransport()
        self.connection_made(self.transport_)  # type: ignore[arg-type]
        self.take = take
        self.got: list[bytes] = []
        self.ready_calls = 0

    def frames_ready(self) -> None:
        self.ready_calls += 1
        if self.take:
            self.collect()

    def collect(self) -> list[bytes]:
        frames = [bytes(frame) for frame in self.take_frames()]
        self.got.extend(frames)
        return frames


def receive(protocol: FrameProtocol, data: bytes, rng: random.Random) -> None:
    """Deliver ``data`` the way the selector transport does, in random-sized receives."""
    view = memoryview(data)
    while view:
        target = protocol.get_buffer(-1)
        n = min(len(target), len(view), rng.choice((1, 3, 700, 70_000, 1 << 20)))
        target[:n] = view[:n]
        view = view[n:]
        protocol.buffer_updated(n)


def test_frames_survive_any_split() -> None:
    for seed in range(5):
        rng = random.Random(seed)
        sizes = (0, 1, 5, 1000, 65_531, 65_535, 65_536, 300_000)
        payloads = [rng.randbytes(rng.choice(sizes)) for _ in range(40)]
        protocol = Collector(10**7)
        receive(protocol, framed(payloads), rng)
        assert protocol.got == payloads, seed


def test_read_ahead_pauses_the_socket_until_the_frames_are_taken() -> None:
    payloads = [random.Random(1).randbytes(3_000_000) for _ in range(3)]  # beyond the read-ahead
    protocol = Collector(10**7, take=False)
    receive(protocol, framed(payloads), random.Random(2))
    assert protocol.transport_.paused and protocol.transport_.pauses == 1
    assert protocol.collect() == payloads
    assert not protocol.transport_.paused


def test_frames_received_by_different_connections_do_not_mix() -> None:
    """Every connection of a thread receives into the same scratch buffer, in turns."""
    rng = random.Random(3)
    first, second = Collector(10**6), Collector(10**6)
    a = framed([b"a" * 100, b"b" * 70_000, b"c" * 10])
    b = framed([b"x" * 50, b"y" * 100_000, b"z" * 5])
    while a or b:
        for protocol, name in ((first, "a"), (second, "b")):
            data = a if name == "a" else b
            if not data:
                continue
            target = protocol.get_buffer(-1)
            n = min(len(target), len(data), rng.choice((1, 7, 300, 40_000)))
            target[:n] = data[:n]
            protocol.buffer_updated(n)
            if name == "a":
                a = a[n:]
            else:
                b = b[n:]
    assert first.got == [b"a" * 100, b"b" * 70_000, b"c" * 10]
    assert second.got == [b"x" * 50, b"y" * 100_000, b"z" * 5]


def test_oversized_frame_fails_after_the_frames_before_it() -> None:
    protocol = Collector(100, take=False)
    receive(protocol, framed([b"ok"]) + struct.pack(">i", 101) + b"more", random.Random(0))
    assert isinstance(protocol.error, FrameTooLarge)
    assert protocol.transport_.paused
    assert protocol.collect() == [b"ok"]
    assert protocol.transport_.paused  # nothing after a bad size prefix is read


def test_a_negative_size_fails_the_stream() -> None:
    protocol = Collector(100)
    receive(protocol, struct.pack(">i", -1), random.Random(0))
    assert isinstance(protocol.error, FrameTooLarge) and protocol.got == []


def test_end_of_stream_and_connection_loss_are_reported() -> None:
    protocol = Collector(100)
    assert protocol.eof_received() is True  # the write side stays open for the answers
    assert protocol.at_eof and protocol.error is None and protocol.ready_calls == 1

    lost = Collector(100)
    lost.connection_lost(OSError("reset"))
    assert lost.at_eof and isinstance(lost.error, ConnectionError) and lost.ready_calls == 1
