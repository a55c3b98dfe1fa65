from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.errors import InvalidOffsetError, OffsetOutOfRangeError
from kompakt.records.batch import iter_batches

from .log_helpers import LogHarness, all_records, batch, batch_ranges, config, kv, read_offsets


def test_read_out_of_range(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.truncate_fully_and_start_at(1024)
    h.log.append(kv(1))
    assert h.log.read(1025, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError) as below:
        h.log.read(0, 1000)
    assert str(below.value) == (
        "Received request for offset 0 for partition t-0, "
        "but we only have log segments starting from offset: 1024."
    )
    with pytest.raises(OffsetOutOfRangeError) as above:
        h.log.read(1026, 1000)
    assert str(above.value) == (
        "Received request for offset 1026 for partition t-0, but we only have log segments upto 1025."
    )


def test_read_at_log_gap(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append_with_offsets(batch(b"a", b"b", base_offset=0))
    h.log.roll()
    h.log.append_with_offsets(batch(b"c", base_offset=10))
    # the first segment's tail is gone (as after compaction): offsets 2..9 do not exist
    result = h.log.read(5, 1000)
    assert batch_ranges(result.records) == [(10, 10)]
    assert result.high_watermark == 11 and result.last_stable_offset == 11 and result.log_start_offset == 0


def test_read_bounded_by_max_offset(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    for i in range(5):
        h.log.append(kv(i))
    assert read_offsets(h.log.read(0, 10_000, max_offset=3).records) == [0, 1, 2]
    assert h.log.read(3, 10_000, max_offset=3).records == b""
    assert h.log.read(4, 10_000, max_offset=3).records == b""
    assert h.log.read(5, 10_000).records == b""


def test_append_assigns_offsets_and_gaps_need_follower_path(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    info = h.log.append(batch(b"a", b"b", b"c", base_offset=999))
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert h.log.log_end_offset == 3 == h.log.high_watermark
    with pytest.raises(InvalidOffsetError):
        h.log.append_with_offsets(batch(b"x", base_offset=2))
    h.log.append_with_offsets(batch(b"x", base_offset=7))
    assert h.log.log_end_offset == 8


def test_log_append_time(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    info = h.log.append(kv(1, timestamp=5), log_append_time_ms=777)
    assert info.max_timestamp == 777 and info.log_append_time_ms == 777
    assert h.log.offset_for_timestamp(700) == (0, 777)


def test_a_leader_append_carries_the_leader_epoch_whatever_the_producer_sent(tmp_path: Path) -> None:
    # The Java producer sends -1, librdkafka 0, a buggy client anything: Kafka's leader stamps
    # its own epoch, and a consumer validates its position with the epoch it reads back.
    h = LogHarness(tmp_path / "t-0")
    h.log.append(kv(1, partition_leader_epoch=-1))
    frame = memoryview(bytearray(kv(2, partition_leader_epoch=7)))
    h.log.append(frame, in_place=True)
    h.log.append_with_offsets(kv(3, base_offset=2, partition_leader_epoch=5))  # a follower keeps it
    stored = h.log.read(0, 100_000).records
    assert [v.partition_leader_epoch for v in iter_batches(stored)] == [0, 0, 5]
    assert all(v.is_valid() for v in iter_batches(stored))


def test_offset_for_timestamp(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(internal_segment_bytes=200, index_interval_bytes=1))
    for i in range(10):
        h.log.append(kv(i, timestamp=100 + 10 * i))
    assert len(h.log.segments) > 1
    assert h.log.offset_for_timestamp(135) == (4, 140)
    assert h.log.offset_for_timestamp(100) == (0, 100)
    assert h.log.offset_for_timestamp(1000) is None
    assert h.log.offset_for_timestamp(-2) == (0, -1)
    assert h.log.offset_for_timestamp(-1) == (10, -1)
    assert h.log.offset_for_timestamp(-3) == (9, 190)


def test_increment_log_start_offset(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    for i in range(3):
        h.log.append(kv(i))
    with pytest.raises(OffsetOutOfRangeError) as err:
        h.log.increment_log_start_offset(4)
    assert "Cannot increment the log start offset to 4 of partition t-0" in str(err.value)
    assert "larger than the high watermark 3" in str(err.value)
    assert h.log.increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        h.log.read(1, 100)
    assert h.log.read(2, 100).log_start_offset == 2


def test_truncate_to_and_reopen(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(internal_segment_bytes=200))
    for i in range(12):
        h.log.append(kv(i))
    assert len(h.log.segments) > 2
    h.log.truncate_to(5)
    assert h.log.log_end_offset == 5
    assert [o for o, _k in all_records(h.log)] == [0, 1, 2, 3, 4]
    assert h.log.append(kv(99)).first_offset == 5
    h.reopen()
    assert h.log.log_end_offset == 6
    assert [o for o, _k in all_records(h.log)] == [0, 1, 2, 3, 4, 5]


def test_roll_is_noop_on_empty_active(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.roll()
    assert len(h.log.segments) == 1
    h.log.append(kv(1))
    h.log.roll()
    assert [s.base_offset for s in h.log.segments] == [0, 1]


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(flush_messages=2))
    h.log.append(kv(0))
    assert h.log.recovery_point == 0
    h.log.append(kv(1))
    assert h.log.recovery_point == 2


def test_preallocate(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(preallocate=True, internal_segment_bytes=1000))
    h.log.roll()
    h.log.append(kv(0))
    h.log.roll()
    h.log.append(kv(1))
    first = h.log.segments.values()[0]
    assert first.log_path.stat().st_size == first.size
    h.reopen()
    assert [o for o, _k in all_records(h.log)] == [0, 1]
