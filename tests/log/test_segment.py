from __future__ import annotations

from pathlib import Path

from kompakt.config.defs import LONG_MAX
from kompakt.log.segment import LogSegment

from .log_helpers import batch, batch_ranges


def new_segment(tmp_path: Path, base: int = 0, interval: int = 1) -> LogSegment:
    return LogSegment.create(tmp_path, base, index_interval_bytes=interval, max_index_size=10 * 1024)


def append(seg: LogSegment, base_offset: int, *values: bytes, timestamp: int = 1000) -> None:
    seg.append_batches(batch(*values, base_offset=base_offset, timestamp=timestamp))


def test_read_from_gap(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, 40)
    append(seg, 50, b"a", b"b")
    append(seg, 60, b"c", b"d")
    found = seg.read(55, 200)
    assert found is not None
    assert batch_ranges(found[1]) == [(60, 61)]


def test_read_before_first_offset_and_after_last(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, 40)
    append(seg, 50, b"a", b"b", b"c", b"d")
    found = seg.read(41, 300)
    assert found is not None and batch_ranges(found[1]) == [(50, 53)]
    assert seg.read(54, 300) is None
    inside = seg.read(52, 300)
    assert inside is not None and batch_ranges(inside[1]) == [(50, 53)]


def test_read_returns_whole_batches_and_min_one_message(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    for i in range(10):
        append(seg, i, b"x" * 50)
    one = seg.read(0, 1, min_one_message=True)
    assert one is not None and batch_ranges(one[1]) == [(0, 0)]
    none = seg.read(0, 0, min_one_message=False)
    assert none is not None and none[1] == b""
    size = len(batch(b"x" * 50))
    three = seg.read(2, 3 * size + size // 2)
    assert three is not None and batch_ranges(three[1]) == [(2, 2), (3, 3), (4, 4)]


def test_first_batch_timestamp_and_next_offset(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, 40)
    assert seg.first_batch_timestamp() == LONG_MAX
    assert seg.read_next_offset() == 40
    append(seg, 50, b"a", b"b", b"c", timestamp=1000)
    assert seg.first_batch_timestamp() == 1000
    assert seg.read_next_offset() == 53


def test_recover_truncates_torn_tail_and_rebuilds_index(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    for i in range(5):
        append(seg, i, b"v" * 20, timestamp=100 + i)
    entries = seg.offset_index.entry_table()
    size = seg.size
    seg.close()
    with open(seg.log_path, "r+b") as f:
        f.truncate(size - 3)
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=1, max_index_size=10 * 1024)
    truncated = reopened.recover()
    assert truncated == size - 3 - (size // 5) * 4
    assert reopened.read_next_offset() == 4
    assert reopened.offset_index.entry_table() == entries[:3]
    assert reopened.largest_timestamp == 103


def test_truncate_to(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    for i in range(5):
        append(seg, i * 2, b"a", b"b", timestamp=10 + i)
    assert seg.truncate_to(5, now_ms=0) > 0
    assert seg.read_next_offset() == 4
    assert seg.max_timestamp_so_far == 11


def test_suffix_rename_and_delete(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 7, index_interval_bytes=1, max_index_size=1024, suffix=".cleaned")
    append(seg, 7, b"a")
    seg.on_become_inactive()
    seg.change_file_suffixes(".cleaned", ".swap")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000007.index.swap",
        "00000000000000000007.log.swap",
        "00000000000000000007.timeindex.swap",
    ]
    seg.change_file_suffixes(".swap", "")
    assert seg.log_path.name == "00000000000000000007.log"
    seg.delete_files()
    assert list(tmp_path.iterdir()) == []


def test_header_scans_skip_large_batches_and_find_every_offset(tmp_path: Path) -> None:
    """Batches larger and smaller than the read chunk, mixed: header scans see every batch and
    offset lookups land on the batch holding the offset (sparse index, so scans do the work)."""
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=200_000, max_index_size=10 * 1024)
    sizes = [10, 300_000, 20, 20, 90_000, 5000, 10, 300_000, 10]
    offset = 0
    expected: list[tuple[int, int]] = []
    for size in sizes:
        values = [b"v" * size, b"w"]
        append(seg, offset, *values)
        expected.append((offset, offset + len(values) - 1))
        offset += len(values)
    full = [(view.base_offset, view.last_offset) for _, view in seg.iter_batches()]
    headers = [(view.base_offset, view.last_offset) for _, view in seg.iter_batches(headers_only=True)]
    small_first = [
        (v.base_offset, v.last_offset) for _, v in seg.iter_batches(headers_only=True, first_read=100)
    ]
    assert full == headers == small_first == expected
    for base, last in expected:
        for target in (base, last):
            found = seg.translate_offset(target)
            assert found is not None and (found.base_offset, found.last_offset) == (base, last)
