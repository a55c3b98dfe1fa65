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

Every file-system mutation goes through one :class:`FileOps` object that the caller hands down
(injected, never swapped process-wide), so a test can fail or "crash" at any create, write,
fsync, rename or delete and then check what recovery makes of the files left behind.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Final, Literal, Protocol, TypeAlias, get_args

from kompakt.errors import InvalidOffsetError, LogDirectoryError

# The names are Kafka's (``LogFileUtils``); the one vocabulary of file names in a log directory.
LOG_FILE_SUFFIX: Final = ".log"
INDEX_FILE_SUFFIX: Final = ".index"
TIME_INDEX_FILE_SUFFIX: Final = ".timeindex"
TXN_INDEX_FILE_SUFFIX: Final = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX: Final = ".snapshot"
SegmentExtension: TypeAlias = Literal["log", "index", "timeindex", "txnindex", "snapshot"]
SEGMENT_EXTENSIONS: Final = frozenset(get_args(SegmentExtension))

#: Temporary suffixes, which follow the extension: a clean's output, a swap in progress, a file
#: waiting for its delayed delete.
CLEANED_FILE_SUFFIX: Final = ".cleaned"
SWAP_FILE_SUFFIX: Final = ".swap"
DELETED_FILE_SUFFIX: Final = ".deleted"
SEGMENT_FILE_SUFFIXES: Final = frozenset({"", CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, DELETED_FILE_SUFFIX})
TMP_FILE_SUFFIX: Final = ".tmp"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
DIR_SUFFIXES = (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)

OFFSET_DIGITS = 20

_PLAIN_DIR_RE = re.compile(r"(?P<topic>.+)-(?P<partition>[0-9]+)")
_MARKED_DIR_RE = re.compile(
    r"(?P<topic>.+)-(?P<partition>[0-9]+)\.(?P<id>[0-9a-f]{32})(?P<suffix>-delete|-future|-stray)"
)


class FileOps(Protocol):
    """Every file-system mutation the log layer makes, in one object handed down to where it happens.

    A :class:`~kompakt.log.manager.LogManager` or :class:`~kompakt.log.partition_log.PartitionLog`
    takes one (``file_ops=``) and passes it to its segments, indexes, recovery and quarantine; the
    helpers below take one too. The real file system is :data:`DEFAULT_FILE_OPS`. There is no
    process-wide switch: a test injects a fault model (:mod:`kompakt.testing.faults`,
    :mod:`kompakt.testing.power_cut`) into the objects it builds, so two logs in one process, or
    two test workers, never see each other's faults. Reads go to the OS directly; they change
    nothing a crash could lose.
    """

    def open_fd(self, path: Path, flags: int, mode: int = 0o644) -> int: ...
    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int: ...
    def ftruncate(self, fd: int, size: int) -> None: ...
    def fsync(self, fd: int) -> None: ...
    def rename(self, src: Path, dst: Path) -> None: ...
    def unlink(self, path: Path) -> None: ...
    def fsync_dir(self, path: Path) -> None: ...
    def mkdir(self, path: Path) -> None: ...


class OsFileOps:
    """The real file system. Stateless, so one instance serves every thread."""

    def open_fd(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        """Write all of ``data`` at ``position`` (``os.pwrite`` may write less than asked)."""
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(fd, view[written:], position + written)
        return written

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def rename(self, src: Path, dst: Path) -> None:
        """Atomically replace ``dst`` with ``src``."""
        os.replace(src, dst)

    def unlink(self, path: Path) -> None:
        """Remove a file; a missing file is not an error (deletion is idempotent on recovery)."""
        path.unlink(missing_ok=True)

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

    def mkdir(self, path: Path) -> None:
        """Create one directory; an existing one is fine (creation is idempotent on recovery)."""
        path.mkdir(exist_ok=True)


DEFAULT_FILE_OPS: Final[FileOps] = OsFileOps()


# ---- names ---------------------------------------------------------------------------------


def segment_file_name(base_offset: int, ext: SegmentExtension, suffix: str = "") -> str:
    """``00000000000000001024.log`` for ``(1024, "log")``; ``...1024.log.cleaned`` with a suffix.

    Every segment file name is built here, so a bad extension, suffix or offset fails loudly
    instead of naming a file recovery would not recognise.
    """
    if ext not in SEGMENT_EXTENSIONS:
        raise ValueError(f"unknown segment file extension {ext!r}")
    if suffix not in SEGMENT_FILE_SUFFIXES:
        raise ValueError(f"unknown segment file suffix {suffix!r}")
    if base_offset < 0:
        raise InvalidOffsetError(f"negative base offset {base_offset} cannot name a segment file")
    return f"{base_offset:0{OFFSET_DIGITS}d}.{ext}{suffix}"


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


def fsync_dir(path: str | Path, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Make entries created or renamed in directory ``path`` durable."""
    file_ops.fsync_dir(Path(path))


def atomic_write_bytes(path: str | Path, data: bytes, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    Recipe: write ``<name>.tmp``, fsync it, rename over ``path``, fsync the directory. A
    leftover ``.tmp`` from an earlier crash is simply overwritten. The file is created with mode
    ``0o666`` (less the umask), as Python's ``open`` creates files.
    """
    target = Path(path)
    tmp = add_suffix(target, TMP_FILE_SUFFIX)
    fd = file_ops.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        file_ops.pwrite(fd, data, 0)
        file_ops.fsync(fd)
    finally:
        os.close(fd)
    file_ops.rename(tmp, target)
    file_ops.fsync_dir(target.parent)


def rename_durably(src: str | Path, dst: str | Path, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Rename and fsync the directories involved, so the new name survives a crash."""
    source, destination = Path(src), Path(dst)
    file_ops.rename(source, destination)
    file_ops.fsync_dir(destination.parent)
    if source.parent != destination.parent:
        file_ops.fsync_dir(source.parent)


def delete_file(path: str | Path, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
    """Delete through ``file_ops`` (missing files are fine)."""
    file_ops.unlink(Path(path))
