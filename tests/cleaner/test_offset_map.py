"""Offset map semantics (``SkimpyOffsetMap``, Kafka's ``OffsetMapTest``), bulk build
(``Cleaner.buildOffsetMapForSegment``) and retention (``Cleaner.shouldRetainRecord``), both maps."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.cleaner.kernels.hashing import hash_key
from kompakt.cleaner.offset_map import (
    ExactOffsetMap,
    HashedOffsetMap,
    OffsetMap,
    RecordKeys,
)
from kompakt.errors import OffsetMapTooSmallError
from tests.support.profiles import examples

MapFactory = Callable[[int, float], OffsetMap]
FACTORIES: list[MapFactory] = [HashedOffsetMap, ExactOffsetMap.for_memory]
both = pytest.mark.parametrize("make", FACTORIES, ids=["hashed", "exact"])


def keys_of(keys: list[bytes | None]) -> RecordKeys:
    raw = b"".join(k or b"" for k in keys)
    lens = np.array([-1 if k is None else len(k) for k in keys], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(np.maximum(lens, 0))[:-1]]).astype(np.int64) if keys else lens
    return RecordKeys.of(np.frombuffer(raw, dtype=np.uint8), starts, lens)


def key(i: int) -> bytes:
    return str(i).encode()


@both
@pytest.mark.parametrize("items", [10, 100, 1000])
def test_basic_put_get(make: MapFactory, items: int) -> None:
    m = make(items * 48, 0.5)
    for i in range(items):
        m.put(key(i), i)
    for i in range(items):
        assert m.get(key(i)) == i
    assert m.size == items


@both
def test_clear_resets_everything(make: MapFactory) -> None:
    m = make(4000, 0.5)
    for i in range(10):
        m.put(key(i), i)
    assert m.latest_offset == 9
    m.clear()
    assert m.size == 0 and m.latest_offset == -1
    for i in range(10):
        assert m.get(key(i)) == -1
    m.put(key(3), 30)  # usable again after clear
    assert m.get(key(3)) == 30 and m.get(key(4)) == -1


@both
def test_full_map_returns_minus_one_for_absent(make: MapFactory) -> None:
    m = make(30 * 24, 1.0)
    for i in range(m.slots):
        m.put(key(i), i)
    assert m.size == m.slots
    for i in range(m.slots, m.slots + 100):
        assert m.get(key(i)) == -1
    assert m.get(key(0)) == 0
    m.put(key(5), 500)  # overwrite in a full map does not grow it
    assert m.get(key(5)) == 500 and m.size == m.slots
    with pytest.raises(OverflowError):
        m.put(b"one more", 1)


@both
def test_latest_offset_and_utilization(make: MapFactory) -> None:
    m = make(100 * 24, 0.9)
    assert m.latest_offset == -1
    for i, off in enumerate([5, 3, 99, 42]):
        m.put(key(i % 3), off)
        assert m.latest_offset == off
        assert m.utilization == m.size / m.slots
    assert m.size == 3
    m.update_latest_offset(1234)
    assert m.latest_offset == 1234


@both
def test_capacity_numbers(make: MapFactory) -> None:
    m = make(134_217_728, 0.9)  # Kafka's default dedupe buffer, one thread
    assert m.slots == 5_592_405
    assert m.max_keys_per_pass == 5_033_164


@both
@pytest.mark.parametrize(("memory", "load"), [(24, 1.0), (48, 0.5), (0, 0.9), (23, 1.0), (48 * 10, 0.05)])
def test_too_small(make: MapFactory, memory: int, load: float) -> None:
    with pytest.raises(OffsetMapTooSmallError, match="too small to fit in even a single message"):
        make(memory, load)


@both
def test_smallest_working_map(make: MapFactory) -> None:
    m = make(48, 1.0)  # 2 slots, max_keys 2 > 1
    assert m.max_keys_per_pass == 2


def test_zero_digest_and_colliding_buckets_are_stored() -> None:
    m = HashedOffsetMap(97 * 24, 1.0)
    slots = m.slots
    # digests that all start at slot 0 (the top 32 bits of hi pick the home slot) with equal and
    # zero double-hashing steps
    hi = np.array([0, slots, 2 * slots, 3 * slots, 0], dtype=np.uint64)
    lo = np.array([0, 0, 0, slots - 1, 1], dtype=np.uint64)
    keys = RecordKeys(np.zeros(0, np.uint8), np.zeros(5, np.int64), np.zeros(5, np.int64), hi, lo)
    res = m.put_records(keys, np.arange(10, 15, dtype=np.int64), 0)
    assert (res.consumed, res.full) == (5, False)
    assert m.size == 5
    assert m.get_many(keys).tolist() == [10, 11, 12, 13, 14]


def test_hashed_map_fills_every_slot_through_probing() -> None:
    m = HashedOffsetMap(64 * 24, 1.0)
    n = m.slots
    hi = np.full(n, 7 << 58, dtype=np.uint64)  # all start at slot 7; steps from lo share factors with 64
    # lo such that the double-hashing step 1 + (top32(lo) * 63 >> 32) is a multiple of 8
    lo = np.array(
        [(((((8 * (i % 7 + 1) - 1) << 32) + 62) // 63) << 32) | i for i in range(n)], dtype=np.uint64
    )
    keys = RecordKeys(np.zeros(0, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.int64), hi, lo)
    res = m.put_records(keys, np.arange(n, dtype=np.int64), 0)
    assert (res.consumed, res.full, m.size) == (n, False, n)
    assert m.get_many(keys).tolist() == list(range(n))


@both
def test_bulk_put_stops_before_put_even_for_existing_key(make: MapFactory) -> None:
    m = make(4 * 24, 0.5)  # 4 slots, 2 keys per pass
    keys = keys_of([b"a", None, b"b", b"a", b"c"])
    res = m.put_records(keys, np.array([0, 1, 2, 3, 4], dtype=np.int64), 0)
    # a, b fill the map; the repeat of "a" at index 3 is refused because size == max already
    assert (res.consumed, res.full) == (3, True)
    assert m.latest_offset == 2
    assert m.get(b"a") == 0 and m.get(b"b") == 2 and m.get(b"c") == -1


@both
def test_bulk_put_skips_below_start_and_null_keys(make: MapFactory) -> None:
    m = make(100 * 24, 0.9)
    keys = keys_of([b"x", None, b"", b"x"])
    res = m.put_records(keys, np.array([5, 6, 7, 8], dtype=np.int64), 7)
    assert (res.consumed, res.full) == (4, False)
    assert m.get(b"x") == 8 and m.get(b"") == 7 and m.size == 2
    assert m.latest_offset == 8
    none_put = m.put_records(keys_of([None, b"y"]), np.array([9, 1], dtype=np.int64), 7)
    assert (none_put.consumed, none_put.full) == (2, False) and m.latest_offset == 8  # nothing put


POOL: list[bytes | None] = [
    None,
    b"",
    b"a",
    b"b",
    b"key-1",
    b"key-2",
    b"\x00",
    b"\x00\x00",
    b"longer key 123",
]
key_pool = st.sampled_from(POOL)


@settings(max_examples=examples(150))
@given(
    st.lists(key_pool, max_size=60),
    st.integers(min_value=2, max_value=40),
    st.sampled_from([0.3, 0.5, 0.75, 0.9, 1.0]),
    st.integers(min_value=0, max_value=30),
    st.integers(min_value=1, max_value=3),
)
def test_bulk_put_matches_exact_oracle(
    seq: list[bytes | None], slots: int, load: float, start: int, chunks: int
) -> None:
    if slots * load <= 1:
        return
    hashed, exact = HashedOffsetMap(slots * 24, load), ExactOffsetMap(slots, load)
    offsets = np.arange(len(seq), dtype=np.int64) * 2  # with gaps
    bounds = np.linspace(0, len(seq), chunks + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        keys = keys_of(seq[a:b])
        r1 = hashed.put_records(keys, offsets[a:b], start)
        r2 = exact.put_records(keys, offsets[a:b], start)
        assert r1 == r2
        assert (hashed.size, hashed.latest_offset) == (exact.size, exact.latest_offset)
        if r1.full:
            break
    probe = keys_of([*POOL, b"absent"])
    assert hashed.get_many(probe).tolist() == exact.get_many(probe).tolist()


def retain_model(
    m: OffsetMap, keys: list[bytes | None], offsets: list[int], values: list[int], tomb_ok: list[bool]
) -> tuple[list[bool], int]:
    keep, invalid = [], 0
    for k, off, vl, ok in zip(keys, offsets, values, tomb_ok, strict=True):
        if off > m.latest_offset:
            keep.append(True)
        elif k is None:
            keep.append(False)
            invalid += 1
        else:
            keep.append(off >= m.get(k) and (vl >= 0 or ok))
    return keep, invalid


@given(
    st.lists(st.tuples(key_pool, st.sampled_from([-1, 0, 5]), st.booleans()), max_size=50),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=2, max_value=30),
)
def test_retain_mask_matches_model(
    recs: list[tuple[bytes | None, int, bool]], map_end: int, slots: int
) -> None:
    keys = [r[0] for r in recs]
    values = [r[1] for r in recs]
    tomb = [r[2] for r in recs]
    offsets = list(range(len(recs)))
    rk = keys_of(keys)
    for make in FACTORIES:
        m = make(slots * 24, 0.75)
        m.put_records(keys_of(keys[:map_end]), np.array(offsets[:map_end], dtype=np.int64), 0)
        res = m.retain_mask(
            rk,
            np.array(offsets, dtype=np.int64),
            np.array(values, dtype=np.int64),
            np.array(tomb, dtype=bool),
        )
        want_keep, want_invalid = retain_model(m, keys, offsets, values, tomb)
        assert res.keep.tolist() == want_keep
        assert res.invalid_dropped == want_invalid


def test_single_and_bulk_paths_share_digests() -> None:
    m = HashedOffsetMap(1000 * 24, 0.9)
    m.put(b"alpha", 3)
    assert m.get_many(keys_of([b"alpha", b"beta", None])).tolist() == [3, -1, -1]
    m.put_records(keys_of([b"beta"]), np.array([9], dtype=np.int64), 0)
    assert m.get(b"beta") == 9
    assert hash_key(b"alpha") != hash_key(b"beta")


# ---------------------------------------------------------------------------------------------
# Growth: the table starts with a few slots in use and rehashes in place as keys arrive


@settings(max_examples=examples(150))
@given(
    st.lists(st.integers(min_value=0, max_value=80), max_size=120),
    st.integers(min_value=2, max_value=70),
    st.sampled_from([0.5, 0.75, 0.9, 1.0]),
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=1, max_value=3),
)
def test_growing_map_matches_exact_oracle(
    ids: list[int], slots: int, load: float, initial: int, chunks: int
) -> None:
    if slots * load <= 1:
        return
    seq: list[bytes | None] = [None if i == 0 else key(i) for i in ids]
    hashed = HashedOffsetMap(slots * 24, load, initial_slots=initial)
    exact = ExactOffsetMap(slots, load)
    offsets = np.arange(len(seq), dtype=np.int64)
    bounds = np.linspace(0, len(seq), chunks + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        keys = keys_of(seq[a:b])
        r1 = hashed.put_records(keys, offsets[a:b], 0)
        assert r1 == exact.put_records(keys, offsets[a:b], 0)
        assert (hashed.size, hashed.latest_offset) == (exact.size, exact.latest_offset)
        assert initial <= hashed.slots_in_use <= slots or hashed.slots_in_use == slots
        if r1.full:
            break
    probe = keys_of([key(i) for i in range(82)])
    assert hashed.get_many(probe).tolist() == exact.get_many(probe).tolist()
    hashed.clear()
    assert hashed.slots_in_use == min(initial, slots) and hashed.size == 0
    assert (hashed.get_many(probe) == -1).all()


def test_single_puts_grow_the_table_up_to_every_slot() -> None:
    m = HashedOffsetMap(1000 * 24, 1.0, initial_slots=3)
    for i in range(1000):
        m.put(key(i), i)
    assert m.size == 1000 and m.slots_in_use == 1000
    assert all(m.get(key(i)) == i for i in range(1000))
    with pytest.raises(OverflowError):
        m.put(b"one more", 1)


def test_large_map_grows_past_its_initial_region_and_clears() -> None:
    m = HashedOffsetMap(300_000 * 24, 0.9)
    assert m.slots_in_use < 300_000
    n = 200_000
    raw = b"".join(b"k%07d" % i for i in range(n))
    rk = RecordKeys.of(np.frombuffer(raw, dtype=np.uint8), np.arange(n, dtype=np.int64) * 8, np.full(n, 8))
    res = m.put_records(rk, np.arange(n, dtype=np.int64), 0)
    assert (res.consumed, res.full, m.size) == (n, False, n)
    assert m.slots_in_use == 300_000  # a non-power-of-two final region: all slots
    assert (m.get_many(rk) == np.arange(n)).all()
    res = m.put_records(rk, np.arange(n, 2 * n, dtype=np.int64), 0)  # overwrites only
    assert m.size == n and (m.get_many(rk) == np.arange(n, 2 * n)).all()
    m.clear()
    assert m.size == 0 and (m.get_many(rk) == -1).all()
    assert not m._table.any()  # the whole used region is zero again


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_idle_map_does_not_take_its_memory() -> None:
    before = _rss_kib()
    m = HashedOffsetMap(128 * 1024 * 1024, 0.9)
    m.put(b"one", 1)  # touches only the initial region
    assert _rss_kib() - before < 16 * 1024
    assert m.get(b"one") == 1
