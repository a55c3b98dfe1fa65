"""One injected file-operations seam (issue 20): a fault model handed to one log sees every file
mutation of that log, descriptor writes and renames alike, and nothing of any other log; segment
file names are built, and checked, in one place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kompakt.errors import InvalidOffsetError
from kompakt.log.files import segment_file_name
from kompakt.log.segment import LogSegment
from kompakt.testing.faults import FaultInjectingFileOps, SimulatedCrashError

from .log_helpers import LogHarness, all_records, config, kv


def test_a_fault_model_sees_every_mutation_of_its_own_log_and_none_of_another(tmp_path: Path) -> None:
    ops = FaultInjectingFileOps(armed=False)
    faulty = LogHarness(tmp_path / "a-0", config(internal_segment_bytes=3 * len(kv(0))), file_ops=ops)
    plain = LogHarness(tmp_path / "b-0", config(internal_segment_bytes=3 * len(kv(0))))
    with ops.armed():
        for i in range(4):
            plain.log.append(kv(i))
        plain.log.roll()
        assert ops.count == 0  # the other log's writes never reach this model
        for i in range(4):
            faulty.log.append(kv(i))
        faulty.log.roll()
        faulty.log.flush()
        olds = faulty.log.segments.values()[:1]
        seg = faulty.log.create_segment(olds[0].base_offset)
        for _pos, view in olds[0].iter_batches():
            seg.append_batches(bytes(view.raw))
        seg.on_become_inactive()
        faulty.log.replace_segments([seg], olds)
    kinds = {op for op, _target in ops.log}
    # Descriptor-level writes and the swap's renames go through the one object.
    assert {"create", "write", "truncate", "fsync", "rename", "fsync_dir"} <= kinds
    assert any(".cleaned" in target and ".swap" in target for op, target in ops.log if op == "rename")

    # And a crash injected at the first write of that log fails that log's append only.
    crashing = FaultInjectingFileOps(fail_at=0, armed=False)
    victim = LogHarness(tmp_path / "c-0", config(), file_ops=crashing)
    with crashing.armed():
        plain.log.append(kv(10))
        with pytest.raises(SimulatedCrashError):
            victim.log.append(kv(10))
    assert [o for o, _k in all_records(plain.log)][-1] == 4
    assert all_records(victim.log) == []


def test_segment_file_names_carry_only_known_suffixes(tmp_path: Path) -> None:
    assert segment_file_name(5, "log", ".cleaned") == "00000000000000000005.log.cleaned"
    assert segment_file_name(5, "txnindex", ".swap") == "00000000000000000005.txnindex.swap"
    assert segment_file_name(5, "index", ".deleted") == "00000000000000000005.index.deleted"
    with pytest.raises(ValueError, match="suffix"):
        segment_file_name(5, "log", ".bogus")
    with pytest.raises(InvalidOffsetError):
        segment_file_name(-5, "log", ".cleaned")
    # A segment is named through the same check: a bad suffix creates no file at all.
    with pytest.raises(ValueError, match="suffix"):
        LogSegment.create(tmp_path, 0, index_interval_bytes=4096, max_index_size=1024, suffix=".bogus")
    assert os.listdir(tmp_path) == []
