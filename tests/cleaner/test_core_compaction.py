"""Core compaction: ports of Kafka's ``LogCleanerTest`` (reference scenarios S1-S16), driven through the
real Cleaner."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.errors import CleaningAbortedError

from ._harness import (
    DAY_MS,
    MAX_LONG,
    K,
    O,
    all_records,
    append_at,
    append_kv,
    append_until_segments,
    batches,
    build_map,
    clean,
    clean_result,
    lct_log,
    leftovers,
    log_bytes,
    make_map,
    rewrite,
    roll,
    roll_at,
    segment_record_counts,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_clean_keeps_the_latest_value_of_each_key(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanSegments`` (reference scenario S1)."""
    log = lct_log(tmp_path, clock)
    append_until_segments(log, 4)
    before = K(log)
    segs = log.segments.values()
    offset_map = make_map()
    for k in (1, 3, 5, 7, 9):
        offset_map.put(str(k).encode(), MAX_LONG)
    stats = rewrite(log, segs[:3], offset_map, now=0, upper_bound=segs[2].read_next_offset())
    assert K(log) == [k for k in before if k not in {1, 3, 5, 7, 9}]
    assert stats.bytes_read == sum(s.size for s in segs[:3])


def test_clean_segments_retaining_last_empty_batch(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanSegmentsRetainingLastEmptyBatch`` (reference scenario S2)."""
    log = lct_log(tmp_path, clock)
    keys = append_until_segments(log, 4)
    segs = log.segments.values()
    offset_map = make_map()
    for k in keys:
        offset_map.put(str(k).encode(), MAX_LONG)
    upper = segs[2].read_next_offset()
    rewrite(log, segs[:3], offset_map, now=0, upper_bound=upper)
    assert len(log.segments) == 2
    first = log.segments.values()[0]
    views = [(v.records_count, v.last_offset) for _p, v in first.iter_batches()]
    assert views == [(0, log.segments.active.base_offset - 1)]


def test_size_trimmed_for_preallocated_and_compacted_topic(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testSizeTrimmedForPreallocatedAndCompactedTopic`` (reference scenario S3)."""
    log = lct_log(tmp_path, clock, preallocate=True)
    for k in (0, 1, 0, 1, 0):
        append_kv(log, k, k)
    roll(log)
    clean(log, 2, map_slots=2)
    first = log.segments.values()[0]
    assert first.log_path.stat().st_size < 1024
    assert first.log_path.stat().st_size == first.size


def test_clean_statistics_count_reads_and_writes(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testLogCleanerStats`` (reference scenario S4)."""
    log = lct_log(tmp_path, clock)
    for k in (0, 1, 0, 1, 0):
        append_kv(log, k, k)
    roll(log)
    size0 = log.size_bytes
    result = clean_result(log, 2, map_slots=4)
    stats = result.stats
    assert result.end_offset == 5
    assert stats.messages_read == 5
    assert stats.bytes_read == size0
    assert stats.messages_written == 2
    assert stats.bytes_written == log.size_bytes
    assert stats.invalid_messages_read == 0
    assert stats.end_ms is not None and stats.end_ms >= stats.start_ms


def test_partial_segment_clean_when_the_map_is_full(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testPartialSegmentClean`` (reference scenario S5)."""
    log = lct_log(tmp_path, clock)
    for k in (0, 1, 0, 1, 0):
        append_kv(log, k, k)
    roll(log)
    assert clean(log, 2, map_slots=2) == 3
    assert (K(log), O(log)) == ([1, 0, 1, 0], [1, 2, 3, 4])
    assert clean(log, 3, map_slots=2) == 4
    assert (K(log), O(log)) == ([0, 1, 0], [2, 3, 4])
    assert clean(log, 4, map_slots=2) == 5
    assert (K(log), O(log)) == ([1, 0], [3, 4])


@pytest.mark.parametrize("hashed", [False, True])
def test_build_partial_offset_map(tmp_path: Path, clock: FakeClock, hashed: bool) -> None:
    """Kafka's ``LogCleanerTest.testBuildPartialOffsetMap`` (reference scenario S6)."""
    log = lct_log(tmp_path, clock)
    for k in range(5):
        append_kv(log, k, k)
    roll(log)
    offset_map = make_map(3, hashed=hashed)
    stats = build_map(log, 2, 2**62, offset_map)
    assert offset_map.size == 2
    assert [offset_map.get(str(k).encode()) for k in (0, 2, 3, 4)] == [-1, 2, 3, -1]
    assert stats.map_messages_read == 4


@pytest.mark.parametrize("hashed", [False, True])
def test_build_offset_map(tmp_path: Path, clock: FakeClock, hashed: bool) -> None:
    """Kafka's ``LogCleanerTest.testBuildOffsetMap`` (reference scenario S7)."""
    log = lct_log(tmp_path, clock)
    for i in range(500):
        append_kv(log, i, i)
    segs = log.segments.values()
    assert len(segs) > 4
    for a, b in (
        (0, segs[1].base_offset),
        (segs[1].base_offset, segs[3].base_offset),
        (segs[3].base_offset, 500),
    ):
        offset_map = make_map(1000, hashed=hashed)
        stats = build_map(log, a, b, offset_map)
        assert offset_map.latest_offset + 1 == b
        assert offset_map.size == b - a
        assert all(offset_map.get(str(i).encode()) == i for i in range(a, b))
        assert offset_map.get(str(a - 1).encode()) == -1
        assert offset_map.get(str(b).encode()) == -1
        assert stats.map_messages_read == b - a


def test_build_offset_map_fake_large(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testBuildOffsetMapFakeLarge`` (reference scenario S8)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=120, segment_index_bytes=120)
    append_at(log, 0, 0, 0)
    append_at(log, 7206178, 1, 1)
    offset_map = make_map()
    build_map(log, 0, 7206179, offset_map)
    assert offset_map.latest_offset == 7206178
    assert offset_map.size == 2
    assert offset_map.get(b"0") == 0
    assert offset_map.get(b"1") == 7206178


def test_cleaning_with_deletes(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleaningWithDeletes`` (reference scenario S9)."""
    log = lct_log(tmp_path, clock)
    append_until_segments(log, 2)
    leo = log.log_end_offset
    for k in range(0, leo, 2):
        append_kv(log, k, None)
    append_until_segments(log, 4, start_key=leo)
    clean(log, 0)
    assert not any(k < leo and k % 2 == 0 for k in K(log))
    tombstones = [k for _o, k, v in all_records(log) if v is None]
    assert tombstones == [str(k).encode() for k in range(0, leo, 2)]
    for view, recs in batches(log):
        if any(r.value is None for r in recs):
            assert view.has_delete_horizon


def test_tombstone_horizon_follows_clean_time(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanTombstone`` (reference scenario S10)."""
    log = lct_log(tmp_path, clock, base={})
    now = clock.now_ms()
    append_kv(log, 0, 0, timestamp=now + DAY_MS + 10_000)
    roll(log)
    clean(log, 0, map_slots=10)
    append_kv(log, 0, None, timestamp=now - DAY_MS - 10_000)
    roll(log)
    clean(log, 1, map_slots=10)
    first = next(iter(batches(log)))[0]
    assert first.last_offset == 1
    append_kv(log, 1, 1)
    roll(log)
    clean(log, 2, map_slots=10)
    first = next(iter(batches(log)))[0]
    assert first.last_offset == 1


def test_cleaning_with_unkeyed_messages(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleaningWithUnkeyedMessages`` (reference scenario S11)."""
    log = lct_log(tmp_path, clock, cleanup_policy=frozenset({"delete"}))
    while len(log.segments) < 2:
        append_kv(log, None, log.log_end_offset)
    n = sum(1 for _o, k, _v in all_records(log) if k is None)
    size_unkeyed = log.size_bytes
    while len(log.segments) < 3:
        append_kv(log, log.log_end_offset, log.log_end_offset)
    expected = log.size_bytes - size_unkeyed
    result = clean_result(log, 0)
    assert sum(1 for _o, k, _v in all_records(log) if k is None) == 0
    assert log.size_bytes == expected
    assert result.stats.invalid_messages_read == n


def test_cleaning_with_uncleanable_section(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleaningWithUncleanableSection`` (reference scenario S12)."""
    log = lct_log(tmp_path, clock)
    while len(log.segments) < 3:
        o = log.log_end_offset
        append_kv(log, o % 10, o)
    u = log.log_end_offset + 1
    while len(log.segments) < 6:
        o = log.log_end_offset
        append_kv(log, o % 10, o)
    before = segment_record_counts(log)
    clean(log, 0, uncleanable=u)
    after = segment_record_counts(log)
    assert len(after) == 6
    assert after[0] < before[0] and after[1] < before[1]
    assert after[2:] == before[2:]


def test_cleaning_beyond_missing_offsets_in_one_pass(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleaningBeyondMissingOffsets`` (reference scenario S14)."""
    log = lct_log(tmp_path, clock, segment_bytes=1024 * 1024)
    for i in range(10):
        append_at(log, i, i, i)
    roll_at(log, 11)
    append_at(log, 11, 1015, 1015)
    assert clean(log, 0) == 11


def test_cleaning_beyond_missing_offsets_in_two_passes(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleaningBeyondMissingOffsets`` (reference scenario S14)."""
    log = lct_log(tmp_path, clock, segment_bytes=1024 * 1024)
    for i in range(10):
        append_at(log, i, i, i)
    roll_at(log, 15)
    for i in range(15, 25):
        append_at(log, i, i, i)
    roll_at(log, 30)
    append_at(log, 30, 1015, 1015)
    assert clean(log, 0) == 30


def _always_abort(topic: str, partition: int) -> None:
    raise CleaningAbortedError(f"cleaning of {topic}-{partition} aborted")


def test_clean_segments_with_abort(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanSegmentsWithAbort`` (reference scenario S15)."""
    log = lct_log(tmp_path, clock)
    append_until_segments(log, 4, value=lambda i: i)
    before = log_bytes(log)
    segs = log.segments.values()
    offset_map = make_map()
    for k in (1, 3, 5):
        offset_map.put(str(k).encode(), MAX_LONG)
    with pytest.raises(CleaningAbortedError):
        rewrite(
            log,
            segs[:3],
            offset_map,
            now=0,
            upper_bound=segs[2].read_next_offset(),
            check_abort=_always_abort,
        )
    assert leftovers(log) == []
    assert log_bytes(log) == before
    # The whole pass aborts the same way, already while mapping.
    with pytest.raises(CleaningAbortedError):
        clean(log, 0, check_abort=_always_abort)
    assert leftovers(log) == []
    assert log_bytes(log) == before


def test_abort_after_rewrite_before_swap(tmp_path: Path, clock: FakeClock) -> None:
    """An abort that fires at the last check (after the .cleaned files were written) also cleans up.

    Kafka's ``LogCleanerTest.testCleanSegmentsWithAbort`` (reference scenario S15).
    """
    log = lct_log(tmp_path, clock)
    append_until_segments(log, 4)
    before = log_bytes(log)

    def abort_when_cleaned_exists(topic: str, partition: int) -> None:
        if any(p.name.endswith(".cleaned") for p in log.directory.iterdir()):
            _always_abort(topic, partition)

    with pytest.raises(CleaningAbortedError):
        clean(log, 0, check_abort=abort_when_cleaned_exists)
    assert leftovers(log) == []
    assert log_bytes(log) == before


def test_clean_segments_with_concurrent_segment_deletion(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanSegmentsWithConcurrentSegmentDeletion`` (reference scenario S16)."""
    log = lct_log(tmp_path, clock, cleanup_policy=frozenset({"compact", "delete"}))
    append_kv(log, 0, 0)
    roll(log)
    append_kv(log, 0, 1)
    roll(log)
    assert len(log.segments) == 3
    segs = log.segments.values()
    original = segs[0].log_path
    offset_map = make_map()
    build_map(log, 0, 2, offset_map)
    real_replace = log.replace_segments

    def delete_then_replace(new: list[object], old: list[object]) -> None:
        log.increment_log_start_offset(2)
        assert log.delete_old_segments(clock.now_ms()) == 2
        real_replace(new, old)  # type: ignore[arg-type]

    log.replace_segments = delete_then_replace  # type: ignore[method-assign,assignment]
    rewrite(log, segs[:2], offset_map, now=clock.now_ms(), upper_bound=2)
    assert segs[0].log_path == original.with_name(original.name + ".deleted")
    assert [s.base_offset for s in log.segments.values()] == [0, 2]
    log.delete_old_segments(clock.now_ms())
    assert [s.base_offset for s in log.segments.values()] == [2]


def test_empty_dirty_range_is_a_no_op(tmp_path: Path, clock: FakeClock) -> None:
    """With a real map, clean(active base) maps nothing and returns 0 (the reference's harness note)."""
    log = lct_log(tmp_path, clock)
    for k in (0, 0, 1):
        append_kv(log, k, k)
    roll(log)
    before = log_bytes(log)
    assert clean(log, log.segments.active.base_offset) == 0
    assert log_bytes(log) == before
