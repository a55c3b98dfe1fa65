"""Which partition a key goes to: the default partitioners of Kafka's clients.

* ``murmur2``: the Java client's ``BuiltInPartitioner.partitionForKey`` (and librdkafka's
  ``murmur2_random`` for keyed records): ``toPositive(Utils.murmur2(key)) % partitions``. This is
  the default of a lookup, since it is what Kafka's own clients (and Kafka Streams, Connect)
  produce with.
* ``crc32``: librdkafka's default ``consistent_random`` for keyed records (confluent-kafka,
  kcat, the Go and .NET clients): ``crc32(key) % partitions``.

Both run once per lookup, on one key, so plain Python is fine here.
"""

from __future__ import annotations

import zlib
from typing import Final

PARTITIONERS: Final = ("murmur2", "crc32")
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (MurmurHash2, seed 0x9747b28c) as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, partitions: int, partitioner: str = "murmur2") -> int:
    """The partition ``partitioner`` sends a record with ``key`` to, of ``partitions``."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    if partitioner == "murmur2":
        return (murmur2(key) & 0x7FFFFFFF) % partitions
    if partitioner == "crc32":
        return zlib.crc32(key) % partitions
    raise ValueError(f"unknown partitioner {partitioner!r} (expected one of {', '.join(PARTITIONERS)})")
