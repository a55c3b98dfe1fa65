"""Producer id allocation for idempotent producers, never repeating across restarts.

Kafka hands out producer ids in blocks from the controller; kompakt does the same against one
small file, ``<data-dir>/kompakt-producer-ids``, which holds the first id *not yet reserved*. The
next block is reserved (the file atomically rewritten and fsynced) before any id of it is handed
out, so after a crash at most the rest of one block is skipped and no id is ever issued twice.
Reusing an id would let a new producer's sequence numbers collide with an old one's state still
in the log, and its batches would be rejected as duplicates or out of order.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Final

from kompakt.errors import KompaktError
from kompakt.log.files import atomic_write_bytes

PRODUCER_IDS_FILE: Final = "kompakt-producer-ids"
DEFAULT_BLOCK_SIZE: Final = 1000
#: Kafka bumps to a new producer id instead of letting the epoch reach Short.MAX_VALUE.
MAX_PRODUCER_EPOCH: Final = 32767


class CorruptProducerIdFileError(KompaktError):
    """The producer id file exists but does not hold a non-negative integer."""


class ProducerIdManager:
    """Hands out unique producer ids. Thread-safe."""

    def __init__(self, data_dir: str | Path, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.path = Path(data_dir) / PRODUCER_IDS_FILE
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next = self._read()
        self._reserved_end = self._next  # nothing reserved by this process yet

    def _read(self) -> int:
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except (OSError, UnicodeDecodeError) as exc:
            raise CorruptProducerIdFileError(f"Cannot read {self.path}: {exc}") from exc
        if not text.isdigit():
            raise CorruptProducerIdFileError(f"{self.path} does not hold a producer id: {text[:40]!r}")
        return int(text)

    def next_id(self) -> int:
        """A producer id no one has been given before."""
        with self._lock:
            if self._next >= self._reserved_end:
                end = self._next + self.block_size
                atomic_write_bytes(self.path, f"{end}\n".encode("ascii"))
                self._reserved_end = end
            pid = self._next
            self._next += 1
            return pid

    def issued(self, producer_id: int) -> bool:
        """Whether ``producer_id`` is one this data directory has handed out (now or before)."""
        with self._lock:
            return 0 <= producer_id < self._next

    def init_producer(self, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """``(producer_id, epoch)`` for InitProducerId of a non-transactional producer.

        A producer re-initialising with the id and epoch we gave it (KIP-360, v3+) gets the same
        id with the epoch bumped, so its partitions accept sequence 0 again; when the epoch is
        exhausted, or the id is not ours, it gets a fresh id at epoch 0.
        """
        if producer_id >= 0 and 0 <= producer_epoch < MAX_PRODUCER_EPOCH - 1 and self.issued(producer_id):
            return producer_id, producer_epoch + 1
        return self.next_id(), 0
