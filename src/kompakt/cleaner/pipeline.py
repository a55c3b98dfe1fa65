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
from collections import deque
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

    def __init__(self, chunk_bytes: int, workers: int = DEFAULT_WORKERS, depth: int | None = None) -> None:
        """``workers`` 0 prepares each chunk in the caller's thread, one chunk at a time.
        ``depth``: chunks prepared ahead of the one the caller holds (default: one more than
        ``workers``, so that a worker finds the next chunk read when it is done)."""
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.workers = workers
        self.depth = max(1, workers + 1 if depth is None else depth)
        self._chunk_bytes = chunk_bytes
        self._slots: list[Slot] = [Slot(ReadBuffer(chunk_bytes))]

    @classmethod
    def inline(cls, buffer: ReadBuffer) -> ChunkPipeline:
        """A walk in the caller's thread through ``buffer``, one chunk at a time."""
        pipeline = cls(buffer.base_size, workers=0)
        pipeline._slots = [Slot(buffer)]
        return pipeline

    def _slot_pool(self) -> list[Slot]:
        wanted = 1 if self.workers == 0 else self.depth + 1
        while len(self._slots) < wanted:
            self._slots.append(Slot(ReadBuffer(self._chunk_bytes)))
        return list(self._slots[:wanted])

    def walk(
        self, sources: Sequence[Source], prepare: Prepare[T], *, verify_crc: bool = True
    ) -> Iterator[Prepared[T]]:
        """Every chunk of ``sources`` in order, CRC-checked, with ``prepare(chunk, workspace)``."""
        if self.workers == 0:
            yield from self._walk_inline(sources, prepare, verify_crc)
            return
        free = self._slot_pool()
        pending: deque[tuple[Slot, Source, Chunk, Future[T]]] = deque()
        chunks = _read(sources, free)
        failure: BaseException | None = None
        executor = ThreadPoolExecutor(self.workers, thread_name_prefix="kompakt-cleaner-work")
        try:
            while True:
                while failure is None and len(pending) < self.depth and free:
                    try:
                        item = next(chunks, None)
                    except Exception as exc:  # noqa: BLE001 - raised in order, after the chunks before it
                        failure = exc
                        break
                    if item is None:
                        break
                    slot, source, chunk = item
                    future = executor.submit(
                        _prepare, source.path, chunk, slot.workspace, prepare, verify_crc
                    )
                    pending.append((slot, source, chunk, future))
                if not pending:
                    if failure is not None:
                        raise failure
                    return
                slot, source, chunk, future = pending.popleft()
                value = future.result()
                yield Prepared(chunk, source, value, slot.workspace)
                slot.buffer.restore()
                free.append(slot)
        finally:
            chunks.close()
            for *_, future in pending:
                future.cancel()
            wait_all([f for *_, f in pending])
            executor.shutdown(wait=True)

    def _walk_inline(
        self, sources: Sequence[Source], prepare: Prepare[T], verify_crc: bool
    ) -> Iterator[Prepared[T]]:
        free = self._slot_pool()
        try:
            for slot, source, chunk in _read(sources, free):
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


def _read(sources: Sequence[Source], free: list[Slot]) -> Generator[tuple[Slot, Source, Chunk], None, None]:
    """Read the chunks of ``sources`` in order, each into a slot taken from ``free`` (the caller
    puts slots back as their chunks are done; one must be free whenever a chunk is read)."""
    taken: list[Slot] = []

    def take() -> ReadBuffer:
        taken.append(free.pop())
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
