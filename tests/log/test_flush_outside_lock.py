"""``PartitionLog.flush`` fsyncs without holding the partition lock (issue 14, item 7).

Kafka's ``UnifiedLog.flush`` picks the segments under the lock, flushes them outside it and takes
the lock again only to mark the offsets flushed. The fsync here blocks on an event, so each test
knows a flush is inside fsync while it appends, rolls, deletes or truncates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.log.files import OsFileOps
from kompakt.log.partition_log import PartitionLog

from .log_helpers import config, kv

DEADLINE_S = 10.0


class BlockingFsync(OsFileOps):
    """fsync waits for ``release`` once ``armed``; ``entered`` is set when a call is waiting."""

    def __init__(self) -> None:
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def fsync(self, fd: int) -> None:
        if self.armed:
            self.entered.set()
            assert self.release.wait(DEADLINE_S), "fsync was never released"
        super().fsync(fd)


@pytest.fixture
def ops() -> Iterator[BlockingFsync]:
    blocking = BlockingFsync()
    yield blocking
    blocking.release.set()


def run_in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


def blocked_flush(log: PartitionLog, ops: BlockingFsync) -> tuple[threading.Thread, list[BaseException]]:
    ops.armed = True
    flusher, errors = run_in_thread(log.flush)
    assert ops.entered.wait(DEADLINE_S), "the flush never reached fsync"
    return flusher, errors


def test_append_and_roll_complete_while_a_flush_is_inside_fsync(tmp_path: Path, ops: BlockingFsync) -> None:
    log = PartitionLog(
        tmp_path / "t-0", "t", 0, config(internal_segment_bytes=1024), FakeClock(0), file_ops=ops
    )
    for i in range(20):
        log.append(kv(i))
    assert len(log.segments) > 1
    flusher, errors = blocked_flush(log, ops)

    appender, append_errors = run_in_thread(lambda: [log.append(kv(100 + i)) for i in range(20)])
    appender.join(DEADLINE_S)
    assert not appender.is_alive(), "append waited for the fsync of another thread"
    assert append_errors == []
    assert log.log_end_offset == 40
    assert log.recovery_point == 0  # not flushed yet

    ops.release.set()
    flusher.join(DEADLINE_S)
    assert not flusher.is_alive() and errors == []
    assert log.recovery_point == 20  # what the flush chose under the lock, no more
    log.flush()
    assert log.recovery_point == 40
    log.close()


def test_segments_deleted_during_the_fsync_do_no_harm(tmp_path: Path, ops: BlockingFsync) -> None:
    clock = FakeClock(0)
    cfg = config(internal_segment_bytes=1024, retention_bytes=1, file_delete_delay_ms=0)
    log = PartitionLog(tmp_path / "t-0", "t", 0, cfg, clock, file_ops=ops)
    for i in range(20):
        log.append(kv(i))
    flusher, errors = blocked_flush(log, ops)
    deleter, delete_errors = run_in_thread(
        lambda: (log.delete_old_segments(clock.now_ms()), log.scheduler.run_due())
    )
    deleter.join(DEADLINE_S)
    assert not deleter.is_alive() and delete_errors == []
    assert len(list((tmp_path / "t-0").glob("*.log"))) == 1  # the flushed segments are gone
    ops.release.set()
    flusher.join(DEADLINE_S)
    assert not flusher.is_alive() and errors == []
    assert log.recovery_point == 20
    log.close()


def test_a_truncation_during_the_fsync_keeps_the_recovery_point_down(
    tmp_path: Path, ops: BlockingFsync
) -> None:
    log = PartitionLog(
        tmp_path / "t-0", "t", 0, config(internal_segment_bytes=1024), FakeClock(0), file_ops=ops
    )
    for i in range(20):
        log.append(kv(i))
    flusher, errors = blocked_flush(log, ops)
    truncater, truncate_errors = run_in_thread(lambda: log.truncate_to(5))
    truncater.join(DEADLINE_S)
    assert not truncater.is_alive() and truncate_errors == []
    ops.release.set()
    flusher.join(DEADLINE_S)
    assert not flusher.is_alive() and errors == []
    assert log.log_end_offset == 5
    assert log.recovery_point <= 5
    log.close()
