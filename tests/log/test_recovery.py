"""Crash recovery (``LogLoader``): swap states (``LogCleanerTest.testRecoveryAfterCrash``,
``LogLoaderTest.testRecoveryAfterCrashDuringSplitPhase*``), obsolete leftovers
(``LogLoaderTest.testOpenDeletesObsoleteFiles``), torn tails, corruption."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from kompakt.errors import PartitionOfflineError
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segment import LogSegment
from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records
from kompakt.testing.faults import FaultInjectingFileOps, SimulatedCrashError

from .log_helpers import LogHarness, all_records, config, kv

SIZE = len(kv(0))


def make_log(tmp_path: Path, n: int = 25) -> LogHarness:
    h = LogHarness(
        tmp_path / "t-0",
        config(internal_segment_bytes=5 * SIZE, index_interval_bytes=1, file_delete_delay_ms=10),
    )
    for i in range(n):
        h.log.append(kv(i))
    return h


def build_cleaned(log: PartitionLog, olds: list[LogSegment]) -> list[LogSegment]:
    """One ``.cleaned`` segment per old segment keeping only even offsets (a fake compaction)."""
    news = []
    for old in olds:
        seg = log.create_segment(old.base_offset)
        for _pos, view in old.iter_batches():
            if view.base_offset % 2 == 0:
                seg.append_batches(bytes(view.raw))
        seg.on_become_inactive()
        news.append(seg)
    return news


def keys(log: PartitionLog) -> list[int]:
    return [o for o, _k in all_records(log)]


ALL = list(range(25))
CLEANED = [o for o in ALL if o >= 10 or o % 2 == 0]


def test_replace_segments_then_reopen(tmp_path: Path) -> None:
    h = make_log(tmp_path)
    olds = h.log.segments.values()[:2]
    h.log.replace_segments(build_cleaned(h.log, olds), olds)
    assert keys(h.log) == CLEANED
    assert (h.directory / "00000000000000000000.log.deleted").exists()
    h.reopen(clean=False)
    assert keys(h.log) == CLEANED
    assert not any(p.name.endswith((".deleted", ".swap", ".cleaned")) for p in h.directory.iterdir())


def test_crash_at_every_file_operation_of_a_swap(tmp_path: Path) -> None:
    """Every crash point leaves either the originals or the cleaned data; both occur."""
    template = tmp_path / "template"
    make_log(template).log.close()
    counter = FaultInjectingFileOps()
    outcomes = []
    k = 0
    while True:
        work = tmp_path / f"run{k}"
        shutil.copytree(template, work)
        ops = FaultInjectingFileOps(fail_at=k, armed=False)
        h = LogHarness.__new__(LogHarness)
        LogHarness.__init__(
            h, work / "t-0", config(internal_segment_bytes=5 * SIZE, index_interval_bytes=1), file_ops=ops
        )
        olds = h.log.segments.values()[:2]
        news = build_cleaned(h.log, olds)
        crashed = False
        with ops.armed():
            try:
                h.log.replace_segments(news, olds)
            except SimulatedCrashError:
                crashed = True
        h.log.close_without_flush()
        h.scheduler.clear()
        h.open(had_clean_shutdown=False)
        outcome = keys(h.log)
        assert outcome in (ALL, CLEANED), f"crash at op {k}: {outcome}"
        outcomes.append(outcome)
        counter = ops
        if not crashed:
            break
        k += 1
    assert outcomes[0] == ALL and outcomes[-1] == CLEANED
    assert counter.count > 5


def stage(h: LogHarness, *, new_suffix: dict[str, str], old_suffix: str) -> None:
    """Write a cleaned head segment and leave files as a crash would (suffixes per extension)."""
    olds = h.log.segments.values()[:1]
    (new,) = build_cleaned(h.log, olds)
    new.close_handlers()
    h.log.close()
    if old_suffix:
        for p in list(h.directory.iterdir()):
            if p.name.startswith("00000000000000000000.") and p.name.count(".") == 1:
                p.rename(p.with_name(p.name + old_suffix))
    for ext, suffix in new_suffix.items():
        src = h.directory / f"00000000000000000000.{ext}.cleaned"
        src.rename(h.directory / f"00000000000000000000.{ext}{suffix}")


HEAD_CLEANED = [o for o in ALL if o >= 5 or o % 2 == 0]


@pytest.mark.parametrize(
    ("new_suffix", "old_suffix", "expected"),
    [
        ({"log": ".cleaned", "index": ".cleaned", "timeindex": ".cleaned"}, "", ALL),
        ({"log": ".swap", "index": ".cleaned", "timeindex": ".cleaned"}, "", ALL),
        ({"log": ".swap", "index": ".swap", "timeindex": ".swap"}, "", HEAD_CLEANED),
        ({"log": ".swap", "index": ".swap", "timeindex": ".swap"}, ".deleted", HEAD_CLEANED),
        ({"log": "", "index": "", "timeindex": ".swap"}, ".deleted", HEAD_CLEANED),
    ],
)
def test_recovery_after_crash_rows(
    tmp_path: Path, new_suffix: dict[str, str], old_suffix: str, expected: list[int]
) -> None:
    """``LogCleanerTest.testRecoveryAfterCrash`` rows 1-5 (row 6 is test_replace_segments_then_reopen with
    pending deletes)."""
    h = make_log(tmp_path)
    stage(h, new_suffix=new_suffix, old_suffix=old_suffix)
    h.open(had_clean_shutdown=False)
    assert keys(h.log) == expected
    leftovers = [p.name for p in h.directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []


def test_stray_swap_without_originals_is_adopted(tmp_path: Path) -> None:
    h = make_log(tmp_path, n=5)
    h.log.roll()
    h.log.close()
    other = LogHarness(tmp_path / "u-0", config())
    for i in range(3):
        other.log.append(kv(i))
    other.log.truncate_fully_and_start_at(100)
    other.log.append(kv(1))
    other.log.close()
    for p in other.directory.iterdir():
        if p.name.startswith("00000000000000000100."):
            shutil.copy(p, h.directory / (p.name + ".swap"))
    h.open(had_clean_shutdown=True)
    assert [s.base_offset for s in h.log.segments] == [0, 5, 100]
    assert h.log.log_end_offset == 101


def test_unknown_files_are_left_alone_and_orphan_indexes_deleted(tmp_path: Path) -> None:
    h = make_log(tmp_path, n=3)
    h.log.close()
    (h.directory / "notes.txt").write_text("hi")
    (h.directory / "00000000000000000000.bogus").write_text("x")
    (h.directory / "00000000000000000099.index").write_bytes(b"")
    h.open(had_clean_shutdown=True)
    names = {p.name for p in h.directory.iterdir()}
    assert {"notes.txt", "00000000000000000000.bogus"} <= names
    assert "00000000000000000099.index" not in names


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path: Path) -> None:
    h = make_log(tmp_path)
    expected = h.log.segments.values()[0].offset_index.entry_table()
    h.log.close()
    (h.directory / "00000000000000000000.index").unlink()
    (h.directory / "00000000000000000005.index").write_bytes(b"\x00\x00\x00\x09\x00\x00\x00\x01" * 3)
    h.open(had_clean_shutdown=True)
    assert h.log.segments.values()[0].offset_index.entry_table() == expected
    assert keys(h.log) == ALL
    assert h.log.read(7, 1).records  # lazily rebuilt corrupt index still answers
    assert h.log.segments.get(5) is not None
    assert h.log.segments.get(5).offset_index.lookup(7)[0] <= 7  # type: ignore[union-attr]


def test_torn_tail_at_every_byte_of_last_batch(tmp_path: Path) -> None:
    template = tmp_path / "template"
    h = LogHarness(template, config(index_interval_bytes=1))
    for i in range(6):
        h.log.append(kv(i))
    h.log.close()
    log_file = "00000000000000000000.log"
    full = (template / log_file).stat().st_size
    for cut in range(full - SIZE, full):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(template, work)
        with open(work / log_file, "r+b") as f:
            f.truncate(cut)
        h2 = LogHarness(work, config(index_interval_bytes=1))
        h2.log.close_without_flush()
        reopened = h2.open(had_clean_shutdown=False)
        assert keys(reopened) == list(range(5)), cut
        assert reopened.log_end_offset == 5
        assert reopened.append(kv(5)).first_offset == 5


def test_zero_filled_tail_is_torn(tmp_path: Path) -> None:
    h = make_log(tmp_path, n=3)
    h.log.close()
    with open(h.directory / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 500)
    h.open(had_clean_shutdown=False)
    assert keys(h.log) == [0, 1, 2]


def quarantined(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if ".corrupt-" in p.name}


def test_flipped_byte_below_the_recovery_point_takes_partition_offline(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(index_interval_bytes=1))
    for i in range(6):
        h.log.append(kv(i))
    h.log.close()
    path = h.directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    position = 2 * SIZE + 40
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))
    # A clean start reads no CRC before the active segment's tail (its last index entry, here the
    # last batch), so the log opens (Kafka reads none at a clean start).
    h.open(had_clean_shutdown=True, recovery_point=6)
    assert h.log.log_end_offset == 6
    h.log.close()
    with pytest.raises(PartitionOfflineError) as err:
        h.open(had_clean_shutdown=False, recovery_point=6)
    message = str(err.value)
    assert f"{path} at byte {2 * SIZE}" in message
    assert "valid only up to offset 2, below its recovery point 6" in message
    assert "a valid batch follows at byte" in message
    assert f"kompakt log repair {h.directory}" in message
    assert path.read_bytes() == bytes(data), "nothing is truncated"
    assert quarantined(h.directory) == {}


def test_flipped_byte_above_the_recovery_point_is_cut_into_quarantine(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's LogLoader.recoverLog cuts at the first invalid batch above the recovery point even
    when valid batches follow; kompakt does too, but keeps the bytes beside the segment."""
    h = LogHarness(tmp_path / "t-0", config(index_interval_bytes=1))
    for i in range(6):
        h.log.append(kv(i))
    h.log.close()
    path = h.directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[2 * SIZE + 40] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kompakt.log.quarantine"):
        reopened = h.open(had_clean_shutdown=False, recovery_point=2)
    assert keys(reopened) == [0, 1]
    assert quarantined(h.directory) == {"00000000000000000000.log.corrupt-2": bytes(data[2 * SIZE :])}
    [warning] = [r.getMessage() for r in caplog.records if r.name == "kompakt.log.quarantine"]
    assert f"moved {len(data) - 2 * SIZE} bytes from byte {2 * SIZE} of {path}" in warning
    assert "(offsets from 2 on;" in warning and "as 00000000000000000000.log.corrupt-2" in warning
    assert path.stat().st_size == 2 * SIZE
    assert reopened.append(kv(9)).first_offset == 2
    # A second unclean start neither quarantines again nor fails.
    reopened.close_without_flush()
    again = h.open(had_clean_shutdown=False, recovery_point=2)
    assert keys(again) == [0, 1, 2]
    assert list(quarantined(h.directory)) == ["00000000000000000000.log.corrupt-2"]


def test_corruption_followed_by_later_segments_quarantines_them_all(tmp_path: Path) -> None:
    h = make_log(tmp_path, n=12)
    h.log.close()
    path = h.directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # the last batch of the first segment, but segments 5 and 10 follow
    path.write_bytes(bytes(data))
    later_bases = (f"{5:020d}", f"{10:020d}")
    # Producer snapshots are derived data: not quarantined; the ones past the cut are dropped.
    later = {
        p.name: p.read_bytes()
        for p in h.directory.iterdir()
        if p.name[:20] in later_bases and not p.name.endswith(".snapshot")
    }
    reopened = h.open(had_clean_shutdown=False)
    assert keys(reopened) == [0, 1, 2, 3]
    assert [s.base_offset for s in reopened.segments] == [0]
    moved = quarantined(h.directory)
    assert moved.pop("00000000000000000000.log.corrupt-4") == bytes(data[4 * SIZE :])
    assert moved == {f"{name}.corrupt-4": content for name, content in later.items()}
    assert reopened.append(kv(4)).first_offset == 4
    assert not [
        p.name for p in h.directory.iterdir() if p.name.endswith(".snapshot") and p.name[:20] in later_bases
    ]


def test_recovery_point_skips_validation_of_flushed_segments(tmp_path: Path) -> None:
    h = make_log(tmp_path, n=12)
    h.log.close()
    path = h.directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    path.write_bytes(bytes(data))
    reopened = h.open(had_clean_shutdown=False, recovery_point=10)
    assert reopened.log_end_offset == 12


def test_clean_segments_with_concurrent_segment_deletion(tmp_path: Path) -> None:
    """``LogCleanerTest.testCleanSegmentsWithConcurrentSegmentDeletion``: old segments already deleted by
    retention are skipped by the swap (renamed once)."""
    h = LogHarness(tmp_path / "t-0", config(cleanup_policy=frozenset({"compact", "delete"})))
    h.log.append(kv(0))
    h.log.roll()
    h.log.append(kv(1))
    h.log.roll()
    olds = h.log.segments.values()[:2]
    original = olds[0].log_path
    news = build_cleaned(h.log, olds[:1])
    h.log.increment_log_start_offset(2)
    assert h.log.delete_old_segments(h.clock.now_ms()) == 2
    h.log.replace_segments(news, olds)
    assert olds[0].log_path == original.with_name(original.name + ".deleted")
    assert [s.base_offset for s in h.log.segments] == [0, 2]
    assert h.log.delete_old_segments(h.clock.now_ms()) == 1
    assert [s.base_offset for s in h.log.segments] == [2]


def test_lone_stray_log_swap_leaves_no_orphan_swap_files(tmp_path: Path) -> None:
    """Issue 14 item 6: recovering a stray ``X.log.swap`` writes ``X.index.swap`` and
    ``X.timeindex.swap``; they are renamed with it, as Kafka's LogLoader renames every swap file."""
    h = make_log(tmp_path, n=5)
    h.log.roll()
    h.log.close()
    other = LogHarness(tmp_path / "u-0", config(index_interval_bytes=1))
    other.log.truncate_fully_and_start_at(100)
    for i in range(3):
        other.log.append(kv(100 + i))
    other.log.close()
    shutil.copy(other.directory / f"{100:020d}.log", h.directory / f"{100:020d}.log.swap")
    h.open(had_clean_shutdown=False, recovery_point=5)
    names = sorted(p.name for p in h.directory.iterdir())
    assert [n for n in names if n.endswith(".swap")] == []
    assert {f"{100:020d}.log", f"{100:020d}.index", f"{100:020d}.timeindex"} <= set(names)
    assert [s.base_offset for s in h.log.segments] == [0, 5, 100]
    assert h.log.log_end_offset == 103
    assert [o for o, _ in all_records(h.log)][-3:] == [100, 101, 102]
    h.reopen(clean=True)
    assert h.log.log_end_offset == 103
    assert sorted(p.name for p in h.directory.iterdir()) == names


def torn_after_clean_shutdown(tmp_path: Path, cut_bytes: int) -> tuple[LogHarness, Path, bytes]:
    """Six records closed cleanly, then the active segment loses its last ``cut_bytes`` bytes."""
    h = LogHarness(tmp_path / "t-0", config(index_interval_bytes=1))
    for i in range(6):
        h.log.append(kv(i))
    h.log.close()
    path = h.directory / "00000000000000000000.log"
    data = path.read_bytes()
    path.write_bytes(data[:-cut_bytes])
    return h, path, data


def test_torn_active_tail_after_clean_shutdown_below_the_recovery_point_is_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Hardening item 2 (it was offline since issue 14 item 5): a clean shutdown checkpoints the
    recovery point at the log end offset, so a torn tail found at the next start lies below it, but
    no valid batch follows the tear: the torn bytes are cut into quarantine and the rest served,
    as after a crash, with a warning naming the acknowledged offset that is gone."""
    h, path, data = torn_after_clean_shutdown(tmp_path, 10)
    with caplog.at_level(logging.WARNING, logger="kompakt.log"):
        reopened = h.open(had_clean_shutdown=True, recovery_point=6)
    assert reopened.log_end_offset == 5
    assert reopened.recovery_point == 5
    assert keys(reopened) == [0, 1, 2, 3, 4]
    assert path.read_bytes() == data[: 5 * SIZE]
    assert quarantined(h.directory) == {"00000000000000000000.log.corrupt-5": data[5 * SIZE : -10]}
    [warning] = [r.getMessage() for r in caplog.records if r.name == "kompakt.log.recovery"]
    assert f"{path} is damaged at byte {5 * SIZE} after a clean shutdown" in warning
    assert "offsets 5..5 were acknowledged but are no longer in the file" in warning
    assert reopened.append(kv(50)).first_offset == 5
    assert read_values(reopened, 5) == [b"0050"]


def test_torn_active_tail_after_clean_shutdown_above_the_recovery_point_is_quarantined(
    tmp_path: Path,
) -> None:
    """Issue 14 item 5: with no recovery point covering the tail (no checkpoint entry) the torn
    batch is cut into quarantine at start-up, and the next append is readable."""
    h, path, data = torn_after_clean_shutdown(tmp_path, 10)
    reopened = h.open(had_clean_shutdown=True, recovery_point=0)
    assert reopened.log_end_offset == 5
    assert quarantined(h.directory) == {"00000000000000000000.log.corrupt-5": data[5 * SIZE : -10]}
    assert path.stat().st_size == 5 * SIZE
    info = reopened.append(kv(50))
    assert info.first_offset == 5
    assert [(o, k) for o, k in all_records(reopened)][-1] == (5, b"0050")
    assert read_values(reopened, 5) == [b"0050"]
    reopened.close()
    again = h.open(had_clean_shutdown=True, recovery_point=6)
    assert again.log_end_offset == 6
    assert list(quarantined(h.directory)) == ["00000000000000000000.log.corrupt-5"]


def test_garbage_after_the_last_batch_after_clean_shutdown_is_quarantined(tmp_path: Path) -> None:
    """Bytes after the last whole batch hold no acknowledged offset (the cut is at the recovery
    point, not below it): they are moved to quarantine and the log is served from offset 6."""
    h = LogHarness(tmp_path / "t-0", config())
    for i in range(6):
        h.log.append(kv(i))
    h.log.close()
    path = h.directory / "00000000000000000000.log"
    with path.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x01\x00garbage")
    reopened = h.open(had_clean_shutdown=True, recovery_point=6)
    assert reopened.log_end_offset == 6
    assert list(quarantined(h.directory)) == ["00000000000000000000.log.corrupt-6"]
    assert reopened.append(kv(6)).first_offset == 6
    assert read_values(reopened, 6) == [b"0006"]


def read_values(log: PartitionLog, offset: int) -> list[bytes | None]:
    data = log.read(offset, 1 << 20).records
    return [r.value for v in iter_batches(data) for r in decode_records(v) if r.offset >= offset]
