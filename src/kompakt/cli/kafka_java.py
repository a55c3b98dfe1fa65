"""What Kafka's Java tools print, reproduced: their line writer, table layout and hash ordering.

Kafka's ``kafka-*`` tools print some of their results in the order of a ``java.util.HashMap`` or
``HashSet`` (``kafka-log-dirs``' JSON, ``kafka-leader-election``'s partition lists,
``kafka-transactions describe``'s partitions, the KIP-848 assignments of the offsets decoder). A
script that diffs the output against Kafka's sees that order, so the tools here reproduce it
rather than sorting: :func:`hash_order` gives the iteration order of a HashMap filled with the
given keys (bucket by bucket, each bucket in insertion order), from each key's Java ``hashCode``.
The hash codes of the few key types the tools use (``String``, ``Integer``, ``Long``,
``TopicPartition``, ``Uuid``) are here too. (``kafka-delete-records`` is not among them: its
order is an immutable map's, salted afresh in every JVM.)

:func:`pretty_table` is ``ToolsUtils.prettyPrintTable`` (each cell padded to its column's width,
then a tab, on every column including the last), the layout of ``kafka-transactions``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kompakt.broker.groups.records.placement import java_string_hashcode
from kompakt.cli.output import console

K = TypeVar("K")

_INT_MASK = 0xFFFFFFFF
_DEFAULT_CAPACITY = 16
_LOAD_FACTOR = 0.75


def out(text: str = "") -> None:
    """One line on stdout as Java's ``println`` writes it (no wrapping, no markup)."""
    console.file.write(text + "\n")
    console.file.flush()


def _int32(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value >= 1 << 31 else value


def int_hash(value: int) -> int:
    """``Integer.hashCode``."""
    return _int32(value)


def long_hash(value: int) -> int:
    """``Long.hashCode``: the two halves xor-ed."""
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return _int32(unsigned ^ (unsigned >> 32))


def string_hash(text: str) -> int:
    """``String.hashCode``."""
    return java_string_hashcode(text)


def uuid_hash(value: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the two longs xor-ed, then the halves of that."""
    h = (value.int >> 64) ^ (value.int & 0xFFFFFFFFFFFFFFFF)
    return _int32((h >> 32) ^ h)


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()``."""
    return _int32(31 * (31 + partition) + java_string_hashcode(topic))


def topic_partition_text(topic: str, partition: int) -> str:
    """``TopicPartition.toString``."""
    return f"{topic}-{partition}"


def _capacity(count: int, initial: int) -> int:
    capacity = initial
    while count > capacity * _LOAD_FACTOR:
        capacity *= 2
    return capacity


def hash_order(
    keys: Iterable[K], hash_code: Callable[[K], int], *, initial: int = _DEFAULT_CAPACITY
) -> list[K]:
    """The iteration order of a ``HashMap``/``HashSet`` the keys were put into in this order.

    ``initial`` is the table size it started with (16 for ``new HashMap<>()``); the table doubles
    while it holds more than 3/4 of its size, and a doubling keeps each bucket's order, so the
    final order is by bucket of the final table, ties in insertion order. (Java turns a bucket of
    more than 8 keys into a tree; the tools' small maps never get there.)
    """
    unique: list[K] = []
    seen: set[K] = set()
    for key in keys:
        if key not in seen:
            seen.add(key)
            unique.append(key)
    capacity = _capacity(len(unique), initial)

    def bucket(item: tuple[int, K]) -> tuple[int, int]:
        h = hash_code(item[1]) & _INT_MASK
        return ((h ^ (h >> 16)) & (capacity - 1), item[0])

    return [key for _, key in sorted(enumerate(unique), key=bucket)]


def pretty_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """``ToolsUtils.prettyPrintTable``: every cell padded to its column's width and followed by a tab."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for row in [list(headers), *rows]:
        out("".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True)))


#: Kafka's exception class (``Errors``) where it is not the error's name in CamelCase + Exception.
_EXCEPTION_CLASSES = {
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "GROUP_AUTHORIZATION_FAILED": "GroupAuthorizationException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "TransactionalIdAuthorizationException",
    "REQUEST_TIMED_OUT": "TimeoutException",
}
#: Kafka's default message of the errors these tools meet (``Errors``' descriptions).
ERROR_MESSAGES = {
    "OFFSET_OUT_OF_RANGE": (
        "The requested offset is not within the range of offsets maintained by the server."
    ),
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "NOT_LEADER_OR_FOLLOWER": (
        "For requests intended only for the leader, this error indicates that the broker is not the "
        "current leader. For requests intended for any replica, this error indicates that the broker "
        "is not a replica of the topic partition."
    ),
    "TOPIC_AUTHORIZATION_FAILED": "Topic authorization failed.",
    "CLUSTER_AUTHORIZATION_FAILED": "Cluster authorization failed.",
    "POLICY_VIOLATION": "Request parameters do not satisfy the configured policy.",
    "REQUEST_TIMED_OUT": "The request timed out.",
}


def exception_text(name: str) -> str:
    """``ExecutionException.getMessage()`` of a Kafka error: its exception class and message."""
    cls = _EXCEPTION_CLASSES.get(name) or "".join(p.capitalize() for p in name.split("_")) + "Exception"
    message = ERROR_MESSAGES.get(name)
    return f"org.apache.kafka.common.errors.{cls}" + (f": {message}" if message else "")
