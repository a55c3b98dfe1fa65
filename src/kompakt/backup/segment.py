"""Backup segment files: Kafka RecordBatch v2 batches at their original offsets.

A backup segment is exactly what a Kafka ``.log`` segment holds: v2 batches back to back, so
``kompakt log dump`` (and Kafka's own dump tool) read it. What a batch keeps:

* each record's original offset (``base_offset + offset_delta``; a compacted source leaves holes,
  which v2 expresses with offset deltas, just as Kafka's cleaner output does),
* its timestamp and the timestamp type (batches are cut where the type changes, and for
  LogAppendTime where the append time changes, since such a batch has one time for all records),
* key and value with null distinct from empty (a tombstone is a key with a null value), headers
  with null header values.

Records come from a Kafka consumer, which hides batch attributes, so a batch's delete horizon
(KIP-534) cannot be read through the protocol. A batch holding tombstones of a compacted topic is
therefore stamped with ``consumed_ms + delete.retention.ms`` (see ``docs/backup-format.md``):
never earlier than the source's own horizon for a tombstone the source had already stamped, so
an exact restore keeps each tombstone at least as long as the source would have.

The batch codec is the backup's ``compression`` (zstd, lz4 or none), applied per batch the way a
Kafka producer compresses, so files stay valid Kafka segments.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kompakt.backup.batches import StoredBatch, recompressed
from kompakt.backup.errors import CorruptBackupError
from kompakt.errors import KompaktError
from kompakt.log.files import segment_file_name
from kompakt.records.batch import RecordBatchView, TimestampType, iter_batches
from kompakt.records.builder import attributes_for, encode_header, finish_crc
from kompakt.records.compression import Compression, compress
from kompakt.records.record import Header
from kompakt.records.varint import encode_varint

CODECS = {"none": Compression.NONE, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
PendingRecord = tuple[int, int, bytes | None, bytes | None, Sequence[Header]]
"""``(offset, timestamp, key, value, headers)`` as consumed."""

# Zigzag varints of small numbers, precomputed: record encoding is the backup's hot loop (six
# varints per record), and lengths, deltas and counts are nearly always small.
_SMALL = 1 << 15
_VARINTS = [encode_varint(n) for n in range(-_SMALL, _SMALL)]


def _varint(value: int) -> bytes:
    if -_SMALL <= value < _SMALL:
        return _VARINTS[value + _SMALL]
    return encode_varint(value)


def _field(data: bytes | None) -> bytes:
    return _VARINTS[_SMALL - 1] if data is None else _varint(len(data)) + data


def encode_batch(
    records: Sequence[PendingRecord],
    *,
    compression: Compression,
    compression_level: int | None,
    timestamp_type: TimestampType,
    delete_horizon_ms: int | None,
) -> bytes:
    """One v2 batch of consumed records at their own offsets (gaps become offset-delta holes).

    Byte-for-byte what :func:`kompakt.records.builder.build_batch` builds (a test checks it),
    with the record encoding inlined and small varints looked up, since this runs per record.
    """
    base_offset = records[0][0]
    base_timestamp = delete_horizon_ms if delete_horizon_ms is not None else records[0][1]
    parts: list[bytes] = []
    append = parts.append
    max_timestamp = -1
    for offset, timestamp, key, value, headers in records:
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        body = (
            b"\x00"
            + _varint(timestamp - base_timestamp)
            + _varint(offset - base_offset)
            + _field(key)
            + _field(value)
        )
        if headers:
            body += _varint(len(headers)) + b"".join(
                _field(hkey.encode("utf-8")) + _field(hvalue) for hkey, hvalue in headers
            )
        else:
            body += b"\x00"
        append(_varint(len(body)))
        append(body)
    section = b"".join(parts)
    if compression != Compression.NONE:
        section = compress(compression, section, compression_level)
    attributes = attributes_for(compression, timestamp_type, False, False, delete_horizon_ms is not None)
    header = encode_header(
        base_offset=base_offset,
        records_section_size=len(section),
        partition_leader_epoch=-1,
        attributes=attributes,
        last_offset_delta=records[-1][0] - base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=len(records),
    )
    header += section
    return bytes(finish_crc(header))


def segment_path(topic: str, partition: int, base_offset: int) -> str:
    """``topics/<topic>-<partition>/<20-digit base offset>.log``: Kafka's names, so tools open it."""
    return f"topics/{topic}-{partition}/{segment_file_name(base_offset, 'log')}"


def sha256_hex(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class BuiltSegment:
    """A finished segment file's bytes and what the manifest records about it."""

    data: bytes
    first_offset: int
    last_offset: int
    records: int
    tombstones: int
    min_timestamp: int
    max_timestamp: int
    sha256: str | None = None
    """Computed while the file grew, when it was (else at the commit)."""


@dataclass
class SegmentBuilder:
    """Collects one partition's consumed records into batches, then into a segment file."""

    compression: Compression
    compression_level: int | None
    batch_max_bytes: int
    delete_retention_ms: int | None
    """Set for compacted topics: tombstone batches get ``consumed_ms + delete_retention_ms``."""

    _batches: list[bytes] = field(default_factory=list)
    _size: int = 0
    _pending: list[PendingRecord] = field(default_factory=list)
    _pending_bytes: int = 0
    _pending_type: TimestampType = TimestampType.CREATE_TIME
    _pending_tombstones: int = 0
    _pending_consumed_ms: int = 0
    first_offset: int = -1
    last_offset: int = -1
    records: int = 0
    tombstones: int = 0
    min_timestamp: int = -1
    max_timestamp: int = -1

    def add(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: TimestampType,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        consumed_ms: int,
    ) -> None:
        pending = self._pending
        if pending and (
            timestamp_type != self._pending_type
            or (timestamp_type == TimestampType.LOG_APPEND_TIME and timestamp != pending[0][1])
            or self._pending_bytes >= self.batch_max_bytes
        ):
            self._close_batch()
            pending = self._pending
        if not pending:
            self._pending_type = timestamp_type
        pending.append((offset, timestamp, key, value, headers))
        self._pending_bytes += 24 + (len(key) if key else 0) + (len(value) if value else 0)
        if value is None and key is not None:
            self._pending_tombstones += 1
            self._pending_consumed_ms = max(self._pending_consumed_ms, consumed_ms)
        if self.first_offset < 0:
            self.first_offset = offset
        self.last_offset = offset
        if self.min_timestamp < 0 or timestamp < self.min_timestamp:
            self.min_timestamp = timestamp
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp

    def _close_batch(self) -> None:
        pending = self._pending
        if not pending:
            return
        horizon = None
        if self._pending_tombstones and self.delete_retention_ms is not None:
            horizon = self._pending_consumed_ms + self.delete_retention_ms
        batch = encode_batch(
            pending,
            compression=self.compression,
            compression_level=self.compression_level,
            timestamp_type=self._pending_type,
            delete_horizon_ms=horizon,
        )
        self._batches.append(batch)
        self._size += len(batch)
        self.records += len(pending)
        self.tombstones += self._pending_tombstones
        self._pending = []
        self._pending_bytes = 0
        self._pending_tombstones = 0
        self._pending_consumed_ms = 0

    @property
    def size(self) -> int:
        """Bytes of closed batches plus an estimate of the open one."""
        return self._size + self._pending_bytes

    @property
    def empty(self) -> bool:
        return not self._batches and not self._pending

    @property
    def record_count(self) -> int:
        """Records in the file so far, the open batch included."""
        return self.records + len(self._pending)

    def finish(self) -> BuiltSegment:
        """Close the open batch and hand out the file; the builder is reset for the next file."""
        self._close_batch()
        built = BuiltSegment(
            b"".join(self._batches),
            self.first_offset,
            self.last_offset,
            self.records,
            self.tombstones,
            self.min_timestamp,
            self.max_timestamp,
        )
        self._batches = []
        self._size = 0
        self.first_offset = self.last_offset = -1
        self.records = self.tombstones = 0
        self.min_timestamp = self.max_timestamp = -1
        return built


#: How much of a segment's uncompressed batches is compressed before deciding whether it pays.
COMPRESSION_SAMPLE_BYTES = 1024 * 1024
#: Compression pays when the sample shrinks to at most this fraction of its size.
COMPRESSION_PAYS = 0.9


@dataclass
class BatchSegment:
    """A segment file assembled from whole batches as a Fetch returned them (the backup's fast path).

    A batch the producer compressed is stored as it is. An uncompressed one gets its records
    section compressed with the backup's codec (the records themselves are not touched), until the
    first :data:`COMPRESSION_SAMPLE_BYTES` of this segment's uncompressed batches show that it does
    not pay (they shrank by less than 10 %: random, encrypted or already compressed values); the
    rest of that segment is then stored uncompressed, which saves the CPU and keeps the rate of
    the fetch. The sha256 is computed as the file grows, so the commit does not read it again.
    """

    compression: Compression
    compression_level: int | None

    _parts: list[bytes | bytearray] = field(default_factory=list)
    _size: int = 0
    _hash: Any = field(default_factory=hashlib.sha256)
    _sample_raw: int = 0
    _sample_packed: int = 0
    _compressing: bool | None = None
    first_offset: int = -1
    last_offset: int = -1
    records: int = 0
    tombstones: int = 0
    min_timestamp: int = -1
    max_timestamp: int = -1

    def add(self, batch: StoredBatch) -> None:
        data = batch.data
        if self.compression != Compression.NONE and self._compressing is not False and not batch.compressed:
            packed = recompressed(data, self.compression, self.compression_level)
            if self._compressing is None:
                self._sample_raw += len(data)
                self._sample_packed += len(packed)
                if self._sample_raw >= COMPRESSION_SAMPLE_BYTES:
                    self._compressing = self._sample_packed <= COMPRESSION_PAYS * self._sample_raw
            data = packed
        self._parts.append(data)
        self._size += len(data)
        self._hash.update(data)
        if self.first_offset < 0:
            self.first_offset = batch.base_offset
        self.last_offset = batch.last_offset
        self.records += batch.records
        self.tombstones += batch.tombstones
        if self.min_timestamp < 0 or batch.min_timestamp < self.min_timestamp:
            self.min_timestamp = batch.min_timestamp
        self.max_timestamp = max(self.max_timestamp, batch.max_timestamp)

    @property
    def size(self) -> int:
        return self._size

    @property
    def empty(self) -> bool:
        return not self._parts

    @property
    def record_count(self) -> int:
        return self.records

    def finish(self) -> BuiltSegment:
        """The file, and a fresh segment for the next one (compression is decided again)."""
        built = BuiltSegment(
            b"".join(self._parts),
            self.first_offset,
            self.last_offset,
            self.records,
            self.tombstones,
            self.min_timestamp,
            self.max_timestamp,
            self._hash.hexdigest(),
        )
        self._parts = []
        self._size = 0
        self._hash = hashlib.sha256()
        self._sample_raw = self._sample_packed = 0
        self._compressing = None
        self.first_offset = self.last_offset = -1
        self.records = self.tombstones = 0
        self.min_timestamp = self.max_timestamp = -1
        return built


def verify_segment(
    data: bytes, *, name: str, sha256: str, first_offset: int, last_offset: int, records: int
) -> list[RecordBatchView]:
    """Check a segment file against its manifest entry; return its batches.

    The sha256 catches any change to the file; the batch framing and CRC-32C checks then name
    what is wrong (a truncated tail, a corrupt batch), and the offsets and record count must match
    the manifest so a file swapped for another one is caught too.
    """
    actual = sha256_hex(data)
    if actual != sha256:
        raise CorruptBackupError(
            f"{name}: checksum mismatch (sha256 {actual[:16]}..., manifest {sha256[:16]}...)"
        )
    batches = list(iter_batches(data))
    end = batches[-1].position + batches[-1].size if batches else 0
    if end != len(data):
        raise CorruptBackupError(f"{name}: truncated or trailing bytes at position {end} of {len(data)}")
    count = 0
    previous = first_offset - 1
    for batch in batches:
        try:
            batch.validate()
        except KompaktError as exc:
            raise CorruptBackupError(f"{name}: {exc}") from None
        if batch.base_offset <= previous:
            raise CorruptBackupError(f"{name}: batch at offset {batch.base_offset} is out of order")
        previous = batch.last_offset
        count += batch.records_count
    if batches and (batches[0].base_offset != first_offset or batches[-1].last_offset != last_offset):
        raise CorruptBackupError(
            f"{name}: holds offsets {batches[0].base_offset}..{batches[-1].last_offset}, "
            f"manifest says {first_offset}..{last_offset}"
        )
    if count != records:
        raise CorruptBackupError(f"{name}: holds {count} records, manifest says {records}")
    return batches
