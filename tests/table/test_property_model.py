"""The table against a model, for random workloads (issue 18's acceptance property).

Workload: batches of one to four records over a small key alphabet (values, empty values and
tombstones, every codec), transactions that commit, abort or stay open across other writes,
rolls, clock advances, cleans that stop at the last stable offset and continue from the
cleaner's checkpoint, truncations, clean restarts and crashes (the descriptors dropped without a
flush, then crash recovery). The model is a list of what was appended; its answer is what a
``read_committed`` consumer replaying from offset 0 ends with: per key the record with the
highest offset among plain records and records of committed transactions below the last stable
offset; a key whose latest record is a tombstone is absent.

After every operation, for every key of the alphabet, the live table (following the log through
every operation, restarts included) and an offline table over the same directory (the files on
disk, read as ``kompakt table --log-dir`` reads them) give the model's value; their scans give
exactly the model's live keys; their tombstone counts agree with their own scans. ``--as-of``
answers at random past times equal the model's state at that cut whenever they say they are
complete, and they must say so while nothing was ever cleaned.
"""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.files import OsFileOps
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segments import ManualScheduler
from kompakt.records.batch import Compression
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch
from kompakt.table.offline import open_tables
from kompakt.table.partition import LiveTable, PartitionTable
from tests.support.profiles import examples

# 150 examples under the quick profile (scaled under ``make fuzz``); KOMPAKT_TABLE_EXAMPLES=N runs N.
_EXAMPLES = int(os.environ.get("KOMPAKT_TABLE_EXAMPLES", examples(150)))
KEYS = [b"", b"a", b"b", b"c", b"d"]
START_MS = 1_700_000_000_000  # before the files' modification times, as a real clock would be
RETENTION_MS = 10_000


class NoSyncFileOps(OsFileOps):
    """Real files without fsync: the test observes contents after crashes, never durability."""

    def fsync(self, fd: int) -> None:
        pass

    def fsync_dir(self, path: Path) -> None:
        pass


@dataclass
class Entry:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    pid: int | None = None  # producer id of a transactional record


@dataclass
class Txn:
    first_offset: int
    marker_offset: int | None = None  # None while the transaction is open
    committed: bool = False


@dataclass
class Model:
    records: list[Entry] = field(default_factory=list)
    txns: dict[int, Txn] = field(default_factory=dict)
    sequences: dict[int, int] = field(default_factory=dict)
    next_pid: int = 1000
    counter: int = 0
    cleaned: bool = False
    #: base offsets of the batches appended (truncation, like Kafka's, cuts whole batches)
    batch_bases: list[int] = field(default_factory=list)

    def value(self, kind: str) -> bytes | None:
        self.counter += 1
        return {"value": f"v{self.counter}".encode(), "empty": b"", "tombstone": None}[kind]

    def open_pids(self) -> list[int]:
        return [pid for pid, t in self.txns.items() if t.marker_offset is None]

    def state(self, end: int | None = None) -> dict[bytes, bytes | None]:
        """The consumer's answer for the log cut at ``end`` (None: the whole log)."""
        cut = end if end is not None else (1 << 62)
        open_first = [
            t.first_offset
            for t in self.txns.values()
            if t.first_offset < cut and (t.marker_offset is None or t.marker_offset >= cut)
        ]
        lso = min([cut, *open_first])
        latest: dict[bytes, bytes | None] = {}
        for r in self.records:
            if r.offset >= lso or r.key is None:
                continue
            if r.pid is not None:
                t = self.txns[r.pid]
                if not t.committed or t.marker_offset is None or t.marker_offset >= cut:
                    continue
            latest[r.key] = r.value
        return latest

    def live(self, end: int | None = None) -> dict[bytes, bytes]:
        return {k: v for k, v in self.state(end).items() if v is not None}

    def cut_for(self, as_of_ms: int) -> int | None:
        later = [r.offset for r in self.records if r.timestamp > as_of_ms]
        return min(later) if later else None

    def truncate(self, offset: int) -> None:
        self.records = [r for r in self.records if r.offset < offset]
        self.batch_bases = [b for b in self.batch_bases if b < offset]
        for pid, t in list(self.txns.items()):
            if t.first_offset >= offset:
                del self.txns[pid]
            elif t.marker_offset is not None and t.marker_offset >= offset:
                t.marker_offset = None


record_st = st.tuples(
    st.sampled_from(KEYS), st.sampled_from(["value", "value", "value", "empty", "tombstone"])
)
records_st = st.lists(record_st, min_size=1, max_size=4)
op_st = st.one_of(
    st.tuples(st.just("append"), records_st, st.sampled_from(list(Compression))),
    st.tuples(st.just("txn_begin"), records_st),
    st.tuples(st.just("txn_begin"), records_st),
    st.tuples(st.just("txn_more"), records_st),
    st.tuples(st.just("txn_end"), st.booleans()),
    st.tuples(st.just("txn_end"), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.sampled_from([1, 1_000, RETENTION_MS + 1])),
    st.tuples(st.just("clean")),
    st.tuples(st.just("truncate"), st.integers(1, 6)),
    st.tuples(st.just("restart")),
    st.tuples(st.just("crash")),
)


def _config(segment_bytes: int) -> LogConfig:
    return dataclasses.replace(
        LogConfig.defaults(),
        cleanup_policy=frozenset({"compact"}),
        internal_segment_bytes=segment_bytes,
        segment_index_bytes=1024,
        delete_retention_ms=RETENTION_MS,
    )


class Harness:
    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.clock = FakeClock(START_MS)
        self.directory = directory
        self.config = _config(segment_bytes)
        self.ops = NoSyncFileOps()
        self.log = self._open(True)
        self.table = LiveTable(self.log)
        self.model = Model()
        self.checkpoint = 0

    def _open(self, clean: bool, start: int = 0) -> PartitionLog:
        return PartitionLog(
            self.directory,
            "t",
            0,
            self.config,
            self.clock,
            scheduler=ManualScheduler(self.clock),
            had_clean_shutdown=clean,
            log_start_offset=start,
            rng=random.Random(0),
            file_ops=self.ops,
        )

    def _append_records(self, records: list[tuple[bytes, str]], pid: int | None, codec: Compression) -> None:
        m = self.model
        now = self.clock.now_ms()
        built = [SimpleRecord(k, m.value(kind), now) for k, kind in records]
        if pid is None:
            raw = build_batch(built, compression=codec)
        else:
            seq = m.sequences.get(pid, 0)
            m.sequences[pid] = seq + len(built)
            raw = build_batch(
                built,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=seq,
                is_transactional=True,
                compression=codec,
            )
        first = self.log.append(raw).first_offset
        m.batch_bases.append(first)
        for i, r in enumerate(built):
            m.records.append(Entry(first + i, r.key, r.value, now, pid))

    def apply(self, op: tuple[object, ...]) -> None:
        m = self.model
        kind = op[0]
        if kind == "append":
            self._append_records(op[1], None, op[2])  # type: ignore[arg-type]
        elif kind == "txn_begin":
            pid = m.next_pid
            m.next_pid += 1
            m.txns[pid] = Txn(self.log.log_end_offset)
            self._append_records(op[1], pid, Compression.NONE)  # type: ignore[arg-type]
        elif kind == "txn_more" and m.open_pids():
            self._append_records(op[1], m.open_pids()[0], Compression.LZ4)  # type: ignore[arg-type]
        elif kind == "txn_end" and m.open_pids():
            pid = m.open_pids()[0]
            commit = bool(op[1])
            marker = build_control_batch(
                ControlType.COMMIT if commit else ControlType.ABORT,
                producer_id=pid,
                producer_epoch=0,
                timestamp=self.clock.now_ms(),
            )
            info = self.log.append(marker)
            m.batch_bases.append(info.first_offset)
            m.txns[pid].marker_offset = info.first_offset
            m.txns[pid].committed = commit
        elif kind == "roll":
            self.log.roll()
        elif kind == "advance":
            self.clock.advance(int(op[1]))  # type: ignore[call-overload]
        elif kind == "clean":
            self._clean()
        elif kind == "truncate" and not m.open_pids() and m.batch_bases:
            # the start of one of the last batches (Kafka truncates whole batches)
            target = m.batch_bases[-min(int(op[1]), len(m.batch_bases))]  # type: ignore[call-overload]
            if target >= self.checkpoint:
                self.log.truncate_to(target)
                m.truncate(target)
                m.next_pid += 1
        elif kind == "restart":
            self.log.close()
            self.log = self._open(True, self.log.log_start_offset)
            self.table = LiveTable(self.log)
        elif kind == "crash":
            start = self.log.log_start_offset
            self.log.close_without_flush()
            self.log = self._open(False, start)
            self.table = LiveTable(self.log)

    def _clean(self) -> None:
        log = self.log
        lso = log.last_stable_offset
        holder = log.segments.floor(lso)
        end = min(log.active_segment.base_offset, holder.base_offset if holder is not None else lso)
        if end <= self.checkpoint:
            return
        cleaner = Cleaner(0, HashedOffsetMap(1 << 16, 0.9), self.clock)
        result = cleaner.clean(log, self.checkpoint, end)
        self.checkpoint = result.end_offset
        self.model.cleaned = True

    def check(self, as_of_choices: list[int]) -> None:
        expected = self.model.live()
        (offline,) = open_tables(self.directory)
        tables: list[tuple[str, PartitionTable]] = [("live", self.table), ("offline", offline)]
        for name, table in tables:
            for key in KEYS:
                got = table.get(key)
                assert (None if got is None else got.value) == expected.get(key), (name, key)
            rows = {r.key: r.value for r in table.scan()}
            assert rows == expected, name
            with_tombstones = list(table.scan(include_tombstones=True))
            counts = table.counts()
            assert counts.live_keys == len(expected), name
            assert counts.tombstones == sum(1 for r in with_tombstones if r.value is None), name
            for r in with_tombstones:
                if r.value is None:
                    assert r.key not in expected, name
        for as_of_ms in as_of_choices:
            cut = self.model.cut_for(as_of_ms)
            want = self.model.live(cut)
            for name, table in tables:
                index, info = table.as_of(as_of_ms)
                if not self.model.cleaned and self.log.log_start_offset == 0:
                    assert info.complete, (name, info)
                if info.complete:
                    got = {
                        r.key: r.value for r in table.scan(index=index, end_offset=info.last_stable_offset)
                    }
                    assert got == want, (name, as_of_ms, info)


@settings(max_examples=_EXAMPLES)
@given(
    ops=st.lists(op_st, min_size=1, max_size=30),
    segment_bytes=st.sampled_from([200, 500, 4000]),
    as_of_steps=st.lists(st.integers(0, 40_000), max_size=2),
)
def test_every_answer_equals_the_model(
    ops: list[tuple[object, ...]], segment_bytes: int, as_of_steps: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(Path(tmp) / "t-0", segment_bytes)
        try:
            for op in ops:
                harness.apply(op)
                harness.check([START_MS + step for step in as_of_steps])
        finally:
            harness.log.close_without_flush()
