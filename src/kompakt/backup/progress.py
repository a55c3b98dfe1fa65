"""Progress reporting, as plain callbacks: the CLI draws rich progress bars, tests pass nothing.

Backup and restore know nothing about terminals (the layering keeps output helpers in
``kompakt.cli``); they call a :class:`Progress` with per-partition counters, at most a few times
a second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class PartitionProgress:
    """Counters of one partition during a backup or restore."""

    topic: str
    partition: int
    total: int | None = None
    """Offsets (backup) or records (restore) to go through, when known (snapshot mode)."""
    done: int = 0
    records: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def rate(self) -> float:
        """Bytes per second since the partition started."""
        elapsed = time.monotonic() - self.started
        return self.bytes / elapsed if elapsed > 0 else 0.0


class Progress(Protocol):
    def begin(self, partitions: list[PartitionProgress]) -> None: ...

    def update(self, partition: PartitionProgress) -> None: ...

    def message(self, text: str) -> None:
        """A notable event (a gap found, a resumed run, a skipped group)."""
        ...

    def end(self) -> None: ...


class NoProgress:
    """Reports nothing; messages are kept for callers that want them."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def begin(self, partitions: list[PartitionProgress]) -> None:
        pass

    def update(self, partition: PartitionProgress) -> None:
        pass

    def message(self, text: str) -> None:
        self.messages.append(text)

    def end(self) -> None:
        pass
