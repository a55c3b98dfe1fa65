"""A hypothesis state machine of the partition log against a list model (the opfuzz idea).

Operations: append, roll, read, truncate, clean close + reopen, and crash-cut (cut the active
``.log`` at a random byte and reopen without the clean-shutdown marker). Invariants: offsets are
contiguous per the model, every acknowledged batch fully written before a cut survives, and reads
return whole batches starting with the one that holds the asked offset.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.support.profiles import examples

from .log_helpers import LogHarness, all_records, batch, batch_ranges, config


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kompakt-sm-"))
        self.h = LogHarness(self.tmp / "t-0", config(internal_segment_bytes=400, index_interval_bytes=100))
        self.batches: list[tuple[int, int, int]] = []  # (base offset, last offset, size in bytes)
        self.counter = 0

    def teardown(self) -> None:
        self.h.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def next_offset(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else 0

    @rule(n=st.integers(1, 4))
    def append(self, n: int) -> None:
        self.counter += 1
        raw = batch(*[f"v{self.counter}-{i}".encode() for i in range(n)], timestamp=self.counter)
        info = self.h.log.append(raw)
        assert info.first_offset == self.next_offset
        self.batches.append((info.first_offset, info.last_offset, len(raw)))

    @rule()
    def roll(self) -> None:
        self.h.log.roll()

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.next_offset - 1))
        records = self.h.log.read(offset, data.draw(st.integers(0, 500))).records
        ranges = batch_ranges(records)
        assert ranges, "min_one_message returns at least the batch holding the offset"
        assert ranges[0][0] <= offset <= ranges[0][1]
        expected = [(b, last) for b, last, _s in self.batches if last >= offset][: len(ranges)]
        assert ranges == expected

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.batches) - 1))
        self.h.log.truncate_to(self.batches[i][0])
        del self.batches[i:]

    @rule()
    def reopen(self) -> None:
        self.h.reopen(clean=True)

    @rule(data=st.data())
    def crash_cut(self, data: st.DataObject) -> None:
        active = self.h.log.active_segment
        size = active.size
        cut = data.draw(st.integers(0, size))
        path = active.log_path
        self.h.log.close_without_flush()
        with open(path, "r+b") as f:
            f.truncate(cut)
        self.h.scheduler.clear()
        self.h.open(had_clean_shutdown=False)
        position = 0
        kept = []
        for entry in self.batches:
            if entry[0] < active.base_offset:
                kept.append(entry)
                continue
            position += entry[2]
            if position <= cut:
                kept.append(entry)
        self.batches = kept

    @invariant()
    def offsets_match_model(self) -> None:
        assert self.h.log.log_end_offset == self.next_offset
        assert [o for o, _k in all_records(self.h.log)] == list(range(self.next_offset))


PartitionLogMachine.TestCase.settings = settings(max_examples=examples(60), stateful_step_count=30)
TestPartitionLog = PartitionLogMachine.TestCase
