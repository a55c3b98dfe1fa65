"""Why is (or isn't) a partition compacting? The engine behind ``kompakt log explain``.

"My topic is not compacting" always comes down to a partition state and the event that will
change it: data still in the active segment, a dirty ratio at or under the threshold,
``min.compaction.lag.ms`` holding the head, an open transaction pinning the LSO, tombstones
waiting for ``delete.retention.ms``, an offset map too small for the dirty keys. This module
computes all of them from a partition's segment files and its effective configs, using the
cleaner's own selection code (:mod:`kompakt.cleaner.planning`) so the answer is the one the
cleaner would reach, and returns a frozen :class:`PartitionExplain` with a one-line verdict.

It reads files and returns values: no printing, no CLI, no locks taken, nothing written. The CLI
builds its input from a directory on disk; the broker's admin endpoint can build the same
:class:`PartitionSource` from a live log (segment paths and sizes read under the log's lock).

Records are never decoded one by one in Python: batch headers and record columns come from the
cleaner's native kernels, keys are hashed natively to the same 128-bit digests the offset map
stores, and distinct keys are counted with ``np.unique`` over those digests.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.dedupe import decompressed_spans
from kompakt.cleaner.kernels import (
    BatchTable,
    Spans,
    hash_key,
    hash_keys,
    scan_batches,
    scan_records,
)
from kompakt.cleaner.planning import (
    LONG_MAX,
    NO_TIMESTAMP,
    SegmentInfo,
    cleanable_offsets,
    estimated_earliest_timestamps,
    log_to_clean,
    max_segment_ms,
    non_active_segments_from,
)
from kompakt.cleaner.sizing import SLOT_BYTES, keys_per_pass
from kompakt.errors import CorruptCheckpointError
from kompakt.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kompakt.log.config import BrokerConfig, LogConfig
from kompakt.log.config_defs import ConfigSource
from kompakt.log.config_describe import describe_topic_config
from kompakt.log.inspect import PartitionDir
from kompakt.log.producer_state import ProducerStateManager
from kompakt.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    BATCH_OVERHEAD,
    RecordBatchView,
)
from kompakt.records.legacy import iter_legacy_records

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
BOOL = npt.NDArray[np.bool_]

MAX_TOMBSTONES_LISTED: Final = 50
RELEVANT_TOPIC_CONFIGS: Final = (
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "segment.bytes",
    "segment.ms",
)
RELEVANT_BROKER_CONFIGS: Final = (
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
)


def iso_ms(ms: int | None) -> str:
    """Milliseconds since the epoch as ISO-8601 UTC (``-`` for none, ``never`` for Long.MAX)."""
    if ms is None:
        return "-"
    if ms >= LONG_MAX or ms > 253_402_300_799_000:
        return "never"
    if ms < -62_135_596_800_000:
        return str(ms)
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def duration(ms: int) -> str:
    """A short human duration (``1d 2h``, ``3m 4s``, ``250 ms``)."""
    if ms >= LONG_MAX:
        return "forever"
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms < 1000:
        return f"{sign}{ms} ms"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return sign + " ".join(parts[:2])


# --------------------------------------------------------------------------------------------
# Input


@dataclass(frozen=True, slots=True)
class SegmentSource:
    """One segment to read: ``size_bytes`` bytes of ``path`` (a live segment may grow after).

    ``created_ms`` stands in for the segment's creation time where no batch timestamp exists
    (offline: the file's modification time).
    """

    base_offset: int
    path: Path
    size_bytes: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class PartitionSource:
    """Everything the engine needs to know about one partition besides its configs."""

    topic: str
    partition: int
    segments: tuple[SegmentSource, ...]
    log_start_offset: int | None = None
    """From ``log-start-offset-checkpoint``; None means the first segment's base offset."""
    cleaner_checkpoint: int | None = None
    uncleanable_reason: str | None = None
    """Set by a broker that marked the partition uncleanable (KIP-346)."""


@dataclass(frozen=True, slots=True)
class ConfigInput:
    """The configs to explain with: topic overrides (each with where it came from) on a broker."""

    overrides: Mapping[str, str]
    override_origins: Mapping[str, str]
    broker: BrokerConfig
    broker_origin: str = "broker config"


# --------------------------------------------------------------------------------------------
# Report


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str
    source: str


@dataclass(frozen=True, slots=True)
class Section:
    """``[first_offset, end_offset)`` of one section and its bytes (whole segments)."""

    name: str
    first_offset: int
    end_offset: int
    bytes: int


@dataclass(frozen=True, slots=True)
class SegmentReport:
    base_offset: int
    end_offset: int
    size_bytes: int
    section: str
    records: int
    largest_timestamp_ms: int
    estimated_earliest_timestamp_ms: int | None
    max_lag_deadline_ms: int | None
    overdue: bool


@dataclass(frozen=True, slots=True)
class Hold:
    """One bound on the cleanable part: what it is, where, and until when (None: no known time)."""

    kind: str  # "active segment", "min.compaction.lag.ms", "last stable offset"
    offset: int
    until_ms: int | None
    detail: str
    binding: bool


@dataclass(frozen=True, slots=True)
class MaxLag:
    max_compaction_lag_ms: int
    enabled: bool
    delay_ms: int
    must_clean_bytes: int
    must_clean_ratio: float
    deadline_ms: int | None
    deadline_detail: str


@dataclass(frozen=True, slots=True)
class ActiveSegment:
    base_offset: int
    size_bytes: int
    records: int
    first_timestamp_ms: int | None
    age_ms: int | None
    effective_segment_ms: int
    time_roll_ms: int | None
    bytes_until_size_roll: int
    forced_roll_ms: int | None
    rolls: str


@dataclass(frozen=True, slots=True)
class Tombstone:
    offset: int
    key: str
    delete_horizon_ms: int | None
    state: str
    removable_from_ms: int | None


@dataclass(frozen=True, slots=True)
class Tombstones:
    total: int
    live: int
    stamped_waiting: int
    past_horizon: int
    unstamped_cleanable: int
    unstamped_uncleanable: int
    earliest_waiting_horizon_ms: int | None
    delete_retention_ms: int
    listed: tuple[Tombstone, ...]


@dataclass(frozen=True, slots=True)
class Keys:
    records: int
    keyed_records: int
    null_key_records: int
    live_keys: int
    live_records: int
    dirty_records: int
    dirty_distinct_keys: int


@dataclass(frozen=True, slots=True)
class OffsetMapReport:
    dedupe_buffer_size: int
    threads: int
    load_factor: float
    buffer_per_thread: int
    slots: int
    keys_per_pass: int
    dirty_distinct_keys: int
    raw_bytes_needed: int
    bytes_needed: int
    passes_needed: int
    fits: bool


@dataclass(frozen=True, slots=True)
class PartitionExplain:
    """The whole answer for one partition. ``to_dict()`` is the JSON form."""

    topic: str
    partition: int
    now_ms: int
    verdict: str
    eligible: bool
    reason: str | None
    configs: tuple[ConfigValue, ...]
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    log_end_offset: int
    last_stable_offset: int
    sections: tuple[Section, ...]
    total_bytes: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    holds: tuple[Hold, ...]
    max_lag: MaxLag
    active: ActiveSegment
    segments: tuple[SegmentReport, ...]
    tombstones: Tombstones
    keys: Keys
    estimated_bytes_after: int
    offset_map: OffsetMapReport
    uncleanable_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------------------------
# Configs


def _source_label(source: ConfigSource, synonym: str, inp: ConfigInput, name: str) -> str:
    if source is ConfigSource.TOPIC_CONFIG:
        return f"topic override ({inp.override_origins.get(name, 'topic config')})"
    if source is ConfigSource.DEFAULT_CONFIG:
        return "Kafka default"
    return f"{inp.broker_origin}: {synonym}"


def resolve_configs(inp: ConfigInput) -> tuple[LogConfig, tuple[ConfigValue, ...]]:
    """The effective topic config and, for the configs that matter here, value and origin."""
    config = LogConfig.from_overrides(inp.overrides, inp.broker)
    rows: list[ConfigValue] = []
    entries = {e.name: e for e in describe_topic_config(inp.overrides, inp.broker)}
    for name in RELEVANT_TOPIC_CONFIGS:
        entry = entries[name]
        synonym = entry.synonyms[0].name if entry.synonyms else name
        text = entry.value if entry.value is not None else ""
        rows.append(ConfigValue(name, text, _source_label(entry.source, synonym, inp, name)))
    for name in RELEVANT_BROKER_CONFIGS:
        value, source = inp.broker.lookup(name)
        label = "Kafka default" if source is ConfigSource.DEFAULT_CONFIG else f"{inp.broker_origin}: {name}"
        rows.append(ConfigValue(name, inp.broker.definition(name).format(value) or "", label))
    return config, tuple(rows)


# --------------------------------------------------------------------------------------------
# Scanning


@dataclass(slots=True)
class _Cols:
    """Per-record columns of one segment (keyed data records and null-key ones)."""

    offset: list[I64]
    hi: list[U64]
    lo: list[U64]
    null_key: list[BOOL]
    tombstone: list[BOOL]
    size: list[I64]
    batch: list[I64]
    timestamp: list[I64]


@dataclass(slots=True)
class _BatchCols:
    base_offset: list[int]
    last_offset: list[int]
    size: list[int]
    attributes: list[int]
    horizon: list[int | None]
    records: list[int]
    payload_bytes: list[int]
    segment: list[int]
    base_timestamp: list[int]


@dataclass(slots=True)
class _SegmentScan:
    info: SegmentInfo
    records: int


@dataclass(slots=True)
class _Scan:
    cols: _Cols
    batches: _BatchCols
    segments: list[_SegmentScan]
    producers: ProducerStateManager
    tombstone_keys: dict[int, bytes]
    log_end_offset: int


def _scan(source: PartitionSource) -> _Scan:
    cols = _Cols([], [], [], [], [], [], [], [])
    batches = _BatchCols([], [], [], [], [], [], [], [], [])
    producers = ProducerStateManager(f"{source.topic}-{source.partition}")
    tomb_keys: dict[int, bytes] = {}
    scans: list[_SegmentScan] = []
    leo = source.segments[0].base_offset if source.segments else 0
    for seg_index, seg in enumerate(source.segments):
        buf = (
            np.fromfile(seg.path, dtype=np.uint8, count=seg.size_bytes)
            if seg.size_bytes
            else np.empty(0, np.uint8)
        )
        first_batch = len(batches.size)
        table = scan_batches(buf, 0, len(buf))
        if len(table) == 0 and len(buf) > 16 and int(buf[16]) in (0, 1):  # a legacy (v0/v1) segment
            largest, first_ts, next_offset = _scan_legacy(buf, seg_index, cols, batches, tomb_keys)
        else:
            largest, first_ts, next_offset = _scan_v2(
                buf, table, seg_index, cols, batches, producers, tomb_keys
            )
        n_records = sum(batches.records[first_batch:])
        if next_offset is None:
            next_offset = seg.base_offset
        else:
            leo = next_offset
        if largest == NO_TIMESTAMP:
            largest = seg.created_ms  # Kafka's fallback: the file's last-modified time
        scans.append(
            _SegmentScan(
                SegmentInfo(seg.base_offset, len(buf), largest, first_ts, seg.created_ms, next_offset),
                n_records,
            )
        )
    if source.segments and scans[-1].info.size_bytes == 0:
        leo = max(leo, source.segments[-1].base_offset)
    return _Scan(cols, batches, scans, producers, tomb_keys, leo)


def _add_batch(
    batches: _BatchCols,
    base: int,
    last: int,
    size: int,
    attrs: int,
    horizon: int | None,
    n: int,
    payload: int,
    seg: int,
    base_ts: int = NO_TIMESTAMP,
) -> int:
    batches.base_offset.append(base)
    batches.last_offset.append(last)
    batches.size.append(size)
    batches.attributes.append(attrs)
    batches.horizon.append(horizon)
    batches.records.append(n)
    batches.payload_bytes.append(payload)
    batches.segment.append(seg)
    batches.base_timestamp.append(base_ts)
    return len(batches.size) - 1


def _varint_size(values: I64) -> I64:
    """Bytes of the zigzag varint encoding of each int64 (records' timestamp deltas)."""
    zz = (values.astype(np.int64) << 1) ^ (values.astype(np.int64) >> 63)
    u = zz.view(np.uint64)
    size = np.ones(len(values), dtype=np.int64)
    for k in range(1, 10):
        size += (u >= np.uint64(1 << (7 * k))).astype(np.int64)
    return size


def _scan_v2(
    buf: npt.NDArray[np.uint8],
    table: BatchTable,
    seg_index: int,
    cols: _Cols,
    batches: _BatchCols,
    producers: ProducerStateManager,
    tomb_keys: dict[int, bytes],
) -> tuple[int, int, int | None]:
    n = len(table)
    if n == 0:
        return NO_TIMESTAMP, NO_TIMESTAMP, None
    attrs = table.attributes
    max_ts = table.max_timestamp
    largest = int(max_ts.max())
    first_ts = int(max_ts[0]) if int(max_ts[0]) >= 0 else NO_TIMESTAMP
    offset0 = len(batches.size)
    for i in range(n):
        a = int(attrs[i])
        _add_batch(
            batches,
            int(table.base_offset[i]),
            int(table.base_offset[i] + table.last_offset_delta[i]),
            int(table.size[i]),
            a,
            int(table.base_timestamp[i]) if a & ATTR_DELETE_HORIZON else None,
            int(table.records_count[i]),
            int(table.size[i]) - BATCH_OVERHEAD,
            seg_index,
            int(table.base_timestamp[i]),
        )
    pids = np.flatnonzero(table.producer_id >= 0)
    raw = buf.data
    for i in pids.tolist():
        producers.update(RecordBatchView(raw, int(table.position[i])))
    data = np.flatnonzero((attrs & ATTR_CONTROL) == 0)
    plain = data[(attrs[data] & ATTR_COMPRESSION_MASK) == 0]
    if len(plain):
        spans = Spans.of_batches(table, plain)
        _add_records(buf, spans, offset0 + plain, cols, tomb_keys)
    for i in data[(attrs[data] & ATTR_COMPRESSION_MASK) != 0].tolist():
        payload, spans = decompressed_spans(buf, table, i, i + 1)
        batches.payload_bytes[offset0 + i] = len(payload)
        _add_records(payload, spans, np.array([offset0 + i], dtype=np.int64), cols, tomb_keys)
    return largest, first_ts, int(table.base_offset[-1] + table.last_offset_delta[-1]) + 1


def _add_records(
    buf: npt.NDArray[np.uint8], spans: Spans, batch_ids: I64, cols: _Cols, tomb_keys: dict[int, bytes]
) -> None:
    table = scan_records(buf, *spans.arrays())
    count = len(table)
    if count == 0:
        return
    key_len = table.key_len.copy()
    key_start = table.key_start.copy()
    hi, lo = hash_keys(buf, key_start, key_len)
    tombstone = (table.value_len < 0) & (key_len >= 0)
    offsets = table.offset.copy()
    cols.offset.append(offsets)
    cols.hi.append(hi.copy())
    cols.lo.append(lo.copy())
    cols.null_key.append(key_len < 0)
    cols.tombstone.append(tombstone)
    cols.size.append(table.length.copy())
    cols.batch.append(np.asarray(batch_ids, dtype=np.int64)[table.batch])
    cols.timestamp.append(table.timestamp.copy())
    for row in np.flatnonzero(tombstone)[: MAX_TOMBSTONES_LISTED * 4].tolist():
        start, length = int(key_start[row]), int(key_len[row])
        tomb_keys[int(offsets[row])] = bytes(buf[start : start + length])


def _scan_legacy(
    buf: npt.NDArray[np.uint8], seg_index: int, cols: _Cols, batches: _BatchCols, tomb_keys: dict[int, bytes]
) -> tuple[int, int, int | None]:
    """Legacy (v0/v1) segments: rare and old, so a Python walk is acceptable here."""
    records = list(iter_legacy_records(buf.tobytes(), verify_crc=False))
    if not records:
        return NO_TIMESTAMP, NO_TIMESTAMP, None
    offs, his, los, nulls, tombs, sizes, bids = [], [], [], [], [], [], []
    for r in records:
        size = 34 + len(r.key or b"") + len(r.value or b"")
        bid = _add_batch(batches, r.offset, r.offset, size, 0, None, 1, size, seg_index)
        h, lw = hash_key(r.key) if r.key is not None else (0, 0)
        offs.append(r.offset)
        his.append(h)
        los.append(lw)
        nulls.append(r.key is None)
        tombs.append(r.key is not None and r.value is None)
        sizes.append(size)
        bids.append(bid)
        if r.key is not None and r.value is None:
            tomb_keys[r.offset] = r.key
    cols.offset.append(np.array(offs, dtype=np.int64))
    cols.hi.append(np.array(his, dtype=np.uint64))
    cols.lo.append(np.array(los, dtype=np.uint64))
    cols.null_key.append(np.array(nulls, dtype=np.bool_))
    cols.tombstone.append(np.array(tombs, dtype=np.bool_))
    cols.size.append(np.array(sizes, dtype=np.int64))
    cols.batch.append(np.array(bids, dtype=np.int64))
    cols.timestamp.append(np.array([r.timestamp for r in records], dtype=np.int64))
    largest = max(r.timestamp for r in records)
    return (
        largest,
        records[0].timestamp if records[0].timestamp >= 0 else NO_TIMESTAMP,
        records[-1].offset + 1,
    )


def _cat(parts: Sequence[npt.NDArray[Any]], dtype: Any) -> npt.NDArray[Any]:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _digests(hi: U64, lo: U64) -> npt.NDArray[np.void]:
    pairs = np.empty((len(hi), 2), dtype=np.uint64)
    pairs[:, 0] = hi
    pairs[:, 1] = lo
    return pairs.view(np.dtype((np.void, 16))).ravel()


def _latest_mask(digests: npt.NDArray[np.void], eligible: BOOL) -> BOOL:
    """True for the last (highest-offset) eligible record of each key; records are in offset order."""
    mask = np.zeros(len(digests), dtype=np.bool_)
    idx = np.flatnonzero(eligible)
    if len(idx) == 0:
        return mask
    rev = idx[::-1]
    _, first = np.unique(digests[rev], return_index=True)
    mask[rev[first]] = True
    return mask


# --------------------------------------------------------------------------------------------
# The explanation


class _Log:
    """The ``CleanableLog`` the planner reads, built from the scan."""

    def __init__(
        self,
        source: PartitionSource,
        config: LogConfig,
        infos: list[SegmentInfo],
        start: int,
        leo: int,
        lso: int,
    ) -> None:
        self.topic = source.topic
        self.partition = source.partition
        self.config = config
        self._infos = infos
        self.log_start_offset = start
        self.log_end_offset = leo
        self.last_stable_offset = lso

    def segment_infos(self) -> Sequence[SegmentInfo]:
        return self._infos


def explain_partition(source: PartitionSource, configs: ConfigInput, now_ms: int) -> PartitionExplain:
    """Explain one partition at ``now_ms`` (pure given the files: the same inputs, the same report)."""
    config, config_rows = resolve_configs(configs)
    scan = _scan(source)
    infos = [s.info for s in scan.segments]
    if not infos:
        infos = [SegmentInfo(0, 0, 0, NO_TIMESTAMP, now_ms, 0)]
    leo = scan.log_end_offset
    start = max(source.log_start_offset or 0, infos[0].base_offset)
    start = min(start, leo)
    first_unstable = scan.producers.first_unstable_offset()
    lso = leo if first_unstable is None else min(first_unstable, leo)
    log = _Log(source, config, infos, start, leo, lso)

    offsets = cleanable_offsets(log, source.cleaner_checkpoint, now_ms, infos)
    first_dirty = offsets.first_dirty_offset
    active = infos[-1]

    # Records and keys.
    c = scan.cols
    rec_offset = _cat(c.offset, np.int64)
    hi, lo = _cat(c.hi, np.uint64), _cat(c.lo, np.uint64)
    null_key = _cat(c.null_key, np.bool_)
    tomb = _cat(c.tombstone, np.bool_)
    rec_size = _cat(c.size, np.int64)
    rec_batch = _cat(c.batch, np.int64)
    in_log = rec_offset >= start
    keyed = in_log & ~null_key
    digests = _digests(hi, lo)
    horizons = scan.batches.horizon
    batch_attrs = np.array(scan.batches.attributes, dtype=np.int64)
    batch_seg = np.array(scan.batches.segment, dtype=np.int64)
    active_index = len(infos) - 1

    # The earliest horizon still governing a tombstone or marker in a non-active segment.
    governing: list[int] = []
    stamped_tomb_batches = {int(b) for b in rec_batch[tomb]}
    for b, h in enumerate(horizons):
        if h is None or batch_seg[b] == active_index or scan.batches.records[b] == 0:
            continue
        if batch_attrs[b] & ATTR_CONTROL or b in stamped_tomb_batches:
            governing.append(h)
    earliest_horizon = min(governing) if governing else None

    ltc = log_to_clean(
        log,
        first_dirty,
        offsets.first_uncleanable_dirty_offset,
        now_ms,
        earliest_horizon_ms=earliest_horizon,
        segments=infos,
    )
    first_uncleanable = ltc.first_uncleanable_offset
    ratio = ltc.cleanable_ratio

    latest_all = _latest_mask(digests, keyed)
    dirty = keyed & (rec_offset >= first_dirty) & (rec_offset < first_uncleanable)
    dirty_keys = int(len(np.unique(digests[dirty]))) if dirty.any() else 0
    keys = Keys(
        records=int(in_log.sum()),
        keyed_records=int(keyed.sum()),
        null_key_records=int((in_log & null_key).sum()),
        live_keys=int(latest_all.sum()),
        live_records=int((latest_all & ~tomb).sum()),
        dirty_records=int(dirty.sum()),
        dirty_distinct_keys=dirty_keys,
    )

    # Estimated size after the next clean of [log start, first uncleanable).
    in_range = in_log & (rec_offset < first_uncleanable)
    latest_range = _latest_mask(digests, keyed & in_range)
    rec_horizon = (
        np.array([(-1 if h is None else h) for h in horizons], dtype=np.int64)[rec_batch]
        if len(rec_batch)
        else np.empty(0, np.int64)
    )
    expired_tomb = tomb & (rec_horizon >= 0) & (rec_horizon <= now_ms)
    kept = ~in_range | (latest_range & ~expired_tomb)
    nb = len(scan.batches.size)
    nb = len(scan.batches.size)
    # A batch that keeps an unstamped tombstone gets a delete horizon as its base timestamp, so
    # every kept record's timestamp delta is re-encoded against it (usually a longer varint).
    rec_ts = _cat(c.timestamp, np.int64)
    base_ts = np.array(scan.batches.base_timestamp, dtype=np.int64)
    stamping = np.zeros(nb, dtype=np.bool_)
    stamping[rec_batch[tomb & kept & in_range & (rec_horizon < 0)]] = True
    grow = np.zeros(len(rec_size), dtype=np.int64)
    if stamping.any():
        rows = stamping[rec_batch] & kept
        horizon_ts = now_ms + config.delete_retention_ms
        grow[rows] = _varint_size(rec_ts[rows] - horizon_ts) - _varint_size(
            rec_ts[rows] - base_ts[rec_batch[rows]]
        )
    sized = rec_size + grow
    total_rec = np.bincount(rec_batch, weights=rec_size, minlength=nb) if nb else np.zeros(0)
    kept_rec = np.bincount(rec_batch, weights=sized * kept, minlength=nb) if nb else np.zeros(0)
    estimated_after = 0
    for b in range(nb):
        size = scan.batches.size[b]
        if batch_seg[b] >= len(infos) or scan.batches.records[b] == 0 or batch_attrs[b] & ATTR_CONTROL:
            estimated_after += size
            continue
        total, kept_b = float(total_rec[b]), float(kept_rec[b])
        if total <= 0 or (kept_b == total and not stamping[b]):
            estimated_after += size
        elif kept_b > 0:
            body = size - BATCH_OVERHEAD  # compressed bodies shrink in proportion to what is kept
            estimated_after += BATCH_OVERHEAD + round(body * kept_b / total)
    estimated_after = min(estimated_after, sum(i.size_bytes for i in infos))

    sections = _sections(
        infos, start, first_dirty, first_uncleanable, leo, ltc.clean_bytes, ltc.cleanable_bytes
    )
    holds = _holds(log, infos, first_dirty, lso, now_ms, scan.producers)
    max_lag = _max_lag(
        config,
        infos,
        first_dirty,
        now_ms,
        ltc.max_compaction_delay_ms,
        ltc.must_clean_bytes,
        ltc.must_clean_ratio,
    )
    active_report = _active(config, active, scan.segments[-1].records if scan.segments else 0, now_ms)
    segment_reports = _segment_reports(scan, infos, config, start, first_dirty, first_uncleanable, now_ms)
    tombstones = _tombstones(
        scan, rec_offset, tomb, latest_all, rec_batch, horizons, first_uncleanable, in_log, config, now_ms
    )
    map_report = _offset_map(configs.broker, dirty_keys)

    verdict, eligible = _verdict(
        source,
        config,
        ltc.reason,
        ratio,
        ltc.clean_bytes,
        ltc.cleanable_bytes,
        infos,
        holds,
        max_lag,
        active_report,
        tombstones,
        map_report,
        leo,
        start,
        now_ms,
    )
    if eligible and not configs.broker.log_cleaner_enable:
        verdict += (
            "; but log.cleaner.enable=false, so no cleaner thread runs: only compact-now cleans it "
            "(and its retention waits too)"
        )
    return PartitionExplain(
        topic=source.topic,
        partition=source.partition,
        now_ms=now_ms,
        verdict=verdict,
        eligible=eligible,
        reason=ltc.reason,
        configs=config_rows,
        log_start_offset=start,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=first_uncleanable,
        log_end_offset=leo,
        last_stable_offset=lso,
        sections=sections,
        total_bytes=sum(i.size_bytes for i in infos),
        dirty_ratio=ratio,
        min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
        holds=holds,
        max_lag=max_lag,
        active=active_report,
        segments=segment_reports,
        tombstones=tombstones,
        keys=keys,
        estimated_bytes_after=estimated_after,
        offset_map=map_report,
        uncleanable_reason=source.uncleanable_reason,
    )


def _sections(
    infos: Sequence[SegmentInfo],
    start: int,
    first_dirty: int,
    first_uncleanable: int,
    leo: int,
    clean_bytes: int,
    cleanable_bytes: int,
) -> tuple[Section, ...]:
    """Clean / cleanable / uncleanable / active, with whole-segment bytes as the planner counts them
    (a segment holding the first dirty offset in its middle counts in both clean and cleanable)."""
    active = infos[-1]
    clean_end = min(first_dirty, first_uncleanable)
    unclean_bytes = sum(i.size_bytes for i in infos[:-1] if i.base_offset >= first_uncleanable)
    return (
        Section("clean", start, max(start, clean_end), clean_bytes),
        Section("cleanable", first_dirty, max(first_dirty, first_uncleanable), cleanable_bytes),
        Section("uncleanable", first_uncleanable, max(first_uncleanable, active.base_offset), unclean_bytes),
        Section("active", active.base_offset, max(leo, active.base_offset), active.size_bytes),
    )


def _holds(
    log: _Log,
    infos: Sequence[SegmentInfo],
    first_dirty: int,
    lso: int,
    now_ms: int,
    producers: ProducerStateManager,
) -> tuple[Hold, ...]:
    config = log.config
    active = infos[-1]
    holds: list[tuple[int, str, int | None, str]] = [
        (
            active.base_offset,
            "active segment",
            None,
            f"the active segment starts at offset {active.base_offset}",
        )
    ]
    if lso < log.log_end_offset:
        open_pids = [
            (e.current_txn_first_offset, pid)
            for pid, e in producers.producers.items()
            if e.current_txn_first_offset is not None
        ]
        first, pid = min(open_pids) if open_pids else (lso, -1)
        holds.append(
            (
                lso,
                "last stable offset",
                None,
                f"an open transaction of producer {pid} started at offset {first}",
            )
        )
    if config.min_compaction_lag_ms > 0:
        too_young = now_ms - config.min_compaction_lag_ms
        for seg in non_active_segments_from(infos, first_dirty):
            if seg.largest_timestamp_ms > too_young:
                until = seg.largest_timestamp_ms + config.min_compaction_lag_ms
                holds.append(
                    (
                        seg.base_offset,
                        "min.compaction.lag.ms",
                        until,
                        f"the segment at {seg.base_offset} holds a record from "
                        f"{iso_ms(seg.largest_timestamp_ms)}, "
                        f"younger than min.compaction.lag.ms={config.min_compaction_lag_ms}",
                    )
                )
                break
    binding = min(h[0] for h in holds)
    result = []
    seen_binding = False
    for offset, kind, until_ms, detail in sorted(holds, key=lambda h: h[0]):
        is_binding = offset == binding and not seen_binding
        seen_binding = seen_binding or is_binding
        result.append(Hold(kind, offset, until_ms, detail, is_binding))
    return tuple(result)


def _max_lag(
    config: LogConfig,
    infos: Sequence[SegmentInfo],
    first_dirty: int,
    now_ms: int,
    delay_ms: int,
    must_clean_bytes: int,
    must_clean_ratio: float,
) -> MaxLag:
    max_lag = config.effective_max_compaction_lag_ms
    enabled = max_lag < LONG_MAX
    deadline: int | None = None
    detail = "max.compaction.lag.ms is not set: no deadline"
    if config.max_compaction_lag_ms == 0:
        detail = "max.compaction.lag.ms is 0, which disables it (KIP-354): no deadline"
    if enabled:
        estimates = estimated_earliest_timestamps(infos, max_segment_ms(config))
        dirty_non_active = [
            (i, est) for i, est in zip(infos[:-1], estimates[:-1], strict=True) if i.next_offset > first_dirty
        ]
        known = [(i, est) for i, est in dirty_non_active if est is not None and est > 0]
        if known:
            seg, est = min(known, key=lambda p: p[1])
            deadline = est + max_lag
            detail = (
                f"the dirty segment at {seg.base_offset} (earliest record ~{iso_ms(est)}) "
                "must be cleaned by then"
            )
        else:
            active = infos[-1]
            first_ts = (
                active.first_batch_timestamp_ms if active.first_batch_timestamp_ms >= 0 else active.created_ms
            )
            if active.size_bytes > 0 and config.compact:
                deadline = first_ts + max_lag
                detail = (
                    "the active segment's first record reaches max.compaction.lag.ms then; kompakt rolls it "
                    "and cleans it"
                )
            else:
                detail = "no dirty data"
    return MaxLag(max_lag, enabled, delay_ms, must_clean_bytes, must_clean_ratio, deadline, detail)


def _active(config: LogConfig, active: SegmentInfo, records: int, now_ms: int) -> ActiveSegment:
    eff = (
        min(config.segment_ms, config.effective_max_compaction_lag_ms)
        if config.compact
        else config.segment_ms
    )
    left = max(config.segment_bytes - active.size_bytes, 0)
    if active.size_bytes == 0:
        return ActiveSegment(
            active.base_offset,
            0,
            0,
            None,
            None,
            eff,
            None,
            left,
            None,
            "empty: it rolls only after data arrives",
        )
    first_ts = active.first_batch_timestamp_ms if active.first_batch_timestamp_ms >= 0 else active.created_ms
    time_roll = first_ts + eff if eff < LONG_MAX else None
    forced: int | None = None
    if config.compact and config.effective_max_compaction_lag_ms < LONG_MAX:
        forced = first_ts + config.effective_max_compaction_lag_ms
    parts = []
    if time_roll is not None:
        when = "now" if time_roll < now_ms else iso_ms(time_roll)
        parts.append(f"at the first append after {when} (segment.ms {duration(eff)})")
    parts.append(f"when {left} more bytes arrive (segment.bytes {config.segment_bytes})")
    if forced is not None:
        when = "at the next cleaner pass" if forced < now_ms else f"at {iso_ms(forced)}"
        parts.append(f"kompakt's cleaner rolls it idle {when} (max.compaction.lag.ms)")
    return ActiveSegment(
        active.base_offset,
        active.size_bytes,
        records,
        first_ts,
        now_ms - first_ts,
        eff,
        time_roll,
        left,
        forced,
        "; ".join(parts),
    )


def _segment_reports(
    scan: _Scan,
    infos: Sequence[SegmentInfo],
    config: LogConfig,
    start: int,
    first_dirty: int,
    first_uncleanable: int,
    now_ms: int,
) -> tuple[SegmentReport, ...]:
    estimates = estimated_earliest_timestamps(infos, max_segment_ms(config))
    max_lag = config.effective_max_compaction_lag_ms
    out = []
    for n, (info, est) in enumerate(zip(infos, estimates, strict=True)):
        if n == len(infos) - 1:
            section = "active"
        elif info.next_offset <= first_dirty:
            section = "clean"
        elif info.base_offset >= first_uncleanable:
            section = "uncleanable"
        else:
            section = "cleanable"
        deadline = est + max_lag if est is not None and est > 0 and max_lag < LONG_MAX else None
        overdue = deadline is not None and deadline < now_ms and section in ("cleanable", "uncleanable")
        records = scan.segments[n].records if n < len(scan.segments) else 0
        out.append(
            SegmentReport(
                info.base_offset,
                info.next_offset,
                info.size_bytes,
                section,
                records,
                info.largest_timestamp_ms,
                est,
                deadline,
                overdue,
            )
        )
    return tuple(out)


def _tombstones(
    scan: _Scan,
    rec_offset: I64,
    tomb: BOOL,
    latest: BOOL,
    rec_batch: I64,
    horizons: list[int | None],
    first_uncleanable: int,
    in_log: BOOL,
    config: LogConfig,
    now_ms: int,
) -> Tombstones:
    live = np.flatnonzero(tomb & latest & in_log)
    waiting = past = unstamped_c = unstamped_u = 0
    earliest_waiting: int | None = None
    listed: list[Tombstone] = []
    for row in live.tolist():
        offset = int(rec_offset[row])
        horizon = horizons[int(rec_batch[row])]
        if horizon is not None and horizon <= now_ms:
            past += 1
            state, removable = "past its delete horizon: removed at the next clean", horizon
        elif horizon is not None:
            waiting += 1
            earliest_waiting = horizon if earliest_waiting is None else min(earliest_waiting, horizon)
            state, removable = f"waiting for delete.retention.ms until {iso_ms(horizon)}", horizon
        elif offset < first_uncleanable:
            unstamped_c += 1
            state = (
                "not stamped yet: the next clean stamps horizon = clean time + delete.retention.ms "
                f"({duration(config.delete_retention_ms)})"
            )
            removable = None
        else:
            unstamped_u += 1
            state = "not stamped yet: not cleanable yet"
            removable = None
        if len(listed) < MAX_TOMBSTONES_LISTED:
            key = scan.tombstone_keys.get(offset, b"")
            listed.append(
                Tombstone(offset, key.decode("utf-8", errors="backslashreplace"), horizon, state, removable)
            )
    return Tombstones(
        total=int((tomb & in_log).sum()),
        live=len(live),
        stamped_waiting=waiting,
        past_horizon=past,
        unstamped_cleanable=unstamped_c,
        unstamped_uncleanable=unstamped_u,
        earliest_waiting_horizon_ms=earliest_waiting,
        delete_retention_ms=config.delete_retention_ms,
        listed=tuple(listed),
    )


def _offset_map(broker: BrokerConfig, dirty_keys: int) -> OffsetMapReport:
    buffer = broker.log_cleaner_dedupe_buffer_size
    threads = max(broker.log_cleaner_threads, 1)
    lf = broker.log_cleaner_io_buffer_load_factor
    per_thread = buffer // threads
    slots = per_thread // SLOT_BYTES
    per_pass = keys_per_pass(buffer, threads, lf)
    needed = math.ceil(dirty_keys / lf) * SLOT_BYTES if dirty_keys else 0
    passes = (
        math.ceil(dirty_keys / per_pass)
        if dirty_keys and per_pass > 0
        else (0 if not dirty_keys else LONG_MAX)
    )
    return OffsetMapReport(
        dedupe_buffer_size=buffer,
        threads=threads,
        load_factor=lf,
        buffer_per_thread=per_thread,
        slots=slots,
        keys_per_pass=per_pass,
        dirty_distinct_keys=dirty_keys,
        raw_bytes_needed=dirty_keys * SLOT_BYTES,
        bytes_needed=needed,
        passes_needed=passes,
        fits=dirty_keys <= per_pass,
    )


def _verdict(
    source: PartitionSource,
    config: LogConfig,
    reason: str | None,
    ratio: float,
    clean_bytes: int,
    cleanable_bytes: int,
    infos: Sequence[SegmentInfo],
    holds: tuple[Hold, ...],
    max_lag: MaxLag,
    active: ActiveSegment,
    tombstones: Tombstones,
    offset_map: OffsetMapReport,
    leo: int,
    start: int,
    now_ms: int,
) -> tuple[str, bool]:
    """The one line: eligible and why, or the event that will change it."""
    if not config.compact:
        policy = ",".join(sorted(config.cleanup_policy)) or '"" (keep forever)'
        return f"not compacting: cleanup.policy is {policy}", False
    if source.uncleanable_reason is not None:
        return f"not compacting: the partition is marked uncleanable ({source.uncleanable_reason})", False
    if leo <= start or sum(i.size_bytes for i in infos) == 0:
        return "nothing to clean: the log is empty", False
    map_note = ""
    if not offset_map.fits and offset_map.dirty_distinct_keys:
        map_note = (
            f"; the offset map is too small for one pass: "
            f"{offset_map.dirty_distinct_keys} distinct dirty keys, "
            f"{offset_map.keys_per_pass} per pass, so it takes {offset_map.passes_needed} passes "
            f"(raise log.cleaner.dedupe.buffer.size to {offset_map.bytes_needed} bytes for one)"
        )
    if reason is not None:
        if tombstones.past_horizon and "tombstones" in reason:
            reason = f"{tombstones.past_horizon} tombstones past their horizon"
        return f"will be cleaned at the next cleaner pass: {reason}{map_note}", True
    if tombstones.past_horizon:
        # Expired tombstones that no rule can act on (e.g. still in the active segment).
        pass
    binding = next(h for h in holds if h.binding)
    if cleanable_bytes == 0:
        if binding.kind == "last stable offset":
            return (
                f"not eligible until the open transaction completes, because {binding.detail} "
                f"pins the last stable offset at {binding.offset}",
                False,
            )
        if binding.kind == "min.compaction.lag.ms":
            return (
                f"not eligible until {iso_ms(binding.until_ms)}, because min.compaction.lag.ms="
                f"{config.min_compaction_lag_ms} holds the head from offset {binding.offset} "
                f"({binding.detail})",
                False,
            )
        if tombstones.stamped_waiting and tombstones.earliest_waiting_horizon_ms is not None:
            return (
                f"not eligible until {iso_ms(tombstones.earliest_waiting_horizon_ms)}, because "
                f"{tombstones.stamped_waiting} tombstones wait for delete.retention.ms="
                f"{config.delete_retention_ms} (their delete horizon)",
                False,
            )
        if max_lag.deadline_ms is not None:
            return (
                f"nothing to clean: all dirty data is in the active segment, which rolls {active.rolls}; "
                f"max.compaction.lag.ms forces a clean by {iso_ms(max_lag.deadline_ms)}",
                False,
            )
        return f"nothing to clean: all dirty data is in the active segment, which rolls {active.rolls}", False
    m = config.min_cleanable_dirty_ratio
    more = math.floor(m * clean_bytes / (1 - m)) - cleanable_bytes + 1 if m < 1 else None
    why = f"dirty ratio {ratio:.2f} <= min.cleanable.dirty.ratio {m}"
    need = f" ({more} more dirty bytes must roll)" if more is not None and more > 0 else ""
    if max_lag.deadline_ms is not None:
        return (
            f"not eligible until {iso_ms(max_lag.deadline_ms)} (max.compaction.lag.ms), because {why}{need}",
            False,
        )
    if tombstones.stamped_waiting and tombstones.earliest_waiting_horizon_ms is not None:
        return (
            f"not eligible until {iso_ms(tombstones.earliest_waiting_horizon_ms)}, because {why}{need} and "
            f"{tombstones.stamped_waiting} tombstones wait for delete.retention.ms",
            False,
        )
    return f"not eligible: {why}{need}", False


# --------------------------------------------------------------------------------------------
# Offline input


def source_from_files(part: PartitionDir, data_dir: Path | None) -> PartitionSource:
    """A :class:`PartitionSource` from a partition directory and its data directory's checkpoints.

    Unreadable checkpoints are treated as absent, as the broker does when it opens the directory
    (``kompakt log verify`` reports them).
    """
    start: int | None = None
    checkpoint: int | None = None
    if data_dir is not None:
        tp = (part.topic, part.partition)
        start = _checkpoint_entry(data_dir / LOG_START_OFFSET_CHECKPOINT_FILE, tp)
        checkpoint = _checkpoint_entry(data_dir / CLEANER_OFFSET_CHECKPOINT_FILE, tp)
    segments = []
    for seg in part.segments:
        stat = seg.path.stat()
        segments.append(SegmentSource(seg.base_offset, seg.path, stat.st_size, int(stat.st_mtime * 1000)))
    return PartitionSource(part.topic, part.partition, tuple(segments), start, checkpoint)


def _checkpoint_entry(path: Path, tp: tuple[str, int]) -> int | None:
    try:
        return OffsetCheckpointFile(path).read().get(tp)
    except CorruptCheckpointError:
        return None
