"""A small blocking Kafka client for the admin calls confluent-kafka's Python API does not have.

The tools talk to clusters through confluent-kafka, whose ``AdminClient`` has no OffsetDelete
(KIP-496; librdkafka has ``DeleteConsumerGroupOffsets``, the Python binding does not expose it),
so ``kafka-consumer-groups --delete-offsets`` speaks the protocol itself, with kompakt's own
codec: ApiVersions to agree on versions, FindCoordinator for the group's coordinator (a real
Kafka cluster may have it on another broker), then OffsetDelete there. Plaintext only, as the
rest of the tools; every frame's size is checked before it is read.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kompakt.cli.output import CliError
from kompakt.protocol import codec

API_VERSIONS, FIND_COORDINATOR, OFFSET_DELETE = 18, 10, 47
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""A response larger than this is not one of the small answers asked for here: refused."""
_CLIENT_ID = "kompakt-cli"


def _bootstrap_hosts(bootstrap: str) -> list[tuple[str, int]]:
    hosts = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise CliError(f"bootstrap server {item.strip()!r} is not HOST:PORT")
        hosts.append((host.strip("[]"), int(port)))
    return hosts


class Connection:
    """One plaintext connection; requests go one at a time and are answered in order."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.address = f"{host}:{port}"
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise CliError(f"cannot reach {self.address}: {exc.strerror or exc}") from None
        self._correlation = 0
        self._versions: dict[int, tuple[int, int]] | None = None

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, api_key: int, version: int, values: Mapping[str, object]) -> Any:
        self._correlation += 1
        request = codec.build(codec.request_class(api_key, version), values)
        try:
            self._sock.sendall(codec.encode_request(request, self._correlation, _CLIENT_ID))
            (size,) = struct.unpack(">i", self._read(4))
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise CliError(
                    f"{self.address} answered a frame of {size} bytes to {codec.api_name(api_key)}"
                )
            frame = self._read(size)
        except OSError as exc:
            raise CliError(f"{codec.api_name(api_key)} to {self.address} failed: {exc}") from None
        correlation, body = codec.decode_response(frame, api_key, version)
        if correlation != self._correlation:
            raise CliError(f"{self.address} answered correlation id {correlation}, not {self._correlation}")
        return body

    def _read(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise CliError(f"{self.address} closed the connection")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def version(self, api_key: int, ours: range) -> int:
        """The highest version of ``api_key`` both sides speak (ApiVersions v0, which every broker
        answers, asked once per connection)."""
        if self._versions is None:
            answer = self.call(API_VERSIONS, 0, {})
            if answer.error_code != codec.ErrorCode.none:
                raise CliError(f"ApiVersions to {self.address}: {answer.error_code.name}")
            self._versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys
            }
        theirs = self._versions.get(api_key)
        common = [] if theirs is None else [v for v in ours if theirs[0] <= v <= theirs[1]]
        if not common:
            raise CliError(
                f"{self.address} does not serve {codec.api_name(api_key)} in a version kompakt speaks"
            )
        return max(common)


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    error: str | None
    """None when the committed offset was deleted; else Kafka's error name."""


def _coordinator(conn: Connection, group: str) -> tuple[str, int]:
    version = conn.version(FIND_COORDINATOR, range(1, 7))
    if version >= 4:
        answer = conn.call(FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": [group]})
        found = answer.coordinators[0] if answer.coordinators else None
        if found is None:
            raise CliError(f"{conn.address} found no coordinator for group {group!r}")
        error, host, port = found.error_code, found.host, found.port
    else:
        answer = conn.call(FIND_COORDINATOR, version, {"key": group, "key_type": 0})
        error, host, port = answer.error_code, answer.host, answer.port
    if error != codec.ErrorCode.none:
        raise CliError(f"cannot find the coordinator of group {group!r}: {error.name.upper()}")
    return str(host), int(port)


def delete_offsets(
    bootstrap: str, group: str, partitions: list[tuple[str, int]], timeout_s: float
) -> tuple[str | None, list[PartitionResult]]:
    """OffsetDelete of ``partitions``' committed offsets in ``group``: ``(group error, per-partition
    results)``. The group error (e.g. GROUP_ID_NOT_FOUND) is None when the request was taken."""
    host, port = _bootstrap_hosts(bootstrap)[0]
    with Connection(host, port, timeout_s) as conn:
        target = _coordinator(conn, group)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = {
        "group_id": group,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by_topic.items()
        ],
    }
    with Connection(*target, timeout_s) as coordinator:
        answer = coordinator.call(OFFSET_DELETE, coordinator.version(OFFSET_DELETE, range(0, 1)), request)
    group_error = None if answer.error_code == codec.ErrorCode.none else answer.error_code.name.upper()
    results = [
        PartitionResult(
            str(t.name),
            int(p.partition_index),
            None if p.error_code == codec.ErrorCode.none else p.error_code.name.upper(),
        )
        for t in answer.topics
        for p in t.partitions
    ]
    return group_error, results
