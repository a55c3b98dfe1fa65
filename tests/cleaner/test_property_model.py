"""Random workloads against a model of compaction (``Cleaner.doClean`` end to end: next dirty offset,
rewrite from the log start, KIP-534 horizons, batches never merged or split).

Workload: one-to-five-record batches over a small key alphabet (the empty key included), values
that may be empty or null (tombstones), all codecs, small segments, forced rolls, clock advances
and cleanings that each start where the previous one ended, with offset maps small enough to
fill. Two logs receive the same operations: one cleaned with the exact (dict) map, one with the
hashed map. After every clean:

(a) offsets strictly increase, and every record left is an original record at its own offset;
(b) every batch's last offset is one that existed before the clean;
(c) every key's latest record survives with its value; a latest tombstone survives, stamped with
    horizon = (time of the first clean that rewrote it) + delete.retention.ms, until a later clean
    with now >= horizon rewrites it from inside its mapped range, then the key is gone entirely;
    and no rewritten record older than the offset the map held for its key survives;
(d) segments at or above the clean's end offset (so everything from the uncleanable bound on) are
    byte-identical;
(e) both maps give byte-identical logs.
"""

from __future__ import annotations

import bisect
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression
from kompakt.records.builder import SimpleRecord, build_batch
from tests.support.profiles import examples

from ._harness import all_records, batches, clean_result, lct_log, log_bytes, reopen

RETENTION_MS = 10_000
# 80 examples under the quick profile (scaled under ``make fuzz``); KOMPAKT_CLEANER_EXAMPLES=N runs N.
_EXAMPLES = int(os.environ.get("KOMPAKT_CLEANER_EXAMPLES", examples(80)))
KEYS = [b"", b"a", b"b", b"c", b"d", b"e"]

Record = tuple[bytes, bytes | None]

record_st = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["value", "value", "value", "empty", "tombstone"]),
)
op_st = st.one_of(
    st.tuples(
        st.just("append"), st.lists(record_st, min_size=1, max_size=5), st.sampled_from(list(Compression))
    ),
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.sampled_from([0, 1, 4_000, RETENTION_MS, 2 * RETENTION_MS])),
    st.tuples(st.just("clean")),
)


@dataclass
class Model:
    originals: dict[int, Record] = field(default_factory=dict)
    latest: dict[bytes, int] = field(default_factory=dict)
    horizon: dict[int, int] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)
    counter: int = 0


def _value(kind: str, model: Model) -> bytes | None:
    model.counter += 1
    return {"value": f"v{model.counter}".encode(), "empty": b"", "tombstone": None}[kind]


def _append(
    logs: list[PartitionLog], model: Model, records: list[tuple[bytes, str]], codec: Compression
) -> None:
    now = logs[0].clock.now_ms()
    built = [SimpleRecord(k, _value(kind, model), now) for k, kind in records]
    raw = build_batch(built, compression=codec)
    firsts = {log.append(raw).first_offset for log in logs}
    (first,) = firsts
    for i, r in enumerate(built):
        assert r.key is not None
        model.originals[first + i] = (r.key, r.value)
        model.latest[r.key] = first + i


def _check_clean(logs: list[PartitionLog], model: Model, d: int, map_slots: int, clock: FakeClock) -> int:
    log = logs[0]
    bases = [s.base_offset for s in log.segments.values()]
    before_bytes = dict(log_bytes(log))
    before_last_offsets = {v.last_offset for v, _r in batches(log)}
    before = all_records(log)
    now = clock.now_ms()
    ends = {clean_result(lg, d, map_slots=map_slots, hashed=i == 1).end_offset for i, lg in enumerate(logs)}
    (end,) = ends

    def processed(offset: int) -> bool:
        return bases[bisect.bisect_right(bases, offset) - 1] < end

    # (e) both maps agree byte for byte.
    assert log_bytes(logs[0]) == log_bytes(logs[1])
    after = all_records(log)
    _check_records_and_segments(log, model, after, before_bytes, before_last_offsets, end)
    _check_dedupe(before, after, d, end, processed)
    _check_latest_and_tombstones(log, model, after, end, now, processed)
    return end


def _check_records_and_segments(
    log: PartitionLog,
    model: Model,
    after: list[tuple[int, bytes | None, bytes | None]],
    before_bytes: dict[int, bytes],
    before_last_offsets: set[int],
    end: int,
) -> None:
    # (a) original records at their own offsets, strictly increasing.
    offsets = [o for o, _k, _v in after]
    assert offsets == sorted(set(offsets))
    for o, k, v in after:
        assert model.originals[o] == (k, v)
    for view, _r in batches(log):
        assert view.is_valid()
    # (b) batch last offsets are preserved, never invented.
    assert {v.last_offset for v, _r in batches(log)} <= before_last_offsets
    # (d) untouched segments are byte-identical.
    after_bytes = dict(log_bytes(log))
    for base, data in before_bytes.items():
        if base >= end:
            assert after_bytes.get(base) == data, f"segment {base} at/above end offset {end} changed"


def _check_dedupe(
    before: list[tuple[int, bytes | None, bytes | None]],
    after: list[tuple[int, bytes | None, bytes | None]],
    d: int,
    end: int,
    processed: Callable[[int], bool],
) -> None:
    # Dedupe: no rewritten record older than what the map held for its key survives.
    mapped: dict[bytes | None, int] = {}
    if end > 0:
        for o, k, _v in before:
            if d <= o < end and k is not None:
                mapped[k] = max(mapped.get(k, -1), o)
        for o, k, _v in after:
            if processed(o) and o < end:
                assert o >= mapped.get(k, -1), f"superseded record {o} of key {k!r} survived"


def _check_latest_and_tombstones(
    log: PartitionLog,
    model: Model,
    after: list[tuple[int, bytes | None, bytes | None]],
    end: int,
    now: int,
    processed: Callable[[int], bool],
) -> None:
    # (c) latest records and the tombstone lifecycle.
    for o in model.latest.values():
        value = model.originals[o][1]
        if value is not None or o in model.gone:
            continue
        if end > 0 and processed(o):
            h = model.horizon.get(o)
            if h is None:
                model.horizon[o] = now + RETENTION_MS
            elif now >= h and o < end:
                model.gone.add(o)
    present = {o: (k, v) for o, k, v in after}
    horizons = {r.offset: v.delete_horizon_ms for v, recs in batches(log) for r in recs}
    for key, o in model.latest.items():
        value = model.originals[o][1]
        if o in model.gone:
            assert all(k != key for _o, k, _v in after), f"key {key!r} left after its tombstone expired"
            continue
        assert present.get(o) == (key, value), f"latest record {o} of key {key!r} lost"
        if value is None and o in model.horizon:
            assert horizons[o] == model.horizon[o]


@settings(max_examples=_EXAMPLES)
@given(
    ops=st.lists(op_st, min_size=1, max_size=40),
    segment_bytes=st.sampled_from([150, 300, 700]),
    map_slots=st.sampled_from([2, 3, 5, 8, 64]),
)
def test_compaction_matches_model(ops: list[tuple[object, ...]], segment_bytes: int, map_slots: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        logs = [
            lct_log(
                Path(tmp),
                clock,
                name=f"t-{i}",
                internal_segment_bytes=segment_bytes,
                delete_retention_ms=RETENTION_MS,
            )
            for i in range(2)
        ]
        model = Model()
        d = 0
        ops = [
            *ops,
            ("roll",),
            ("clean",),
            ("advance", 2 * RETENTION_MS),
            ("append", [(b"zz", "value")], Compression.NONE),
            ("roll",),
            ("clean",),
            ("clean",),
        ]
        for op in ops:
            if op[0] == "append":
                _append(logs, model, op[1], op[2])  # type: ignore[arg-type]
            elif op[0] == "roll":
                for log in logs:
                    log.roll()
            elif op[0] == "advance":
                clock.advance(op[1])  # type: ignore[arg-type]
            else:
                end = _check_clean(logs, model, d, map_slots, clock)
                d = end if end > 0 else d
        expected = all_records(logs[0])
        for i, log in enumerate(logs):
            logs[i] = reopen(log, clean_shutdown=False)
            assert all_records(logs[i]) == expected
            logs[i].close()
