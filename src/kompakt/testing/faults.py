"""A counting fault model for the log's file operations: fail at the n-th mutation, or just count.

:class:`FaultInjectingFileOps` is a :class:`~kompakt.log.files.FileOps` over the real file system.
Hand it to what performs the writes (``file_ops=`` of a log, or of
:func:`~kompakt.log.files.atomic_write_bytes`), run a scenario once with ``fail_at=None`` to learn
``count``, then once per ``0..count-1``, each time reopening the directory and checking recovery.
``log`` lists ``(op, target)`` pairs: ``create``/``open`` (a descriptor opened to change a file),
``write``, ``truncate``, ``fsync``, ``rename``, ``delete``, ``fsync_dir``, ``mkdir``.

With ``kill=True`` the failure is a ``kill -9``: the failing operation and every one after it
raise, so no clean-up or rollback the code under test attempts can touch the files; what is on
disk is what the kill left, for a reopen to recover.

Only operations done while it is armed count (from construction, unless ``armed=False``; see
:meth:`FaultInjectingFileOps.armed`), so a log can be opened through it and only, say, one swap
put to the test. For a model of what survives a power cut, see :mod:`kompakt.testing.power_cut`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kompakt.errors import FileOperationError
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps

#: Open flags that make an ``open_fd`` a mutation (opening to read changes nothing).
_MUTATING_OPEN = os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_RDWR


class SimulatedCrashError(FileOperationError):
    """Raised by a fault model in place of the file operation it was told to fail."""


class FaultInjectingFileOps:
    """Counts every mutating operation and raises :class:`SimulatedCrashError` at operation ``fail_at``.

    Not thread-safe; the log layer calls it under its locks.
    """

    def __init__(
        self,
        fail_at: int | None = None,
        *,
        armed: bool = True,
        kill: bool = False,
        inner: FileOps = DEFAULT_FILE_OPS,
    ) -> None:
        self.fail_at = fail_at
        self.kill = kill
        #: Whether the failure has happened (with ``kill``, every later operation fails too).
        self.failed = False
        self.count = 0
        self.log: list[tuple[str, str]] = []
        self._armed = armed
        self._inner = inner

    @contextmanager
    def armed(self) -> Iterator[FaultInjectingFileOps]:
        """Count (and fail) only inside the ``with`` block; ``count`` and ``log`` start empty."""
        self.count = 0
        self.log.clear()
        self._armed = True
        try:
            yield self
        finally:
            self._armed = False

    def _step(self, op: str, target: object) -> None:
        if self.failed and self.kill:
            raise SimulatedCrashError(f"{op} {target} after the simulated kill at operation {self.fail_at}")
        if not self._armed:
            return
        if self.fail_at is not None and self.count == self.fail_at:
            self.count += 1
            self.failed = True
            raise SimulatedCrashError(f"simulated crash at operation {self.fail_at}: {op} {target}")
        self.count += 1
        self.log.append((op, str(target)))

    def open_fd(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if flags & _MUTATING_OPEN:
            self._step("create" if flags & os.O_CREAT else "open", path)
        return self._inner.open_fd(path, flags, mode)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        self._step("write", fd)
        return self._inner.pwrite(fd, data, position)

    def ftruncate(self, fd: int, size: int) -> None:
        self._step("truncate", fd)
        self._inner.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        self._step("fsync", fd)
        self._inner.fsync(fd)

    def rename(self, src: Path, dst: Path) -> None:
        self._step("rename", f"{src} -> {dst}")
        self._inner.rename(src, dst)

    def unlink(self, path: Path) -> None:
        self._step("delete", path)
        self._inner.unlink(path)

    def fsync_dir(self, path: Path) -> None:
        self._step("fsync_dir", path)
        self._inner.fsync_dir(path)

    def mkdir(self, path: Path) -> None:
        self._step("mkdir", path)
        self._inner.mkdir(path)


__all__ = ["FaultInjectingFileOps", "SimulatedCrashError"]
