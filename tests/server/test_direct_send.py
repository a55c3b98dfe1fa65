"""Responses with file ranges written past the transport: byte order kept under back-pressure."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from kompakt.log.segment import FileSlice
from kompakt.server import connection
from kompakt.server.connection import _DirectSender, copies_file_ranges


@pytest.mark.parametrize("copy", [True, False], ids=["pread-write", "sendfile"])
def test_bytes_and_file_ranges_arrive_in_order_through_a_slow_reader(tmp_path: Path, copy: bool) -> None:
    rng = random.Random(7)
    blob = rng.randbytes(6 << 20)  # larger than any socket buffer: sendfile must wait and resume
    path = tmp_path / "segment.log"
    path.write_bytes(blob)
    head = [rng.randbytes(rng.choice((1, 4, 50))) for _ in range(3000)]  # kio writes field by field
    middle = [memoryview(rng.randbytes(100_000))]
    tail = [b"trailer"]

    async def scenario() -> bytes:
        received = bytearray()
        done = asyncio.Event()
        sent_before = b"queued-through-the-transport"

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.transport.set_write_buffer_limits(high=0)
            writer.write(sent_before)
            await writer.drain()
            sender = _DirectSender(writer.transport, copy=copy)
            with open(path, "rb") as file:
                chunks: list[object] = [*head, FileSlice(file.fileno(), 1000, len(blob) - 2000), *middle]
                chunks += [FileSlice(file.fileno(), 0, 1000), *tail]
                await sender.send(chunks)  # type: ignore[arg-type]
            sender.close()
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", port))
        client.setblocking(False)
        loop = asyncio.get_running_loop()

        async def read_slowly() -> None:
            while True:
                data = await loop.sock_recv(client, 65536)
                if not data:
                    break
                received.extend(data)
                if rng.random() < 0.05:
                    await asyncio.sleep(0.001)  # let the server's socket fill up now and then
            done.set()

        await asyncio.wait_for(read_slowly(), 30)
        client.close()
        server.close()
        await server.wait_closed()
        assert done.is_set()
        return bytes(received)

    expected = (
        b"queued-through-the-transport"
        + b"".join(head)
        + blob[1000 : len(blob) - 1000]
        + b"".join(bytes(m) for m in middle)
        + blob[:1000]
        + b"trailer"
    )
    got = asyncio.run(scenario())
    assert len(got) == len(expected)
    assert got == expected


def serve_one_range(path: Path, position: int, size: int, **sender: Any) -> bytes:
    """What a peer on loopback receives when a sender writes one file range."""

    async def scenario() -> bytes:
        failure: list[BaseException] = []

        async def serve(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            direct = _DirectSender(writer.transport, **sender)
            try:
                with open(path, "rb") as file:
                    await direct.send([FileSlice(file.fileno(), position, size)])  # type: ignore[list-item]
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                failure.append(exc)
            finally:
                direct.close()
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        data = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        server.close()
        await server.wait_closed()
        if failure:
            raise failure[0]
        return data

    return asyncio.run(scenario())


def test_a_range_not_in_the_page_cache_is_read_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = random.Random(3).randbytes(3 << 20)
    path = tmp_path / "cold.log"
    path.write_bytes(blob)
    real_preadv = os.preadv
    nowait_reads: list[int] = []
    threaded_reads: list[str] = []

    def preadv(fd: int, buffers: list[memoryview], offset: int, flags: int = 0) -> int:
        if flags:  # the event loop's page-cache-only attempt: pretend the pages are on disk
            nowait_reads.append(offset)
            raise BlockingIOError
        threaded_reads.append(threading.current_thread().name)
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(connection, "_NOWAIT", 8)
    monkeypatch.setattr(connection.os, "preadv", preadv)
    got = serve_one_range(path, 100, len(blob) - 100, copy=True)
    assert got == blob[100:]
    assert len(nowait_reads) == len(threaded_reads) == 3  # 1 MiB pieces
    assert threading.main_thread().name not in threaded_reads


def test_a_file_that_shrank_under_a_copied_range_fails_the_send(tmp_path: Path) -> None:
    path = tmp_path / "short.log"
    path.write_bytes(b"x" * 1000)
    with pytest.raises(ConnectionError, match="bytes unsent"):
        serve_one_range(path, 0, 5000, copy=True)


def test_local_peers_get_copies_and_remote_ones_sendfile() -> None:
    left, right = socket.socketpair()
    with left, right:
        assert copies_file_ranges(left)  # a Unix socket
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    with server, client, accepted:
        assert copies_file_ranges(accepted)
    unconnected = socket.socket()
    with unconnected:
        assert not copies_file_ranges(unconnected)
    remote = FakeSocket(peer=("203.0.113.9", 40000), local=("198.51.100.2", 9092))
    assert not copies_file_ranges(remote)  # type: ignore[arg-type]
    own_address = FakeSocket(peer=("198.51.100.2", 40000), local=("198.51.100.2", 9092))
    assert copies_file_ranges(own_address)  # type: ignore[arg-type]
    mapped = FakeSocket(
        peer=("::ffff:127.0.0.1", 40000, 0, 0), local=("::", 9092, 0, 0), family=socket.AF_INET6
    )
    assert copies_file_ranges(mapped)  # type: ignore[arg-type]


class FakeSocket:
    """Just the addresses :func:`copies_file_ranges` looks at (no second interface to test with)."""

    def __init__(
        self,
        *,
        peer: tuple[object, ...],
        local: tuple[object, ...],
        family: socket.AddressFamily = socket.AF_INET,
    ) -> None:
        self.family = family
        self._peer, self._local = peer, local

    def getpeername(self) -> tuple[object, ...]:
        return self._peer

    def getsockname(self) -> tuple[object, ...]:
        return self._local


def test_a_send_cancelled_during_a_threaded_read_does_not_recycle_the_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cold.log"
    path.write_bytes(b"y" * 4096)
    reading = threading.Event()
    release = threading.Event()
    filled: list[memoryview] = []

    def preadv(fd: int, buffers: list[memoryview], offset: int, flags: int = 0) -> int:
        if flags:
            raise BlockingIOError
        filled.append(buffers[0])
        reading.set()
        release.wait(10)  # the worker thread is still using the buffer after the cancellation
        return 0

    monkeypatch.setattr(connection, "_NOWAIT", 8)
    monkeypatch.setattr(connection.os, "preadv", preadv)
    monkeypatch.setattr(connection, "_BUFFERS", connection._CopyBuffers())

    async def scenario() -> None:
        left, right = socket.socketpair()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, left)
        sender = _DirectSender(transport, copy=True)
        with open(path, "rb") as file:
            task = asyncio.create_task(sender.send([FileSlice(file.fileno(), 0, 4096)]))  # type: ignore[list-item]
            await asyncio.to_thread(reading.wait, 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        release.set()
        sender.close()
        transport.close()
        right.close()

    asyncio.run(scenario())
    assert filled
    assert all(idle.obj is not filled[0].obj for idle in connection._BUFFERS._idle)
