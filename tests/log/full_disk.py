"""A file system that runs out of space: ``pwrite`` writes what still fits, then raises.

A real full disk fails a write part way through: the bytes that fit reach the file and the call
fails with ENOSPC. :class:`FullDisk` is the log's file operations with a byte budget for every
write the log makes (``.log`` and indexes); ``None`` means unlimited. Hand it to the
``LogManager`` (``file_ops=``); files written with the atomic recipe outside the log (checkpoints,
metadata) go to the real file system.
"""

from __future__ import annotations

import errno
import os

from kompakt.log.files import OsFileOps


class FullDisk(OsFileOps):
    def __init__(self) -> None:
        self.space: int | None = None
        self.failures = 0

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        view = memoryview(data)
        if self.space is not None and len(view) > self.space:
            fits = self.space
            if fits:
                os.pwrite(fd, view[:fits], position)  # the partial write a full disk makes
            self.space = 0
            self.failures += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = super().pwrite(fd, data, position)
        if self.space is not None:
            self.space -= written
        return written
