"""Exporting a table (the latest record per key) to Parquet, JSON lines or CSV.

Parquet and CSV go through Apache Arrow (``pyarrow``): a run of records becomes an Arrow record
batch without a Python object per record (keys and values are gathered natively into Arrow's
offsets-and-data layout, UTF-8 is validated by Arrow's cast). JSON lines is a text format written
row by row. DuckDB, pandas, Polars and Spark read the Parquet file directly.

Columns: ``partition`` (int32), ``offset`` (int64), ``timestamp`` (ms, UTC), ``key``, ``value``
(null for a tombstone, only present with ``include_tombstones``), ``headers`` (a list of
key/value structs; a JSON text in CSV). Keys and values are text in ``encoding``: ``utf8``
(bytes that are not valid UTF-8 stop the export, naming the record), ``base64``, ``hex``, or
``binary`` (raw bytes, Parquet only).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import numpy as np

from kompakt.errors import OperatorError
from kompakt.table.kernels import gather
from kompakt.table.partition import PartitionTable
from kompakt.table.records import RecordRun, TableRecord, has_headers, row_record

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS: Final = ("parquet", "jsonl", "csv")
ENCODINGS: Final = ("utf8", "base64", "hex", "binary")
ROW_GROUP_ROWS: Final = 128 * 1024


class ExportError(OperatorError):
    """An export that cannot be written as asked (bad format, bytes that are not UTF-8, ...)."""


@dataclass(frozen=True, slots=True)
class ExportStats:
    rows: int
    tombstones: int
    key_value_bytes: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        mb_s = self.key_value_bytes / self.seconds / 1e6 if self.seconds > 0 else None
        return {
            "rows": self.rows,
            "tombstones": self.tombstones,
            "key_value_bytes": self.key_value_bytes,
            "seconds": round(self.seconds, 3),
            "mb_per_s": None if mb_s is None else round(mb_s, 1),
        }


def _pa() -> Any:
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - a dependency of kompakt
        raise ExportError("the export needs pyarrow (pip install pyarrow)") from None
    return pyarrow


def _header_type() -> pa.DataType:
    pa_ = _pa()
    return pa_.list_(pa_.struct([("key", pa_.string()), ("value", pa_.large_binary())]))


def schema(encoding: str, fmt: str) -> pa.Schema:
    pa_ = _pa()
    text = pa_.large_binary() if encoding == "binary" else pa_.large_string()
    headers = pa_.string() if fmt == "csv" else _header_type()
    return pa_.schema(
        [
            ("partition", pa_.int32()),
            ("offset", pa_.int64()),
            ("timestamp", pa_.timestamp("ms", tz="UTC")),
            ("key", text),
            ("value", text),
            ("headers", headers),
        ]
    )


def _binary(starts: np.ndarray, lengths: np.ndarray, buf: np.ndarray) -> pa.Array:
    pa_ = _pa()
    offsets, data = gather(buf, np.ascontiguousarray(starts), np.ascontiguousarray(lengths))
    n = len(starts)
    valid = lengths >= 0
    validity = None if bool(valid.all()) else pa_.py_buffer(np.packbits(valid, bitorder="little"))
    return pa_.LargeBinaryArray.from_buffers(
        pa_.large_binary(), n, [validity, pa_.py_buffer(offsets), pa_.py_buffer(data)]
    )


def _encode(column: pa.Array, encoding: str, offsets: np.ndarray, what: str) -> pa.Array:
    pa_ = _pa()
    if encoding == "binary":
        return column
    if encoding == "utf8":
        try:
            return column.cast(pa_.large_string())
        except pa_.ArrowInvalid:
            for i, item in enumerate(column.to_pylist()):
                if item is not None:
                    try:
                        item.decode("utf-8")
                    except UnicodeDecodeError:
                        raise ExportError(
                            f"the {what} of the record at offset {int(offsets[i])} is not UTF-8; "
                            "export with --encoding base64 or hex"
                        ) from None
            raise
    encode = (lambda b: base64.b64encode(b).decode("ascii")) if encoding == "base64" else (lambda b: b.hex())
    return pa_.array([None if b is None else encode(b) for b in column.to_pylist()], type=pa_.large_string())


def _headers_column(records_headers: Sequence[tuple[tuple[str, bytes | None], ...]], fmt: str) -> pa.Array:
    pa_ = _pa()
    if fmt == "csv":
        return pa_.array(
            [
                json.dumps(
                    [{"key": k, "value": None if v is None else base64.b64encode(v).decode()} for k, v in h]
                )
                if h
                else ""
                for h in records_headers
            ],
            type=pa_.string(),
        )
    return pa_.array([[{"key": k, "value": v} for k, v in h] for h in records_headers], type=_header_type())


def run_batch(run: RecordRun, rows: np.ndarray, partition: int, encoding: str, fmt: str) -> pa.RecordBatch:
    """The Arrow batch of ``rows`` of ``run`` (natively, except for records carrying headers)."""
    pa_ = _pa()
    rec = run.records
    n = len(rows)
    offsets = rec.offset[rows]
    key = _binary(rec.key_start[rows], rec.key_len[rows], run.buf)
    value = _binary(rec.value_start[rows], rec.value_len[rows], run.buf)
    with_headers = has_headers(run, rows)
    if bool(with_headers.any()):
        headers_list: list[tuple[tuple[str, bytes | None], ...]] = [()] * n
        for i in np.flatnonzero(with_headers).tolist():
            headers_list[i] = row_record(run, int(rows[i]), partition).headers
        headers = _headers_column(headers_list, fmt)
    else:
        headers = _headers_column([()] * n, fmt)
    return pa_.record_batch(
        [
            pa_.array(np.full(n, partition, dtype=np.int32)),
            pa_.array(offsets),
            pa_.array(run.timestamp[rows].astype("datetime64[ms]")).cast(pa_.timestamp("ms", tz="UTC")),
            _encode(key, encoding, offsets, "key"),
            _encode(value, encoding, offsets, "value"),
            headers,
        ],
        schema=schema(encoding, fmt),
    )


def records_batch(records: Sequence[TableRecord], encoding: str, fmt: str) -> pa.RecordBatch:
    """The Arrow batch of records that are already Python objects (a scan over HTTP)."""
    pa_ = _pa()
    offsets = np.array([r.offset for r in records], dtype=np.int64)
    key = pa_.array([r.key for r in records], type=pa_.large_binary())
    value = pa_.array([r.value for r in records], type=pa_.large_binary())
    return pa_.record_batch(
        [
            pa_.array([r.partition for r in records], type=pa_.int32()),
            pa_.array(offsets),
            pa_.array(np.array([r.timestamp for r in records], dtype="datetime64[ms]")).cast(
                pa_.timestamp("ms", tz="UTC")
            ),
            _encode(key, encoding, offsets, "key"),
            _encode(value, encoding, offsets, "value"),
            _headers_column([r.headers for r in records], fmt),
        ],
        schema=schema(encoding, fmt),
    )


class _Sink:
    """Writes Arrow batches in one format; JSON lines are written row by row."""

    def __init__(self, out: Path | IO[bytes], fmt: str, encoding: str) -> None:
        if fmt not in FORMATS:
            raise ExportError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
        if encoding not in ENCODINGS:
            raise ExportError(f"unknown encoding {encoding!r} (expected one of {', '.join(ENCODINGS)})")
        if encoding == "binary" and fmt != "parquet":
            raise ExportError("--encoding binary is for Parquet only (JSON and CSV are text)")
        self.fmt = fmt
        self.encoding = encoding
        self._schema = schema(encoding, fmt)
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._file: IO[bytes] = open(out, "wb") if isinstance(out, Path) else out  # noqa: SIM115
        self._owns = isinstance(out, Path)
        self._writer: Any = None
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(self._file, self._schema, compression="zstd")
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            self._writer = pcsv.CSVWriter(self._file, self._schema)

    def write(self, batch: pa.RecordBatch) -> None:
        if self.fmt == "jsonl":
            self._write_jsonl(batch)
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        pa_ = _pa()
        table = pa_.Table.from_batches(self._pending, schema=self._schema)
        self._writer.write_table(table)
        self._pending = []
        self._pending_rows = 0

    def _write_jsonl(self, batch: pa.RecordBatch) -> None:
        columns = batch.to_pydict()
        lines = []
        for i in range(batch.num_rows):
            ts = columns["timestamp"][i]
            headers = columns["headers"][i] or []
            lines.append(
                json.dumps(
                    {
                        "partition": columns["partition"][i],
                        "offset": columns["offset"][i],
                        "timestamp": int(ts.timestamp() * 1000) if ts is not None else None,
                        "key": columns["key"][i],
                        "value": columns["value"][i],
                        "headers": [
                            {"key": h["key"], "value": _header_text(h["value"], self.encoding)}
                            for h in headers
                        ],
                    },
                    ensure_ascii=False,
                )
            )
        if lines:
            self._file.write(("\n".join(lines) + "\n").encode("utf-8"))

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
        if self._owns:
            self._file.close()


def _header_text(value: bytes | None, encoding: str) -> str | None:
    if value is None:
        return None
    if encoding == "hex":
        return value.hex()
    if encoding == "base64":
        return base64.b64encode(value).decode("ascii")
    return value.decode("utf-8", errors="replace")


def export_tables(
    tables: Iterable[PartitionTable],
    out: Path | IO[bytes],
    *,
    fmt: str,
    encoding: str = "utf8",
    prefix: bytes = b"",
    include_tombstones: bool = False,
    as_of_ms: int | None = None,
) -> ExportStats:
    """Write the latest record of every key of ``tables`` to ``out``, partition by partition."""
    started = time.perf_counter()
    sink = _Sink(out, fmt, encoding)
    rows = tombstones = kv_bytes = 0
    try:
        for table in sorted(tables, key=lambda t: t.partition):
            index = None
            end = None
            if as_of_ms is not None:
                index, info = table.as_of(as_of_ms)
                end = info.last_stable_offset
            for run, selected in table.scan_runs(
                prefix=prefix, include_tombstones=include_tombstones, index=index, end_offset=end
            ):
                sink.write(run_batch(run, selected, table.partition, encoding, fmt))
                rows += len(selected)
                value_len = run.records.value_len[selected]
                tombstones += int((value_len < 0).sum())
                kv_bytes += int(
                    np.maximum(value_len, 0).sum() + np.maximum(run.records.key_len[selected], 0).sum()
                )
    finally:
        sink.close()
    return ExportStats(rows, tombstones, kv_bytes, time.perf_counter() - started)


def export_records(
    records: Iterator[TableRecord],
    out: Path | IO[bytes],
    *,
    fmt: str,
    encoding: str = "utf8",
    batch_rows: int = 4096,
) -> ExportStats:
    """:func:`export_tables` for records that arrive as objects (pages of a remote scan)."""
    started = time.perf_counter()
    sink = _Sink(out, fmt, encoding)
    rows = tombstones = kv_bytes = 0
    batch: list[TableRecord] = []
    try:
        for record in records:
            batch.append(record)
            rows += 1
            tombstones += record.value is None
            kv_bytes += len(record.key) + len(record.value or b"")
            if len(batch) >= batch_rows:
                sink.write(records_batch(batch, encoding, fmt))
                batch = []
        if batch:
            sink.write(records_batch(batch, encoding, fmt))
    finally:
        sink.close()
    return ExportStats(rows, tombstones, kv_bytes, time.perf_counter() - started)
