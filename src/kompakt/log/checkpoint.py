"""Kafka's text checkpoint files: offsets per partition, and leader epochs per partition.

Both share one layout (Kafka's ``CheckpointFile``, under ``LeaderEpochCheckpointFile`` and
``OffsetCheckpointFile``), lines separated by ``\\n``::

    0                           version
    <N>                         number of entries
    <entry>                     N lines, fields separated by whitespace

An offset checkpoint entry is ``<topic> <partition> <offset>``; a leader-epoch entry is
``<epoch> <start offset>``. A 0-byte or missing file reads as no entries. A wrong version, a
malformed line or a count mismatch raises :class:`~kompakt.errors.CorruptCheckpointError` naming
the file (and the line). Writes are atomic: ``<name>.tmp``, fsync, rename, fsync the directory.

The four offset checkpoints live at the data-dir root; ``leader-epoch-checkpoint`` lives in each
partition directory. Not thread-safe: each file has one owner that serialises reads and writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kompakt.errors import CorruptCheckpointError
from kompakt.log.files import atomic_write_bytes

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
)

CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """The first offset written under a leader epoch."""

    epoch: int
    start_offset: int


def _read_entries(path: Path, parse: Callable[[list[str]], T]) -> list[T]:
    """Parse the shared layout; ``parse`` gets an entry's whitespace-split fields."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"Checkpoint file ({path}) is not UTF-8 text") from None
    lines = text.splitlines()
    if not lines:
        return []
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(
            f"Unrecognized version of the checkpoint file ({path}) at line 1: '{lines[0]}'"
        )
    if len(lines) < 2 or not _is_int(lines[1]):
        got = lines[1] if len(lines) >= 2 else "<missing>"
        raise CorruptCheckpointError(f"Malformed entry count in checkpoint file ({path}) at line 2: '{got}'")
    expected = int(lines[1])
    entries: list[T] = []
    for line_number, line in enumerate(lines[2:], start=3):
        try:
            entries.append(parse(line.split()))
        except (ValueError, IndexError):
            raise CorruptCheckpointError(
                f"Malformed line in checkpoint file ({path}) at line {line_number}: '{line}'"
            ) from None
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file ({path}), but found {len(entries)}"
        )
    return entries


def _write_entries(path: Path, lines: list[str]) -> None:
    body = "".join(f"{line}\n" for line in lines)
    atomic_write_bytes(path, f"{CHECKPOINT_VERSION}\n{len(lines)}\n{body}".encode())


def _is_int(text: str) -> bool:
    stripped = text.strip()
    return stripped.lstrip("+-").isdigit() and stripped.isascii()


def _parse_int(field: str) -> int:
    if not _is_int(field):
        raise ValueError(field)
    return int(field)


def _parse_offset_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise ValueError(fields)
    topic, partition, offset = fields
    return (topic, _parse_int(partition)), _parse_int(offset)


def _parse_epoch_entry(fields: list[str]) -> EpochEntry:
    if len(fields) != 2:
        raise ValueError(fields)
    return EpochEntry(_parse_int(fields[0]), _parse_int(fields[1]))


class OffsetCheckpointFile:
    """One of the four per-data-dir offset checkpoints (``topic partition offset`` lines)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[TopicPartition, int]:
        """Entries by (topic, partition); a later duplicate line wins, as in Kafka's map."""
        return dict(_read_entries(self.path, _parse_offset_entry))

    def write(self, entries: Mapping[TopicPartition, int]) -> None:
        """Replace the file atomically; entries are written sorted for stable output."""
        _write_entries(
            self.path,
            [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())],
        )


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint`` (``epoch start_offset`` lines, in order)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[EpochEntry]:
        return _read_entries(self.path, _parse_epoch_entry)

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the file atomically, keeping the given order (epochs ascending)."""
        _write_entries(self.path, [f"{e.epoch} {e.start_offset}" for e in entries])
