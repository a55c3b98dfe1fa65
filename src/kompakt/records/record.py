"""Records inside a v2 batch: decoding for display, tools, tests and backup.

Record layout (uncompressed form; every integer a zigzag varint unless noted)::

    length          bytes after this field
    attributes      int8, always 0
    timestamp_delta varlong: timestamp = base_timestamp + delta
    offset_delta    offset = base_offset + delta
    key_length      -1 = null key
    key
    value_length    -1 = null value: a tombstone
    value
    header_count
    headers         repeated: key_length, key (UTF-8), value_length (-1 = null), value

For LogAppendTime batches readers report the batch's max timestamp for every record. This module
is the readable reference implementation; the hot paths (cleaning, produce validation) use the
native kernels, and tests compare the two.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.errors import CorruptRecordError
from kompakt.records.batch import RecordBatchView, TimestampType
from kompakt.records.compression import Compression, decompress
from kompakt.records.varint import decode_varint

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()

    @property
    def is_tombstone(self) -> bool:
        """A tombstone has a key and a null value; an empty value is a normal value."""
        return self.key is not None and self.value is None


def records_payload(batch: RecordBatchView) -> bytes | memoryview:
    """The uncompressed records section of ``batch`` (decompressed when needed)."""
    section = batch.records_section
    if batch.compression == Compression.NONE:
        return section
    return decompress(batch.compression, section)


def _read_bytes(buf: bytes | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos, end)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"field of {length} bytes at position {pos} runs past its record")
    return bytes(buf[pos : pos + length]), pos + length


def decode_records(batch: RecordBatchView) -> list[Record]:
    """Decode every record of ``batch``; raise CorruptRecordError on malformed contents."""
    payload = records_payload(batch)
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    max_timestamp = batch.max_timestamp
    records: list[Record] = []
    pos = 0
    end_all = len(payload)
    for _ in range(batch.records_count):
        length, pos = decode_varint(payload, pos, end_all)
        end = pos + length
        if length < 0 or end > end_all:
            raise CorruptRecordError(
                f"record of {length} bytes in batch at offset {base_offset} runs past the batch"
            )
        pos += 1  # attributes
        ts_delta, pos = decode_varint(payload, pos, end)
        offset_delta, pos = decode_varint(payload, pos, end)
        key, pos = _read_bytes(payload, pos, end)
        value, pos = _read_bytes(payload, pos, end)
        header_count, pos = decode_varint(payload, pos, end)
        if header_count < 0:
            raise CorruptRecordError(f"negative header count in batch at offset {base_offset}")
        headers: list[Header] = []
        for _h in range(header_count):
            hkey, pos = _read_bytes(payload, pos, end)
            hvalue, pos = _read_bytes(payload, pos, end)
            if hkey is None:
                raise CorruptRecordError(f"null header key in batch at offset {base_offset}")
            headers.append((hkey.decode("utf-8", errors="replace"), hvalue))
        if pos != end:
            raise CorruptRecordError(f"record length mismatch in batch at offset {base_offset}")
        timestamp = max_timestamp if log_append else base_timestamp + ts_delta
        records.append(Record(base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    if pos != end_all:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end_all - pos} bytes after its {batch.records_count} records"
        )
    return records
