"""A file system that runs out of space: ``OsFileOps.pwrite`` writes what still fits, then raises.

A real full disk fails a write part way through: the bytes that fit reach the file and the call
fails with ENOSPC. The patch keeps a byte budget for every write the log makes (``.log`` and
indexes); ``None`` means unlimited.
"""

from __future__ import annotations

import errno
import os

import pytest

from kompakt.log.offset_index import OsFileOps


class FullDisk:
    def __init__(self) -> None:
        self.space: int | None = None
        self.failures = 0

    def pwrite(self, _ops: OsFileOps, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        view = memoryview(data)
        if self.space is not None and len(view) > self.space:
            fits = self.space
            if fits:
                os.pwrite(fd, view[:fits], position)  # the partial write a full disk makes
            self.space = 0
            self.failures += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = 0
        while written < len(view):
            written += os.pwrite(fd, view[written:], position + written)
        if self.space is not None:
            self.space -= written
        return written


def install(monkeypatch: pytest.MonkeyPatch) -> FullDisk:
    disk = FullDisk()
    monkeypatch.setattr(
        OsFileOps, "pwrite", lambda ops, fd, data, position: disk.pwrite(ops, fd, data, position)
    )
    return disk
