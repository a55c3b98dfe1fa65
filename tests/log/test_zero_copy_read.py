"""Zero-copy reads: ``read_slice`` serves exactly the batches ``read`` would, from the file."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from kompakt.errors import OffsetOutOfRangeError
from kompakt.log.files import DELETED_FILE_SUFFIX as DELETED_SUFFIX
from kompakt.log.partition_log import ZERO_COPY_MIN_BYTES
from kompakt.log.segment import FileSlice, LogSegment
from kompakt.records.batch import RecordBatchView

from .log_helpers import LogHarness, batch, config


def filled_segment(tmp_path: Path, interval: int, seed: int) -> LogSegment:
    rng = random.Random(seed)
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=interval, max_index_size=64 * 1024)
    offset = 0
    for _ in range(60):
        values = [rng.randbytes(rng.choice((10, 200, 3000, 20_000))) for _ in range(rng.randint(1, 4))]
        raw = batch(*values, base_offset=offset)
        view = RecordBatchView(raw)
        seg.append_batches(raw)
        offset = view.next_offset + rng.choice((0, 0, 3))  # gaps, as after compaction
    return seg


@pytest.mark.parametrize(("interval", "seed"), [(1, 0), (4096, 1), (100_000, 2)])
def test_read_slice_matches_read(tmp_path: Path, interval: int, seed: int) -> None:
    seg = filled_segment(tmp_path, interval, seed)
    rng = random.Random(seed)
    for _ in range(300):
        offset = rng.randint(0, 400)
        max_size = rng.choice((0, 1, 100, 5_000, 50_000, 200_000, 10**7))
        min_one = rng.random() < 0.5
        max_position = rng.choice((None, None, rng.randint(0, seg.size)))
        expected = seg.read(offset, max_size, max_position, min_one)
        got = seg.read_slice(offset, max_size, max_position, min_one)
        if expected is None:
            assert got is None
            continue
        assert got is not None
        assert got[0] == expected[0]
        data = b"" if got[1] is None else bytes(got[1])
        assert data == expected[1]
        if got[1] is not None:
            got[1].close()
    seg.close()


def test_slice_outlives_rename_and_close(tmp_path: Path) -> None:
    seg = filled_segment(tmp_path, 4096, 3)
    found = seg.read_slice(0, 10**7)
    assert found is not None and found[1] is not None
    piece = found[1]
    expected = seg.read(0, 10**7)
    assert expected is not None
    seg.change_file_suffixes("", DELETED_SUFFIX)
    seg.delete_files()  # the cleaner's delayed delete: closes and unlinks
    assert bytes(piece) == expected[1]
    assert len(piece) == len(expected[1])
    piece.close()
    piece.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        piece.fileno()


def test_slice_is_a_private_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    piece = FileSlice(fd, 2, 5)
    os.close(fd)
    assert bytes(piece) == b"23456" and len(piece) == 5
    del piece  # closed when collected


def test_partition_read_slice_matches_read_across_segments(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(internal_segment_bytes=300_000))
    rng = random.Random(7)
    for _ in range(40):
        h.log.append(batch(*[rng.randbytes(rng.choice((50, 30_000))) for _ in range(rng.randint(1, 3))]))
    assert h.log.number_of_segments() > 1
    end = h.log.log_end_offset
    for offset in range(end + 1):
        for max_bytes in (0, 1_000, ZERO_COPY_MIN_BYTES, 500_000):
            expected = h.log.read(offset, max_bytes, min_one_message=offset % 2 == 0)
            got = h.log.read_slice(offset, max_bytes, min_one_message=offset % 2 == 0)
            records = got.records
            assert bytes(records) == expected.records
            if isinstance(records, FileSlice):
                assert len(records) >= ZERO_COPY_MIN_BYTES
                records.close()
            assert (got.high_watermark, got.log_start_offset, got.last_stable_offset) == (
                expected.high_watermark,
                expected.log_start_offset,
                expected.last_stable_offset,
            )
    with pytest.raises(OffsetOutOfRangeError):
        h.log.read_slice(end + 1, 1000)
