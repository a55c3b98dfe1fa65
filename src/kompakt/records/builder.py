"""Building v2 batches: for tests, tools, control markers, backup restore and the cleaner's rebuilds.

Producers build batches in the clients; the broker only rewrites offsets in place. This builder is
the slow, obviously-correct path; the cleaner's hot path re-encodes records natively and only uses
:func:`encode_header` here for the 61-byte header and CRC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kompakt.lazy_import import LazyModule
from kompakt.records.batch import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    CRC_START,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    TimestampType,
)
from kompakt.records.compression import Compression, compress
from kompakt.records.record import Header
from kompakt.records.varint import encode_varint

if TYPE_CHECKING:
    import crc32c
else:  # loaded on the first checksum (see kompakt.records.batch)
    crc32c = LazyModule("kompakt.records.checksum", globals(), "crc32c")


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to put in a new batch. ``offset_delta`` defaults to its position in the batch."""

    key: bytes | None
    value: bytes | None
    timestamp: int = -1
    headers: tuple[Header, ...] = ()
    offset_delta: int | None = None


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def encode_record(record: SimpleRecord, offset_delta: int, base_timestamp: int) -> bytes:
    """Encode one record (with its length prefix) relative to ``base_timestamp``."""
    parts = [
        b"\x00",
        encode_varint(record.timestamp - base_timestamp),
        encode_varint(offset_delta),
        _bytes_field(record.key),
        _bytes_field(record.value),
        encode_varint(len(record.headers)),
    ]
    for hkey, hvalue in record.headers:
        parts.append(_bytes_field(hkey.encode("utf-8")))
        parts.append(_bytes_field(hvalue))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def attributes_for(
    compression: Compression,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    """The int16 attribute bits of a batch."""
    attributes = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    if has_delete_horizon:
        attributes |= ATTR_DELETE_HORIZON
    return attributes


def encode_header(
    *,
    base_offset: int,
    records_section_size: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytearray:
    """A 61-byte header with a zero CRC; call :func:`finish_crc` once the records follow it."""
    header = bytearray(BATCH_OVERHEAD)
    HEADER.pack_into(
        header,
        0,
        base_offset,
        BATCH_OVERHEAD - LOG_OVERHEAD + records_section_size,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    return header


def finish_crc(batch: bytearray) -> bytearray:
    """Store the CRC-32C of ``batch[21:]`` at bytes 17..21."""
    crc = crc32c.crc32c(memoryview(batch)[CRC_START:])
    batch[17:21] = crc.to_bytes(4, "big")
    return batch


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
    max_timestamp: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Build one complete v2 batch.

    ``last_offset_delta`` defaults to the highest record offset delta; pass a larger one to model
    a batch whose trailing records were compacted away. With ``delete_horizon_ms`` the base
    timestamp holds the horizon and attribute bit 6 is set (KIP-534); record timestamps stay
    absolute because their deltas are computed against it. With no records the batch is an empty
    header, which needs an explicit ``last_offset_delta``.
    """
    deltas = [r.offset_delta if r.offset_delta is not None else i for i, r in enumerate(records)]
    if deltas != sorted(deltas) or len(set(deltas)) != len(deltas):
        raise ValueError("record offset deltas must be strictly increasing")
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif records:
        base_timestamp = records[0].timestamp
    else:
        base_timestamp = -1
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=-1)
    if last_offset_delta is None:
        if not records:
            raise ValueError("an empty batch needs an explicit last_offset_delta")
        last_offset_delta = deltas[-1]
    body = b"".join(encode_record(r, d, base_timestamp) for r, d in zip(records, deltas, strict=True))
    if compression != Compression.NONE and records:
        body = compress(compression, body, compression_level)
    elif not records:
        compression = Compression.NONE
    attributes = attributes_for(
        compression, timestamp_type, is_transactional, is_control, delete_horizon_ms is not None
    )
    header = encode_header(
        base_offset=base_offset,
        records_section_size=len(body),
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )
    return bytes(finish_crc(header + body))
