"""The admin call confluent-kafka's Python API does not have: OffsetDelete (KIP-496).

The tools talk to clusters through confluent-kafka, whose ``AdminClient`` has no OffsetDelete
(librdkafka has ``DeleteConsumerGroupOffsets``, the Python binding does not expose it), so
``kafka-consumer-groups --delete-offsets`` speaks the protocol itself, over kompakt's own
bounds-checked connection (:mod:`kompakt.protocol.client`, shared with the backup's data path):
ApiVersions to agree on versions, FindCoordinator for the group's coordinator (a real Kafka
cluster may have it on another broker), asked of the first bootstrap server that answers, then
OffsetDelete there, found again while the coordinator moves or loads. Plaintext only, as the rest
of the tools; every frame's size is checked before it is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Final

from kompakt.cli.output import CliError
from kompakt.clock import Clock, SystemClock
from kompakt.protocol import client, codec

API_VERSIONS, FIND_COORDINATOR, OFFSET_DELETE = client.API_VERSIONS, 10, 47
MAX_RESPONSE_BYTES = client.MAX_RESPONSE_BYTES
"""A response larger than this is not one of the small answers asked for here: refused."""


def _bootstrap_hosts(bootstrap: str) -> list[tuple[str, int]]:
    return client.bootstrap_hosts(bootstrap, CliError)


class Connection(client.Connection):
    """The shared connection, failing with the command's one-line :class:`CliError`."""

    error: ClassVar[type[Exception]] = CliError


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    error: str | None
    """None when the committed offset was deleted; else Kafka's error name."""


#: Answers a coordinator gives while it moves or loads (a broker stopped, a leader elected):
#: Kafka's admin client finds the coordinator again and retries, within its timeout.
RETRIABLE: Final = frozenset({"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"})
_BACKOFF_S: Final = 0.1


class _Retriable(CliError):
    """A coordinator error worth another FindCoordinator (see :data:`RETRIABLE`)."""


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
        name = error.name.upper()
        kind = _Retriable if name in RETRIABLE else CliError
        raise kind(f"cannot find the coordinator of group {group!r}: {name}")
    return str(host), int(port)


def _find_coordinator(bootstrap: str, group: str, timeout_s: float) -> tuple[str, int]:
    """The group's coordinator, asked of the first bootstrap server that answers (as every Kafka
    client does: a list names several brokers so that one being down does not matter)."""
    unreachable: list[str] = []
    for host, port in _bootstrap_hosts(bootstrap):
        try:
            conn = Connection(host, port, timeout_s)
        except CliError as exc:
            unreachable.append(str(exc))
            continue
        with conn:
            return _coordinator(conn, group)
    raise CliError("; ".join(unreachable))


def delete_offsets(
    bootstrap: str,
    group: str,
    partitions: list[tuple[str, int]],
    timeout_s: float,
    *,
    clock: Clock | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str | None, list[PartitionResult]]:
    """OffsetDelete of ``partitions``' committed offsets in ``group``: ``(group error, per-partition
    results)``. The group error (e.g. GROUP_ID_NOT_FOUND) is None when the request was taken.

    A coordinator that is moving or loading (:data:`RETRIABLE`) is looked up again until
    ``timeout_s`` has passed, as Kafka's admin client does."""
    clock = clock or SystemClock()
    deadline = clock.monotonic_ms() + timeout_s * 1000
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = {
        "group_id": group,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by_topic.items()
        ],
    }
    while True:
        try:
            target = _find_coordinator(bootstrap, group, timeout_s)
            with Connection(*target, timeout_s) as coordinator:
                answer = coordinator.call(
                    OFFSET_DELETE, coordinator.version(OFFSET_DELETE, range(0, 1)), request
                )
            group_error = (
                None if answer.error_code == codec.ErrorCode.none else answer.error_code.name.upper()
            )
            if group_error in RETRIABLE:
                raise _Retriable(f"OffsetDelete of group {group!r} at {coordinator.address}: {group_error}")
        except _Retriable:
            if clock.monotonic_ms() + _BACKOFF_S * 1000 >= deadline:
                raise
            sleep(_BACKOFF_S)
            continue
        break
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
