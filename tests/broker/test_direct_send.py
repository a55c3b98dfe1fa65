"""Responses with file ranges written past the transport: byte order kept under back-pressure."""

from __future__ import annotations

import asyncio
import random
import socket
from pathlib import Path

from kompakt.log.segment import FileSlice
from kompakt.server.connection import _DirectSender


def test_bytes_and_file_ranges_arrive_in_order_through_a_slow_reader(tmp_path: Path) -> None:
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
            sender = _DirectSender(writer.transport)
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
