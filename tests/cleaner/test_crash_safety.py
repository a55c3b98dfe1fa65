"""A crash at every file operation of one full cleaning pass (``Cleaner.cleanSegments``,
``LocalLog.replaceSegments``, ``LogLoader``; ``LogCleanerTest.testRecoveryAfterCrash`` generalised).

The log's segment, index and swap writes all go through the ``file_ops`` object handed to the
``PartitionLog``. A counting implementation learns how many operations one full pass performs;
then, for every index n, a fresh copy of the same log is cleaned with a "crash" at operation n:
that operation and every later one raise, as if the process died, so even the cleaner's own
cleanup of its ``.cleaned`` files does not happen. The directory is then loaded as after an
unclean shutdown and must hold a valid log whose records are the originals at their offsets,
somewhere between the pre-clean and the post-clean state (groups are swapped one at a time), with
every key's latest record present; a following clean must reach the post-clean records.

Not routed through the injectable ops: ``LogSegment.set_mtime`` calls ``os.utime`` directly
(src/kompakt/log/segment.py); it changes no content, so it cannot create a bad crash state.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

from kompakt.clock import FakeClock
from kompakt.log.files import OsFileOps
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression
from kompakt.testing.faults import SimulatedCrashError

from ._harness import (
    FAST_OPS,
    abort,
    all_records,
    append_kv,
    batches,
    clean,
    commit,
    config,
    lct_log,
    leftovers,
    open_log,
    txn,
)

CFG: dict[str, Any] = {
    "internal_segment_bytes": 300,
    "index_interval_bytes": 64,
    "delete_retention_ms": 1_000,
}


class CrashingOps(OsFileOps):
    """Counts mutating operations once armed; from operation ``crash_at`` on, every one raises."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.crash_at = crash_at
        self.armed = False
        self.crashed = False
        self.count = 0
        self.trace: list[str] = []

    def _step(self, op: str, target: object) -> None:
        if not self.armed:
            return
        if self.crashed or self.count == self.crash_at:
            self.crashed = True
            raise SimulatedCrashError(f"crash at {op} {target}")
        self.count += 1
        self.trace.append(f"{op} {target}")

    def open_fd(self, path: Path, flags: int) -> int:
        if flags & (os.O_CREAT | os.O_TRUNC):  # opening an existing file to read changes nothing
            self._step("open", path.name)
        return super().open_fd(path, flags)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        self._step("pwrite", fd)
        return super().pwrite(fd, data, position)

    def ftruncate(self, fd: int, size: int) -> None:
        self._step("ftruncate", fd)
        super().ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        self._step("fsync", fd)  # counted, not performed: a simulated crash loses no page cache

    def rename(self, src: Path, dst: Path) -> None:
        self._step("rename", f"{src.name} -> {dst.name}")
        super().rename(src, dst)

    def unlink(self, path: Path) -> None:
        self._step("unlink", path.name)
        super().unlink(path)

    def fsync_dir(self, path: Path) -> None:
        self._step("fsync_dir", path.name)


def _build_template(directory: Path, clock: FakeClock) -> None:
    """Several segments (so several groups), duplicates, tombstones, compressed batches, an
    aborted and a committed transaction (so the .cleaned segment gets a .txnindex entry)."""
    log = lct_log(directory, clock, **CFG)
    for i in range(26):
        append_kv(log, i % 7, i, compression=Compression.GZIP if i % 5 == 0 else Compression.NONE)
        if i % 9 == 0:
            append_kv(log, (i + 3) % 7, None)
        if i == 12:
            txn(log, 1, 100, 101)
            abort(log, 1)
        if i == 20:
            txn(log, 2, 102)
            commit(log, 2)
    log.roll()
    log.close()


def _open(
    directory: Path, clock: FakeClock, ops: CrashingOps | None, *, clean_shutdown: bool
) -> PartitionLog:
    return open_log(
        directory / "t-0",
        clock,
        config(**CFG),
        had_clean_shutdown=clean_shutdown,
        file_ops=ops if ops is not None else FAST_OPS,
    )


def _assert_valid(log: PartitionLog) -> None:
    assert log.truncated_on_load == 0
    for segment in log.segments.values():
        total = 0
        for _pos, view in segment.iter_batches():
            assert view.is_valid()
            total += view.size
        assert total == segment.size


def test_crash_at_every_file_operation_of_a_clean(tmp_path: Path) -> None:
    clock = FakeClock()
    template = tmp_path / "template"
    _build_template(template, clock)

    # Reference run: no crash.
    ref_dir = tmp_path / "reference"
    shutil.copytree(template, ref_dir)
    counter = CrashingOps()
    log = _open(ref_dir, clock, counter, clean_shutdown=True)
    pre = all_records(log)
    counter.armed = True
    clean(log, 0)
    counter.armed = False
    post = all_records(log)
    post_batches = [(v.base_offset, v.last_offset) for v, _r in batches(log)]
    assert post != pre
    total = counter.count
    assert total > 10, counter.trace
    assert any(t.startswith("rename") for t in counter.trace)

    # Every key's latest committed record (aborted transaction data is not a key's value).
    latest = {k: (o, k, v) for o, k, v in post}
    outcomes = []
    for n in range(total):
        work = tmp_path / f"crash-{n}"
        shutil.copytree(template, work)
        ops = CrashingOps(crash_at=n)
        log = _open(work, clock, ops, clean_shutdown=True)
        ops.armed = True
        with contextlib.suppress(SimulatedCrashError):
            clean(log, 0)
        assert ops.crashed, f"op {n} of {total} was never reached"
        ops.armed = False
        log.close_without_flush()

        log = _open(work, clock, None, clean_shutdown=False)
        _assert_valid(log)
        assert leftovers(log) == []
        after = all_records(log)
        offsets = [o for o, _k, _v in after]
        assert offsets == sorted(set(offsets)), f"crash at op {n}: offsets out of order"
        assert set(post) <= set(after) <= set(pre), f"crash at op {n} ({ops.trace[-1:]}): not pre/post"
        assert set(latest.values()) <= set(after), f"crash at op {n}: a key's latest record is lost"
        outcomes.append("pre" if after == pre else "post" if after == post else "mixed")

        clean(log, 0)
        assert all_records(log) == post, f"crash at op {n}: the next clean did not converge"
        assert [(v.base_offset, v.last_offset) for v, _r in batches(log)] == post_batches
        log.close()
    assert outcomes[0] == "pre"
    assert outcomes[-1] == "post"
    assert "post" in outcomes and "pre" in outcomes
