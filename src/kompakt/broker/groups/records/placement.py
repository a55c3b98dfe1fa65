"""Where a group's records go: Kafka's placement of a key in an internal topic.

Kafka places a group (and a transactional id) in partition ``Utils.abs(id.hashCode()) % partitions``
of ``__consumer_offsets`` (``__transaction_state``), with Java's ``String.hashCode`` over UTF-16
code units; ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0. The same placement keeps a data
directory readable by Kafka's tools.
"""

from __future__ import annotations


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ...`` over UTF-16 units, as a signed int32."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` (``abs(MIN_VALUE)`` is 0 there)."""
    h = java_string_hashcode(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
