"""Fused span passes (parse + hash + put / retain) against the exact oracle and the column kernels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.cleaner.offset_map import ExactOffsetMap, HashedOffsetMap, OffsetMap
from kompakt.errors import CorruptRecordError
from kompakt.records import scan as k
from kompakt.records.native import Workspace
from tests.support.handbuilt_batches import Rec, encode_batch, encode_record
from tests.support.profiles import examples

keys_st = st.sampled_from([None, b"", b"a", b"b", b"c", b"key-1", b"\x00"])
recs_st = st.builds(Rec, key=keys_st, value=st.sampled_from([None, b"", b"v", b"value" * 5]))
log_st = st.lists(st.lists(recs_st, max_size=8), min_size=1, max_size=6)


def segment(batches: list[list[Rec]]) -> tuple[np.ndarray, k.BatchTable]:
    raw = b""
    off = 0
    for i, recs in enumerate(batches):
        raw += encode_batch(off, recs, base_timestamp=100 + i)
        off += max(len(recs), 1) + 1  # offset gaps between batches
    buf = np.frombuffer(raw, dtype=np.uint8)
    return buf, k.scan_batches(buf)


@settings(max_examples=examples(120))
@given(log_st, st.integers(min_value=2, max_value=12), st.integers(min_value=0, max_value=20), st.data())
def test_put_and_retain_spans_match_oracle(
    batches: list[list[Rec]], slots: int, start: int, data: st.DataObject
) -> None:
    buf, table = segment(batches)
    spans = k.Spans.of_batches(table)
    tomb = np.array(
        data.draw(st.lists(st.booleans(), min_size=len(table), max_size=len(table))), dtype=np.bool_
    )
    maps: list[OffsetMap] = [HashedOffsetMap(slots * 24, 0.75), ExactOffsetMap(slots, 0.75)]
    puts = [m.put_spans(buf, spans, start) for m in maps]
    assert puts[0] == puts[1]
    assert maps[0].size == maps[1].size and maps[0].latest_offset == maps[1].latest_offset
    ws = Workspace()
    kept = [maps[0].retain_spans(buf, spans, tomb, ws), maps[1].retain_spans(buf, spans, tomb)]
    assert kept[0].invalid_dropped == kept[1].invalid_dropped
    a, b = kept[0].kept, kept[1].kept
    assert len(a) == len(b)
    assert a.batch_first.tolist() == b.batch_first.tolist()
    for col in (
        "offset",
        "position",
        "length",
        "timestamp",
        "key_start",
        "key_len",
        "value_start",
        "value_len",
        "batch",
    ):
        assert getattr(a, col).tolist() == getattr(b, col).tolist(), col


def test_put_spans_full_reports_span_and_record() -> None:
    buf, table = segment(
        [[Rec(b"a", b"1"), Rec(b"b", b"2")], [Rec(b"a", b"3"), Rec(b"c", b"4"), Rec(b"d", b"5")]]
    )
    m = HashedOffsetMap(4 * 24, 0.75)  # 3 keys per pass
    res = m.put_spans(buf, k.Spans.of_batches(table), 0)
    assert (res.full, res.span, res.records_done) == (True, 1, 2)  # stopped before "d"
    assert m.latest_offset == 4 and m.get(b"c") == 4 and m.get(b"d") == -1 and m.get(b"a") == 3


def test_put_spans_done_and_start_offset() -> None:
    buf, table = segment([[Rec(b"a", b"1"), Rec(None, b"x")], [Rec(b"a", b"3")]])
    m = HashedOffsetMap(100 * 24, 0.9)
    res = m.put_spans(buf, k.Spans.of_batches(table), 1)
    assert (res.full, res.span) == (False, 2)
    assert m.get(b"a") == 3 and m.size == 1


def test_retain_spans_rules() -> None:
    # offsets: batch0 = 0..3, batch1 = 5..7 (gap at 4)
    b0 = [Rec(b"a", b"1"), Rec(None, b"u"), Rec(b"t", None), Rec(b"a", b"2")]
    b1 = [Rec(b"t", None), Rec(b"z", b"9"), Rec(None, b"w")]
    buf, table = segment([b0, b1])
    spans = k.Spans.of_batches(table)
    m = HashedOffsetMap(100 * 24, 0.9)
    m.put_spans(buf, k.Spans.of_batches(table, np.array([0])), 0)
    m.update_latest_offset(5)  # as if the map pass ended at offset 5
    res = m.retain_spans(buf, spans, np.array([True, False]))
    # a@0 superseded; null@1 invalid; t@2 tombstone kept (batch may keep) ; a@3 latest;
    # t@5 is at latest and newest for t, but a tombstone batch 1 may not keep -> dropped;
    # z@6 and null@7 are beyond latest -> retained
    assert res.kept.offset.tolist() == [2, 3, 6, 7]
    assert res.kept.batch_first.tolist() == [0, 2, 4]
    assert res.invalid_dropped == 1


def test_span_errors_raise() -> None:
    good = encode_record(Rec(b"k", b"v"), 0)
    buf = np.frombuffer(good, dtype=np.uint8)
    bad_count = k.Spans(np.array([0]), np.array([len(good)]), np.array([0]), np.array([0]), np.array([2]))
    m = HashedOffsetMap(100 * 24, 0.9)
    with pytest.raises(CorruptRecordError, match="batch 0"):
        m.put_spans(buf, bad_count, 0)
    with pytest.raises(CorruptRecordError, match="batch 0"):
        m.retain_spans(buf, bad_count, np.array([True]))
    outside = k.Spans(np.array([0]), np.array([999]), np.array([0]), np.array([0]), np.array([1]))
    with pytest.raises(CorruptRecordError, match="outside the buffer"):
        m.put_spans(buf, outside, 0)
