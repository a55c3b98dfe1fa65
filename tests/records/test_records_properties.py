"""Hypothesis round-trip properties: any record list, any codec, any batch options."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.records.batch import Compression, RecordBatchView, iter_batches, set_base_offset
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import Record, decode_records
from tests.support.profiles import examples

kafka_records = pytest.importorskip("kafka.record.default_records")

TIMESTAMPS = st.integers(min_value=-1, max_value=2**45)
BLOBS = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=40)), max_size=4).map(tuple)
RECORDS = st.builds(SimpleRecord, key=BLOBS, value=BLOBS, timestamp=TIMESTAMPS, headers=HEADERS)
CODECS = st.sampled_from(list(Compression))


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[SimpleRecord], dict[str, object]]:
    records = draw(st.lists(RECORDS, min_size=1, max_size=25))
    gaps = draw(
        st.lists(st.integers(min_value=1, max_value=1000), min_size=len(records), max_size=len(records))
    )
    deltas = [sum(gaps[: i + 1]) - gaps[0] for i in range(len(records))]
    records = [
        SimpleRecord(r.key, r.value, r.timestamp, r.headers, offset_delta=d)
        for r, d in zip(records, deltas, strict=True)
    ]
    options: dict[str, object] = {
        "base_offset": draw(st.integers(min_value=0, max_value=2**62)),
        "compression": draw(CODECS),
        "last_offset_delta": deltas[-1] + draw(st.integers(min_value=0, max_value=50)),
        "delete_horizon_ms": draw(st.none() | TIMESTAMPS),
        "producer_id": draw(st.integers(min_value=-1, max_value=2**62)),
        "partition_leader_epoch": draw(st.integers(min_value=-1, max_value=2**31 - 1)),
    }
    return records, options


def _expected(records: list[SimpleRecord], base_offset: int) -> list[Record]:
    return [
        Record(base_offset + (r.offset_delta or 0), r.timestamp, r.key, r.value, r.headers) for r in records
    ]


@settings(max_examples=examples(150))
@given(batches())
def test_build_decode_round_trip(case: tuple[list[SimpleRecord], dict[str, object]]) -> None:
    records, options = case
    raw = build_batch(records, **options)  # type: ignore[arg-type]
    view = RecordBatchView(raw)
    view.validate()
    base_offset = options["base_offset"]
    assert isinstance(base_offset, int)
    assert view.compression == options["compression"]
    assert view.last_offset_delta == options["last_offset_delta"]
    assert view.delete_horizon_ms == options["delete_horizon_ms"]
    assert view.max_timestamp == max(r.timestamp for r in records)
    assert decode_records(view) == _expected(records, base_offset)


@settings(max_examples=examples(75))
@given(batches())
def test_kafka_python_agrees(case: tuple[list[SimpleRecord], dict[str, object]]) -> None:
    records, options = case
    raw = build_batch(records, **options)  # type: ignore[arg-type]
    batch = kafka_records.DefaultRecordBatch(raw)
    assert batch.validate_crc()
    parsed = [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch]
    expected = [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in _expected(records, batch.base_offset)
    ]
    assert parsed == expected


@settings(max_examples=examples(50))
@given(st.lists(st.lists(RECORDS, min_size=1, max_size=4), min_size=1, max_size=6), st.data())
def test_concatenated_batches_reassigned_offsets(
    groups: list[list[SimpleRecord]], data: st.DataObject
) -> None:
    """The broker's append path: concatenate, then rewrite base offsets in place; CRCs stay valid."""
    buf = bytearray(b"".join(build_batch(g, compression=data.draw(CODECS)) for g in groups))
    next_offset = data.draw(st.integers(min_value=0, max_value=2**40))
    start = next_offset
    for view in list(iter_batches(buf)):
        set_base_offset(buf, view.position, next_offset)
        next_offset = view.next_offset
    views = list(iter_batches(buf))
    assert len(views) == len(groups)
    offsets: list[int] = []
    for view in views:
        view.validate()
        offsets.extend(r.offset for r in decode_records(view))
    assert offsets == list(range(start, start + sum(len(g) for g in groups)))
