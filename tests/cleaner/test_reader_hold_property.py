"""Random workloads under the reader hold: compaction still matches its model, and no tombstone at
or above a named group's committed offset is removed before the maximum hold has passed.

Workload: one-to-four-record batches over a small key alphabet with tombstones, all codecs, small
segments, rolls, clock advances, the named group committing further, and whole-log cleans (the
cleaner's tombstone-driven re-clean from the log start) with the hold from that group. After every
clean:

(a) every key's latest record survives, unless it is a tombstone whose batch was stamped with a
    horizon ``h`` before the clean and the clean's ``now`` satisfies ``now >= h`` and either the
    group had read past the batch or ``now >= h + max hold``: then the key is gone entirely;
(b) in particular, a tombstone at or above the group's committed offset is never removed before
    ``h + max hold``;
(c) records are originals at their own offsets, in order.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.compact_now import compact_log
from kompakt.cleaner.readers import FixedPositions
from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression
from kompakt.records.builder import SimpleRecord, build_batch
from tests.support.profiles import examples

from ._harness import all_records, batches, lct_log, make_map

RETENTION_MS = 10_000
MAX_HOLD_MS = 25_000
GROUP = "g"
_EXAMPLES = int(os.environ.get("KOMPAKT_CLEANER_EXAMPLES", examples(60)))
KEYS = [b"a", b"b", b"c", b"d"]

record_st = st.tuples(st.sampled_from(KEYS), st.booleans())  # True: a tombstone
op_st = st.one_of(
    st.tuples(
        st.just("append"), st.lists(record_st, min_size=1, max_size=4), st.sampled_from(list(Compression))
    ),
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.sampled_from([1, 4_000, RETENTION_MS, MAX_HOLD_MS])),
    st.tuples(st.just("commit"), st.integers(0, 6)),
    st.tuples(st.just("clean")),
)


@dataclass
class Model:
    originals: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)
    latest: dict[bytes, int] = field(default_factory=dict)
    gone: set[bytes] = field(default_factory=set)
    committed: int = 0
    counter: int = 0


def _append(log: PartitionLog, model: Model, records: list[tuple[bytes, bool]], codec: Compression) -> None:
    now = log.clock.now_ms()
    built = []
    for key, tombstone in records:
        model.counter += 1
        built.append(SimpleRecord(key, None if tombstone else f"v{model.counter}".encode(), now))
    first = log.append(build_batch(built, compression=codec)).first_offset
    for i, r in enumerate(built):
        assert r.key is not None
        model.originals[first + i] = (r.key, r.value)
        model.latest[r.key] = first + i
        model.gone.discard(r.key)


def _clean(log: PartitionLog, model: Model, clock: FakeClock) -> None:
    # The horizon and last offset of each record's batch, before the clean.
    stamped = {r.offset: (v.delete_horizon_ms, v.last_offset) for v, recs in batches(log) for r in recs}
    before = {o for o, _k, _v in all_records(log)}
    readers = FixedPositions({(log.topic, log.partition): {GROUP: model.committed}})
    cleaner = Cleaner(0, make_map(None), clock, readers=readers)
    now = clock.now_ms()
    compact_log(cleaner, log, log.log_start_offset, now_ms=now)
    after = all_records(log)
    offsets = [o for o, _k, _v in after]
    assert offsets == sorted(set(offsets))  # (c)
    present = {o: (k, v) for o, k, v in after}
    for o, kv in present.items():
        assert model.originals[o] == kv
    for key, o in model.latest.items():
        value = model.originals[o][1]
        if key in model.gone:
            assert all(k != key for k, _v in present.values()), f"key {key!r} came back"
            continue
        if o in present:
            continue
        # (a) only an expired, released tombstone may go, and with it the whole key.
        assert value is None and o in before, f"latest record {o} of {key!r} lost"
        horizon, last = stamped[o]
        assert horizon is not None and now >= horizon, f"tombstone {o} removed before its horizon"
        # (b) the hold: above the group's position only the maximum hold releases it.
        if o >= model.committed:
            assert now >= horizon + MAX_HOLD_MS, f"tombstone {o} above committed {model.committed} removed"
        else:
            assert last < model.committed or now >= horizon + MAX_HOLD_MS
        assert all(k != key for k, _v in present.values())
        model.gone.add(key)


@settings(max_examples=_EXAMPLES, deadline=None)
@given(ops=st.lists(op_st, min_size=1, max_size=30), segment_bytes=st.sampled_from([150, 400]))
def test_held_compaction_matches_model(ops: list[tuple[object, ...]], segment_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        log = lct_log(
            Path(tmp),
            clock,
            name="t-0",
            internal_segment_bytes=segment_bytes,
            delete_retention_ms=RETENTION_MS,
            kompakt_tombstone_retain_for_groups=(GROUP,),
            kompakt_tombstone_max_hold_ms=MAX_HOLD_MS,
        )
        model = Model()
        for op in [
            *ops,
            ("roll",),
            ("clean",),
            ("advance", RETENTION_MS),
            ("clean",),
            ("advance", MAX_HOLD_MS),
            ("clean",),
        ]:
            if op[0] == "append":
                _append(log, model, op[1], op[2])  # type: ignore[arg-type]
            elif op[0] == "roll":
                log.roll()
            elif op[0] == "advance":
                clock.advance(op[1])  # type: ignore[arg-type]
            elif op[0] == "commit":
                model.committed = min(log.log_end_offset, model.committed + int(op[1]))  # type: ignore[call-overload]
            else:
                _clean(log, model, clock)
        log.close()
