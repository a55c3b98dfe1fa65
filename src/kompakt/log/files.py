"""File naming in a log directory, and the crash-safe write/rename recipe.

Layout of a data directory (Kafka's, see ``LogFileUtils`` and ``LocalLog.logDirName``)::

    <data-dir>/
      cleaner-offset-checkpoint, recovery-point-offset-checkpoint, log-start-offset-checkpoint,
      replication-offset-checkpoint, .kafka_cleanshutdown, meta.properties
      <topic>-<partition>/                     one directory per partition
        partition.metadata, leader-epoch-checkpoint
        00000000000000001024.log                 segment data, named by base offset (20 digits)
        00000000000000001024.index / .timeindex / .txnindex / .snapshot
        00000000000000001024.log.cleaned         temporary suffixes follow the extension
      <topic>-<partition>.<32 hex>-delete/     directory being deleted (also -future, -stray)

The offset of a file is the text before its first ``.``.

Every file-system mutation goes through one replaceable :class:`FileOps` object (see
:func:`use_file_ops`), so a test can fail or "crash" at any create, write, fsync, rename or delete
and then check what recovery makes of the files left behind.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TypeVar

from kompakt.errors import InvalidOffsetError, KompaktError, LogDirectoryError

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
SEGMENT_EXTENSIONS = frozenset({"log", "index", "timeindex", "txnindex", "snapshot"})

CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETED_FILE_SUFFIX = ".deleted"
TMP_FILE_SUFFIX = ".tmp"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
DIR_SUFFIXES = (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)

OFFSET_DIGITS = 20

_PLAIN_DIR_RE = re.compile(r"(?P<topic>.+)-(?P<partition>[0-9]+)")
_MARKED_DIR_RE = re.compile(
    r"(?P<topic>.+)-(?P<partition>[0-9]+)\.(?P<id>[0-9a-f]{32})(?P<suffix>-delete|-future|-stray)"
)


class SimulatedCrashError(KompaktError):
    """Raised by :class:`FaultInjectingFileOps` in place of the operation it was told to fail."""


class FileOps:
    """The file-system operations the log layer performs, in one replaceable object.

    The default implementation does the real thing. Subclass and override to inject faults;
    install with :func:`use_file_ops`. Thread-safe as far as the OS calls are.
    """

    def create(self, path: Path) -> BinaryIO:
        """Create (or truncate) a file for writing."""
        return path.open("wb")

    def write(self, handle: BinaryIO, data: bytes | memoryview) -> None:
        handle.write(data)

    def fsync(self, handle: BinaryIO) -> None:
        handle.flush()
        os.fsync(handle.fileno())

    def fsync_dir(self, path: Path) -> None:
        """Make renames and creations inside ``path`` durable (a no-op where unsupported)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass  # some platforms and file systems cannot fsync a directory
        finally:
            os.close(fd)

    def rename(self, src: Path, dst: Path) -> None:
        """Atomically replace ``dst`` with ``src``."""
        os.replace(src, dst)

    def delete(self, path: Path) -> None:
        """Remove a file; a missing file is not an error (deletion is idempotent on recovery)."""
        path.unlink(missing_ok=True)

    def mkdir(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)


class FaultInjectingFileOps(FileOps):
    """Counts every operation and raises :class:`SimulatedCrashError` at operation ``fail_at``.

    Run a scenario once with ``fail_at=None`` to learn ``count``, then once per ``0..count-1``,
    each time reopening the directory and checking recovery. ``log`` lists ``(op, path)`` pairs.
    """

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.count = 0
        self.log: list[tuple[str, str]] = []

    def _step(self, op: str, target: object) -> None:
        if self.fail_at is not None and self.count == self.fail_at:
            self.count += 1
            raise SimulatedCrashError(f"simulated crash at operation {self.fail_at}: {op} {target}")
        self.count += 1
        self.log.append((op, str(target)))

    def create(self, path: Path) -> BinaryIO:
        self._step("create", path)
        return super().create(path)

    def write(self, handle: BinaryIO, data: bytes | memoryview) -> None:
        self._step("write", getattr(handle, "name", handle))
        super().write(handle, data)

    def fsync(self, handle: BinaryIO) -> None:
        self._step("fsync", getattr(handle, "name", handle))
        super().fsync(handle)

    def fsync_dir(self, path: Path) -> None:
        self._step("fsync_dir", path)
        super().fsync_dir(path)

    def rename(self, src: Path, dst: Path) -> None:
        self._step("rename", f"{src} -> {dst}")
        super().rename(src, dst)

    def delete(self, path: Path) -> None:
        self._step("delete", path)
        super().delete(path)

    def mkdir(self, path: Path) -> None:
        self._step("mkdir", path)
        super().mkdir(path)


_file_ops: FileOps = FileOps()


def file_ops() -> FileOps:
    """The :class:`FileOps` every log-layer helper uses right now."""
    return _file_ops


OpsT = TypeVar("OpsT", bound=FileOps)


@contextmanager
def use_file_ops(ops: OpsT) -> Iterator[OpsT]:
    """Install ``ops`` for the duration of a ``with`` block (tests only; not thread-scoped)."""
    global _file_ops
    previous, _file_ops = _file_ops, ops
    try:
        yield ops
    finally:
        _file_ops = previous


# ---- names ---------------------------------------------------------------------------------


def segment_file_name(base_offset: int, ext: str) -> str:
    """``00000000000000001024.log`` for ``(1024, "log")``."""
    if ext not in SEGMENT_EXTENSIONS:
        raise ValueError(f"unknown segment file extension {ext!r}")
    if base_offset < 0:
        raise InvalidOffsetError(f"negative base offset {base_offset} cannot name a segment file")
    return f"{base_offset:0{OFFSET_DIGITS}d}.{ext}"


def parse_offset_from_name(name: str) -> int | None:
    """The offset encoded before the first ``.`` of a file name, or None if it is not one."""
    prefix = name.split(".", 1)[0]
    return int(prefix) if prefix.isascii() and prefix.isdigit() else None


def partition_dir_name(
    topic: str, partition: int, suffix: str | None = None, unique_id: uuid.UUID | None = None
) -> str:
    """``my-topic-3``; with a suffix, Kafka's ``my-topic-3.<32 hex>-delete`` form."""
    if suffix is None:
        return f"{topic}-{partition}"
    if suffix not in DIR_SUFFIXES:
        raise ValueError(f"unknown partition directory suffix {suffix!r}")
    return f"{topic}-{partition}.{(unique_id or uuid.uuid4()).hex}{suffix}"


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """``("my-topic", 3)`` from ``my-topic-3`` (or from its ``-delete``/``-future``/``-stray`` form).

    Topic names may contain ``-`` and ``.``, so the partition is the digits after the last ``-``.
    """
    match = _MARKED_DIR_RE.fullmatch(name) or _PLAIN_DIR_RE.fullmatch(name)
    if match is None:
        raise LogDirectoryError(
            f"Found directory {name}, '{name}' is not in the form of topic-partition or "
            "topic-partition.uniqueId-delete (if marked for deletion)"
        )
    return match["topic"], int(match["partition"])


def partition_dir_suffix(name: str) -> str | None:
    """``-delete``, ``-future`` or ``-stray`` for a marked partition directory, else None."""
    match = _MARKED_DIR_RE.fullmatch(name)
    return match["suffix"] if match else None


def add_suffix(path: Path, suffix: str) -> Path:
    """``X.log`` -> ``X.log.cleaned``: temporary suffixes go after the extension."""
    return path.with_name(path.name + suffix)


def remove_suffix(path: Path, suffix: str) -> Path:
    """``X.log.swap`` -> ``X.log``."""
    if not path.name.endswith(suffix):
        raise ValueError(f"{path} does not end with {suffix}")
    return path.with_name(path.name[: -len(suffix)])


# ---- durable changes -----------------------------------------------------------------------


def fsync_dir(path: str | Path) -> None:
    """Make entries created or renamed in directory ``path`` durable."""
    file_ops().fsync_dir(Path(path))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    Recipe: write ``<name>.tmp``, fsync it, rename over ``path``, fsync the directory. A
    leftover ``.tmp`` from an earlier crash is simply overwritten.
    """
    target = Path(path)
    tmp = add_suffix(target, TMP_FILE_SUFFIX)
    ops = file_ops()
    handle = ops.create(tmp)
    try:
        ops.write(handle, data)
        ops.fsync(handle)
    finally:
        handle.close()
    ops.rename(tmp, target)
    ops.fsync_dir(target.parent)


def rename_durably(src: str | Path, dst: str | Path) -> None:
    """Rename and fsync the directories involved, so the new name survives a crash."""
    source, destination = Path(src), Path(dst)
    ops = file_ops()
    ops.rename(source, destination)
    ops.fsync_dir(destination.parent)
    if source.parent != destination.parent:
        ops.fsync_dir(source.parent)


def delete_file(path: str | Path) -> None:
    """Delete through the :class:`FileOps` indirection (missing files are fine)."""
    file_ops().delete(Path(path))
