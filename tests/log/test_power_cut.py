"""Power cuts under a broker-shaped load (issue 14, item 2 and its acceptance test).

A :class:`LogManager` with the default flush policy (fsync only when a roll's scheduled flush
runs) takes produce-shaped appends on four partitions, with segment rolls, the scheduler's
flushes and the periodic recovery-point checkpoint. Power is cut at a random moment with
:class:`kompakt.testing.power_cut.PowerCutFileOps`: each file keeps what it fsynced and a random
part of the rest (nothing, a prefix, a torn write, garbage and later writes past it), each
directory a random prefix of its unsynced entries. In some trials power is cut a second time
in the middle of the recovery itself. Then the directory is opened as the broker opens it.

Every trial checks what a user sees: every acknowledged record below the last completed flush
is there with its value, nothing that was not acknowledged appears, no partition is offline,
appends after recovery read back, ``kompakt log verify`` passes and lists exactly the quarantine
files on disk, and a second restart changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.segments import ManualScheduler
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records
from kompakt.testing.faults import SimulatedCrashError
from kompakt.testing.power_cut import PowerCutFileOps
from tests.support.log_dirs import CliResult

TopicPartition = tuple[str, int]
TRIALS = 12
TOPIC_CONFIGS = {
    "internal.segment.bytes": "12000",
    "segment.index.bytes": "4096",
    "index.interval.bytes": "1024",
}
BROKER = BrokerConfig.from_properties({})


def new_manager(data_dir: Path, ops: PowerCutFileOps | None = None) -> LogManager:
    clock = FakeClock()
    if ops is None:
        return LogManager(data_dir, BROKER, clock, ManualScheduler(clock))
    return LogManager(data_dir, BROKER, clock, ManualScheduler(clock), file_ops=ops)


def open_manager(data_dir: Path, ops: PowerCutFileOps | None = None) -> LogManager:
    manager = new_manager(data_dir, ops)
    manager.open()
    return manager


def contents(manager: LogManager, tp: TopicPartition) -> dict[int, bytes | None]:
    log = manager.get_log(*tp)
    out: dict[int, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        views = list(iter_batches(data))
        assert views, f"{tp}: nothing readable at offset {offset} below the log end {log.log_end_offset}"
        for view in views:
            for record in decode_records(view):
                out[record.offset] = record.value
            offset = view.next_offset
    return out


def quarantine_files(data_dir: Path) -> set[str]:
    return {str(p) for p in data_dir.glob("*/*") if ".corrupt-" in p.name}


@dataclass
class Load:
    acked: dict[TopicPartition, dict[int, bytes]]
    flushed: dict[TopicPartition, int]


def run_load(manager: LogManager, rng: random.Random) -> Load:
    """Produce-shaped appends with acks, rolls, the scheduler's flushes and checkpoints."""
    clock = manager.clock
    assert isinstance(clock, FakeClock) and isinstance(manager.scheduler, ManualScheduler)
    for topic in ("orders", "events"):
        manager.create_topic(topic, 2, TOPIC_CONFIGS)
    tps = sorted(manager.logs())
    load = Load({tp: {} for tp in tps}, dict.fromkeys(tps, 0))
    for step in range(rng.randint(150, 400)):
        tp = rng.choice(tps)
        values = [
            f"{tp[0]}-{tp[1]}-{step}-{j}-".encode() + rng.randbytes(rng.randint(0, 300)) for j in range(3)
        ]
        values = values[: rng.randint(1, 3)]
        records = [
            SimpleRecord(f"k{rng.randint(0, 50)}".encode(), v, timestamp=clock.now_ms()) for v in values
        ]
        info = manager.get_log(*tp).append(build_batch(records))
        for i, value in enumerate(values):
            load.acked[tp][info.first_offset + i] = value  # the produce response went out
        clock.advance(rng.randint(0, 50))
        if rng.random() < 0.2:  # the broker's log-scheduler task: the flushes rolls scheduled
            manager.scheduler.run_due()
            for other in tps:
                load.flushed[other] = manager.get_log(*other).recovery_point
        if rng.random() < 0.05:  # log.flush.offset.checkpoint.interval.ms
            manager.checkpoint_recovery_points()
            manager.checkpoint_high_watermarks()
    return load


def recover(data_dir: Path, rng: random.Random) -> tuple[LogManager, str]:
    """Open after the cut; in some trials cut the power again part-way through that recovery."""
    if rng.random() < 0.4:
        ops = PowerCutFileOps(rng, crash_at=rng.randint(0, 12))
        manager = new_manager(data_dir, ops)
        with contextlib.suppress(SimulatedCrashError):
            manager.open()
        manager.close_without_flush()
        note = f"recovery itself cut after {ops.mutations} file operations:\n{ops.cut().describe()}"
        return open_manager(data_dir), note
    return open_manager(data_dir), ""


@pytest.mark.parametrize("seed", range(TRIALS))
def test_power_cut_under_load_keeps_flushed_acks_and_quarantines_the_rest(
    tmp_path: Path, seed: int, cli: Callable[..., CliResult]
) -> None:
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    ops = PowerCutFileOps(random.Random(seed + 1000))
    manager = open_manager(data_dir, ops)
    load = run_load(manager, rng)
    manager.close_without_flush()
    report = ops.cut().describe()

    reopened, note = recover(data_dir, rng)
    context = f"seed {seed}; the cut:\n{report}\n{note}"
    assert reopened.offline_partitions == {}, context
    survived: dict[TopicPartition, dict[int, bytes | None]] = {}
    for tp, acked in load.acked.items():
        got = contents(reopened, tp)
        survived[tp] = got
        flushed = {o: v for o, v in acked.items() if o < load.flushed[tp]}
        assert {o: got.get(o) for o in flushed} == flushed, f"{tp} lost flushed acks; {context}"
        assert all(acked.get(o) == v for o, v in got.items()), f"{tp} holds records never acked; {context}"
        log = reopened.get_log(*tp)
        assert sorted(got) == list(range(log.log_end_offset)), context
        # The log takes appends again where it ends, and they read back.
        info = log.append(build_batch([SimpleRecord(b"after", b"cut")]))
        assert info.first_offset == log.log_end_offset - 1
        assert contents(reopened, tp)[info.first_offset] == b"cut"
        survived[tp][info.first_offset] = b"cut"
    reopened.close()

    quarantined = quarantine_files(data_dir)
    result = cli("log", "verify", str(data_dir), "--output", "json")
    assert result.code == 0, f"{result.out}\n{result.err}\n{context}"
    listed = json.loads(result.out)["quarantine"]
    assert {q["file"] for q in listed} == quarantined
    for q in listed:
        assert q["bytes"] == Path(q["file"]).stat().st_size and q["cut_offset"] >= 0

    # A second restart after a crash changes nothing: no new quarantine, same records, online.
    again = open_manager(data_dir)
    again.close_without_flush()
    again = open_manager(data_dir)
    assert again.offline_partitions == {}
    for tp in load.acked:
        assert contents(again, tp) == survived[tp]
    again.close()
    assert quarantine_files(data_dir) == quarantined
