"""Every cleaner statistic agrees with an independent count of the log before and after the clean.

Random logs (plain batches over a small key alphabet with null keys, empty values and tombstones;
transactional batches of two producers, committed or aborted; every codec; small segments) are
compacted by the real cleaner, from the log start (``compact_log``, as ``kompakt log compact`` and
compact-now do) or from the last clean's end (as the cleaner threads do), with offset maps small
enough to need several passes and the clock advanced past ``delete.retention.ms`` so that later
passes remove stamped tombstones and markers. Before and after every pass the segments the pass
rewrites are read back with the records package's plain decoder, and each statistic of the pass
is compared with what that reader counts:

* records and bytes read: the records (a marker counts one) and bytes of the rewritten segments
  before the pass; records and bytes written: the same after it (empty batches kept for their
  producer state count their bytes and no record);
* tombstones removed: keyed records with a null value that were there before and are not after,
  for whatever reason (superseded, past their horizon, or in an aborted transaction);
* invalid records: unkeyed records removed from batches that were not aborted (Kafka's
  ``invalidMessagesRead``; an aborted batch is dropped whole, before its records are looked at);
* markers removed: control records removed; aborted records removed: data records of aborted
  transactions removed. Once the producers expire, the empty batches kept for them go, and
  then their markers, so every example ends by removing at least one marker.

The statistics of a whole multi-pass compaction (:func:`~kompakt.cleaner.stats.combine_passes`,
what ``kompakt log compact`` and compact-now report) are compared with the log before the first
pass and after the last.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.cleaner.compact_now import cleanable_range, compact_log
from kompakt.cleaner.stats import CleanerStats, combine_passes
from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch
from kompakt.records.record import decode_records
from tests.support.profiles import examples

from ._harness import cleaner, lct_log

RETENTION_MS = 10_000
PRODUCER_EXPIRY_MS = 86_400_001  # past the default producer.id.expiration.ms: producers expire
_EXAMPLES = int(os.environ.get("KOMPAKT_CLEANER_EXAMPLES", examples(60)))
KEYS: list[bytes | None] = [None, b"", b"a", b"b", b"c", b"d"]
PIDS = (1, 2)

record_st = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["value", "value", "empty", "tombstone", "tombstone"]),
)
codec_st = st.sampled_from(list(Compression))
op_st = st.one_of(
    st.tuples(st.just("append"), st.lists(record_st, min_size=1, max_size=5), codec_st),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.lists(record_st, min_size=1, max_size=4), codec_st),
    st.tuples(
        st.just("end"), st.sampled_from(PIDS), st.sampled_from([ControlType.COMMIT, ControlType.ABORT])
    ),
    st.tuples(st.just("roll")),
    st.tuples(
        st.just("advance"), st.sampled_from([1, 4_000, RETENTION_MS, 2 * RETENTION_MS, PRODUCER_EXPIRY_MS])
    ),
    st.tuples(st.just("compact")),
    st.tuples(st.just("clean_dirty")),
)


@dataclass
class Model:
    """What the test wrote: which data offsets belong to which transaction, and each one's fate."""

    txn_of: dict[int, int] = field(default_factory=dict)  # data offset -> transaction id
    markers_removed: int = 0  # by every compaction so far (the test checks the path was taken)
    open_txn: dict[int, int] = field(default_factory=dict)  # pid -> its open transaction id
    aborted: set[int] = field(default_factory=set)  # transaction ids ended by an abort marker
    next_txn: int = 0
    sequence: dict[int, int] = field(default_factory=dict)  # pid -> next base sequence
    counter: int = 0

    def value(self, kind: str) -> bytes | None:
        self.counter += 1
        return {"value": f"v{self.counter}".encode(), "empty": b"", "tombstone": None}[kind]

    def is_aborted(self, offset: int) -> bool:
        txn = self.txn_of.get(offset)
        return txn is not None and txn in self.aborted


@dataclass(frozen=True)
class Stored:
    """One record as the plain decoder reads it back."""

    control: bool
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Snapshot:
    """The records (by offset) and the bytes of the segments below some offset."""

    records: dict[int, Stored]
    record_count: int
    size: int


def read_below(log: PartitionLog, end: int) -> Snapshot:
    """The segments whose base offset is below ``end`` (those a clean with this end offset
    rewrites), decoded with the records package's plain decoder."""
    records: dict[int, Stored] = {}
    count = size = 0
    for segment in log.segments.values():
        if segment.base_offset >= end:
            continue
        size += segment.size
        for _pos, view in segment.iter_batches():
            for r in decode_records(view):
                records[r.offset] = Stored(view.is_control, r.key, r.value)
                count += 1
    return Snapshot(records, count, size)


@dataclass(frozen=True)
class Expected:
    messages_read: int
    bytes_read: int
    messages_written: int
    bytes_written: int
    tombstones_removed: int
    invalid_messages_read: int
    markers_removed: int
    aborted_records_removed: int


def expected(before: Snapshot, after: Snapshot, model: Model) -> Expected:
    removed = [(o, r) for o, r in before.records.items() if o not in after.records]
    data = [(o, r) for o, r in removed if not r.control]
    return Expected(
        messages_read=before.record_count,
        bytes_read=before.size,
        messages_written=after.record_count,
        bytes_written=after.size,
        tombstones_removed=sum(1 for _o, r in data if r.key is not None and r.value is None),
        invalid_messages_read=sum(1 for o, r in data if r.key is None and not model.is_aborted(o)),
        markers_removed=sum(1 for _o, r in removed if r.control),
        aborted_records_removed=sum(1 for o, _r in data if model.is_aborted(o)),
    )


def observed(stats: CleanerStats) -> Expected:
    return Expected(
        messages_read=stats.messages_read,
        bytes_read=stats.bytes_read,
        messages_written=stats.messages_written,
        bytes_written=stats.bytes_written,
        tombstones_removed=stats.tombstones_removed,
        invalid_messages_read=stats.invalid_messages_read,
        markers_removed=stats.markers_removed,
        aborted_records_removed=stats.aborted_records_removed,
    )


def _append(
    log: PartitionLog, model: Model, records: list[tuple[bytes | None, str]], codec: Compression
) -> None:
    now = log.clock.now_ms()
    log.append(
        build_batch([SimpleRecord(k, model.value(kind), now) for k, kind in records], compression=codec)
    )


def _txn(
    log: PartitionLog, model: Model, pid: int, records: list[tuple[bytes | None, str]], codec: Compression
) -> None:
    now = log.clock.now_ms()
    txn = model.open_txn.get(pid)
    if txn is None:
        txn = model.open_txn[pid] = model.next_txn
        model.next_txn += 1
    seq = model.sequence.get(pid, 0)
    model.sequence[pid] = seq + len(records)
    raw = build_batch(
        [SimpleRecord(k, model.value(kind), now) for k, kind in records],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
        compression=codec,
    )
    info = log.append(raw)
    for offset in range(info.first_offset, info.last_offset + 1):
        model.txn_of[offset] = txn


def _end(log: PartitionLog, model: Model, pid: int, control: ControlType) -> None:
    txn = model.open_txn.pop(pid, None)
    if txn is None:
        return
    if control is ControlType.ABORT:
        model.aborted.add(txn)
    raw = build_control_batch(control, producer_id=pid, producer_epoch=0, timestamp=log.clock.now_ms())
    log.append(raw)


def _check_passes(log: PartitionLog, model: Model, start: int, clock: FakeClock, map_slots: int) -> int:
    """Clean from ``start`` to the uncleanable boundary pass by pass, as ``compact_log`` does,
    checking each pass and then the passes combined; returns where the last pass ended."""
    now = clock.now_ms()
    first, bound = cleanable_range(log, max(start, log.log_start_offset), now)
    if first >= bound:
        return start
    worker = cleaner(log, map_slots, hashed=True)
    initial = _all_segments(log)
    results = []
    while first < bound:
        # What a pass rewrites is only known after it (its end offset): read every segment, then
        # keep those below the pass's end.
        segments = _all_segments(log)
        result = worker.clean(log, first, bound, now)
        results.append(result)
        after = read_below(log, result.end_offset)
        assert observed(result.stats) == expected(_narrow(segments, result.end_offset), after, model), (
            f"pass {len(results)}"
        )
        first = result.end_offset
    end = results[-1].end_offset
    combined = combine_passes([r.stats for r in results])
    assert observed(combined) == expected(_narrow(initial, end), read_below(log, end), model), "combined"
    model.markers_removed += combined.markers_removed
    return end


@dataclass(frozen=True)
class _SegmentSnap:
    base: int
    records: dict[int, Stored]
    count: int
    size: int


def _all_segments(log: PartitionLog) -> list[_SegmentSnap]:
    out = []
    for segment in log.segments.values():
        records: dict[int, Stored] = {}
        count = 0
        for _pos, view in segment.iter_batches():
            for r in decode_records(view):
                records[r.offset] = Stored(view.is_control, r.key, r.value)
                count += 1
        out.append(_SegmentSnap(segment.base_offset, records, count, segment.size))
    return out


def _narrow(segments: list[_SegmentSnap], end: int) -> Snapshot:
    records: dict[int, Stored] = {}
    count = size = 0
    for s in segments:
        if s.base < end:
            records.update(s.records)
            count += s.count
            size += s.size
    return Snapshot(records, count, size)


@settings(max_examples=_EXAMPLES)
@given(
    ops=st.lists(op_st, min_size=1, max_size=40),
    segment_bytes=st.sampled_from([200, 400, 1000]),
    map_slots=st.sampled_from([3, 5, 8, 64]),
)
def test_every_statistic_matches_an_independent_count(
    ops: list[tuple[object, ...]], segment_bytes: int, map_slots: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        log = lct_log(
            Path(tmp), clock, internal_segment_bytes=segment_bytes, delete_retention_ms=RETENTION_MS
        )
        model = Model()
        dirty = 0
        tail: list[tuple[object, ...]] = [
            ("end", 1, ControlType.COMMIT),
            # An aborted transaction holding a tombstone: dropped whole by the first compaction,
            # which stamps its marker; the last one removes the marker.
            ("txn", 2, [(b"a", "tombstone"), (None, "value")], Compression.GZIP),
            ("end", 2, ControlType.ABORT),
            ("roll",),
            ("compact",),
            ("advance", 2 * RETENTION_MS),
            ("append", [(b"zz", "value")], Compression.NONE),
            ("roll",),
            ("compact",),
            ("advance", 2 * RETENTION_MS),
            ("compact",),
            # Once the producers expire, their empty batches go, then the markers (stamped first).
            ("advance", PRODUCER_EXPIRY_MS),
            ("compact",),
            ("compact",),
            ("advance", 2 * RETENTION_MS),
            ("compact",),
        ]
        for op in [*ops, *tail]:
            kind = op[0]
            if kind == "append":
                _append(log, model, op[1], op[2])  # type: ignore[arg-type]
            elif kind == "txn":
                _txn(log, model, op[1], op[2], op[3])  # type: ignore[arg-type]
            elif kind == "end":
                _end(log, model, op[1], op[2])  # type: ignore[arg-type]
            elif kind == "roll":
                log.roll()
            elif kind == "advance":
                clock.advance(op[1])  # type: ignore[arg-type]
            elif kind == "compact":
                dirty = _check_passes(log, model, log.log_start_offset, clock, map_slots)
            else:
                dirty = _check_passes(log, model, dirty, clock, map_slots)
        log.close()
        assert model.markers_removed > 0


def test_compact_log_reports_the_passes_combined(tmp_path: Path) -> None:
    """``compact_log``'s passes, combined, describe the log before the first and after the last."""
    clock = FakeClock()
    log = lct_log(tmp_path, clock, internal_segment_bytes=300, delete_retention_ms=RETENTION_MS)
    model = Model()
    for i in range(40):
        _append(
            log, model, [(f"k{i % 7}".encode(), "tombstone" if i % 5 == 0 else "value")], Compression.NONE
        )
    log.roll()
    before = read_below(log, log.log_end_offset)
    results = compact_log(cleaner(log, 4, hashed=True), log, 0)
    assert len(results) > 1
    combined = combine_passes([r.stats for r in results])
    assert observed(combined) == expected(before, read_below(log, log.log_end_offset), model)
