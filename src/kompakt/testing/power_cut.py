"""A power-cut fault model: file operations that remember what is durable, and a cut that leaves only that.

:class:`PowerCutFileOps` is a descriptor-level file-operations object
(:class:`kompakt.log.files.FileOps`) over the real file system. Hand it to a
:class:`~kompakt.log.manager.LogManager` or :class:`~kompakt.log.partition_log.PartitionLog`
(``file_ops=``), run a workload, call :meth:`PowerCutFileOps.cut`, and the files on disk become
what a machine that lost power at that moment could find after a reboot. Then reopen the
directory with ordinary file operations and check what recovery makes of it.

The model is POSIX's promise and no more:

* A file's bytes survive as of its last ``fsync``. Of the writes and truncations after it, what
  survives is chosen at random per file: none; a prefix, in order; a prefix and then the next
  write torn (only its first bytes); or a prefix, then the next write as garbage (zeros or
  random bytes: blocks allocated but never written) and possibly some of the later writes after
  that hole, since write-back does not follow the program's order.
* A directory's entries (files created, renamed, unlinked) survive as of its last ``fsync_dir``;
  of the later changes a random prefix survives, in order (a journaling file system commits
  metadata in order).
* Files the model never saw through these operations were written by the atomic recipe
  (``atomic_write_bytes``: temporary file, fsync, rename, directory fsync) and are left as they
  are; a file first seen already existing counts as durable as found.

``crash_at`` additionally stops the program at its n-th file mutation (raising
:class:`~kompakt.testing.faults.SimulatedCrashError`), to cut power in the middle of, say, recovery.
The object holds all its state itself (no process-wide switch), and is for tests only: it keeps
every unsynced write in memory and reads a whole file at each fsync.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from kompakt.log.files import DEFAULT_FILE_OPS, FileOps
from kompakt.testing.faults import SimulatedCrashError

#: How the unsynced tail of one file is treated by a cut.
TAIL_MODES = ("synced", "prefix", "torn", "garbage")


@dataclass(slots=True)
class _File:
    """One inode: its durable content and the changes since its last fsync."""

    inode: int
    durable: bytes = b""  # trailing zero bytes stripped; ``durable_size`` is the length
    durable_size: int = 0
    #: ``("write", position, data)`` and ``("truncate", size, b"")``, in program order.
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CutFile:
    """What a cut did to one file: kept ``kept`` of its ``pending`` unsynced changes, in ``mode``."""

    path: str
    mode: str
    pending: int
    kept: int
    size: int


@dataclass(frozen=True, slots=True)
class CutReport:
    """Every file a cut rewrote or removed, and the directory changes it dropped."""

    files: tuple[CutFile, ...]
    removed: tuple[str, ...]
    dropped_entries: int

    def describe(self) -> str:
        lines = [
            f"{f.path}: {f.mode}, kept {f.kept}/{f.pending} unsynced changes, {f.size} bytes"
            for f in self.files
        ]
        lines += [f"{path}: its directory entry was not durable, removed" for path in self.removed]
        return "\n".join(lines)


def _read_all(fd: int, size: int) -> bytes:
    """The first ``size`` bytes behind ``fd``, also for a write-only descriptor (atomic writes)."""
    if not size:
        return b""
    try:
        return os.pread(fd, size, 0)
    except OSError:
        reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        try:
            return os.pread(reader, size, 0)
        finally:
            os.close(reader)


class PowerCutFileOps:
    """File operations that record durability; :meth:`cut` rewrites the files to what survives.

    Not thread-safe: the log layer calls it under its locks, and a cut happens with the workload
    stopped (close the logs' descriptors first, e.g. ``LogManager.close_without_flush``).
    """

    def __init__(
        self, rng: random.Random, *, inner: FileOps = DEFAULT_FILE_OPS, crash_at: int | None = None
    ) -> None:
        self._rng = rng
        self._inner = inner
        self.crash_at = crash_at
        self.mutations = 0
        self._current: dict[str, _File] = {}
        self._durable: dict[str, _File] = {}
        self._pending_dirs: dict[str, list[tuple[str, str, str, _File | None]]] = {}
        self._fds: dict[int, _File] = {}
        self._done = False

    # ------------------------------------------------------------------ bookkeeping

    def _step(self, what: str) -> None:
        if self._done:
            raise RuntimeError(f"{what} after the power cut")
        if self.crash_at is not None and self.mutations >= self.crash_at:
            raise SimulatedCrashError(f"simulated crash before file operation {self.mutations}: {what}")
        self.mutations += 1

    def _adopt(self, key: str) -> _File | None:
        """The model's file at ``key``; a file not seen before counts as durable as it is now."""
        known = self._current.get(key)
        if known is not None or not os.path.exists(key):
            return known
        with open(key, "rb") as f:
            data = f.read()
        adopted = _File(os.stat(key).st_ino, data.rstrip(b"\x00"), len(data))
        self._current[key] = adopted
        self._durable[key] = adopted
        return adopted

    def _file_of(self, fd: int) -> _File:
        """The model's file behind ``fd``: one opened here, or a ``dup`` of one (the flush path
        fsyncs duplicates so it can run outside the partition lock); matched by inode."""
        inode = os.fstat(fd).st_ino
        f = self._fds.get(fd)
        if f is not None and f.inode == inode:
            return f
        for known in self._fds.values():
            if known.inode == inode:
                return known
        raise RuntimeError(f"descriptor {fd} was not opened through this PowerCutFileOps")

    def _dir_change(self, kind: str, src: str, dst: str, f: _File | None) -> None:
        directory = os.path.dirname(dst or src)
        if os.path.dirname(src or dst) != directory:
            raise RuntimeError(f"rename across directories is not modelled: {src} -> {dst}")
        self._pending_dirs.setdefault(directory, []).append((kind, src, dst, f))

    @staticmethod
    def _apply_entry(names: dict[str, _File], change: tuple[str, str, str, _File | None]) -> None:
        kind, src, dst, f = change
        if kind == "create" and f is not None:
            names[dst] = f
        elif kind == "rename":
            moved = names.pop(src, None)
            if moved is not None:
                names[dst] = moved
        elif kind == "unlink":
            names.pop(src, None)

    # ------------------------------------------------------------------ FileOps

    def open_fd(self, path: Path, flags: int, mode: int = 0o644) -> int:
        key = os.fspath(path)
        if flags & (os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_RDWR):
            self._step(f"open {key}")
        known = self._adopt(key)
        fd = self._inner.open_fd(path, flags, mode)
        if known is None:
            known = _File(os.fstat(fd).st_ino)
            self._current[key] = known
            self._dir_change("create", "", key, known)
        if flags & os.O_TRUNC:
            known.pending.append(("truncate", 0, b""))
        self._fds[fd] = known
        return fd

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        self._step(f"pwrite {fd}")
        self._file_of(fd).pending.append(("write", position, bytes(data)))
        return self._inner.pwrite(fd, data, position)

    def ftruncate(self, fd: int, size: int) -> None:
        self._step(f"ftruncate {fd}")
        self._file_of(fd).pending.append(("truncate", size, b""))
        self._inner.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        self._step(f"fsync {fd}")
        f = self._file_of(fd)
        self._inner.fsync(fd)
        size = os.fstat(fd).st_size
        data = _read_all(fd, size)
        f.durable, f.durable_size = data.rstrip(b"\x00"), size
        f.pending.clear()

    def rename(self, src: Path, dst: Path) -> None:
        s, d = os.fspath(src), os.fspath(dst)
        self._step(f"rename {s} -> {d}")
        moved = self._adopt(s)
        self._adopt(d)
        self._inner.rename(src, dst)
        if moved is not None:
            self._current.pop(s, None)
            self._current[d] = moved
        self._dir_change("rename", s, d, moved)

    def unlink(self, path: Path) -> None:
        key = os.fspath(path)
        self._step(f"unlink {key}")
        self._adopt(key)
        self._inner.unlink(path)
        self._current.pop(key, None)
        self._dir_change("unlink", key, "", None)

    def fsync_dir(self, path: Path) -> None:
        key = os.fspath(path)
        self._step(f"fsync_dir {key}")
        self._inner.fsync_dir(path)
        for change in self._pending_dirs.pop(key, []):
            self._apply_entry(self._durable, change)

    def mkdir(self, path: Path) -> None:
        """Directories are not modelled: one created survives the cut (its entries may not)."""
        self._step(f"mkdir {os.fspath(path)}")
        self._inner.mkdir(path)

    # ------------------------------------------------------------------ the cut

    def _materialize(self, f: _File) -> tuple[bytes, str, int]:
        """The bytes that survive of ``f``, the tail mode drawn, and how many changes were kept."""
        buf = bytearray(f.durable)
        size = f.durable_size
        n = len(f.pending)
        mode = self._rng.choice(TAIL_MODES) if n else "synced"

        def apply(change: tuple[str, int, bytes], data: bytes | None = None) -> None:
            nonlocal size
            kind, where, payload = change
            if kind == "truncate":
                del buf[where:]
                size = where
                return
            payload = payload if data is None else data
            if where > len(buf):
                buf.extend(bytes(where - len(buf)))
            buf[where : where + len(payload)] = payload
            size = max(size, where + len(payload))

        kept = 0
        if mode == "prefix":
            kept = self._rng.randint(1, n)
            for change in f.pending[:kept]:
                apply(change)
        elif mode in ("torn", "garbage"):
            j = self._rng.randint(0, n - 1)
            for change in f.pending[:j]:
                apply(change)
            kind, _where, payload = f.pending[j]
            if kind == "truncate" or not payload:
                apply(f.pending[j])
            elif mode == "torn":
                apply(f.pending[j], payload[: self._rng.randint(0, len(payload) - 1)])
            elif self._rng.random() < 0.5:
                apply(f.pending[j], bytes(len(payload)))
            else:
                apply(f.pending[j], self._rng.randbytes(len(payload)))
            kept = j + 1
            if mode == "garbage":
                later = self._rng.randint(j + 1, n)
                for change in f.pending[j + 1 : later]:
                    apply(change)
                kept = later
        if len(buf) > size:
            del buf[size:]
        return bytes(buf) + bytes(size - len(buf)), mode, kept

    def cut(self) -> CutReport:
        """Cut the power: rewrite every file the model knows to what survives; return what it did.

        The object is unusable afterwards. Descriptors the program still holds must be closed
        first (without writing), or the program must simply never write through them again.
        """
        if self._done:
            raise RuntimeError("the power was cut already")
        self._done = True
        names = dict(self._durable)
        dropped = 0
        for changes in self._pending_dirs.values():
            keep = self._rng.randint(0, len(changes))
            for change in changes[:keep]:
                self._apply_entry(names, change)
            dropped += len(changes) - keep
        removed = sorted(set(self._current) - set(names))
        for key in removed:
            if os.path.exists(key):
                os.unlink(key)
        files = []
        for key in sorted(names):
            data, mode, kept = self._materialize(names[key])
            with open(key, "wb") as out:
                out.write(data)
            files.append(CutFile(key, mode, len(names[key].pending), kept, len(data)))
        return CutReport(tuple(files), tuple(removed), dropped)


__all__ = ["TAIL_MODES", "CutFile", "CutReport", "PowerCutFileOps"]
