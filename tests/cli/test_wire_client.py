"""The tools' own protocol client (``--delete-offsets``) against a peer that misbehaves: every
length is checked before it is read, and a bad answer is a one-line error, not a hang or a crash."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kompakt.cli.output import CliError
from kompakt.cli.wire_client import API_VERSIONS, Connection


@pytest.fixture
def peer() -> Iterator[tuple[socket.socket, list[bytes]]]:
    """A listening socket and the bytes it answers the first request with."""
    server = socket.create_server(("127.0.0.1", 0))
    yield server, []
    server.close()


def _call(server: socket.socket, answers: list[bytes], reply: bytes) -> CliError:
    answers.append(reply)
    thread = threading.Thread(target=_accept_once, args=(server, answers), daemon=True)
    thread.start()
    host, port = server.getsockname()
    with Connection(host, port, 5.0) as conn, pytest.raises(CliError) as raised:
        conn.call(API_VERSIONS, 0, {})
    thread.join(5)
    return raised.value


def _accept_once(server: socket.socket, answers: list[bytes]) -> None:
    conn, _ = server.accept()
    with conn:
        size = struct.unpack(">i", conn.recv(4))[0]
        while size > 0:
            size -= len(conn.recv(size))
        for answer in answers:
            conn.sendall(answer)


def test_an_oversized_frame_is_refused_before_it_is_read(peer: tuple[socket.socket, list[bytes]]) -> None:
    error = _call(*peer, struct.pack(">i", 0x7FFFFFFF))
    assert "answered a frame of 2147483647 bytes to api_versions" in str(error)


def test_a_negative_frame_size_is_refused(peer: tuple[socket.socket, list[bytes]]) -> None:
    assert "answered a frame of -5 bytes" in str(_call(*peer, struct.pack(">i", -5)))


def test_a_peer_that_closes_mid_frame(peer: tuple[socket.socket, list[bytes]]) -> None:
    assert "closed the connection" in str(_call(*peer, struct.pack(">i", 100) + b"\0" * 10))


def test_a_wrong_correlation_id(peer: tuple[socket.socket, list[bytes]]) -> None:
    body = struct.pack(">i", 99) + struct.pack(">h", 0) + struct.pack(">i", 0)  # id 99, no error, no keys
    assert "correlation id 99, not 1" in str(_call(*peer, struct.pack(">i", len(body)) + body))


def test_an_unreachable_peer() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(CliError, match=f"cannot reach 127.0.0.1:{port}"):
        Connection("127.0.0.1", port, 2.0)
