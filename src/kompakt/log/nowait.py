"""Reads that never wait for a disk: how a Fetch is answered on the event loop when it can be.

The server runs storage handlers in a worker thread because a read that misses the page cache
would otherwise stall every connection of the event loop. The hop costs: on a 1-partition consume
it was 0.3 ms of a Fetch's broker time, and answering on the loop ran at 913 against 682 MB/s. So
the server first tries such a handler on the loop inside :func:`cached_only`, and every read
of the log layer on that thread then asks the kernel for page-cache data only (``preadv`` with
``RWF_NOWAIT``, which fails with ``EAGAIN`` rather than start a disk read). Anything that would
wait (a page on disk, a file or index not opened or loaded yet, a log lock held by an append)
raises :class:`WouldBlock` before the handler has changed anything, and the server runs the
request again in a worker thread, where the same reads simply wait.

The mode is per thread and off unless :func:`cached_only` is active, so worker threads, the
cleaner and the tools read as they always did. A kernel or file system without ``RWF_NOWAIT``
makes every attempt a :class:`WouldBlock`: the worker path, as before.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

#: ``RWF_NOWAIT`` (Linux 4.14+), 0 where Python or the platform lacks it.
RWF_NOWAIT: Final = getattr(os, "RWF_NOWAIT", 0)

_STATE = threading.local()


class WouldBlock(Exception):  # noqa: N818 - named for what it reports, like BlockingIOError
    """A read in :func:`cached_only` mode needs the disk (or a lock, or a wait): retry elsewhere.

    Deliberately not an :class:`OSError`: callers that turn I/O errors into a fallback or an
    error code must let this one through to the server unchanged.
    """


class _Supported:
    """Whether ``RWF_NOWAIT`` reads work here (cleared on the first EOPNOTSUPP or EINVAL)."""

    ok = RWF_NOWAIT != 0


def active() -> bool:
    """Whether this thread is inside :func:`cached_only`."""
    return getattr(_STATE, "on", False)


def available() -> bool:
    """Whether a :func:`cached_only` attempt can succeed at all on this system."""
    return _Supported.ok


@contextmanager
def cached_only() -> Iterator[None]:
    """Reads of the log layer on this thread inside the block use the page cache only."""
    previous = active()
    _STATE.on = True
    try:
        yield
    finally:
        _STATE.on = previous


def check(what: str) -> None:
    """Raise :class:`WouldBlock` in :func:`cached_only` mode: ``what`` would touch the disk."""
    if active():
        raise WouldBlock(what)


def pread(fd: int, size: int, position: int) -> bytes:
    """``os.pread``, or in :func:`cached_only` mode the same bytes from the page cache only.

    A short result means the end of the file, as with ``os.pread``: a read that stops at the first
    page not cached is continued, and raises :class:`WouldBlock` if that page is still not there.
    """
    if not active():
        return os.pread(fd, size, position)
    if not _Supported.ok:
        raise WouldBlock("RWF_NOWAIT is not supported")
    buffer = bytearray(size)
    view = memoryview(buffer)
    filled = 0
    while filled < size:
        try:
            read = os.preadv(fd, [view[filled:]], position + filled, RWF_NOWAIT)
        except BlockingIOError as exc:
            raise WouldBlock(
                f"{size - filled} bytes at {position + filled} are not in the page cache"
            ) from exc
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                _Supported.ok = False
                raise WouldBlock("RWF_NOWAIT is not supported") from exc
            raise
        if read == 0:
            break
        filled += read
    view.release()
    if filled < size:
        del buffer[filled:]
    return bytes(buffer)
