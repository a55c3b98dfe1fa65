"""The tools' own protocol client (``--delete-offsets``) against a peer that misbehaves: every
length is checked before it is read, and a bad answer is a one-line error, not a hang or a crash."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kompakt.cli.output import CliError
from kompakt.cli.wire_client import (
    API_VERSIONS,
    FIND_COORDINATOR,
    OFFSET_DELETE,
    Connection,
    PartitionResult,
    delete_offsets,
)


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


class FakeCluster:
    """A peer that speaks just enough Kafka for ``--delete-offsets``: ApiVersions, FindCoordinator
    (naming itself, after ``loading`` answers of COORDINATOR_LOAD_IN_PROGRESS, as a coordinator
    that just took over does) and OffsetDelete."""

    def __init__(self, loading: int) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self.server.getsockname()
        self.loading = loading
        self.asked: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        from kompakt.protocol import codec

        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                frame = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                api_key, version, correlation = codec.peek(frame)
                self.asked.append(codec.api_name(api_key))
                values: dict[str, object]
                if api_key == API_VERSIONS:
                    keys = [(API_VERSIONS, 0, 3), (FIND_COORDINATOR, 0, 4), (OFFSET_DELETE, 0, 0)]
                    values = {
                        "api_keys": [{"api_key": k, "min_version": a, "max_version": b} for k, a, b in keys]
                    }
                elif api_key == FIND_COORDINATOR:
                    error = (
                        codec.ErrorCode.coordinator_load_in_progress if self.loading else codec.ErrorCode.none
                    )
                    self.loading = max(0, self.loading - 1)
                    values = {
                        "coordinators": [
                            {
                                "key": "g",
                                "node_id": 1,
                                "host": self.host,
                                "port": self.port,
                                "error_code": error,
                            }
                        ]
                    }
                else:
                    values = {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
                response = codec.build(codec.response_class(api_key, version), values, zero_fill=True)
                conn.sendall(b"".join(bytes(c) for c in codec.encode_response(correlation, response)))

    def close(self) -> None:
        self.server.close()


def _dead_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
    return port


def test_delete_offsets_asks_the_next_bootstrap_server_when_the_first_is_down() -> None:
    cluster = FakeCluster(loading=0)
    try:
        bootstrap = f"127.0.0.1:{_dead_port()},{cluster.host}:{cluster.port}"
        error, results = delete_offsets(bootstrap, "g", [("t", 0)], 5.0)
        assert (error, results) == (None, [PartitionResult("t", 0, None)])
    finally:
        cluster.close()


def test_delete_offsets_waits_for_a_coordinator_that_is_loading() -> None:
    cluster = FakeCluster(loading=2)
    slept: list[float] = []
    try:
        error, results = delete_offsets(
            f"{cluster.host}:{cluster.port}", "g", [("t", 0)], 5.0, sleep=slept.append
        )
        assert (error, results) == (None, [PartitionResult("t", 0, None)])
        assert cluster.asked.count("find_coordinator") == 3 and len(slept) == 2
    finally:
        cluster.close()
    stuck = FakeCluster(loading=1_000_000)
    try:
        with pytest.raises(CliError, match="COORDINATOR_LOAD_IN_PROGRESS"):
            delete_offsets(f"{stuck.host}:{stuck.port}", "g", [("t", 0)], 0.3)
    finally:
        stuck.close()
