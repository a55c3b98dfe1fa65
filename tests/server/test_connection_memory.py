"""Memory of a real ``kompakt serve`` process: per idle connection, after they close, per request.

Measured from the outside, as an operator sees it: VmRSS and VmHWM of the broker subprocess in
``/proc``. The goals (hardening issue, item 3) are at most 64 kB per idle connection and RSS back
within 10 % of its level before the connections once they close; before this work a connection
that never sent a byte cost 265 kB, and the memory of 1,000 of them stayed after they closed.
Every wait polls a condition the broker shows (its open sockets, an answered request) with a
deadline.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from tests.support.serve import BrokerProcess, start_broker
from tests.support.wire import request_bytes

pytestmark = pytest.mark.xdist_group("broker-memory")  # one at a time: they read whole-process RSS

CONNECTIONS = 1000
GOAL_PER_CONNECTION_KB = 64
GOAL_AFTER_CLOSE = 0.10
DEADLINE_S = 30.0
API_VERSIONS = {"client_software_name": "memory-test", "client_software_version": "1"}


def status_kb(pid: int, field: str) -> int:
    """A ``VmRSS``/``VmHWM``-style line of ``/proc/<pid>/status``, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


def open_sockets(pid: int) -> int:
    """How many sockets the process holds (listeners, clients, its own pipes to itself)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(fd).startswith("socket:")
    return count


def poll(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached within {deadline_s} s"
        time.sleep(0.05)  # the polling interval; the deadline is the check


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


def request(broker: Broker, api_key: int, version: int, values: object, frame: bytes | None = None) -> object:
    """One request on a fresh connection; the decoded response."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=DEADLINE_S) as sock:
        sock.sendall(frame if frame is not None else request_bytes(api_key, version, values))  # type: ignore[arg-type]
        correlation_id, response = codec.decode_response(read_frame(sock), api_key, version)
    assert correlation_id == 1
    return response


def served(broker: Broker) -> None:
    """A round trip: everything the broker was sent before it has been read."""
    assert request(broker, ApiKey.API_VERSIONS, 3, API_VERSIONS).error_code == codec.ErrorCode.none  # type: ignore[attr-defined]


class Broker:
    """The broker process and the sockets it holds with no client connected."""

    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self.port = process.port
        self.pid = process.process.pid
        self.idle_sockets = open_sockets(self.pid)

    def settled(self) -> None:
        """Until every client connection is closed on the broker's side too."""
        poll(lambda: open_sockets(self.pid) <= self.idle_sockets, "every connection closed")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * CONNECTIONS + 256  # this process's ends and the broker's (it inherits the limit)
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.fail(f"needs {wanted} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    process = start_broker(tmp_path / "data")
    try:
        broker = Broker(process)
        # Warm up what the first connections and requests load or cache once.
        for _ in range(3):
            warm = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(50)]
            for sock in warm:
                sock.close()
            served(broker)
        broker.settled()
        yield broker
    finally:
        process.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_idle_connections_cost_little_and_give_their_memory_back_when_they_close(broker: Broker) -> None:
    pid = broker.pid
    before_kb = status_kb(pid, "VmRSS")

    clients = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(CONNECTIONS)]
    try:
        poll(lambda: open_sockets(pid) >= broker.idle_sockets + CONNECTIONS, "every connection accepted")
        served(broker)
        per_connection_kb = (status_kb(pid, "VmRSS") - before_kb) / CONNECTIONS
    finally:
        for sock in clients:
            sock.close()
    broker.settled()
    after_kb = status_kb(pid, "VmRSS")

    assert per_connection_kb <= GOAL_PER_CONNECTION_KB, f"{per_connection_kb:.1f} kB per idle connection"
    assert after_kb <= before_kb * (1 + GOAL_AFTER_CLOSE), (
        f"RSS {before_kb} kB before {CONNECTIONS} connections, {after_kb} kB after they closed"
    )


def test_a_size_prefix_alone_costs_no_memory(broker: Broker) -> None:
    """A frame is buffered as its bytes arrive: a client announcing 64 MiB and sending 5 bytes of
    it holds 5 bytes of the broker (it was 64 MiB, zero-filled, as soon as the prefix arrived)."""
    pid = broker.pid
    before_kb = status_kb(pid, "VmRSS")
    announced = 64 << 20
    clients = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(4)]
    try:
        for sock in clients:
            sock.sendall(struct.pack(">i", announced) + b"\x00\x12\x00\x03\x00")
        served(broker)
        grown_kb = status_kb(pid, "VmRSS") - before_kb
    finally:
        for sock in clients:
            sock.close()
    assert grown_kb < 16 * 1024, f"{grown_kb} kB for 4 announced frames of 64 MiB"
    served(broker)  # and the broker is fine


def compact_array_of_int32(count: int) -> bytes:
    """A flexible version's array of ``count`` int32s (0, 1, 2, ...): uvarint count + 1, then them."""
    n, prefix = count + 1, bytearray()
    while n >= 0x80:
        prefix.append(n & 0x7F | 0x80)
        n >>= 7
    prefix.append(n)
    return bytes(prefix) + struct.pack(f">{count}i", *range(count))


def test_describe_log_dirs_naming_a_million_partitions_is_bounded_by_what_the_broker_holds(
    broker: Broker,
) -> None:
    """A 4 MB DescribeLogDirs naming 1,000,000 partitions of a topic that does not exist: the answer
    names only hosted partitions, the broker's memory peaks at about the decoded request, and it is
    given back afterwards (before: RSS up by 110 MB, and kept)."""
    create = {
        "topics": [
            {"name": "here", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        "timeout": 10_000,
        "validate_only": False,
    }
    created = request(broker, ApiKey.CREATE_TOPICS, 7, create)
    assert [t.error_code for t in created.topics] == [codec.ErrorCode.none]  # type: ignore[attr-defined]
    topics = [{"topic": "nowhere", "partitions": []}, {"topic": "here", "partitions": [1, 7, 1]}]
    small = request_bytes(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": topics})
    # The same request with a million partitions of "nowhere": its empty array spliced out.
    empty = b"\x08nowhere\x01"
    assert small.count(empty) == 1
    body = small[4:].replace(empty, b"\x08nowhere" + compact_array_of_int32(1_000_000))
    frame = struct.pack(">i", len(body)) + body
    assert len(frame) > 4_000_000

    pid = broker.pid
    request(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, None, small)  # the handler's first use
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
    before_kb = status_kb(pid, "VmRSS")
    answer = request(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, None, frame)
    peak_kb = status_kb(pid, "VmHWM")

    (result,) = answer.results  # type: ignore[attr-defined]
    assert result.error_code == codec.ErrorCode.none
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("here", [1])]
    # The floor is the frame (4 MB) and kio's decoded tuple of a million ints (about 40 MB).
    assert peak_kb - before_kb < 80 * 1024, f"RSS peaked {peak_kb - before_kb} kB above {before_kb} kB"
    poll(
        lambda: status_kb(pid, "VmRSS") <= before_kb * (1 + GOAL_AFTER_CLOSE),
        f"RSS back within 10 % of {before_kb} kB (it is {status_kb(pid, 'VmRSS')} kB)",
    )
