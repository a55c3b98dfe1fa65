"""The log a compaction check starts from, and what a reader of it sees.

A :class:`SourceLog` is one partition's record batches as they were written: whole v2 batches
with their offsets, producer ids, transactional flags and markers, so that the generator of legal
compactions (:mod:`kompakt.testing.compactions`) can write them into real segment files and run
the real cleaner over them. It comes from records a test produces (:meth:`SourceLog.from_records`,
:class:`LogBuilder` for transactions and multi-record batches), from a partition directory of
kompakt or Apache Kafka (:meth:`SourceLog.from_directory`: a log captured from production), or
from a live :class:`~kompakt.log.partition_log.PartitionLog` (a topic of the fixture broker).

What an application replays is a *view* of a partition (:data:`VIEWS`):

* ``read_committed`` (the default): what a ``read_committed`` consumer reads from the log start,
  data of committed transactions and of non-transactional batches, below the last stable offset;
* ``read_uncommitted``: every data record (aborted transactions' too), no markers;
* ``log``: every record as stored, transaction markers included, in offset order: what a
  coordinator's loader reads (Kafka's ``CoordinatorLoaderImpl``, kompakt's ``GroupLog.load``).

Compaction never invents a record: every record a compacted log holds is the record the log held
at that offset (same key, value, headers and timestamp; the cleaner rewrites batches but keeps
their records' absolute timestamps). So a variant's records are the source's
:class:`LogRecord` objects at the offsets that survive, decided from the variant's own files by
:func:`visible_offsets` (a native scan: the check of a million-record log reads offsets, not
Python objects). A variant that shows a record the source does not show is not a compaction of
it, and is refused (:class:`CompactionModelError`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import numpy as np

from kompakt.errors import KompaktError, OperatorError
from kompakt.inspect.log_files import list_segments
from kompakt.log.checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kompakt.log.files import parse_partition_dir_name
from kompakt.log.partition_log import PartitionLog
from kompakt.log.topic_store import TopicStore
from kompakt.records.batch import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    RecordBatchView,
    iter_batches,
)
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression
from kompakt.records.control import ControlType, build_control_batch, control_type_of
from kompakt.records.native import I64Array, U8Array
from kompakt.records.record import decode_records
from kompakt.records.varint import decode_varint

View = Literal["read_committed", "read_uncommitted", "log"]
VIEWS: Final[tuple[View, ...]] = ("read_committed", "read_uncommitted", "log")

Key = bytes | str | None
Value = bytes | str | None
Headers = Sequence[tuple[str, bytes | str | None]]

#: Where a test's records are stamped when it gives no timestamp (2023-11-14, any fixed instant).
DEFAULT_TIMESTAMP_MS: Final = 1_700_000_000_000


class SourceLogError(OperatorError):
    """The source cannot be checked: not a partition directory, a legacy format, a bad record."""


class CompactionModelError(OperatorError):
    """A variant shows what no compaction of its source can show: a cleaner or model defect."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record as a reader of the view gets it.

    ``control`` names a transaction marker (``"COMMIT"``, ``"ABORT"``) in the ``log`` view; data
    records have ``None``. ``producer_id`` is -1 outside idempotent and transactional batches.
    """

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()
    producer_id: int = -1
    transactional: bool = False
    control: str | None = None

    @property
    def is_tombstone(self) -> bool:
        return self.key is not None and self.value is None and self.control is None

    def describe(self) -> str:
        """One line for a report: the offset, then the key and value as text where they are text."""
        if self.control is not None:
            return f"offset {self.offset}: {self.control} marker of producer {self.producer_id}"
        txn = f" (transaction of producer {self.producer_id})" if self.transactional else ""
        value = "null (tombstone)" if self.value is None else show_bytes(self.value)
        return f"offset {self.offset}: key={show_bytes(self.key)} value={value}{txn}"


def show_bytes(data: bytes | None, limit: int = 60) -> str:
    """``b'...'`` as text when it is printable UTF-8, else hex; long values are cut."""
    if data is None:
        return "null"
    try:
        text: str | None = data.decode()
    except UnicodeDecodeError:
        text = None
    shown = repr(text) if text is not None and text.isprintable() else "0x" + data.hex()
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _b(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


# --------------------------------------------------------------------------------------------
# The source log


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header fields of one source batch the generator and the views need."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool
    records: int
    max_timestamp: int
    delete_horizon_ms: int | None

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


@dataclass(frozen=True, slots=True)
class SourceLog:
    """One partition's batches as written (see the module docstring).

    ``configs`` are the topic's config overrides (Kafka names); only ``delete.retention.ms``
    changes how the variants are produced (the horizons the passes stamp), not which exist.
    """

    batches: tuple[bytes, ...]
    topic: str = "topic"
    partition: int = 0
    configs: Mapping[str, str] = field(default_factory=dict)
    log_start_offset: int | None = None
    #: Where the log came from, for reports.
    origin: str = "records"

    def __post_init__(self) -> None:
        for raw in self.batches:
            view = RecordBatchView(raw)
            if view.magic != 2:
                raise SourceLogError(
                    f"batch at offset {view.base_offset} has magic {view.magic}: the check reads record "
                    "batches v2 (Kafka 0.11 and later) only"
                )
        offsets = [RecordBatchView(raw).base_offset for raw in self.batches]
        if offsets != sorted(offsets):
            raise SourceLogError("the batches are not in offset order")

    # ---- constructors ------------------------------------------------------------------------

    @classmethod
    def from_records(
        cls,
        records: Iterable[tuple[Key, Value] | tuple[Key, Value, Headers]],
        *,
        topic: str = "topic",
        batch_records: int = 1,
        timestamp_ms: int = DEFAULT_TIMESTAMP_MS,
        configs: Mapping[str, str] | None = None,
    ) -> SourceLog:
        """Records as a producer wrote them, ``batch_records`` to a batch (1: every record may be
        a cut point, the finest grain compaction has). Keys and values are bytes, str or None."""
        builder = LogBuilder(timestamp_ms=timestamp_ms)
        chunk: list[tuple[Key, Value] | tuple[Key, Value, Headers]] = []
        for record in records:
            chunk.append(record)
            if len(chunk) >= max(batch_records, 1):
                builder.append(*chunk)
                chunk = []
        if chunk:
            builder.append(*chunk)
        return builder.build(topic=topic, configs=configs)

    @classmethod
    def from_directory(cls, path: Path, *, configs: Mapping[str, str] | None = None) -> SourceLog:
        """A partition directory (``<topic>-<partition>``) of kompakt or Apache Kafka, read as it is
        on disk: a log captured from production. The log start offset is the data directory's
        ``log-start-offset-checkpoint`` entry when there is one; kompakt's stored topic configs
        are read from ``kompakt-topics.json`` beside it (``configs`` wins)."""
        path = Path(path)
        if not path.is_dir():
            raise SourceLogError(f"{path} is not a partition directory")
        try:
            topic, partition = parse_partition_dir_name(path.name)
        except KompaktError:
            raise SourceLogError(f"{path} is not named <topic>-<partition>") from None
        batches: list[bytes] = []
        for segment in list_segments(path):
            data = segment.path.read_bytes()
            position = 0
            for view in iter_batches(data):
                if view.magic != 2:
                    raise SourceLogError(
                        f"{segment.path}: batch at offset {view.base_offset} has magic {view.magic}: "
                        "the check reads record batches v2 only"
                    )
                batches.append(bytes(view.raw))
                position += view.size
            if position != len(data):
                raise SourceLogError(
                    f"{segment.path}: {len(data) - position} bytes after the last whole batch "
                    "(run kompakt log verify)"
                )
        return cls(
            tuple(batches),
            topic=topic,
            partition=partition,
            configs={**_stored_configs(path.parent, topic), **(configs or {})},
            log_start_offset=_checkpointed_start(path.parent, topic, partition),
            origin=str(path),
        )

    @classmethod
    def from_partition_log(cls, log: PartitionLog) -> SourceLog:
        """A live log's batches from its start to its end now (a topic of the fixture broker)."""
        return cls(
            tuple(bytes(view.raw) for view in log.replay_batches()),
            topic=log.topic,
            partition=log.partition,
            configs={"delete.retention.ms": str(log.config.delete_retention_ms)},
            log_start_offset=log.log_start_offset,
            origin=f"{log.topic}-{log.partition} of a running broker",
        )

    # ---- what the generator reads ---------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def headers(self) -> list[BatchHeader]:
        out = []
        for raw in self.batches:
            view = RecordBatchView(raw)
            out.append(
                BatchHeader(
                    view.base_offset,
                    view.last_offset,
                    view.producer_id,
                    view.is_transactional,
                    view.is_control,
                    view.records_count,
                    view.max_timestamp,
                    view.delete_horizon_ms,
                )
            )
        return out

    @property
    def start_offset(self) -> int:
        """The log start offset: checkpointed, else the first batch's base offset, else 0."""
        if self.log_start_offset is not None:
            return self.log_start_offset
        return RecordBatchView(self.batches[0]).base_offset if self.batches else 0

    @property
    def end_offset(self) -> int:
        return RecordBatchView(self.batches[-1]).next_offset if self.batches else self.start_offset

    def records(self) -> list[tuple[LogRecord, bool]]:
        """Every record in offset order with whether its batch is a control batch.

        Data batches are parsed by the native record scan and only the objects are made in
        Python (a million-record source decodes in seconds, not a minute); markers, and records
        with headers, go through the reference decoder.
        """
        if not self.batches:
            return []
        from kompakt.records.scan import scan_batches, scan_records
        from kompakt.table.records import span_runs

        joined = b"".join(self.batches)
        buf = np.frombuffer(bytearray(joined), dtype=np.uint8)
        table = scan_batches(buf)
        n = len(table)
        if n != len(self.batches):
            raise SourceLogError(f"{self.name}: {len(self.batches)} batches, but {n} scanned")
        attrs = table.attributes.tolist()
        pids = table.producer_id.tolist()
        max_ts = table.max_timestamp.tolist()
        per_batch: list[list[tuple[LogRecord, bool]]] = [[] for _ in range(n)]
        control = (table.attributes & ATTR_CONTROL) != 0
        for i in np.flatnonzero(control).tolist():
            view = RecordBatchView(self.batches[i])
            ctype = control_type_of(view)
            name = ctype.name if isinstance(ctype, ControlType) else str(ctype)
            txn = view.is_transactional
            per_batch[i] = [
                (
                    LogRecord(r.offset, r.key, r.value, r.timestamp, tuple(r.headers), pids[i], txn, name),
                    True,
                )
                for r in decode_records(view)
            ]
        for run_buf, spans, which in span_runs(buf, table, ~control):
            data = joined if run_buf is buf else run_buf.tobytes()
            recs = scan_records(run_buf, *spans.arrays())
            rows = zip(
                recs.offset.tolist(),
                recs.timestamp.tolist(),
                recs.key_start.tolist(),
                recs.key_len.tolist(),
                recs.value_start.tolist(),
                recs.value_len.tolist(),
                (recs.position + recs.length).tolist(),
                which[recs.batch].tolist(),
                strict=True,
            )
            for offset, ts, ks, kl, vs, vl, end, b in rows:
                a = attrs[b]
                value_end = vs + vl if vl > 0 else vs
                headers: tuple[tuple[str, bytes | None], ...] = ()
                if end - value_end != 1 or data[value_end] != 0:
                    headers = _decode_headers(data, value_end, end)
                record = LogRecord(
                    offset,
                    data[ks : ks + kl] if kl >= 0 else None,
                    data[vs : vs + vl] if vl >= 0 else None,
                    max_ts[b] if a & ATTR_TIMESTAMP_TYPE else ts,
                    headers,
                    pids[b],
                    bool(a & ATTR_TRANSACTIONAL),
                    None,
                )
                per_batch[b].append((record, False))
        return [item for batch in per_batch for item in batch]


def _decode_headers(data: bytes, pos: int, end: int) -> tuple[tuple[str, bytes | None], ...]:
    """A record's headers (the bytes after its value), as the reference decoder reads them."""
    count, pos = decode_varint(data, pos, end)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = decode_varint(data, pos, end)
        hkey = data[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = decode_varint(data, pos, end)
        hvalue = data[pos : pos + vlen] if vlen >= 0 else None
        pos += max(vlen, 0)
        headers.append((hkey.decode("utf-8", errors="replace"), hvalue))
    return tuple(headers)


def _stored_configs(data_dir: Path, topic: str) -> dict[str, str]:
    if not (data_dir / "kompakt-topics.json").exists():
        return {}
    try:
        meta = TopicStore(data_dir).load().get(topic)
    except (KompaktError, OSError, json.JSONDecodeError):
        return {}
    return dict(meta.configs) if meta is not None else {}


def _checkpointed_start(data_dir: Path, topic: str, partition: int) -> int | None:
    path = data_dir / LOG_START_OFFSET_CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        return OffsetCheckpointFile(path).read().get((topic, partition))
    except (KompaktError, OSError):
        return None


class LogBuilder:
    """A partition log built batch by batch, for tests: plain batches, idempotent and
    transactional batches of several producers, their markers, interleaved as a broker would
    append them. Offsets are assigned in order; every batch is one cut point for the cleaner."""

    def __init__(self, *, timestamp_ms: int = DEFAULT_TIMESTAMP_MS, start_offset: int = 0) -> None:
        self.timestamp_ms = timestamp_ms
        self.next_offset = start_offset
        self._start = start_offset
        self._batches: list[bytes] = []
        self._sequences: dict[int, int] = {}

    def _records(
        self, records: Sequence[tuple[Key, Value] | tuple[Key, Value, Headers]]
    ) -> list[SimpleRecord]:
        out = []
        for record in records:
            key, value = record[0], record[1]
            headers: Headers = record[2] if len(record) > 2 else ()
            out.append(
                SimpleRecord(
                    _b(key),
                    _b(value),
                    self.timestamp_ms,
                    tuple((name, _b(v)) for name, v in headers),
                )
            )
        return out

    def _add(self, raw: bytes) -> int:
        view = RecordBatchView(raw)
        self._batches.append(raw)
        base = self.next_offset
        self.next_offset = view.next_offset
        return base

    def append(
        self,
        *records: tuple[Key, Value] | tuple[Key, Value, Headers],
        compression: Compression = Compression.NONE,
    ) -> int:
        """One plain batch of ``records``; returns its base offset."""
        if not records:
            raise ValueError("a batch holds at least one record")
        return self._add(
            build_batch(self._records(records), base_offset=self.next_offset, compression=compression)
        )

    def _producer_batch(
        self,
        producer_id: int,
        records: Sequence[tuple[Key, Value] | tuple[Key, Value, Headers]],
        *,
        transactional: bool,
        compression: Compression,
    ) -> int:
        if not records:
            raise ValueError("a batch holds at least one record")
        sequence = self._sequences.get(producer_id, 0)
        self._sequences[producer_id] = sequence + len(records)
        return self._add(
            build_batch(
                self._records(records),
                base_offset=self.next_offset,
                producer_id=producer_id,
                producer_epoch=0,
                base_sequence=sequence,
                is_transactional=transactional,
                compression=compression,
            )
        )

    def idempotent(
        self,
        producer_id: int,
        *records: tuple[Key, Value] | tuple[Key, Value, Headers],
        compression: Compression = Compression.NONE,
    ) -> int:
        """One idempotent (non-transactional) batch of ``producer_id``."""
        return self._producer_batch(producer_id, records, transactional=False, compression=compression)

    def transactional(
        self,
        producer_id: int,
        *records: tuple[Key, Value] | tuple[Key, Value, Headers],
        compression: Compression = Compression.NONE,
    ) -> int:
        """One batch of ``producer_id``'s open transaction (it stays open until a marker)."""
        return self._producer_batch(producer_id, records, transactional=True, compression=compression)

    def _marker(self, producer_id: int, control: ControlType) -> int:
        return self._add(
            build_control_batch(
                control,
                producer_id=producer_id,
                producer_epoch=0,
                timestamp=self.timestamp_ms,
                base_offset=self.next_offset,
            )
        )

    def commit(self, producer_id: int) -> int:
        """The COMMIT marker of ``producer_id``'s transaction."""
        return self._marker(producer_id, ControlType.COMMIT)

    def abort(self, producer_id: int) -> int:
        """The ABORT marker of ``producer_id``'s transaction."""
        return self._marker(producer_id, ControlType.ABORT)

    def build(self, *, topic: str = "topic", configs: Mapping[str, str] | None = None) -> SourceLog:
        return SourceLog(
            tuple(self._batches), topic=topic, configs=dict(configs or {}), log_start_offset=self._start
        )


# --------------------------------------------------------------------------------------------
# Views


@dataclass(frozen=True, slots=True)
class BatchRecords:
    """What the views need of a log's batches: header columns, control types, record offsets.

    ``control_type`` is -1 for data batches and for empty control batches (a marker whose record
    a clean removed); ``record_batch`` maps each record offset to its batch.
    """

    base_offset: I64Array
    last_offset: I64Array
    attributes: I64Array
    producer_id: I64Array
    control_type: I64Array
    record_offset: I64Array
    record_batch: I64Array


def _batch_records_of(source: SourceLog) -> BatchRecords:
    """The source's batches and record offsets, by the same native scan as a variant's files."""
    columns = _new_columns()
    if source.batches:
        buf = np.frombuffer(bytearray(b"".join(source.batches)), dtype=np.uint8)
        _scan_into(columns, buf, 0, source.name)
    return _joined(columns)


def visible_batches(batches: BatchRecords, view: View) -> tuple[np.ndarray, int | None]:
    """Per batch, whether the view shows its records; and the last stable offset (``None``: the
    log end) that bounds a ``read_committed`` reader.

    ``read_committed`` decides each transaction by its marker, as a reader of files with no
    broker to ask does (the table's one-shot builder): data of a COMMIT is shown, of an ABORT not,
    and a transaction with no marker yet is open, so nothing at or past its first offset is shown.
    """
    attrs = batches.attributes
    control = (attrs & ATTR_CONTROL) != 0
    if view == "log":
        return np.ones(len(attrs), dtype=np.bool_), None
    shown = ~control
    if view == "read_uncommitted":
        return shown, None
    pending: dict[int, list[int]] = {}
    first: dict[int, int] = {}
    for i in np.flatnonzero((attrs & ATTR_TRANSACTIONAL) != 0).tolist():
        pid = int(batches.producer_id[i])
        if control[i]:
            ctype = int(batches.control_type[i])
            if ctype not in (int(ControlType.COMMIT), int(ControlType.ABORT)):
                continue
            decided = pending.pop(pid, [])
            first.pop(pid, None)
            if ctype == int(ControlType.ABORT):
                shown[decided] = False
            continue
        pending.setdefault(pid, []).append(i)
        first.setdefault(pid, int(batches.base_offset[i]))
    return shown, (min(first.values()) if first else None)


def visible_offsets(batches: BatchRecords, view: View) -> I64Array:
    """The offsets of the records the view shows, ascending."""
    shown, stable = visible_batches(batches, view)
    offsets = batches.record_offset[shown[batches.record_batch]]
    if stable is not None:
        offsets = offsets[offsets < stable]
    return np.ascontiguousarray(offsets, dtype=np.int64)


def scan_partition(directory: Path) -> BatchRecords:
    """:class:`BatchRecords` of a partition directory's segments, read with the native scans
    (Python runs per batch run, not per record)."""
    from kompakt.inspect.log_files import read_segment_bytes

    columns = _new_columns()
    batches_before = 0
    for segment in list_segments(directory):
        buf = read_segment_bytes(segment.path)
        batches_before += _scan_into(columns, buf, batches_before, str(segment.path))
    return _joined(columns)


_COLUMNS: Final = ("base", "last", "attrs", "pid", "ctype", "offset", "batch")


def _new_columns() -> dict[str, list[I64Array]]:
    return {k: [] for k in _COLUMNS}


def _scan_into(columns: dict[str, list[I64Array]], buf: U8Array, batches_before: int, where: str) -> int:
    """Append the batches of ``buf`` (whole v2 batches, as in a segment) to ``columns``; returns
    how many there were."""
    from kompakt.records.scan import StopReason, scan_batches, scan_records
    from kompakt.table.records import span_runs

    table = scan_batches(buf)
    if table.stop_reason != StopReason.END and table.stop_position != len(buf):
        raise CompactionModelError(
            f"{where}: the scan stopped at byte {table.stop_position} ({table.stop_reason.name})"
        )
    n = len(table)
    attrs = table.attributes
    control = (attrs & ATTR_CONTROL) != 0
    ctype = np.full(n, -1, dtype=np.int64)
    record_offsets: list[I64Array] = []
    record_batches: list[I64Array] = []
    for i in np.flatnonzero(control).tolist():
        pos, size = int(table.position[i]), int(table.size[i])
        found = control_type_of(RecordBatchView(buf[pos : pos + size].tobytes()))
        if found is not None:
            ctype[i] = int(found)
            record_offsets.append(np.array([int(table.base_offset[i])], dtype=np.int64))
            record_batches.append(np.array([batches_before + i], dtype=np.int64))
    for run_buf, spans, which in span_runs(buf, table, ~control):
        records = scan_records(run_buf, *spans.arrays())
        record_offsets.append(records.offset.copy())
        record_batches.append(which[records.batch] + batches_before)
    columns["base"].append(table.base_offset.copy())
    columns["last"].append(table.last_offset.copy())
    columns["attrs"].append(attrs.copy())
    columns["pid"].append(table.producer_id.copy())
    columns["ctype"].append(ctype)
    if record_offsets:
        offsets = np.concatenate(record_offsets)
        owners = np.concatenate(record_batches)
        order = np.argsort(offsets, kind="stable")
        columns["offset"].append(offsets[order])
        columns["batch"].append(owners[order])
    return n


def _joined(columns: dict[str, list[I64Array]]) -> BatchRecords:
    def joined(name: str) -> I64Array:
        parts = columns[name]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    return BatchRecords(*(joined(name) for name in _COLUMNS))


class SourceView:
    """The source's records as one view shows them, decoded once; a variant's records are these
    objects at the offsets that survive (:meth:`select`)."""

    def __init__(self, source: SourceLog, view: View) -> None:
        self.source = source
        self.view = view
        decoded = source.records()
        #: Every record of the source (all views), decoded once: a million-record log takes
        #: seconds to decode in Python, and the generator needs the tombstones too.
        self.decoded = decoded
        batches = _batch_records_of(source)
        self.offsets = visible_offsets(batches, view)
        by_offset = {record.offset: record for record, _control in decoded}
        self.records: list[LogRecord] = [by_offset[int(o)] for o in self.offsets.tolist()]

    def __len__(self) -> int:
        return len(self.records)

    def select(self, offsets: I64Array, where: str) -> tuple[list[LogRecord], list[LogRecord]]:
        """The records at ``offsets`` and the records the view has that they lack.

        Raises :class:`CompactionModelError` when an offset is not in the source's view: a
        compaction never shows a record the uncompacted log does not show.
        """
        return self.kept(offsets, where), self.lacking(offsets)

    def kept(self, offsets: I64Array, where: str) -> list[LogRecord]:
        """The records at ``offsets`` (see :meth:`select`)."""
        idx = self._positions(offsets, where)
        records = self.records
        if len(idx) == 0:
            return []
        # A variant keeps the view's tail past its last pass whole: that run of consecutive
        # positions is copied as one slice, and only the compacted head is picked record by record.
        breaks = np.flatnonzero(np.diff(idx) != 1)
        head = int(breaks[-1]) + 1 if len(breaks) else 0
        picked = [records[i] for i in idx[:head].tolist()]
        picked += records[int(idx[head]) : int(idx[-1]) + 1]
        return picked

    def lacking(self, offsets: I64Array) -> list[LogRecord]:
        """The records the view has at offsets other than ``offsets`` (a variant's losses)."""
        keep = np.zeros(len(self.offsets), dtype=np.bool_)
        keep[self._positions(offsets, "the variant")] = True
        records = self.records
        return [records[i] for i in np.flatnonzero(~keep).tolist()]

    def _positions(self, offsets: I64Array, where: str) -> I64Array:
        idx = np.searchsorted(self.offsets, offsets)
        inside = idx < len(self.offsets)
        found = np.zeros(len(offsets), dtype=np.bool_)
        found[inside] = self.offsets[idx[inside]] == offsets[inside]
        if not bool(found.all()):
            extra = offsets[~found][:5].tolist()
            raise CompactionModelError(
                f"{where} shows records at offsets {extra} that the uncompacted log does not show "
                f"in its {self.view} view"
            )
        return idx


def iter_view(source: SourceLog, view: View) -> Iterator[LogRecord]:
    """The source's records in ``view``, for a replay of the uncompacted log."""
    yield from SourceView(source, view).records


__all__ = [
    "DEFAULT_TIMESTAMP_MS",
    "VIEWS",
    "BatchHeader",
    "BatchRecords",
    "CompactionModelError",
    "LogBuilder",
    "LogRecord",
    "SourceLog",
    "SourceLogError",
    "SourceView",
    "View",
    "iter_view",
    "scan_partition",
    "show_bytes",
    "visible_batches",
    "visible_offsets",
]
