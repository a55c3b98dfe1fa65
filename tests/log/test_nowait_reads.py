"""Page-cache-only reads (``kompakt.log.nowait``): the same answer as a normal read when the data
is cached, :class:`WouldBlock` (and no leaked file range) when anything would wait."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kompakt.log import nowait

from .log_helpers import LogHarness, batch

needs_nowait = pytest.mark.skipif(not nowait.available(), reason="RWF_NOWAIT reads are not supported here")


def filled(tmp_path: Path) -> LogHarness:
    harness = LogHarness(tmp_path / "t-0")
    for index in range(20):
        harness.log.append(batch(*[b"%d-%d" % (index, i) * 2000 for i in range(10)]))
    return harness


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@needs_nowait
def test_a_cached_read_slice_gives_what_a_normal_one_gives(tmp_path: Path) -> None:
    log = filled(tmp_path).log
    expected = log.read_slice(25, 300_000, read_committed=True)
    with nowait.cached_only():
        got = log.read_slice(25, 300_000, read_committed=True)
    assert bytes(got.records) == bytes(expected.records)
    assert (got.high_watermark, got.last_stable_offset, got.aborted_transactions) == (
        expected.high_watermark,
        expected.last_stable_offset,
        expected.aborted_transactions,
    )


@needs_nowait
def test_a_segment_out_of_the_page_cache_raises_would_block_and_leaks_nothing(tmp_path: Path) -> None:
    harness = filled(tmp_path)
    log = harness.log
    assert log.read_slice(0, 1000).records  # indexes loaded, files open: only the data is cold
    for path in (tmp_path / "t-0").glob("*.log"):
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    before = open_fds()
    with nowait.cached_only(), pytest.raises(nowait.WouldBlock):
        log.read_slice(100, 300_000)
    assert open_fds() == before
    assert len(log.read_slice(100, 300_000).records) > 0  # outside the mode the same read waits


@needs_nowait
def test_a_log_locked_by_a_writer_raises_would_block_instead_of_waiting(tmp_path: Path) -> None:
    log = filled(tmp_path).log
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with log.lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert held.wait(10)
        with nowait.cached_only(), pytest.raises(nowait.WouldBlock, match="locked"):
            log.read_slice(0, 1000)
    finally:
        release.set()
        thread.join(10)


def test_a_log_just_opened_raises_would_block_until_its_files_are_read(tmp_path: Path) -> None:
    harness = filled(tmp_path)
    harness.log.close()
    log = harness.open(had_clean_shutdown=True)
    with nowait.cached_only(), pytest.raises(nowait.WouldBlock):
        log.read_slice(0, 1000)
    assert log.read_slice(0, 1000).records


def test_the_mode_is_per_thread_and_nests() -> None:
    seen: list[bool] = []
    with nowait.cached_only():
        thread = threading.Thread(target=lambda: seen.append(nowait.active()))
        thread.start()
        thread.join()
        with nowait.cached_only():
            seen.append(nowait.active())
        seen.append(nowait.active())
    seen.append(nowait.active())
    assert seen == [False, True, True, False]
