"""Backup segment files: Kafka RecordBatch v2 batches at their original offsets.

A backup segment is exactly what a Kafka ``.log`` segment holds: v2 batches back to back, so
``kompakt log dump`` (and Kafka's own dump tool) read it. What a batch keeps:

* each record's original offset (``base_offset + offset_delta``; a compacted source leaves holes,
  which v2 expresses with offset deltas, just as Kafka's cleaner output does),
* its timestamp and the timestamp type,
* key and value with null distinct from empty (a tombstone is a key with a null value), headers
  with null header values.

Two ways of filling one (the rules are in ``docs/backup-format.md``):

* :class:`BatchSegment`, the fast path: the source's batches as a Fetch returned them
  (:mod:`kompakt.backup.batches`), compressed with the backup's codec where the producer did not
  compress them, for as long as that pays in the segment, hashed as the file grows;
* :class:`SegmentBuilder`: batches built from records a Kafka consumer returned (a source that
  needs TLS or SASL), which hides batch attributes, so a tombstone batch's delete horizon is
  ``consumed_ms + delete.retention.ms``, the same bound the fast path keeps at least.

:func:`verify_segment` and :class:`StreamCheck` check a file against its manifest entry, whole or
read in pieces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kompakt.backup.batches import BACKUP_CODEC_EPOCH, StoredBatch
from kompakt.backup.errors import CorruptBackupError
from kompakt.backup.storage import StagedObject
from kompakt.errors import KompaktError
from kompakt.log.files import segment_file_name
from kompakt.records.batch import BATCH_OVERHEAD as BATCH_HEADER
from kompakt.records.batch import HEADER, RecordBatchView, TimestampType, iter_batches
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
    mark: bool = False,
) -> bytes:
    """One v2 batch of consumed records at their own offsets (gaps become offset-delta holes).

    Byte-for-byte what :func:`kompakt.records.builder.build_batch` builds (a test checks it),
    with the record encoding inlined and small varints looked up, since this runs per record.
    ``mark``: a compressed batch is marked as compressed by the backup
    (:data:`~kompakt.backup.batches.BACKUP_CODEC_EPOCH`), so a restore sends it uncompressed.
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
        producer_epoch=BACKUP_CODEC_EPOCH if mark and compression != Compression.NONE else -1,
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

    data: bytes | list[bytes | bytearray | memoryview] | StagedObject
    """The file, whole, in pieces (written one after the other, never joined), or already written
    to a temporary file that the storage's ``put`` moves into place."""
    first_offset: int
    last_offset: int
    records: int
    tombstones: int
    min_timestamp: int
    max_timestamp: int
    sha256: str
    """Of the whole file (a :class:`BatchSegment` computes it while the file grows)."""

    @property
    def size(self) -> int:
        if isinstance(self.data, StagedObject):
            return self.data.size
        return len(self.data) if isinstance(self.data, bytes) else sum(len(p) for p in self.data)

    def discard(self) -> None:
        """Drop a staged file that will not be put (its write or its put failed)."""
        if isinstance(self.data, StagedObject):
            self.data.discard()


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
            mark=True,
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
        data = b"".join(self._batches)
        built = BuiltSegment(
            data,
            self.first_offset,
            self.last_offset,
            self.records,
            self.tombstones,
            self.min_timestamp,
            self.max_timestamp,
            sha256_hex(data),
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
    section compressed with the backup's codec (the records themselves are not touched; the batch
    is marked so, :data:`~kompakt.backup.batches.BACKUP_CODEC_EPOCH`, for the restore), until the
    first :data:`COMPRESSION_SAMPLE_BYTES` of this segment's uncompressed batches show that it does
    not pay (they shrank by less than 10 %: random, encrypted or already compressed values); the
    rest of that segment is then stored uncompressed, which saves the CPU and keeps the rate of
    the fetch. The sha256 is computed as the file grows, so the commit does not read it again.

    With ``stage`` (the storage can write a file as it grows: :meth:`FilesystemStorage.stage`,
    called with the segment's first offset), each batch goes to the file as it is added, instead
    of being held until the segment is full: the writes overlap the reads, and the answers of the
    Fetch are freed at once.
    """

    compression: Compression
    compression_level: int | None
    stage: Callable[[int], StagedObject] | None = None

    _staged: StagedObject | None = None

    _parts: list[bytes | bytearray | memoryview] = field(default_factory=list)
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
        if self.compression != Compression.NONE and self._compressing is not False and not batch.compressed:
            packed = batch.recompressed(self.compression, self.compression_level)
            if self._compressing is None:
                self._sample_raw += len(batch.body)
                self._sample_packed += len(packed.body)
                if self._sample_raw >= COMPRESSION_SAMPLE_BYTES:
                    self._compressing = self._sample_packed <= COMPRESSION_PAYS * self._sample_raw
            batch = packed
        if self.stage is not None:
            if self._staged is None:
                self._staged = self.stage(batch.base_offset)
            self._staged.write(batch.header, batch.body)
        else:
            self._parts += (batch.header, batch.body)
        for part in (batch.header, batch.body):
            self._size += len(part)
            self._hash.update(part)
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
        return self.first_offset < 0

    @property
    def record_count(self) -> int:
        return self.records

    def discard(self) -> None:
        """Drop what the open segment staged (a write failed: nothing of it is committed)."""
        if self._staged is not None:
            self._staged.discard()
            self._staged = None

    def finish(self) -> BuiltSegment:
        """The file, and a fresh segment for the next one (compression is decided again)."""
        built = BuiltSegment(
            self._staged if self._staged is not None else self._parts,
            self.first_offset,
            self.last_offset,
            self.records,
            self.tombstones,
            self.min_timestamp,
            self.max_timestamp,
            self._hash.hexdigest(),
        )
        self._parts = []
        self._staged = None
        self._size = 0
        self._hash = hashlib.sha256()
        self._sample_raw = self._sample_packed = 0
        self._compressing = None
        self.first_offset = self.last_offset = -1
        self.records = self.tombstones = 0
        self.min_timestamp = self.max_timestamp = -1
        return built


def verify_segment(
    data: bytes, *, name: str, sha256: str | None, first_offset: int, last_offset: int, records: int
) -> list[RecordBatchView]:
    """Check a segment file against its manifest entry; return its batches.

    The sha256 catches any change to the file; the batch framing and CRC-32C checks then name
    what is wrong (a truncated tail, a corrupt batch), and the offsets and record count must match
    the manifest so a file swapped for another one is caught too.
    """
    if sha256 is not None:  # None: checked by an earlier read of the same run
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


class StreamCheck:
    """:func:`verify_segment` over a file read in pieces (the check before a restore writes).

    Each piece is hashed and walked once, the CRC-32C of a batch carried from one piece to the
    next, so a file of any size is checked in a reused buffer, without holding it in memory: the
    whole backup is read this way before anything is written, and then again to be restored.
    When the sha256 does not match, that is the error reported, whatever else is wrong."""

    def __init__(self, *, name: str, sha256: str, first_offset: int, last_offset: int, records: int) -> None:
        import crc32c

        self._crc32c = crc32c.crc32c
        self.name = name
        self.sha256 = sha256
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.records = records
        self._hash = hashlib.sha256()
        self._header = bytearray()
        self._body_left = -1
        """Bytes of the current batch's records still to come; -1 while its header is read."""
        self._crc = 0
        self._want_crc = 0
        self._position = 0
        self._batch_position = 0
        self._batch_size = 0
        self._previous = first_offset - 1
        self._first: int | None = None
        self._last: int | None = None
        self._count = 0
        self._error: str | None = None

    def feed(self, piece: bytes | memoryview) -> None:
        view = memoryview(piece)
        self._hash.update(view)
        i, n = 0, len(view)
        while i < n and self._error is None:
            if self._body_left < 0:
                take = min(BATCH_HEADER - len(self._header), n - i)
                self._header += view[i : i + take]
                i += take
                if len(self._header) == BATCH_HEADER:
                    self._start_batch()
            else:
                take = min(self._body_left, n - i)
                self._crc = self._crc32c(view[i : i + take], self._crc)
                self._body_left -= take
                i += take
            if self._body_left == 0:
                self._end_batch()
        self._position += n

    def _start_batch(self) -> None:
        fields = HEADER.unpack_from(self._header, 0)
        base, length, magic, crc = int(fields[0]), int(fields[1]), int(fields[3]), int(fields[4])
        last_delta, count = int(fields[6]), int(fields[12])
        where = f"position {self._batch_position}"
        size = length + 12
        if magic != 2:
            self._error = f"unsupported magic {magic} at {where}"
        elif size < BATCH_HEADER:
            self._error = f"batch size {size} at {where} is below the minimum {BATCH_HEADER}"
        elif last_delta < 0 or count < 0:
            self._error = f"negative last offset delta or count at {where}"
        elif base <= self._previous:
            self._error = f"batch at offset {base} is out of order"
        if self._error is not None:
            return
        self._first = base if self._first is None else self._first
        self._last = self._previous = base + last_delta
        self._count += count
        self._want_crc = crc
        self._crc = self._crc32c(memoryview(self._header)[21:])
        self._batch_size = size
        self._body_left = size - BATCH_HEADER

    def _end_batch(self) -> None:
        if self._crc != self._want_crc:
            self._error = (
                f"Record is corrupt (stored crc = {self._want_crc}, computed crc = {self._crc}) "
                f"at position {self._batch_position}"
            )
        self._batch_position += self._batch_size
        self._header.clear()
        self._body_left = -1

    def finish(self) -> None:
        """Raise :class:`CorruptBackupError` for anything wrong with the file fed so far."""
        actual = self._hash.hexdigest()
        if actual != self.sha256:
            raise CorruptBackupError(
                f"{self.name}: checksum mismatch (sha256 {actual[:16]}..., manifest {self.sha256[:16]}...)"
            )
        if self._error is not None:
            raise CorruptBackupError(f"{self.name}: {self._error}")
        if self._header or self._body_left > 0:
            raise CorruptBackupError(
                f"{self.name}: truncated or trailing bytes at position "
                f"{self._batch_position} of {self._position}"
            )
        if self._first is not None and (self._first != self.first_offset or self._last != self.last_offset):
            raise CorruptBackupError(
                f"{self.name}: holds offsets {self._first}..{self._last}, "
                f"manifest says {self.first_offset}..{self.last_offset}"
            )
        if self._count != self.records:
            raise CorruptBackupError(
                f"{self.name}: holds {self._count} records, manifest says {self.records}"
            )
