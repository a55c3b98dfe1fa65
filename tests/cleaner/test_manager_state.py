"""CleanerManager (Kafka's ``LogCleanerManager``): cleaning states, checkpoints, the uncleanable set.

Ports of ``LogCleanerManagerTest`` (reference scenarios S48, S50-S53); each test names its Kafka test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kompakt.cleaner.manager import ABORTED, IN_PROGRESS, CleanerManager, paused
from kompakt.cleaner.planning import SelectionError
from kompakt.errors import CleaningAbortedError, IllegalCleanerStateError
from kompakt.log.checkpoint import OffsetCheckpointFile

from ._fakes import FakeConfig, FakeLog, MemoryCheckpoints, build_segments, filthy_log

T0 = 1_700_000_000_000
TP = ("t", 0)


def _manager(entries: dict[tuple[str, int], int] | None = None) -> tuple[CleanerManager, MemoryCheckpoints]:
    store = MemoryCheckpoints(dict(entries or {}))
    return CleanerManager(store, start_ms=T0), store


def _spin_until(predicate: Callable[[], bool], limit_s: float = 5.0) -> None:
    """Wait for another thread's state change without sleeping (hang guard only)."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"


# ----------------------------------------------------------------------------- selection


def test_grab_marks_chosen_in_progress_and_records_metrics() -> None:
    mgr, store = _manager({("t", i): 20 for i in range(3)})
    logs = [filthy_log(0, 20), filthy_log(1, 25), filthy_log(2, 30)]
    sel = mgr.grab_filthiest_compacted_log(logs, T0 + 5)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 2)
    assert mgr.cleaning_state(("t", 2)) == IN_PROGRESS
    assert mgr.time_of_last_run_ms == T0 + 5
    assert mgr.max_dirty_percent == pytest.approx(40.0)
    # tp2 is now in progress, so the next selection takes tp1.
    sel2 = mgr.grab_filthiest_compacted_log(logs, T0 + 6)
    assert sel2.chosen is not None and sel2.chosen.topic_partition == ("t", 1)
    assert store.writes == 0


def test_checkpoint_reset_written_when_nothing_selected() -> None:
    """Kafka's ``LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNoCleaning`` (reference scenario
    S48)."""
    log = filthy_log(0, 20)
    log.log_start_offset = 20
    mgr, store = _manager({TP: 15})
    assert mgr.grab_filthiest_compacted_log([log], T0).chosen is None
    assert store.entries == {TP: 20}
    assert mgr.cleaning_state(TP) is None


def test_checkpoint_reset_written_when_other_log_selected() -> None:
    """Kafka's ``LogCleanerManagerTest.testCheckpointUpdatedForInvalidOffsetNotSelected`` (reference scenario
    S48)."""
    tp0, tp1 = filthy_log(0, 20), filthy_log(1, 20)
    tp0.log_start_offset = 15
    mgr, store = _manager({("t", 0): 10, ("t", 1): 5})
    sel = mgr.grab_filthiest_compacted_log([tp0, tp1], T0)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 1)
    assert store.entries == {("t", 0): 15, ("t", 1): 5}


def test_selection_error_propagates_after_writing_earlier_resets() -> None:
    """Kafka's ``LogCleanerManagerTest.testGrabFilthiestCompactedLogThrowsException`` (reference scenario
    S53)."""
    ok, broken = filthy_log(0, 20), filthy_log(1, 20)
    ok.log_start_offset = 5
    broken.fail_with = OSError("boom")
    mgr, store = _manager({("t", 0): 0})
    with pytest.raises(SelectionError) as info:
        mgr.grab_filthiest_compacted_log([ok, broken], T0)
    assert info.value.topic_partition == ("t", 1)
    assert store.entries == {("t", 0): 5}
    mgr.mark_uncleanable(info.value.topic_partition, str(info.value.__cause__))
    sel = mgr.grab_filthiest_compacted_log([ok, broken], T0)
    assert sel.chosen is not None and sel.chosen.topic_partition == ("t", 0)


def test_uncleanable_marks_can_be_cleared_and_pruned() -> None:
    mgr, _ = _manager()
    log = filthy_log(0, 30)
    mgr.mark_uncleanable(TP, "boom")
    assert mgr.uncleanable() == {TP: "boom"}
    assert mgr.grab_filthiest_compacted_log([log], T0).chosen is None
    assert mgr.deletable_logs([log]) == []
    assert mgr.clear_uncleanable(TP)
    assert not mgr.clear_uncleanable(TP)
    assert mgr.grab_filthiest_compacted_log([log], T0).chosen is not None
    mgr.mark_uncleanable(("t", 9), "gone")
    mgr.prune_uncleanable({TP})
    assert mgr.uncleanable() == {}


def test_uncleanable_bytes_counts_cleanable_bytes_of_marked_partitions() -> None:
    mgr, _ = _manager({("t", 1): 20})
    logs = [filthy_log(0, 30), filthy_log(1, 25)]
    assert mgr.uncleanable_bytes(logs, T0) == 0
    mgr.mark_uncleanable(("t", 1), "boom")
    assert mgr.uncleanable_bytes(logs, T0) == 900  # segments 16 and 21, 9 records of 100 bytes
    logs[1].fail_with = RuntimeError("unreadable")
    assert mgr.uncleanable_bytes(logs, T0) == 0


# ------------------------------------------------ doneCleaning / doneDeleting / concurrent cleanup


def test_done_cleaning_transitions() -> None:
    """Kafka's ``LogCleanerManagerTest.testDoneCleaning`` (reference scenario S52)."""
    mgr, store = _manager()
    with pytest.raises(IllegalCleanerStateError):
        mgr.done_cleaning(TP, 10)
    mgr.abort_and_pause_cleaning(TP)
    assert mgr.cleaning_state(TP) == paused(1)
    with pytest.raises(IllegalCleanerStateError):
        mgr.done_cleaning(TP, 10)
    mgr.resume_cleaning([TP])

    mgr.grab_filthiest_compacted_log([filthy_log(0, 30)], T0)
    assert mgr.cleaning_state(TP) == IN_PROGRESS
    mgr.done_cleaning(TP, 25)
    assert mgr.cleaning_state(TP) is None
    assert store.entries == {TP: 25}


def test_done_cleaning_after_abort_pauses_and_leaves_checkpoint() -> None:
    """Kafka's ``LogCleanerManagerTest.testDoneCleaning`` (reference scenario S52)."""
    mgr, store = _manager({TP: 3})
    mgr.grab_filthiest_compacted_log([filthy_log(0, 30)], T0)
    done = threading.Event()

    def truncate() -> None:
        mgr.abort_and_pause_cleaning(TP)
        done.set()

    worker = threading.Thread(target=truncate)
    worker.start()
    _spin_until(lambda: mgr.is_cleaning_in_state_aborted(TP))
    assert not done.is_set()
    with pytest.raises(CleaningAbortedError):
        mgr.check_cleaning_aborted(TP)
    mgr.done_cleaning(TP, 30)
    worker.join(5)
    assert done.is_set()
    assert mgr.cleaning_state(TP) == paused(1)
    assert store.entries == {TP: 3}
    mgr.resume_cleaning([TP])
    assert mgr.cleaning_state(TP) is None


def test_done_deleting_transitions() -> None:
    """Kafka's ``LogCleanerManagerTest.testDoneDeleting`` (reference scenario S52)."""
    mgr, store = _manager()
    with pytest.raises(IllegalCleanerStateError):
        mgr.done_deleting([TP])
    log = filthy_log(0, 20)
    assert mgr.deletable_logs([log]) == [log]
    assert mgr.cleaning_state(TP) == IN_PROGRESS
    mgr.done_deleting([TP])
    assert mgr.cleaning_state(TP) is None
    assert store.writes == 0


def test_concurrent_cleanup_and_truncation() -> None:
    """Kafka's ``LogCleanerManagerTest.testConcurrentLogCleanupAndLogTruncation`` (reference scenario S52)."""
    mgr, _ = _manager()
    log = filthy_log(0, 20)
    log.config.cleanup_policy = frozenset({"delete"})
    assert mgr.pause_cleaning_for_non_compacted_partitions([log]) == [log]
    mgr.abort_and_pause_cleaning(TP)  # truncation
    assert mgr.cleaning_state(TP) == paused(2)
    mgr.resume_cleaning([TP])
    mgr.resume_cleaning([TP])  # end of retention
    assert mgr.states() == {}


def test_concurrent_cleanup_and_topic_deletion() -> None:
    """Kafka's ``LogCleanerManagerTest.testConcurrentLogCleanupAndTopicDeletion`` (reference scenario S52)."""
    mgr, _ = _manager()
    log = filthy_log(0, 20)
    log.config.cleanup_policy = frozenset({"delete"})
    mgr.pause_cleaning_for_non_compacted_partitions([log])
    mgr.abort_cleaning(TP)
    assert mgr.cleaning_state(TP) == paused(1)
    mgr.resume_cleaning([TP])
    assert mgr.states() == {}


def test_illegal_transitions() -> None:
    mgr, _ = _manager()
    with pytest.raises(IllegalCleanerStateError):
        mgr.resume_cleaning([TP])
    mgr.grab_filthiest_compacted_log([filthy_log(0, 30)], T0)
    with pytest.raises(IllegalCleanerStateError):
        mgr.resume_cleaning([TP])
    with pytest.raises(TimeoutError):
        mgr.abort_and_pause_cleaning(TP, timeout_s=0)
    assert mgr.cleaning_state(TP) == ABORTED
    with pytest.raises(IllegalCleanerStateError):
        mgr.abort_and_pause_cleaning(TP, timeout_s=0)
    with pytest.raises(IllegalCleanerStateError):
        mgr.resume_cleaning([TP])
    mgr.done_cleaning(TP, 5)
    assert mgr.cleaning_state(TP) == paused(1)


def test_done_cleaning_clears_state_even_if_checkpoint_write_fails() -> None:
    class FailingStore(MemoryCheckpoints):
        def write(self, entries: object, /) -> None:
            raise OSError("disk full")

    mgr = CleanerManager(FailingStore(), start_ms=T0)
    mgr.grab_filthiest_compacted_log([filthy_log(0, 30)], T0)
    with pytest.raises(OSError):
        mgr.done_cleaning(TP, 5)
    assert mgr.cleaning_state(TP) is None


# ------------------------------------------------------------ logs under cleanup are ineligible


def test_logs_under_cleanup_are_ineligible_for_compaction() -> None:
    """Kafka's ``LogCleanerManagerTest.testLogsUnderCleanupIneligibleForCompaction`` (reference scenario
    S50)."""
    config = FakeConfig(cleanup_policy=frozenset({"delete"}), min_cleanable_dirty_ratio=0.0)
    log = FakeLog("t", 0, config, build_segments(2, lambda o: o == 0), high_watermark=2)
    mgr, _ = _manager()
    assert mgr.pause_cleaning_for_non_compacted_partitions([log]) == [log]

    config.cleanup_policy = frozenset({"compact"})
    assert mgr.grab_filthiest_compacted_log([log], T0).chosen is None
    mgr.resume_cleaning([TP])
    sel = mgr.grab_filthiest_compacted_log([log], T0)
    assert sel.chosen is not None and sel.chosen.topic_partition == TP

    config.cleanup_policy = frozenset({"delete"})
    assert mgr.pause_cleaning_for_non_compacted_partitions([log]) == []
    mgr.done_deleting([TP])
    assert mgr.pause_cleaning_for_non_compacted_partitions([log]) == [log]


# ------------------------------------------------------------------ checkpoint file operations


def test_checkpoint_update_remove_and_truncate() -> None:
    """Kafka's ``LogCleanerManagerTest.testUpdateCheckpointsShouldAddOffsetToPartition,
    testUpdateCheckpointsShouldRemovePartitionData, testMaybeTruncateCheckpointShouldTruncateData`` (reference
    scenario S51)."""
    mgr, store = _manager()
    mgr.update_checkpoint(TP, 999)
    assert mgr.all_cleaner_checkpoints() == {TP: 999}
    mgr.maybe_truncate_checkpoint(TP, 1000)
    assert store.entries == {TP: 999}
    mgr.maybe_truncate_checkpoint(TP, 1)
    assert store.entries == {TP: 1}
    mgr.maybe_truncate_checkpoint(TP, 0, compact=False)
    assert store.entries == {TP: 1}
    mgr.maybe_truncate_checkpoint(("t", 7), 0)  # no entry: nothing written
    assert store.entries == {TP: 1}
    mgr.remove_checkpoint(TP)
    assert mgr.all_cleaner_checkpoints() == {}


def test_checkpoint_writes_keep_only_live_partitions() -> None:
    store = MemoryCheckpoints({("gone", 0): 4, TP: 1})
    mgr = CleanerManager(store, start_ms=T0, live_partitions=lambda: {TP, ("t", 1)})
    mgr.update_checkpoint(("t", 1), 7)
    assert store.entries == {TP: 1, ("t", 1): 7}


def test_real_checkpoint_file_round_trip(tmp_path: Path) -> None:
    store = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint")
    mgr = CleanerManager(store, start_ms=T0)
    mgr.grab_filthiest_compacted_log([filthy_log(0, 30)], T0)
    mgr.done_cleaning(TP, 30)
    assert OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read() == {TP: 30}
