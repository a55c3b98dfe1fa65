"""Reading a segment's batches in large chunks into one reused buffer, with their header table.

The cleaner reads each segment twice (map pass, copy pass). Both read it in chunks of whole
batches into a per-thread buffer, scan the headers natively and check CRCs, much as Kafka's
cleaner reads through its I/O buffers. A chunk holds only complete batches; when a single batch is
larger than the buffer, the buffer grows to exactly that batch (Kafka's ``Cleaner.growBuffersOrFail``),
provided the file really holds that many bytes — otherwise the segment is corrupt and the clean fails naming
the file and position. Reusing one buffer matters: first touch of fresh memory is slower on these machines
than parsing the records in it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kompakt.errors import CorruptRecordError
from kompakt.records.batch import LOG_OVERHEAD
from kompakt.records.memory import empty
from kompakt.records.native import U8Array
from kompakt.records.scan import BatchTable, StopReason, first_bad_crc, scan_batches

DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole batches read from ``path``: ``buf[0:length]`` holds file bytes from ``file_position``."""

    buf: U8Array
    file_position: int
    length: int
    table: BatchTable


class ReadBuffer:
    """One growable byte buffer per cleaner thread."""

    def __init__(self, size: int = DEFAULT_CHUNK_BYTES, *, huge_pages: bool = True) -> None:
        """``huge_pages``: in 2 MiB pages (numpy's default), for a buffer read into many times;
        base pages for one filled once (:mod:`kompakt.records.memory`)."""
        self.base_size = size
        self.huge_pages = huge_pages
        self.buf: U8Array = empty(size, np.uint8, huge=huge_pages)

    def ensure(self, size: int) -> None:
        if size > len(self.buf):
            self.buf = empty(size, np.uint8, huge=self.huge_pages)

    def restore(self) -> None:
        """Return to the base size after an oversized batch, as Kafka restores its buffers."""
        if len(self.buf) > self.base_size:
            self.buf = empty(self.base_size, np.uint8, huge=self.huge_pages)


def iter_chunks(
    path: Path, start_position: int, end_position: int, buffer: ReadBuffer, *, verify_crc: bool = True
) -> Iterator[Chunk]:
    """Yield chunks of whole, CRC-checked batches of ``path[start_position:end_position]``.

    Raises CorruptRecordError naming the file and position of the first invalid batch: a bad CRC,
    a size below the header, a wrong magic, or a declared size past the end of the segment.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        for chunk in read_chunks(fd, path, start_position, end_position, lambda: buffer):
            if verify_crc:
                check_crcs(path, chunk)
            yield chunk
    finally:
        os.close(fd)
        buffer.restore()


def read_chunks(
    fd: int, path: Path, start_position: int, end_position: int, next_buffer: Callable[[], ReadBuffer]
) -> Iterator[Chunk]:
    """The chunks of ``iter_chunks`` without the CRC check, each read into ``next_buffer()``.

    Reading stays sequential (where a chunk ends is only known once its batch headers are
    scanned); checking CRCs is left to the caller, who may do it in another thread. A chunk is
    yielded before the error that follows it is raised, as a reader of the file would meet them.
    """
    pos = start_position
    while pos < end_position:
        buffer = next_buffer()
        chunk = _read_chunk(fd, path, pos, end_position, buffer)
        yield chunk
        if chunk.table.stop_reason in (StopReason.BAD_SIZE, StopReason.BAD_MAGIC):
            _raise_for_stop(path, pos + chunk.length, 0, end_position, chunk.table, buffer)
        pos += chunk.length


def _read_chunk(fd: int, path: Path, pos: int, end_position: int, buffer: ReadBuffer) -> Chunk:
    """The whole batches at ``pos``, as many as fit in ``buffer`` (grown for one oversized batch)."""
    while True:
        want = min(len(buffer.buf), end_position - pos)
        got = os.preadv(fd, [buffer.buf[:want].data], pos)
        if got < want:
            raise CorruptRecordError(f"{path} is shorter than expected: read {got} of {want} bytes at {pos}")
        table = scan_batches(buffer.buf, 0, want)
        if len(table):
            return Chunk(buffer.buf, pos, int(table.position[-1] + table.size[-1]), table)
        _raise_for_stop(path, pos, want, end_position, table, buffer)  # raises, or grows the buffer


def check_crcs(path: Path, chunk: Chunk) -> None:
    """Raise CorruptRecordError naming the first batch of ``chunk`` whose CRC does not match."""
    bad = first_bad_crc(chunk.buf, chunk.table)
    if bad >= 0:
        raise CorruptRecordError(
            f"Record is corrupt (CRC mismatch) in {path} at position "
            f"{chunk.file_position + int(chunk.table.position[bad])} "
            f"(base offset {int(chunk.table.base_offset[bad])})"
        )


def _raise_for_stop(
    path: Path, pos: int, read: int, end_position: int, table: BatchTable, buffer: ReadBuffer
) -> None:
    """Handle a chunk with no whole batch: grow for an oversized batch, or report corruption."""
    if table.stop_reason == StopReason.BAD_MAGIC:
        raise CorruptRecordError(f"unsupported record batch magic in {path} at position {pos}")
    if table.stop_reason == StopReason.BAD_SIZE:
        raise CorruptRecordError(f"record batch size below the 61-byte header in {path} at position {pos}")
    left = end_position - pos
    if read < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated record batch header in {path} at position {pos}")
    size = int.from_bytes(bytes(buffer.buf[8:12]), "big", signed=True) + LOG_OVERHEAD
    if size > left:
        raise CorruptRecordError(
            f"Log segment may be corrupt, batch size {size} > {left} bytes left in {path} at position {pos}"
        )
    buffer.ensure(size)
