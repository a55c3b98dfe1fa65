"""Every crash point of the swap, staged after a real cleaner rewrite of 9 segments.

Kafka's ``LogCleanerTest.testRecoveryAfterCrash`` (reference scenario S40), recovered by the rules of
``LogLoader.removeTempFilesAndCollectSwapFiles``.

``tests/log/test_recovery.py`` proves the loader's rules with a fake compaction; here the cleaned
head segment is produced by :meth:`Cleaner.clean_segments` (odd keys mapped to 2^63-1), and the
log is reloaded after an unclean shutdown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog

from ._harness import (
    MAX_LONG,
    K,
    all_records,
    append_kv,
    clean,
    lct_log,
    leftovers,
    make_map,
    reopen,
    rewrite,
)

HEAD = "00000000000000000000."
EXTS = ("log", "index", "timeindex", "txnindex")


def _cleaned_log(tmp_path: Path) -> tuple[PartitionLog, list[int], list[int]]:
    clock = FakeClock()
    log = lct_log(
        tmp_path, clock, internal_segment_bytes=300, index_interval_bytes=1, file_delete_delay_ms=10
    )
    while len(log.segments) < 10:
        o = log.log_end_offset
        append_kv(log, o, o)
    all_keys = K(log)
    offset_map = make_map()
    for k in all_keys:
        if k % 2:
            offset_map.put(str(k).encode(), MAX_LONG)
    segs = log.segments.values()[:9]
    rewrite(log, segs, offset_map, now=0, upper_bound=segs[-1].read_next_offset())
    cleaned = K(log)
    assert cleaned != all_keys
    log.close()  # the ManualScheduler never runs the async deletes: .deleted files stay
    return log, all_keys, cleaned


def _stage(directory: Path, head_suffix: dict[str, str], restore_originals: bool) -> None:
    for ext in EXTS:
        path = directory / f"{HEAD}{ext}"
        if path.exists():
            path.rename(path.with_name(path.name + head_suffix.get(ext, "")))
    if restore_originals:
        for path in directory.iterdir():
            if path.name.endswith(".deleted"):
                path.rename(path.with_name(path.name[: -len(".deleted")]))


ROWS = [
    ("cleaned-before-rename", dict.fromkeys(EXTS, ".cleaned"), True, "all"),
    ("log-swap-indexes-cleaned", {"log": ".swap", "index": ".cleaned", "timeindex": ".cleaned"}, True, "all"),
    ("all-swap-originals-present", dict.fromkeys(EXTS, ".swap"), True, "cleaned"),
    ("all-swap-originals-deleted", dict.fromkeys(EXTS, ".swap"), False, "cleaned"),
    ("only-timeindex-swap", {"timeindex": ".swap"}, False, "cleaned"),
    ("swap-done-deletes-pending", {}, False, "cleaned"),
]


@pytest.mark.parametrize(
    ("head_suffix", "restore", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_every_crash_point_after_a_real_clean_recovers(
    tmp_path: Path, head_suffix: dict[str, str], restore: bool, expected: str
) -> None:
    """Kafka's ``LogCleanerTest.testRecoveryAfterCrash`` (reference scenario S40)."""
    log, all_keys, cleaned = _cleaned_log(tmp_path)
    _stage(log.directory, head_suffix, restore)
    log = reopen(log, clean_shutdown=False)
    assert K(log) == (all_keys if expected == "all" else cleaned)
    assert leftovers(log) == []
    # A later clean of the recovered log works and keeps every key's latest record.
    while len(log.segments) < 12:
        o = log.log_end_offset
        append_kv(log, o % 50, o)
    before = {r[1]: r for r in all_records(log)}
    clean(log, 0)
    after = {r[1]: r for r in all_records(log)}
    assert after == before
