from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.errors import CorruptIndexError, InvalidOffsetError
from kompakt.log.offset_index import OffsetIndex
from kompakt.log.time_index import TimeIndex


def test_offset_index_lookup_is_floor(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100, 80)
    index.reset()
    index.resize(80)
    for off, pos in [(105, 50), (110, 90), (130, 400)]:
        index.append(off, pos)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 50)
    assert index.lookup(129) == (110, 90)
    assert index.lookup(10**12) == (130, 400)
    assert (tmp_path / "x.index").stat().st_size == 80  # preallocated while active
    index.trim_to_valid_size()
    assert (tmp_path / "x.index").stat().st_size == 24
    with pytest.raises(InvalidOffsetError):
        index.append(130, 500)


def test_offset_index_full_and_truncate(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 20)  # rounds down to 2 entries
    index.reset()
    index.resize(20)
    assert index.max_entries == 2
    index.append(1, 10)
    index.append(2, 20)
    assert index.is_full()
    index.truncate_to(2)
    assert index.entry_table() == [(1, 10)]
    index.close()
    reloaded = OffsetIndex(tmp_path / "x.index", 0, 20)
    assert reloaded.entry_table() == [(1, 10)]


def test_offset_index_lazy_and_sanity(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(
        (5).to_bytes(4, "big") + (10).to_bytes(4, "big") + (3).to_bytes(4, "big") + (20).to_bytes(4, "big")
    )
    index = OffsetIndex(path, 0, 1000)
    assert not index.is_loaded
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    path.write_bytes(b"\x00" * 7)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1000).sanity_check()


def test_untrimmed_preallocated_index_loads_its_entries(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes((5).to_bytes(4, "big") + (10).to_bytes(4, "big") + b"\x00" * 80)
    assert OffsetIndex(path, 0, 1000).entry_table() == [(5, 10)]


def test_time_index_strictly_increasing_and_reserved_slot(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 36)  # 3 entries, full at 2
    index.reset()
    index.resize(36)
    index.maybe_append(10, 1)
    index.maybe_append(10, 2)  # not strictly greater: skipped
    assert index.entries == 1
    index.maybe_append(20, 3)
    assert index.is_full()
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(30, 4)
    index.maybe_append(30, 4, skip_full_check=True)  # the reserved last slot
    assert index.entry_table() == [(10, 1), (20, 3), (30, 4)]
    assert index.lookup(5) == (-1, 0)
    assert index.lookup(25) == (20, 3)
    index.truncate_to(3)
    assert index.entry_table() == [(10, 1)]
