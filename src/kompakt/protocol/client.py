"""A small blocking Kafka client connection: kompakt's own codec on a plain socket.

The operator tools talk to clusters through confluent-kafka, except where its Python API cannot do
what they need: ``kafka-consumer-groups --delete-offsets`` (OffsetDelete, which the binding does
not expose) and the backup and restore data path, which hands raw RecordBatch bytes between the
cluster and storage (a consumer or a producer decodes and re-encodes every record, and that was
most of a backup's time). Both use this connection, so it sits here, below every tool.

What it guarantees:

* every response frame's size is checked before it is read (a frame larger than
  ``max_response_bytes`` is refused), and every length and count inside it before kio decodes it
  (:func:`kompakt.protocol.codec.decode_response`), so a misbehaving peer is a one-line error,
  never a hang, a crash or a huge allocation;
* requests go in order and their answers are matched by correlation id; several may be sent before
  the first answer is read (:meth:`Connection.send`, :meth:`Connection.receive`), as Kafka
  answers one connection's requests in order;
* a frame is read into one buffer with ``recv_into`` (no join of chunks), since Fetch answers run to
  tens of MiB; a caller that reads many of them can hand in the buffer (:meth:`Connection.receive_frame`'s
  ``buffer``), since a fresh one of that size costs more in page faults than the copy into it.

Plaintext only: a cluster that needs TLS or SASL is reached through confluent-kafka instead.
"""

from __future__ import annotations

import contextlib
import mmap
import socket
import struct
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

from kompakt.errors import OperatorError
from kompakt.protocol import codec

API_VERSIONS = 18
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The default limit of one response frame; a Fetch client raises it to what it asked for."""
_SIZE = struct.Struct(">i")

Buffer: TypeAlias = bytearray | mmap.mmap
"""Writable memory a frame is read into."""


class WireError(OperatorError):
    """A connection failed, or the peer answered something that is not a valid response."""


def bootstrap_hosts(bootstrap: str, error: type[Exception] = WireError) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` as a list; ``[::1]:9092`` keeps its IPv6 host."""
    hosts = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise error(f"bootstrap server {item.strip()!r} is not HOST:PORT")
        hosts.append((host.strip("[]"), int(port)))
    return hosts


class Connection:
    """One plaintext connection to one broker.

    ``error`` is the exception type every failure is raised as (a tool's own one-line error type,
    so a command reports it as its other errors).
    """

    error: ClassVar[type[Exception]] = WireError

    def __init__(
        self,
        host: str,
        port: int,
        timeout_s: float,
        *,
        client_id: str = "kompakt-cli",
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.address = f"{host}:{port}"
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise self.error(f"cannot reach {self.address}: {exc.strerror or exc}") from None
        self._correlation = 0
        self._versions: dict[int, tuple[int, int]] | None = None

    def close(self) -> None:
        self._sock.close()

    def abort(self) -> None:
        """Close, and wake a thread blocked reading this connection (it gets an error): on Linux
        a ``close`` alone leaves a blocked ``recv`` waiting until its timeout."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self, api_key: int, version: int, values: Mapping[str, object], *, zero_fill: bool = False
    ) -> Any:
        """Send one request and wait for its answer."""
        return self.receive(api_key, version, self.send(api_key, version, values, zero_fill=zero_fill))

    def send(
        self, api_key: int, version: int, values: Mapping[str, object], *, zero_fill: bool = False
    ) -> int:
        """Send a request without waiting; returns its correlation id for :meth:`receive`.
        ``zero_fill`` gives every field the request does not name its zero value."""
        self._correlation += 1
        request = codec.build(codec.request_class(api_key, version), values, zero_fill=zero_fill)
        frame = codec.encode_request(request, self._correlation, self.client_id)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            raise self.error(f"{codec.api_name(api_key)} to {self.address} failed: {exc}") from None
        return self._correlation

    def receive(self, api_key: int, version: int, correlation: int, *, wait_s: float = 0.0) -> Any:
        """The answer to the request sent with ``correlation`` (answers come in order).

        ``wait_s`` is how long the broker may hold the request (a Fetch's ``max_wait``), added to
        the connection's timeout.
        """
        name = codec.api_name(api_key)
        frame = self.receive_frame(name, wait_s=wait_s)
        try:
            answered, body = codec.decode_response(frame, api_key, version)
        except codec.MalformedResponse as exc:
            raise self.error(f"{self.address}: {exc}") from None
        if answered != correlation:
            raise self.error(f"{self.address} answered correlation id {answered}, not {correlation}")
        return body

    def receive_frame(
        self, name: str, *, wait_s: float = 0.0, buffer: Callable[[int], Buffer] | None = None
    ) -> memoryview:
        """The next response frame, undecoded (its size checked): for the rare answer kio cannot
        decode, such as DescribeTransactions' ``-1`` start time of a transaction not started, and
        for a reader of its own (the backup's Fetch).

        ``buffer(size)`` gives the writable memory (at least ``size`` bytes) the frame is read into,
        instead of a new one: the frame is a view of its first ``size`` bytes."""
        try:
            self._sock.settimeout(self.timeout_s + wait_s)
            (size,) = _SIZE.unpack(self._read(4, name))
            if not 0 < size <= self.max_response_bytes:
                raise self.error(f"{self.address} answered a frame of {size} bytes to {name}")
            return self._read(size, name, None if buffer is None else buffer(size))
        except TimeoutError:
            raise self.error(f"{name} to {self.address} timed out") from None
        except OSError as exc:
            raise self.error(f"{name} to {self.address} failed: {exc}") from None

    def _read(self, n: int, name: str, into: Buffer | None = None) -> memoryview:
        view = memoryview(bytearray(n) if into is None else into)[:n]
        got = 0
        while got < n:
            chunk = self._sock.recv_into(view[got:], n - got)
            if not chunk:
                raise self.error(f"{self.address} closed the connection during {name}")
            got += chunk
        return view.toreadonly()  # kio reads read-only buffers only

    def version(self, api_key: int, ours: range) -> int:
        """The highest version of ``api_key`` both sides speak (ApiVersions v0, which every broker
        answers, asked once per connection)."""
        if self._versions is None:
            answer = self.call(API_VERSIONS, 0, {})
            if answer.error_code != codec.ErrorCode.none:
                raise self.error(f"ApiVersions to {self.address}: {answer.error_code.name}")
            self._versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys
            }
        theirs = self._versions.get(api_key)
        common = [] if theirs is None else [v for v in ours if theirs[0] <= v <= theirs[1]]
        if not common:
            raise self.error(
                f"{self.address} does not serve {codec.api_name(api_key)} in a version kompakt speaks"
            )
        return max(common)
