"""From chunks of whole v2 batches to runs of record columns, and from a row to a full record.

Python runs once per run of batches (a chunk holds up to 16 MiB of them), never once per record:
batch headers, record fields and key digests come from the cleaner's native kernels
(:func:`~kompakt.records.scan.scan_batches`, :func:`~kompakt.records.scan.scan_records`,
:func:`~kompakt.cleaner.kernels.hashing.hash_keys`), compressed batches are decompressed one run at a time
(:func:`~kompakt.cleaner.dedupe.decompressed_spans`). Only a row that is shown or exported is
turned into Python objects, and only its headers need a Python parse.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.dedupe import decompressed_spans
from kompakt.cleaner.kernels.hashing import hash_keys
from kompakt.errors import CorruptRecordError
from kompakt.records.batch import ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE
from kompakt.records.native import I64Array, U8Array, U64Array, Workspace
from kompakt.records.scan import BatchTable, RecordTable, Spans, scan_records
from kompakt.records.varint import decode_varint

#: Bytes of whole batches read at a time (the cleaner's chunk size).
CHUNK_BYTES: Final = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecordRun:
    """The records of consecutive batches of one kind, as columns (valid until the next run).

    ``buf`` holds the bytes the positions point into: the chunk itself for uncompressed batches,
    the decompressed payloads otherwise. ``batch`` maps a record to its batch in the chunk's
    :class:`~kompakt.cleaner.kernels.BatchTable`.
    """

    buf: U8Array
    records: RecordTable
    hi: U64Array
    lo: U64Array
    batch: I64Array
    timestamp: I64Array

    def __len__(self) -> int:
        return len(self.records)

    @property
    def offset(self) -> I64Array:
        return self.records.offset

    @property
    def key_len(self) -> I64Array:
        return self.records.key_len

    @property
    def value_len(self) -> I64Array:
        return self.records.value_len


@dataclass(frozen=True, slots=True)
class TableRecord:
    """One record as the table shows it (``value is None`` for a tombstone)."""

    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


def _runs(kinds: I64Array) -> list[tuple[int, int, int]]:
    if len(kinds) == 0:
        return []
    cuts = np.flatnonzero(np.diff(kinds)) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    ends = np.concatenate((cuts, [len(kinds)])).tolist()
    return [(int(kinds[s]), s, e) for s, e in zip(starts, ends, strict=True)]


#: Records parsed, hashed and applied together: their columns and key bytes stay in the cache
#: from one step to the next (a whole 16 MiB chunk at a time would go through memory three times).
RUN_RECORDS: Final = 4096


def _groups(counts: I64Array, first: int, end: int, limit: int) -> Iterator[tuple[int, int]]:
    """Split batches ``first:end`` into consecutive groups of about ``limit`` records."""
    if end - first <= 1:
        yield first, end
        return
    cum = np.cumsum(np.maximum(counts[first:end], 0))
    start = first
    while start < end:
        done = int(cum[start - first - 1]) if start > first else 0
        stop = first + int(np.searchsorted(cum, done + limit, side="right"))
        stop = min(max(stop, start + 1), end)
        yield start, stop
        start = stop


def span_runs(
    buf: U8Array, table: BatchTable, keep: np.ndarray, *, max_records: int = RUN_RECORDS
) -> Iterator[tuple[U8Array, Spans, I64Array]]:
    """The records sections of the batches of ``table`` where ``keep`` is true, in offset order,
    in runs of about ``max_records`` records of one kind (a run never splits a batch):
    ``(buffer, spans, batch indexes)``, the buffer being ``buf`` for uncompressed batches and the
    decompressed payloads otherwise.

    ``keep`` must be false for control batches (their one record is a marker, not data).
    """
    attrs = table.attributes
    if bool(np.any(keep & ((attrs & ATTR_CONTROL) != 0))):
        raise ValueError("control batches hold no table records")
    compressed = (attrs & ATTR_COMPRESSION_MASK) != 0
    # kind per batch: -1 skipped, 0 plain, 1 compressed; runs of one kind are scanned together
    kinds = np.where(keep, compressed.astype(np.int64), -1)
    counts = table.records_count
    for kind, run_first, run_end in _runs(kinds):
        if kind < 0:
            continue
        for first, end in _groups(counts, run_first, run_end, max_records):
            which = np.arange(first, end, dtype=np.int64)
            if kind == 0:
                yield buf, Spans.of_batches(table, which), which
            else:
                payload, spans = decompressed_spans(buf, table, first, end)
                yield payload, spans, which


def record_runs(
    buf: U8Array,
    table: BatchTable,
    keep: np.ndarray,
    workspace: Workspace | None = None,
    *,
    max_records: int = RUN_RECORDS,
) -> Iterator[RecordRun]:
    """:func:`span_runs` with every record's columns, key digest and timestamp (LogAppendTime
    batches stamp all their records with the batch's max timestamp)."""
    log_append = (table.attributes & ATTR_TIMESTAMP_TYPE) != 0
    for run_buf, spans, which in span_runs(buf, table, keep, max_records=max_records):
        records = scan_records(run_buf, *spans.arrays(), workspace=workspace)
        n = len(records)
        batch = which[records.batch]
        hi, lo = hash_keys(run_buf, records.key_start, records.key_len, workspace)
        timestamp = records.timestamp
        if bool(log_append[which].any()):
            timestamp = np.where(log_append[batch], table.max_timestamp[batch], timestamp)
        yield RecordRun(run_buf, records, hi[:n], lo[:n], batch, timestamp)


def record_at(buf: U8Array, table: BatchTable, offset: int, partition: int) -> TableRecord | None:
    """The record at ``offset`` in these batches (None if no data record has it): the lookup path,
    which parses the batch but hashes nothing."""
    data = (table.attributes & ATTR_CONTROL) == 0
    i = int(np.searchsorted(table.last_offset, offset, side="left"))
    if i >= len(table) or not data[i] or int(table.base_offset[i]) > offset:
        return None
    which = np.array([i], dtype=np.int64)
    if int(table.attributes[i]) & ATTR_COMPRESSION_MASK:
        run_buf, spans = decompressed_spans(buf, table, i, i + 1)
    else:
        run_buf, spans = buf, Spans.of_batches(table, which)
    records = scan_records(run_buf, *spans.arrays())
    row = int(np.searchsorted(records.offset, offset, side="left"))
    if row >= len(records) or int(records.offset[row]) != offset or int(records.key_len[row]) < 0:
        return None
    timestamp = records.timestamp
    if int(table.attributes[i]) & ATTR_TIMESTAMP_TYPE:
        timestamp = np.full(len(records), int(table.max_timestamp[i]), dtype=np.int64)
    none = np.empty(0, dtype=np.uint64)
    run = RecordRun(run_buf, records, none, none, np.zeros(len(records), dtype=np.int64), timestamp)
    return row_record(run, row, partition)


def _bytes_at(buf: U8Array, start: int, length: int) -> bytes | None:
    if length < 0:
        return None
    return buf[start : start + length].tobytes()


def _headers(buf: U8Array, start: int, end: int) -> tuple[tuple[str, bytes | None], ...]:
    """Parse a record's headers section ``buf[start:end]`` (count, then key/value pairs)."""
    raw = buf[start:end].tobytes()
    count, pos = decode_varint(raw, 0, len(raw))
    if count < 0:
        raise CorruptRecordError(f"negative header count ({count})")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = decode_varint(raw, pos, len(raw))
        if klen < 0 or pos + klen > len(raw):
            raise CorruptRecordError("header key runs past its record")
        hkey = raw[pos : pos + klen].decode("utf-8", errors="replace")
        pos += klen
        vlen, pos = decode_varint(raw, pos, len(raw))
        if vlen > len(raw) - pos:
            raise CorruptRecordError("header value runs past its record")
        hval = None if vlen < 0 else raw[pos : pos + vlen]
        pos += max(vlen, 0)
        out.append((hkey, hval))
    return tuple(out)


def has_headers(run: RecordRun, rows: I64Array) -> npt.NDArray[np.bool_]:
    """Per row: does the record carry headers (its header count byte is not zero)?"""
    rec = run.records
    value_end = rec.value_start[rows] + np.maximum(rec.value_len[rows], 0)
    flags: npt.NDArray[np.bool_] = run.buf[value_end] != 0
    return flags


def row_record(run: RecordRun, row: int, partition: int, *, with_headers: bool = True) -> TableRecord:
    """The full record of one row of ``run`` (the key must not be null)."""
    rec = run.records
    key = _bytes_at(run.buf, int(rec.key_start[row]), int(rec.key_len[row]))
    if key is None:
        raise ValueError("a record without a key has no place in a table")
    vstart, vlen = int(rec.value_start[row]), int(rec.value_len[row])
    value = _bytes_at(run.buf, vstart, vlen)
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if with_headers:
        hstart = vstart + max(vlen, 0)
        hend = int(rec.position[row] + rec.length[row])
        if hstart < hend and run.buf[hstart] != 0:
            headers = _headers(run.buf, hstart, hend)
    return TableRecord(partition, int(rec.offset[row]), int(run.timestamp[row]), key, value, headers)


def key_prefix_mask(run: RecordRun, prefix: bytes) -> np.ndarray:
    """Per record: does its key start with ``prefix``? (numpy over the run, no per-record Python)."""
    key_len = run.key_len
    if not prefix:
        return key_len >= 0
    n = len(prefix)
    ok = key_len >= n
    rows = np.flatnonzero(ok)
    if len(rows) == 0:
        return ok
    idx = run.records.key_start[rows][:, None] + np.arange(n, dtype=np.int64)[None, :]
    match = (run.buf[idx] == np.frombuffer(prefix, dtype=np.uint8)[None, :]).all(axis=1)
    out = np.zeros(len(key_len), dtype=np.bool_)
    out[rows[match]] = True
    return out
