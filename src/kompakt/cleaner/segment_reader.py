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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kompakt.errors import CorruptRecordError
from kompakt.records.batch import LOG_OVERHEAD
from kompakt.records.native import U8Array
from kompakt.records.scan import BatchTable, StopReason, batch_crcs_ok, scan_batches

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

    def __init__(self, size: int = DEFAULT_CHUNK_BYTES) -> None:
        self.base_size = size
        self.buf: U8Array = np.empty(size, dtype=np.uint8)

    def ensure(self, size: int) -> None:
        if size > len(self.buf):
            self.buf = np.empty(size, dtype=np.uint8)

    def restore(self) -> None:
        """Return to the base size after an oversized batch, as Kafka restores its buffers."""
        if len(self.buf) > self.base_size:
            self.buf = np.empty(self.base_size, dtype=np.uint8)


def iter_chunks(
    path: Path, start_position: int, end_position: int, buffer: ReadBuffer, *, verify_crc: bool = True
) -> Iterator[Chunk]:
    """Yield chunks of whole, CRC-checked batches of ``path[start_position:end_position]``.

    Raises CorruptRecordError naming the file and position of the first invalid batch: a bad CRC,
    a size below the header, a wrong magic, or a declared size past the end of the segment.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = start_position
        while pos < end_position:
            want = min(len(buffer.buf), end_position - pos)
            view = buffer.buf[:want].data
            got = os.preadv(fd, [view], pos)
            if got < want:
                raise CorruptRecordError(
                    f"{path} is shorter than expected: read {got} of {want} bytes at {pos}"
                )
            table = scan_batches(buffer.buf, 0, want)
            if len(table) == 0:
                _raise_for_stop(path, pos, want, end_position, table, buffer)
                continue  # the buffer grew to hold one oversized batch; read again
            if verify_crc:
                ok = batch_crcs_ok(buffer.buf, table)
                if not bool(ok.all()):
                    bad = int(np.argmin(ok))
                    raise CorruptRecordError(
                        f"Record is corrupt (CRC mismatch) in {path} at position "
                        f"{pos + int(table.position[bad])} (base offset {int(table.base_offset[bad])})"
                    )
            consumed = int(table.position[-1] + table.size[-1])
            yield Chunk(buffer.buf, pos, consumed, table)
            if table.stop_reason in (StopReason.BAD_SIZE, StopReason.BAD_MAGIC):
                _raise_for_stop(path, pos + consumed, 0, end_position, table, buffer)
            pos += consumed
    finally:
        os.close(fd)
        buffer.restore()


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
