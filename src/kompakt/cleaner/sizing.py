"""The offset map's memory arithmetic, free of the native kernels so tools can use it cheaply.

Kafka's dedupe buffer holds 24 bytes per key (a 16-byte digest and an 8-byte offset); each cleaner
thread gets ``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes, and a pass stops when
the map holds ``floor(slots × log.cleaner.io.buffer.load.factor)`` keys.
"""

from __future__ import annotations

import math
from typing import Final

SLOT_BYTES: Final = 24


def keys_per_pass(buffer_bytes: int, threads: int, load_factor: float) -> int:
    """The seed's arithmetic: ``floor(floor(buffer / threads / 24) × load factor)``."""
    slots = buffer_bytes // max(threads, 1) // SLOT_BYTES
    return math.floor(slots * load_factor)
