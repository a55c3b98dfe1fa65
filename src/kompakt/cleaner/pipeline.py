"""Reading a cleaning pass's segments ahead, with each chunk's native work done in worker threads.

A pass is a walk over segments in log order: the map pass puts every key into the offset map in
order, the copy pass writes the records it keeps in order. What must be in order is cheap; what
costs is per chunk and independent of the other chunks: checking the batches' CRCs, parsing and
hashing the records (map pass), looking every record up and re-encoding the kept ones (copy
pass). The kernels that do it release the GIL (``nogil=True``), so :class:`ChunkPipeline` runs
that part for the next chunks in worker threads while the caller consumes the current one, and
the machine's cores work at once.

The caller sees the same sequence of chunks as a sequential read (:func:`iter_chunks`), each with
what ``prepare`` computed for it, and the same errors at the same places: a read error or a bad
CRC is raised when the walk reaches that chunk, never earlier, and nothing past a failed chunk is
handed out. Each chunk in flight has its own buffer and workspace (a *slot*), returned to the pool
once the caller moves on, so memory stays ``(depth + 1) x chunk size`` per cleaner thread.
Stopping early (a full map, an abort, an error) cancels the chunks read ahead and waits for the
workers before the walk returns, so no thread still uses a buffer afterwards.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from kompakt.cleaner.segment_reader import Chunk, ReadBuffer, check_crcs, read_chunks
from kompakt.records.native import Workspace

T = TypeVar("T")

#: Worker threads per cleaner thread: the development machine's two cores (the caller's thread
#: consumes what they prepare, and mostly waits in native code or I/O itself).
DEFAULT_WORKERS = 2


@dataclass(frozen=True, slots=True)
class Source:
    """A byte range of one segment file to walk."""

    path: Path
    start: int
    end: int


@dataclass(slots=True)
class Slot:
    """The buffer a chunk is read into and the scratch arrays its preparation may use."""

    buffer: ReadBuffer
    workspace: Workspace = field(default_factory=Workspace)


@dataclass(frozen=True, slots=True)
class Prepared(Generic[T]):
    """One chunk of the walk and what ``prepare`` made of it (valid until the walk moves on)."""

    chunk: Chunk
    source: Source
    value: T
    workspace: Workspace


Prepare = Callable[[Chunk, Workspace], T]


class ChunkPipeline:
    """The read-ahead of one cleaner thread: its slots, and worker threads during a walk."""

    def __init__(
        self,
        chunk_bytes: int,
        workers: int = DEFAULT_WORKERS,
        depth: int | None = None,
        *,
        huge_pages: bool = True,
    ) -> None:
        """``workers`` 0 prepares each chunk in the caller's thread, one chunk at a time.
        ``depth``: chunks prepared ahead of the one the caller holds (default: one more than
        ``workers``, so that a worker finds the next chunk read when it is done).
        ``huge_pages``: the slots' buffers and scratch arrays in 2 MiB pages (for a pipeline
        that walks many times; see :mod:`kompakt.records.memory`)."""
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.workers = workers
        self.depth = max(1, workers + 1 if depth is None else depth)
        self._chunk_bytes = chunk_bytes
        self._huge_pages = huge_pages
        self._slots: list[Slot] = [self._new_slot()]

    def _new_slot(self) -> Slot:
        huge = self._huge_pages
        return Slot(ReadBuffer(self._chunk_bytes, huge_pages=huge), Workspace(huge_pages=huge))

    @classmethod
    def inline(cls, buffer: ReadBuffer) -> ChunkPipeline:
        """A walk in the caller's thread through ``buffer``, one chunk at a time."""
        pipeline = cls(buffer.base_size, workers=0, huge_pages=buffer.huge_pages)
        pipeline._slots = [Slot(buffer, Workspace(huge_pages=buffer.huge_pages))]
        return pipeline

    def _slot_pool(self) -> list[Slot]:
        wanted = 1 if self.workers == 0 else self.depth + 1
        while len(self._slots) < wanted:
            self._slots.append(self._new_slot())
        return list(self._slots[:wanted])

    def walk(
        self, sources: Sequence[Source], prepare: Prepare[T], *, verify_crc: bool = True
    ) -> Iterator[Prepared[T]]:
        """Every chunk of ``sources`` in order, CRC-checked, with ``prepare(chunk, workspace)``.

        A reader thread reads the chunks in order into free slots (``preadv`` releases the GIL, so
        the caller's thread keeps consuming meanwhile) and hands each to a worker; the caller
        takes them in order. The reader stops at the first error, which the caller meets after
        the chunks before it."""
        if self.workers == 0:
            yield from self._walk_inline(sources, prepare, verify_crc)
            return
        free: queue.SimpleQueue[Slot | None] = queue.SimpleQueue()
        for slot in self._slot_pool():
            free.put(slot)
        ready: queue.SimpleQueue[_Ready[T]] = queue.SimpleQueue()
        executor = ThreadPoolExecutor(self.workers, thread_name_prefix="kompakt-cleaner-work")
        reader = threading.Thread(
            target=_read_ahead,
            args=(sources, free, ready, executor, prepare, verify_crc),
            name="kompakt-cleaner-work-reader",
            daemon=True,
        )
        reader.start()
        futures: list[Future[T]] = []
        try:
            while True:
                item = ready.get()
                if item.failure is not None:
                    raise item.failure
                if item.slot is None or item.chunk is None or item.future is None or item.source is None:
                    return
                futures.append(item.future)
                value = item.future.result()
                yield Prepared(item.chunk, item.source, value, item.slot.workspace)
                item.slot.buffer.restore()
                free.put(item.slot)
                futures.clear()
        finally:
            free.put(None)  # wakes a reader waiting for a slot; it stops there
            reader.join()
            while not ready.empty():
                left = ready.get()
                if left.future is not None:
                    futures.append(left.future)
            for future in futures:
                future.cancel()
            wait_all(futures)
            executor.shutdown(wait=True)
            for slot in self._slots:
                slot.buffer.restore()

    def _walk_inline(
        self, sources: Sequence[Source], prepare: Prepare[T], verify_crc: bool
    ) -> Iterator[Prepared[T]]:
        free = self._slot_pool()
        try:
            for slot, source, chunk in _read(sources, free.pop):
                value = _prepare(source.path, chunk, slot.workspace, prepare, verify_crc)
                yield Prepared(chunk, source, value, slot.workspace)
                free.append(slot)
        finally:
            for slot in self._slots:
                slot.buffer.restore()


def _prepare(path: Path, chunk: Chunk, workspace: Workspace, prepare: Prepare[T], verify_crc: bool) -> T:
    if verify_crc:
        check_crcs(path, chunk)
    return prepare(chunk, workspace)


@dataclass(frozen=True, slots=True)
class _Ready(Generic[T]):
    """What the reader hands the caller: a chunk with its preparation under way, the error that
    stopped the reader (``failure``), or the end of the walk (nothing set)."""

    slot: Slot | None = None
    source: Source | None = None
    chunk: Chunk | None = None
    future: Future[T] | None = None
    failure: BaseException | None = None


class _Stopped(Exception):
    """The caller left the walk: the reader stops where it is."""


def _read_ahead(
    sources: Sequence[Source],
    free: queue.SimpleQueue[Slot | None],
    ready: queue.SimpleQueue[_Ready[T]],
    executor: ThreadPoolExecutor,
    prepare: Prepare[T],
    verify_crc: bool,
) -> None:
    """The reader thread: each chunk, in order, read into a free slot and submitted to a worker."""

    def take() -> Slot:
        slot = free.get()
        if slot is None:
            raise _Stopped
        return slot

    try:
        for slot, source, chunk in _read(sources, take):
            future = executor.submit(_prepare, source.path, chunk, slot.workspace, prepare, verify_crc)
            ready.put(_Ready(slot, source, chunk, future))
    except _Stopped:
        pass
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised in order
        ready.put(_Ready(failure=exc))
        return
    ready.put(_Ready())


def _read(
    sources: Sequence[Source], take_slot: Callable[[], Slot]
) -> Generator[tuple[Slot, Source, Chunk], None, None]:
    """Read the chunks of ``sources`` in order, each into a slot from ``take_slot`` (which may
    wait until the caller is done with an earlier chunk)."""
    taken: list[Slot] = []

    def take() -> ReadBuffer:
        taken.append(take_slot())
        return taken[-1].buffer

    for source in sources:
        if source.start >= source.end:
            continue
        fd = os.open(source.path, os.O_RDONLY)
        try:
            for chunk in read_chunks(fd, source.path, source.start, source.end, take):
                yield taken.pop(), source, chunk
        finally:
            os.close(fd)
