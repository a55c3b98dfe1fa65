"""Batches as a Fetch returns them, made into backup batches; backup batches made into Produce batches.

The backup's data path never decodes a record into Python objects. A Fetch answer is scanned
natively (batch headers, CRC-32C, then the records of the batches kept, for their offsets, key and
value lengths and timestamps), and each batch is stored as it came whenever the backup format
allows, which is nearly always. What changes a batch, and how (:func:`ingest`):

* control batches and the batches of aborted transactions are left out, as a ``read_committed``
  consumer leaves them out: the Fetch answer lists the aborted transactions, and a batch of a
  producer with an aborted transaction open at that offset is dropped until that producer's abort
  marker (Kafka's consumer does exactly this);
* the producer id, epoch and sequence become -1, the transactional bit is cleared and the
  partition leader epoch becomes -1: a backup holds committed data only and restores it under new
  producer ids, so a stored id could only collide with a producer of the target cluster (only the
  header and its CRC change);
* a tombstone batch of a compacted topic carries a delete horizon at least ``consumed +
  delete.retention.ms``: the source's own horizon when it is later, else that one (the records'
  timestamp deltas move with the base timestamp, natively: :mod:`kompakt.records.rebuild`);
* a batch larger than ``batch_max_bytes`` of records is cut, and the records outside the range
  being copied (below the resume position, at or past the snapshot's end) are trimmed, both at the
  original offsets.

:func:`for_produce` is the restore's side: a stored batch becomes a Produce batch (base offset 0,
contiguous offset deltas, CreateTime, no delete horizon, the restore's producer id and sequence).
A batch that already is one (a producer's batch from a topic never compacted) goes out with a new
header and CRC; any other is rebuilt natively, with the original-offset headers when asked. A
batch the backup compressed (:data:`BACKUP_CODEC_EPOCH`) is first given back as the source had it,
uncompressed (:func:`original`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from kompakt.backup.errors import BackupError, CorruptBackupError
from kompakt.errors import KompaktError
from kompakt.lazy_import import LazyModule
from kompakt.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    CRC_START,
    HEADER,
)
from kompakt.records.builder import encode_header, finish_crc
from kompakt.records.compression import Compression, compress, decompress
from kompakt.records.control import ControlType, parse_control_key

if TYPE_CHECKING:
    import cramjam
    import numpy as np
    import numpy.typing as npt

    from kompakt.records import rebuild, scan

    I64Array = npt.NDArray[np.int64]
else:
    cramjam = LazyModule("cramjam", globals(), "cramjam")
    np = LazyModule("numpy", globals(), "np")
    scan = LazyModule("kompakt.records.scan", globals(), "scan")
    rebuild = LazyModule("kompakt.records.rebuild", globals(), "rebuild")

HEADER_ORIGINAL_OFFSET: Final = 1
""":data:`kompakt.records.rebuild.HEADER_ORIGINAL_OFFSET`, without loading numba to name it."""
HEADER_OSO: Final = 2
""":data:`kompakt.records.rebuild.HEADER_OSO`."""
RECORD_OVERHEAD: Final = 24
"""What a record weighs for ``batch_max_bytes`` besides its key and value (the old builder's rule)."""
_NO_PRODUCER: Final = (-1).to_bytes(8, "big", signed=True) + (-1).to_bytes(2, "big", signed=True)
_NO_EPOCH: Final = (-1).to_bytes(4, "big", signed=True)
BACKUP_CODEC_EPOCH: Final = -2
"""The producer epoch of a stored batch whose records section the backup compressed (the source's
batch was not compressed). Every other stored batch has -1 there, as it has no producer id; a
restore gives a batch so marked back uncompressed, as the source had it (:func:`original`)."""
_BACKUP_CODEC_EPOCH: Final = BACKUP_CODEC_EPOCH.to_bytes(2, "big", signed=True)
_NO_PRODUCER_EPOCH: Final = (-1).to_bytes(2, "big", signed=True)


@dataclass
class StoredBatch:
    """One batch ready for a backup segment, and what the manifest counts of it.

    The header (61 bytes, rewritten) and the records section are kept apart: the section is
    usually a view of the Fetch answer, written to the segment without a copy."""

    header: bytearray
    body: bytes | bytearray | memoryview
    base_offset: int
    last_offset: int
    records: int
    tombstones: int
    min_timestamp: int
    max_timestamp: int
    key_value_bytes: int
    offsets: I64Array
    """The original offset of each record, ascending."""

    @property
    def compressed(self) -> bool:
        return bool(HEADER.unpack_from(self.header, 0)[5] & ATTR_COMPRESSION_MASK)

    @property
    def data(self) -> bytes:
        """The whole batch (a copy)."""
        return bytes(self.header) + bytes(self.body)

    def recompressed(self, codec: Compression, level: int | None) -> StoredBatch:
        """This (uncompressed) batch with its records section compressed by ``codec``, marked as
        compressed by the backup (:data:`BACKUP_CODEC_EPOCH`), so a restore can give the source's
        batch back."""
        section = compress(codec, memoryview(self.body), level)
        header = bytearray(self.header)
        attrs = int.from_bytes(header[21:23], "big")
        header[21:23] = ((attrs & ~ATTR_COMPRESSION_MASK) | int(codec)).to_bytes(2, "big")
        header[8:12] = (BATCH_OVERHEAD - 12 + len(section)).to_bytes(4, "big", signed=True)
        header[51:53] = _BACKUP_CODEC_EPOCH
        _crc(header, section)
        return replace(self, header=header, body=section)


@dataclass
class Chunk:
    """What one Fetch answer adds to a partition."""

    batches: list[StoredBatch] = field(default_factory=list)
    fetch_end: int = -1
    """The offset after the last whole batch of the answer (where the next Fetch starts), or -1."""
    reached_target: bool = False


class _Aborted:
    """A ``read_committed`` consumer's view of one Fetch answer (Kafka's ``CompletedFetch``):
    aborted transactions become active at their first offset, end at their producer's abort
    marker."""

    def __init__(self, aborted: Sequence[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])  # (producer id, first offset)
        self._active: set[int] = set()

    def skip(self, attributes: int, producer_id: int, last_offset: int, marker: int | None) -> bool:
        """Whether the batch is left out; ``marker`` is a control batch's type."""
        if producer_id >= 0:
            while self._pending and self._pending[0][1] <= last_offset:
                self._active.add(self._pending.pop(0)[0])
        if attributes & ATTR_CONTROL:
            if marker == ControlType.ABORT:
                self._active.discard(producer_id)
            return True
        return bool(attributes & ATTR_TRANSACTIONAL) and producer_id in self._active


def _marker(data: memoryview) -> int | None:
    """The type of a control batch's marker (its first record's key), or None when it has none."""
    from kompakt.records.batch import RecordBatchView
    from kompakt.records.record import decode_records

    records = decode_records(RecordBatchView(data))
    if not records or records[0].key is None:
        return None
    try:
        return int(parse_control_key(records[0].key))
    except KompaktError:
        return None


def _scan_kept(
    arr: npt.NDArray[np.uint8], table: scan.BatchTable, kept: list[int], where: str
) -> tuple[scan.RecordTable, npt.NDArray[np.uint8]]:
    """The records of the kept batches in one native scan, and the buffer their positions point
    into: the answer itself when every kept batch is uncompressed, else the decompressed payloads
    (after the answer, when both kinds are there)."""
    compression = table.attributes & ATTR_COMPRESSION_MASK
    starts = table.position[kept] + BATCH_OVERHEAD
    ends = table.position[kept] + table.size[kept]
    packed = [n for n, b in enumerate(kept) if compression[b] != 0]
    buffer = arr
    if packed:
        shift = 0 if len(packed) == len(kept) else len(arr)
        parts: list[bytes] = [] if shift == 0 else [bytes(arr.data)]
        cursor = shift
        for n in packed:
            b = kept[n]
            try:
                part = decompress(int(compression[b]), arr[int(starts[n]) : int(ends[n])].data)
            except KompaktError as exc:
                raise BackupError(f"{where}: batch at offset {int(table.base_offset[b])}: {exc}") from None
            parts.append(part)
            starts[n], ends[n] = cursor, cursor + len(part)
            cursor += len(part)
        buffer = np.frombuffer(b"".join(parts), dtype=np.uint8)
    try:
        records = scan.scan_records(
            buffer,
            starts,
            ends,
            table.base_offset[kept],
            table.base_timestamp[kept],
            table.records_count[kept],
        )
    except KompaktError as exc:
        raise BackupError(f"{where}: {exc}") from None
    return records, buffer


def fetch_end(data: bytes | memoryview) -> int:
    """The offset after the last whole batch of a Fetch answer's records, or -1 without one."""
    if not len(data):
        return -1
    table = scan.scan_batches(np.frombuffer(data, dtype=np.uint8))
    n = len(table)
    return int(table.base_offset[n - 1] + table.last_offset_delta[n - 1] + 1) if n else -1


def ingest(
    data: bytes | memoryview,
    *,
    next_offset: int,
    target: int | None,
    aborted: Sequence[tuple[int, int]],
    retention_ms: int | None,
    consumed_ms: int,
    batch_max_bytes: int,
    where: str,
) -> Chunk:
    """The batches of one Fetch answer's records that the backup stores (see the module docstring).

    ``next_offset`` is the first offset not yet stored, ``target`` the snapshot's end (None in
    continuous mode), ``aborted`` the answer's ``(producer id, first offset)`` pairs and
    ``retention_ms`` the topic's ``delete.retention.ms`` when it is compacted. A batch whose CRC does
    not match is an error naming the offset: nothing of it or after it is stored.
    """
    chunk = Chunk()
    if not len(data):
        return chunk
    arr = np.frombuffer(data, dtype=np.uint8)
    table = _checked_table(arr, where)
    n = len(table)
    if n == 0:
        return chunk
    chunk.fetch_end = int(table.base_offset[n - 1] + table.last_offset_delta[n - 1] + 1)
    kept, chunk.reached_target = _select(arr, table, next_offset, target, aborted)
    if target is not None and chunk.fetch_end >= target:
        chunk.reached_target = True
    if kept:
        stamp_min = None if retention_ms is None else consumed_ms + retention_ms
        _store(chunk, arr, table, kept, (next_offset, target), stamp_min, batch_max_bytes, where)
    return chunk


def _checked_table(arr: npt.NDArray[np.uint8], where: str) -> scan.BatchTable:
    """The whole batches of an answer (a torn last one is left for the next Fetch), CRC-checked."""
    table = scan.scan_batches(arr)
    if table.stop_reason in (scan.StopReason.BAD_SIZE, scan.StopReason.BAD_MAGIC):
        raise BackupError(
            f"{where}: the answer holds bytes that are not a v2 record batch at position "
            f"{table.stop_position} (only RecordBatch v2, Kafka 0.11 and later, is read)"
        )
    crc_ok = scan.batch_crcs_ok(arr, table)
    if not crc_ok.all():
        bad = int(np.flatnonzero(~crc_ok)[0])
        raise BackupError(
            f"{where}: the batch at offset {int(table.base_offset[bad])} fails its CRC-32C check "
            "(the source sent corrupt data); nothing from it on was stored"
        )
    return table


def _select(
    arr: npt.NDArray[np.uint8],
    table: scan.BatchTable,
    next_offset: int,
    target: int | None,
    aborted: Sequence[tuple[int, int]],
) -> tuple[list[int], bool]:
    """The batches a ``read_committed`` reader keeps that hold records not yet stored, and
    whether the answer reached ``target``."""
    attributes = table.attributes
    producer_ids = table.producer_id
    last_offsets = table.base_offset + table.last_offset_delta
    filt = _Aborted(aborted)
    kept: list[int] = []
    for i in range(len(table)):
        if target is not None and int(table.base_offset[i]) >= target:
            return kept, True
        attrs = int(attributes[i])
        marker = None
        if attrs & ATTR_CONTROL:
            pos, size = int(table.position[i]), int(table.size[i])
            marker = _marker(memoryview(arr[pos : pos + size].data))
        if filt.skip(attrs, int(producer_ids[i]), int(last_offsets[i]), marker):
            continue
        if int(last_offsets[i]) >= next_offset and int(table.records_count[i]) > 0:
            kept.append(i)
    return kept, False


def _store(
    chunk: Chunk,
    arr: npt.NDArray[np.uint8],
    table: scan.BatchTable,
    kept: list[int],
    bounds: tuple[int, int | None],
    stamp_min: int | None,
    batch_max_bytes: int,
    where: str,
) -> None:
    """Add the kept batches to ``chunk``: as they are, or rebuilt where they must change."""
    rt, buffer = _scan_kept(arr, table, kept, where)
    count = len(rt)
    offsets = rt.offset[:count]
    key_len = rt.key_len[:count]
    value_len = rt.value_len[:count]
    tomb = (key_len >= 0) & (value_len < 0)
    weight = RECORD_OVERHEAD + np.maximum(key_len, 0) + np.maximum(value_len, 0)
    low, target = bounds
    in_range = (offsets >= low) & (offsets < (target if target is not None else 2**63 - 1))
    first = rt.batch_first
    for n_kept, b in enumerate(kept):
        lo, hi = int(first[n_kept]), int(first[n_kept + 1])
        keep = in_range[lo:hi]
        if not keep.any():
            continue
        attrs = int(table.attributes[b])
        horizon = int(table.base_timestamp[b]) if attrs & ATTR_DELETE_HORIZON else None
        tombs = int(tomb[lo:hi][keep].sum())
        stamp = stamp_min is not None and tombs > 0 and (horizon is None or horizon < stamp_min)
        too_big = hi - lo > 1 and int(weight[lo:hi].sum()) > batch_max_bytes
        if not (stamp or too_big or not keep.all()):
            stamps = rt.timestamp[lo:hi]
            if attrs & ATTR_TIMESTAMP_TYPE:
                stamps = np.full(hi - lo, int(table.max_timestamp[b]), dtype=np.int64)
            pos, size = int(table.position[b]), int(table.size[b])
            chunk.batches.append(
                StoredBatch(
                    *_normalized(arr[pos : pos + size]),
                    int(table.base_offset[b]),
                    int(table.base_offset[b] + table.last_offset_delta[b]),
                    hi - lo,
                    tombs,
                    int(stamps.min()),
                    int(stamps.max()),
                    int(weight[lo:hi].sum()) - RECORD_OVERHEAD * (hi - lo),
                    offsets[lo:hi].copy(),
                )
            )
            continue
        new_horizon = max(stamp_min, horizon or 0) if stamp and stamp_min is not None else horizon
        for group in _groups(np.arange(lo, hi)[keep], weight, batch_max_bytes):
            chunk.batches.append(
                _rebuilt(buffer, rt, group, attrs, int(table.max_timestamp[b]), new_horizon, tomb, weight)
            )


def _groups(rows: I64Array, weight: I64Array, limit: int) -> list[I64Array]:
    """``rows`` cut where the running weight reaches ``limit`` (each group holds at least one)."""
    groups: list[I64Array] = []
    start = 0
    total = 0
    for n, row in enumerate(rows.tolist()):
        if n > start and total >= limit:
            groups.append(rows[start:n])
            start, total = n, 0
        total += int(weight[row])
    groups.append(rows[start:])
    return groups


def _normalized(batch: npt.NDArray[np.uint8]) -> tuple[bytearray, memoryview]:
    """``batch`` without producer id, epoch, sequence, transactional bit and leader epoch: a new
    header, and a view of its records section (not copied)."""
    view = memoryview(batch.data)
    out = bytearray(view[:BATCH_OVERHEAD])
    body = view[BATCH_OVERHEAD:]
    out[12:16] = _NO_EPOCH
    attrs = int.from_bytes(out[21:23], "big")
    if out[43:53] != _NO_PRODUCER or out[53:57] != _NO_EPOCH or attrs & ATTR_TRANSACTIONAL:
        out[43:53] = _NO_PRODUCER
        out[53:57] = _NO_EPOCH
        out[21:23] = (attrs & ~ATTR_TRANSACTIONAL).to_bytes(2, "big")
        _crc(out, body)
    return out, body


def _crc(header: bytearray, body: bytes | bytearray | memoryview) -> None:
    """Store the CRC-32C of ``header[21:] + body`` in ``header``."""
    import crc32c

    crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(header)[CRC_START:]))
    header[17:21] = crc.to_bytes(4, "big")


def _rebuilt(
    buffer: npt.NDArray[np.uint8],
    rt: scan.RecordTable,
    rows: I64Array,
    attrs: int,
    max_timestamp: int,
    horizon: int | None,
    tomb: npt.NDArray[np.bool_],
    weight: I64Array,
) -> StoredBatch:
    """Rows of one scanned batch as a new uncompressed batch at their original offsets."""
    offsets = rt.offset[rows]
    log_append = bool(attrs & ATTR_TIMESTAMP_TYPE)
    stamps = np.full(len(rows), max_timestamp, dtype=np.int64) if log_append else rt.timestamp[rows]
    base_offset = int(offsets[0])
    base_ts = horizon if horizon is not None else int(stamps[0])
    section = rebuild.rebuild_records(
        buffer,
        rt.position[rows],
        rt.length[rows],
        rt.value_start[rows] + np.maximum(rt.value_len[rows], 0),
        offsets - base_offset,
        stamps - base_ts,
    )
    new_attrs = (attrs & ATTR_TIMESTAMP_TYPE) | (ATTR_DELETE_HORIZON if horizon is not None else 0)
    header = encode_header(
        base_offset=base_offset,
        records_section_size=len(section),
        partition_leader_epoch=-1,
        attributes=new_attrs,
        last_offset_delta=int(offsets[-1]) - base_offset,
        base_timestamp=base_ts,
        max_timestamp=max_timestamp if log_append else int(stamps.max()),
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=len(rows),
    )
    _crc(header, section)
    return StoredBatch(
        header,
        section,
        base_offset,
        int(offsets[-1]),
        len(rows),
        int(tomb[rows].sum()),
        int(stamps.min()),
        int(stamps.max()),
        int(weight[rows].sum()) - RECORD_OVERHEAD * len(rows),
        offsets.copy(),
    )


def recompressed(batch: bytes | bytearray, codec: Compression, level: int | None) -> bytearray:
    """An uncompressed batch with its records section compressed by ``codec`` (header and CRC
    follow; the records themselves are not touched)."""
    out = bytearray(batch[:BATCH_OVERHEAD])
    section = compress(codec, memoryview(batch)[BATCH_OVERHEAD:], level)
    attrs = int.from_bytes(out[21:23], "big")
    out[21:23] = ((attrs & ~ATTR_COMPRESSION_MASK) | int(codec)).to_bytes(2, "big")
    out[8:12] = (BATCH_OVERHEAD - 12 + len(section)).to_bytes(4, "big", signed=True)
    out += section
    return finish_crc(out)


@dataclass
class ProduceBatch:
    """A stored batch made into a Produce batch for one partition."""

    data: bytearray
    records: int
    originals: I64Array | None
    """The original offset of each record, in order; None when they are ``base .. base + n - 1``."""
    base_original: int


def for_produce(
    batch: memoryview | bytearray,
    *,
    producer_id: int,
    producer_epoch: int,
    sequence: int,
    headers: int = 0,
    partition: int = 0,
    compression: Compression | None = None,
    level: int | None = None,
) -> ProduceBatch:
    """One stored batch as a Produce batch (see the module docstring).

    ``headers`` is a mask of :data:`kompakt.records.rebuild.HEADER_ORIGINAL_OFFSET` and
    ``HEADER_OSO`` (with ``partition``, the source partition OSO's header names); ``compression``
    recompresses a batch stored with another codec. A ``bytearray`` is the caller's to give away
    (:func:`original`'s): a batch that needs a new header only gets it in place, not in a copy.
    """
    fields = HEADER.unpack_from(batch, 0)
    base_offset, attrs, last_delta, count = int(fields[0]), int(fields[5]), int(fields[6]), int(fields[12])
    codec = attrs & ATTR_COMPRESSION_MASK
    contiguous = count == last_delta + 1
    plain = not attrs & (ATTR_TIMESTAMP_TYPE | ATTR_DELETE_HORIZON | ATTR_CONTROL)
    want = codec if compression is None else int(compression)
    if contiguous and plain and not headers:
        out = batch if isinstance(batch, bytearray) else bytearray(batch)
        out[0:8] = bytes(8)
        out[12:16] = _NO_EPOCH
        out[21:23] = (attrs & ~ATTR_TRANSACTIONAL).to_bytes(2, "big")
        out[43:51] = producer_id.to_bytes(8, "big", signed=True)
        out[51:53] = producer_epoch.to_bytes(2, "big", signed=True)
        out[53:57] = sequence.to_bytes(4, "big", signed=True)
        if want != codec:
            plain_batch = _decompressed(out) if codec else out
            out = recompressed(plain_batch, Compression(want), level) if want else plain_batch
        return ProduceBatch(finish_crc(out), count, None, base_offset)
    section = memoryview(batch)[BATCH_OVERHEAD:]
    payload = section if codec == 0 else decompress(codec, section)
    buffer = np.frombuffer(payload, dtype=np.uint8)
    one = np.array([0], dtype=np.int64)
    rt = scan.scan_records(
        buffer,
        one,
        np.array([len(buffer)], dtype=np.int64),
        np.array([base_offset], dtype=np.int64),
        np.array([int(fields[7])], dtype=np.int64),
        np.array([count], dtype=np.int64),
    )
    n = len(rt)
    offsets = rt.offset[:n].copy()
    stamps = np.full(n, int(fields[8]), dtype=np.int64) if attrs & ATTR_TIMESTAMP_TYPE else rt.timestamp[:n]
    base_ts = int(stamps[0]) if n else 0
    records = rebuild.rebuild_records(
        buffer,
        rt.position[:n],
        rt.length[:n],
        rt.value_start[:n] + np.maximum(rt.value_len[:n], 0),
        np.arange(n, dtype=np.int64),
        stamps - base_ts,
        original_offset=offsets,
        original_timestamp=stamps,
        headers=headers,
        partition=partition,
    )
    header = encode_header(
        base_offset=0,
        records_section_size=len(records),
        partition_leader_epoch=-1,
        attributes=0,
        last_offset_delta=n - 1,
        base_timestamp=base_ts,
        max_timestamp=int(stamps.max()) if n else -1,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=sequence,
        records_count=n,
    )
    header += records
    out = header if not want else recompressed(header, Compression(want), level)
    return ProduceBatch(finish_crc(out), n, offsets, base_offset)


def _decompressed(batch: bytearray) -> bytearray:
    """A compressed batch with its records section decompressed (header fields follow)."""
    codec = int.from_bytes(batch[21:23], "big") & ATTR_COMPRESSION_MASK
    section = decompress(codec, memoryview(batch)[BATCH_OVERHEAD:])
    out = bytearray(batch[:BATCH_OVERHEAD])
    out[21:23] = (int.from_bytes(out[21:23], "big") & ~ATTR_COMPRESSION_MASK).to_bytes(2, "big")
    out[8:12] = (BATCH_OVERHEAD - 12 + len(section)).to_bytes(4, "big", signed=True)
    out += section
    return out


def backup_compressed(batch: bytes | bytearray | memoryview) -> bool:
    """Whether a stored batch's codec is the backup's (its source batch was uncompressed)."""
    return bool(batch[22] & ATTR_COMPRESSION_MASK) and batch[51:53] == _BACKUP_CODEC_EPOCH


ORIGINAL_MAX_BYTES: Final = 256 * 1024 * 1024
"""A zstd frame that says it holds more is decompressed without trusting its size up front."""


def _zstd_content_size(frame: memoryview) -> int | None:
    """The decompressed size a zstd frame's header states, or None when it states none (RFC 8878
    3.1.1.1: the descriptor byte says where the field is and how wide)."""
    if len(frame) < 6 or bytes(frame[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    descriptor = frame[4]
    fcs_flag, single = descriptor >> 6, (descriptor >> 5) & 1
    width = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if width == 0:
        return None
    start = 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
    if len(frame) < start + width:
        return None
    value = int.from_bytes(frame[start : start + width], "little")
    return value + 256 if width == 2 else value


def original(batch: bytes | bytearray | memoryview) -> bytearray:
    """A batch the backup compressed, as the source had it: the records section decompressed,
    the codec bits and the producer epoch cleared (every other field was already as stored), a
    new CRC. For a batch the backup did not change beyond its header, these are the source's
    bytes from the attributes on. zstd and lz4 decompress without the GIL, so a few threads can
    do this beside the thread that sends."""
    view = memoryview(batch)
    codec = view[22] & ATTR_COMPRESSION_MASK
    packed = view[BATCH_OVERHEAD:]
    size = _zstd_content_size(packed) if codec == Compression.ZSTD else None
    out = bytearray(BATCH_OVERHEAD + size) if size is not None and size <= ORIGINAL_MAX_BYTES else None
    if out is not None:
        # Straight into the batch: no copy of the records section after it is decompressed (the
        # backup's zstd is one frame that states its size; anything else takes the long way).
        try:
            if cramjam.zstd.decompress_into(packed, memoryview(out)[BATCH_OVERHEAD:]) != size:
                out = None
        except cramjam.DecompressionError:
            out = None
    if out is None:
        section = decompress(codec, packed)
        out = bytearray(BATCH_OVERHEAD + len(section))
        out[BATCH_OVERHEAD:] = section
    out[:BATCH_OVERHEAD] = view[:BATCH_OVERHEAD]
    out[22] &= ~ATTR_COMPRESSION_MASK & 0xFF
    out[8:12] = (len(out) - 12).to_bytes(4, "big", signed=True)
    out[51:53] = _NO_PRODUCER_EPOCH
    return finish_crc(out)


def crc_ok(batch: bytes | bytearray | memoryview) -> bool:
    """Whether a batch's stored CRC-32C matches its bytes."""
    import crc32c

    return bool(crc32c.crc32c(memoryview(batch)[CRC_START:]) == int.from_bytes(bytes(batch[17:21]), "big"))


def corrupt(where: str, message: str) -> CorruptBackupError:
    return CorruptBackupError(f"{where}: {message}")
