"""RecordBatch magic v2: a zero-copy header view, iteration over a buffer, in-place mutators.

Byte layout of one batch (big-endian fixed-width fields)::

    offset size field
       0    8  base_offset            int64
       8    4  batch_length           int32 = batch size - 12
      12    4  partition_leader_epoch int32, outside the CRC
      16    1  magic                  int8 = 2
      17    4  crc                    uint32 CRC-32C of bytes [21, end)
      21    2  attributes             int16: bits 0-2 codec, 3 timestamp type,
                                             4 transactional, 5 control, 6 delete horizon set
      23    4  last_offset_delta      int32
      27    8  base_timestamp         int64 (the delete horizon when bit 6 is set)
      35    8  max_timestamp          int64
      43    8  producer_id            int64
      51    2  producer_epoch         int16
      53    4  base_sequence          int32
      57    4  records_count          int32
      61    .  records                raw, or one compressed stream

Because the base offset and the leader epoch lie outside the CRC, the broker assigns offsets on
append by rewriting 8 bytes in place, never re-encoding the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from kompakt.errors import CorruptRecordError
from kompakt.lazy_import import LazyModule
from kompakt.records.compression import Compression

if TYPE_CHECKING:
    import crc32c
else:  # loaded on the first checksum; the extension alone, without the package (records.checksum)
    crc32c = LazyModule("kompakt.records.checksum", globals(), "crc32c")

BATCH_OVERHEAD: Final = 61
"""Size of an empty v2 batch: the header alone."""
LOG_OVERHEAD: Final = 12
"""base_offset + batch_length: the bytes not counted by ``batch_length``."""
MAGIC_V2: Final = 2
CRC_START: Final = 21
NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
"""All header fields in order, for building and for reading everything at once."""
_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_U32: Final = struct.Struct(">I")

Buffer = bytes | bytearray | memoryview


class TimestampType(IntEnum):
    """Attribute bit 3."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def _seq_add(sequence: int, delta: int) -> int:
    """Kafka's sequence arithmetic: wraps past 2^31-1 to 0."""
    if sequence > 0x7FFFFFFF - delta:
        return delta - (0x7FFFFFFF - sequence) - 1
    return sequence + delta


class RecordBatchView:
    """A read-only view of the v2 batch header at ``position`` in ``buf``.

    Nothing is copied or decoded up front; each property unpacks its field on access. The view
    does not check that the buffer holds the whole batch: :func:`iter_batches` does that, and
    :meth:`validate` checks sizes, magic and CRC.
    """

    __slots__ = ("buf", "position")

    def __init__(self, buf: Buffer, position: int = 0) -> None:
        self.buf = buf
        self.position = position

    @property
    def base_offset(self) -> int:
        return int(_I64.unpack_from(self.buf, self.position)[0])

    @property
    def batch_length(self) -> int:
        return int(_I32.unpack_from(self.buf, self.position + 8)[0])

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return int(_I32.unpack_from(self.buf, self.position + 12)[0])

    @property
    def magic(self) -> int:
        return int(self.buf[self.position + 16])

    @property
    def crc(self) -> int:
        return int(_U32.unpack_from(self.buf, self.position + 17)[0])

    @property
    def attributes(self) -> int:
        return int(_I16.unpack_from(self.buf, self.position + 21)[0])

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_offset_delta(self) -> int:
        return int(_I32.unpack_from(self.buf, self.position + 23)[0])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return int(_I64.unpack_from(self.buf, self.position + 27)[0])

    @property
    def delete_horizon_ms(self) -> int | None:
        """The KIP-534 delete horizon, or None when the batch has not been stamped."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def max_timestamp(self) -> int:
        return int(_I64.unpack_from(self.buf, self.position + 35)[0])

    @property
    def producer_id(self) -> int:
        return int(_I64.unpack_from(self.buf, self.position + 43)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_I16.unpack_from(self.buf, self.position + 51)[0])

    @property
    def base_sequence(self) -> int:
        return int(_I32.unpack_from(self.buf, self.position + 53)[0])

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return _seq_add(base, self.last_offset_delta)

    @property
    def records_count(self) -> int:
        return int(_I32.unpack_from(self.buf, self.position + 57)[0])

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def raw(self) -> memoryview:
        """The whole batch, as a view into the underlying buffer."""
        return memoryview(self.buf)[self.position : self.position + self.size]

    @property
    def records_section(self) -> memoryview:
        """The bytes after the header: raw records, or one compressed stream.

        Raises CorruptRecordError when the buffer ends inside the batch (a header-only view from
        a segment scan, or a torn buffer): records are never decoded from a truncated view.
        """
        end = self.position + self.size
        if end > len(self.buf):
            raise CorruptRecordError(
                f"batch at offset {self.base_offset} is not wholly in its buffer: "
                f"{len(self.buf) - self.position} of its {self.size} bytes"
            )
        return memoryview(self.buf)[self.position + BATCH_OVERHEAD : end]

    def compute_crc(self) -> int:
        """CRC-32C over attributes..end, the part Kafka protects."""
        view = memoryview(self.buf)[self.position + CRC_START : self.position + self.size]
        return int(crc32c.crc32c(view))

    def is_valid(self) -> bool:
        try:
            self.validate()
        except CorruptRecordError:
            return False
        return True

    def validate(self, available: int | None = None) -> None:
        """Check magic, sizes and CRC; raise CorruptRecordError saying which check failed."""
        limit = len(self.buf) if available is None else available
        if self.position + BATCH_OVERHEAD > limit:
            raise CorruptRecordError(f"truncated batch header at position {self.position}")
        if self.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {self.magic} at position {self.position}")
        if self.size < BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"batch size {self.size} at position {self.position} is below the minimum {BATCH_OVERHEAD}"
            )
        if self.position + self.size > limit:
            raise CorruptRecordError(
                f"batch of {self.size} bytes at position {self.position} runs past the end ({limit})"
            )
        if self.last_offset_delta < 0 or self.records_count < 0:
            raise CorruptRecordError(f"negative last offset delta or count at position {self.position}")
        stored = self.crc
        computed = self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {stored}, computed crc = {computed}) "
                f"at position {self.position}"
            )

    def __repr__(self) -> str:
        return (
            f"RecordBatchView(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size={self.size}, position={self.position})"
        )


def iter_batches(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[RecordBatchView]:
    """Yield a view of each complete batch in ``buf[start:end]``, stopping at a partial tail.

    Only the framing (size field, minimum size) is checked here; callers that need integrity call
    :meth:`RecordBatchView.validate`. A header whose size field is below the minimum stops the
    iteration too, since nothing after it can be located.
    """
    limit = len(buf) if end is None else end
    pos = start
    while pos + LOG_OVERHEAD <= limit:
        (length,) = _I32.unpack_from(buf, pos + 8)
        size = length + LOG_OVERHEAD
        if size < BATCH_OVERHEAD or pos + size > limit:
            return
        yield RecordBatchView(buf, pos)
        pos += size


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Rewrite the base offset in place; the CRC does not cover it."""
    _I64.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Rewrite the partition leader epoch in place; the CRC does not cover it."""
    _I32.pack_into(buf, position + 12, epoch)


def write_crc(buf: bytearray | memoryview, position: int) -> None:
    """Recompute and store the CRC of the batch at ``position`` after a header change."""
    view = RecordBatchView(buf, position)
    _U32.pack_into(buf, position + 17, view.compute_crc())


def set_max_timestamp_log_append(buf: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Mark a batch LogAppendTime with ``timestamp_ms`` as its max timestamp, as the broker does.

    These fields are covered by the CRC, so it is recomputed (one C call over the batch).
    """
    (attributes,) = _I16.unpack_from(buf, position + 21)
    _I16.pack_into(buf, position + 21, attributes | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, position + 35, timestamp_ms)
    write_crc(buf, position)


__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_OVERHEAD",
    "HEADER",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "Compression",
    "RecordBatchView",
    "TimestampType",
    "iter_batches",
    "set_base_offset",
    "set_max_timestamp_log_append",
    "set_partition_leader_epoch",
    "write_crc",
]
