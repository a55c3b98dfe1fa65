"""Record parsing, key hashing and record rewriting against the slow reference parser."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.cleaner.kernels import hashing
from kompakt.cleaner.kernels import rewrite as kr
from kompakt.errors import CorruptRecordError
from kompakt.records import scan as k
from tests.support.handbuilt_batches import Rec, encode_batch, encode_record, parse_records, varint
from tests.support.profiles import examples


def u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.uint8)


opt_bytes = st.one_of(st.none(), st.binary(max_size=40))
records_st = st.builds(
    Rec,
    key=opt_bytes,
    value=opt_bytes,
    timestamp_delta=st.integers(min_value=-(2**45), max_value=2**45),
    headers=st.lists(st.tuples(st.binary(max_size=8), opt_bytes), max_size=3),
)
batches_st = st.lists(st.lists(records_st, max_size=6), min_size=1, max_size=5)


def build_segment(batches: list[list[Rec]]) -> tuple[bytes, list[tuple[int, int]]]:
    raw = b""
    bases = []
    off = 100
    for i, recs in enumerate(batches):
        raw += encode_batch(off, recs, base_timestamp=10_000 + i)
        bases.append((off, 10_000 + i))
        off += max(len(recs), 1)
    return raw, bases


def rows(buf: bytes, t: k.RecordTable) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    out = []
    for i in range(len(t)):
        kl, vl = int(t.key_len[i]), int(t.value_len[i])
        ks, vs = int(t.key_start[i]), int(t.value_start[i])
        out.append(
            (
                int(t.offset[i]),
                int(t.timestamp[i]),
                None if kl < 0 else buf[ks : ks + kl],
                None if vl < 0 else buf[vs : vs + vl],
                int(t.batch[i]),
            )
        )
    return out


def model_rows(raw: bytes, table: k.BatchTable) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    out = []
    for b in range(len(table)):
        pos, size = int(table.position[b]), int(table.size[b])
        for p in parse_records(
            raw, pos + 61, pos + size, int(table.base_offset[b]), int(table.base_timestamp[b])
        ):
            out.append((p.offset, p.timestamp, p.key, p.value, b))
    return out


@settings(max_examples=examples(60))
@given(batches_st)
def test_scan_records_matches_reference(batches: list[list[Rec]]) -> None:
    raw, _ = build_segment(batches)
    buf = u8(raw)
    table = k.scan_batches(buf)
    assert len(table) == len(batches)
    recs = k.scan_batch_records(buf, table)
    assert rows(raw, recs) == model_rows(raw, table)
    assert recs.batch_first.tolist() == np.concatenate([[0], np.cumsum([len(b) for b in batches])]).tolist()
    # record spans tile each batch's records section exactly
    assert (recs.position + recs.length)[:-1].tolist() == [
        int(recs.position[i + 1])
        if recs.batch[i + 1] == recs.batch[i]
        else int(recs.position[i] + recs.length[i])
        for i in range(len(recs) - 1)
    ]


def test_null_empty_keys_values_headers_negative_deltas() -> None:
    recs = [
        Rec(None, b"v", -5),
        Rec(b"", None, 3, headers=[(b"h1", b""), (b"", None)]),
        Rec(b"key", b"", -(2**40)),
    ]
    raw = encode_batch(40, recs, base_timestamp=2**41)
    t = k.scan_batch_records(u8(raw), k.scan_batches(u8(raw)))
    assert t.offset.tolist() == [40, 41, 42]
    assert t.timestamp.tolist() == [2**41 - 5, 2**41 + 3, 2**41 - 2**40]
    assert t.key_len.tolist() == [-1, 0, 3]
    assert t.value_len.tolist() == [1, -1, 0]
    assert t.batch.tolist() == [0, 0, 0]


def test_spans_over_a_separate_payload_buffer() -> None:
    """The compressed-batch path: payloads concatenated in one buffer, headers supplied as arrays."""
    a = [Rec(b"x", b"1"), Rec(b"y", b"2", 4)]
    b = [Rec(b"z", None, -1)]
    pa = b"".join(encode_record(r, i) for i, r in enumerate(a))
    pb = b"".join(encode_record(r, i) for i, r in enumerate(b))
    buf = u8(pa + pb)
    t = k.scan_records(
        buf,
        np.array([0, len(pa)]),
        np.array([len(pa), len(pa) + len(pb)]),
        np.array([10, 20]),
        np.array([500, 900]),
        np.array([2, 1]),
    )
    assert t.offset.tolist() == [10, 11, 20]
    assert t.timestamp.tolist() == [500, 504, 899]
    assert t.batch.tolist() == [0, 0, 1]
    assert t.batch_first.tolist() == [0, 2, 3]


def scan_one(payload: bytes, count: int) -> k.RecordTable:
    buf = u8(payload)
    return k.scan_records(
        buf, np.array([0]), np.array([len(payload)]), np.array([0]), np.array([0]), np.array([count])
    )


GOOD = encode_record(Rec(b"key", b"value", headers=[(b"h", b"v")]), 0)


@pytest.mark.parametrize(
    ("payload", "count", "message"),
    [
        (GOOD, 2, "runs past the batch end"),  # count says more records than bytes
        (GOOD + GOOD, 1, "after its declared record count"),
        (GOOD, -1, "negative"),
        (GOOD[:-1], 1, "runs past the batch end"),  # length past the section
        (b"\xff\xff\xff\xff\xff\x01", 1, "length varint"),  # overlong length varint
        (varint(3) + b"\x00\x00\x00", 1, "record field varint"),  # fields run out
        (varint(5) + b"\x00\x00\x00" + varint(-7) + b"\x00", 1, "key or value length"),
        (varint(5) + b"\x00\x00\x00" + varint(9) + b"\x00", 1, "key or value length"),
        (varint(6) + b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(-2), 1, "header"),
        (
            varint(8) + b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(1) + varint(-1) + b"\x00",
            1,
            "header",
        ),
        (varint(7) + b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(0) + b"\x00", 1, "do not fill"),
    ],
)
def test_malformed_records_raise_with_position(payload: bytes, count: int, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message) as info:
        scan_one(payload, count)
    assert "batch 0" in str(info.value)
    assert "position" in str(info.value)


def test_malformed_reports_the_right_batch() -> None:
    good = encode_batch(0, [Rec(b"a", b"b")])
    bad = bytearray(encode_batch(1, [Rec(b"a", b"b")]))
    bad[57:61] = (2).to_bytes(4, "big")  # count 2, one record present
    buf = u8(good + bytes(bad))
    with pytest.raises(CorruptRecordError, match="batch 1"):
        k.scan_batch_records(buf, k.scan_batches(buf))


def test_span_outside_buffer_is_rejected() -> None:
    with pytest.raises(CorruptRecordError, match="outside the buffer"):
        k.scan_records(u8(GOOD), np.array([0]), np.array([999]), np.array([0]), np.array([0]), np.array([1]))


# ----------------------------------------------------------------------------- hashing


def test_hash_is_deterministic_and_matches_single_key_path() -> None:
    keys = [b"", b"a", b"abcdefgh", b"abcdefghi", b"\x00" * 16, b"\x00" * 17, bytes(range(100))]
    raw = b"".join(keys)
    starts = np.cumsum([0] + [len(x) for x in keys[:-1]])
    lens = np.array([len(x) for x in keys])
    hi, lo = hashing.hash_keys(u8(raw), starts, lens)
    hi2, lo2 = hashing.hash_keys(u8(raw), starts, lens)
    assert hi.tolist() == hi2.tolist() and lo.tolist() == lo2.tolist()
    for i, key in enumerate(keys):
        assert hashing.hash_key(key) == (int(hi[i]), int(lo[i]))
    assert len({(int(a), int(b)) for a, b in zip(hi, lo, strict=True)}) == len(keys)


def test_null_keys_are_not_hashed() -> None:
    hi, lo = hashing.hash_keys(u8(b"abc"), np.array([0, 0]), np.array([-1, 3]))
    assert (int(hi[0]), int(lo[0])) == (0, 0)
    assert (int(hi[1]), int(lo[1])) == hashing.hash_key(b"abc")


def test_hash_rejects_keys_outside_buffer() -> None:
    with pytest.raises(ValueError):
        hashing.hash_keys(u8(b"abc"), np.array([1]), np.array([3]))


def test_hash_distinct_over_many_similar_keys() -> None:
    # 300k keys that differ in few bits: decimal ids, their zero-padded forms and 8-byte counters.
    ids = [str(i).encode() for i in range(100_000)]
    ids += [b"key-%012d" % i for i in range(100_000)]
    ids += [i.to_bytes(8, "little") for i in range(100_000)]
    raw = b"".join(ids)
    lens = np.array([len(x) for x in ids])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    hi, lo = hashing.hash_keys(u8(raw), starts, lens)
    assert len(np.unique(hi)) == len(ids)
    assert len(np.unique(lo)) == len(ids)
    # every output bit is roughly balanced
    for word in (hi, lo):
        bits = np.unpackbits(word.view(np.uint8)).reshape(-1, 64).mean(axis=0)
        assert np.all(np.abs(bits - 0.5) < 0.01)


# ----------------------------------------------------------------------------- rewriting


@settings(max_examples=examples(60))
@given(batches_st, st.integers(min_value=-(2**44), max_value=2**44), st.randoms(use_true_random=False))
def test_rewrite_round_trip(batches: list[list[Rec]], new_base: int, rnd: random.Random) -> None:
    raw, _ = build_segment(batches)
    buf = u8(raw)
    table = k.scan_batches(buf)
    recs = k.scan_batch_records(buf, table)
    keep = np.array([rnd.random() < 0.6 for _ in range(len(recs))], dtype=np.bool_)
    full = model_rows(raw, table)
    ref = [
        (b, p)
        for b in range(len(table))
        for p in parse_records(
            raw,
            int(table.position[b]) + 61,
            int(table.position[b] + table.size[b]),
            int(table.base_offset[b]),
            int(table.base_timestamp[b]),
        )
    ]
    out = np.zeros(len(raw) + 11 * len(recs) + 61 * len(table), dtype=np.uint8)
    bases = np.full(len(table), new_base, dtype=np.int64)
    starts, ends = kr.rewrite_batches(buf, recs, keep, np.arange(len(table)), bases, out)
    obytes = out.tobytes()
    for b in range(len(table)):
        got = parse_records(obytes, int(starts[b]), int(ends[b]), int(table.base_offset[b]), new_base)
        want = [p for (bb, p), kp in zip(ref, keep, strict=True) if bb == b and kp]
        assert got == want
        # single-batch API writes the same bytes
        lo, hi = int(recs.batch_first[b]), int(recs.batch_first[b + 1])
        single = np.zeros(len(out), dtype=np.uint8)
        n = kr.rewrite_records(
            buf,
            recs.position[lo:hi],
            recs.length[lo:hi],
            recs.timestamp[lo:hi],
            keep[lo:hi],
            new_base,
            single,
        )
        assert single[:n].tobytes() == obytes[int(starts[b]) : int(ends[b])]
    assert len(full) == len(recs)


def test_rewrite_unchanged_base_copies_bytes() -> None:
    raw = encode_batch(0, [Rec(b"a", b"1", 0), Rec(b"b", b"2", 5)], base_timestamp=100)
    buf = u8(raw)
    recs = k.scan_batch_records(buf, k.scan_batches(buf))
    out = np.zeros(200, dtype=np.uint8)
    n = kr.rewrite_records(buf, recs.position, recs.length, recs.timestamp, np.ones(2, np.bool_), 100, out)
    assert out[:n].tobytes() == raw[61:]


def test_rewrite_needs_room() -> None:
    raw = encode_batch(0, [Rec(b"a", b"1")], base_timestamp=0)
    buf = u8(raw)
    recs = k.scan_batch_records(buf, k.scan_batches(buf))
    with pytest.raises(ValueError, match="too small"):
        kr.rewrite_records(
            buf,
            recs.position,
            recs.length,
            recs.timestamp,
            np.ones(1, np.bool_),
            -(2**60),
            np.zeros(4, np.uint8),
        )
