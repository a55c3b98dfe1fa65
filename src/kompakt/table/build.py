"""Filling a key index from batches, with read_committed semantics.

Two builders, one answer: what a ``read_committed`` consumer replaying the partition from its log
start ends with. Data of aborted transactions and control batches never count, and nothing at or
past the last stable offset does (Kafka's ``Fetcher`` drops aborted batches by the aborted
transactions the broker sends with each fetch; the LSO bounds what it may read).

* :class:`IncrementalBuilder` is that consumer, for a live log: it is fed fetches
  (:meth:`kompakt.log.partition_log.PartitionLog.read` with ``read_committed``) and their aborted
  transactions, and decides each transactional batch with the cleaner's
  :class:`~kompakt.cleaner.transactions.TransactionTracker`, which follows the same rule.
* :class:`OneShotBuilder` reads a log once from its start, where no broker computes the LSO or the
  aborted list (a log directory on disk, an ``--as-of`` cut): a transaction's data is held until
  its marker decides it; transactions still open at the end pin the LSO at their first offset,
  and if anything at or past it was applied, a second pass applies only what lies below it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from kompakt.cleaner.transactions import TransactionTracker
from kompakt.log.txn_index import AbortedTxn
from kompakt.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, RecordBatchView
from kompakt.records.control import ControlType, control_type_of
from kompakt.records.native import I64Array, U8Array, U64Array, Workspace
from kompakt.records.scan import BatchTable
from kompakt.table.index import KeyIndex
from kompakt.table.records import record_runs, span_runs

Chunk = tuple[U8Array, BatchTable]
"""Whole v2 batches in offset order and their header table."""

_NO_BOUND = np.iinfo(np.int64).max


def _control_type(buf: U8Array, table: BatchTable, i: int) -> ControlType | int | None:
    pos = int(table.position[i])
    return control_type_of(RecordBatchView(buf[pos : pos + int(table.size[i])].data))


@dataclass(slots=True)
class IncrementalBuilder:
    """Applies fetched batches to an index as a read_committed consumer would (see the module)."""

    index: KeyIndex
    growth: float = 1.25
    tracker: TransactionTracker = field(default_factory=TransactionTracker)
    workspace: Workspace = field(default_factory=Workspace)
    records_read: int = 0

    def apply_fetch(
        self, buf: U8Array, table: BatchTable, aborted: Iterable[AbortedTxn], low: int, high: int
    ) -> None:
        """Apply the records in ``[low, high)`` of one fetch's batches."""
        self.tracker.add_aborted(aborted)
        attrs = table.attributes
        special = np.flatnonzero((attrs & (ATTR_TRANSACTIONAL | ATTR_CONTROL)) != 0)
        keep = (attrs & ATTR_CONTROL) == 0
        last = table.last_offset
        for i in special.tolist():
            pid = int(table.producer_id[i])
            if int(attrs[i]) & ATTR_CONTROL:
                self.tracker.on_control_batch_read(pid, _control_type(buf, table, i), int(last[i]))
            elif self.tracker.on_batch_read(pid, True, int(last[i])):
                keep[i] = False
        for run_buf, spans, _which in span_runs(buf, table, keep):
            done, _top = self.index.apply_spans(run_buf, spans, low, high, growth=self.growth)
            self.records_read += done


@dataclass(slots=True)
class _Pending:
    first_offset: int
    parts: list[tuple[U64Array, U64Array, I64Array, I64Array, I64Array]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OneShotResult:
    """How far a one-shot build reached: ``end_offset`` is where the log (or the cut) ended,
    ``last_stable_offset`` the bound the answer honours (below ``end_offset`` when a transaction
    was open there), ``cut_offset`` the first offset past ``--as-of`` (None without one)."""

    end_offset: int
    last_stable_offset: int
    cut_offset: int | None
    records_read: int
    passes: int
    #: The end of the last offset gap seen (a batch or record missing between two that are
    #: there): records were removed below it, by a clean or otherwise. 0 when there is none.
    removed_below: int = 0


class OneShotBuilder:
    """Builds an index from a log's start in one pass (two if a transaction is left open)."""

    def __init__(self, chunks: Callable[[], Iterator[Chunk]], *, start_offset: int = 0) -> None:
        self._chunks = chunks
        self._start = start_offset
        self.workspace = Workspace()
        self._removed_below = 0

    def build(
        self, index_factory: Callable[[], KeyIndex], as_of_ms: int | None = None
    ) -> tuple[KeyIndex, OneShotResult]:
        index = index_factory()
        self._removed_below = 0
        end, cut, open_first, applied_max, records = self._pass(index, _NO_BOUND, as_of_ms)
        lso = min([end, *open_first])
        passes = 1
        if applied_max >= lso:
            index = index_factory()
            self._pass(index, lso, as_of_ms, cut_offset=cut)
            passes = 2
        index.fit()
        return index, OneShotResult(end, lso, cut, records, passes, self._removed_below)

    def _note_gaps(self, table: BatchTable, previous_end: int) -> None:
        found = _gap_end(table, previous_end)
        if found > self._removed_below:
            self._removed_below = found

    def _pass(
        self, index: KeyIndex, bound: int, as_of_ms: int | None, cut_offset: int | None = None
    ) -> tuple[int, int | None, list[int], int, int]:
        """One pass; returns ``(end, cut, first offsets of open transactions, max applied, records)``."""
        pending: dict[int, _Pending] = {}
        cut = cut_offset
        end = self._start
        applied_max = -1
        records = 0
        low = self._start
        for buf, table in self._chunks():
            if len(table) == 0:
                continue
            if cut is not None and int(table.base_offset[0]) >= cut:
                break
            if as_of_ms is not None and cut is None:
                cut = _first_after(buf, table, as_of_ms, low)
            high = bound if cut is None else min(bound, cut)
            attrs = table.attributes
            last = table.last_offset
            txn = (attrs & ATTR_TRANSACTIONAL) != 0
            control = (attrs & ATTR_CONTROL) != 0
            plain = ~txn & ~control
            for run_buf, spans, _which in span_runs(buf, table, plain):
                done, top = index.apply_spans(run_buf, spans, low, high, growth=4.0)
                records += done
                applied_max = max(applied_max, top)
            for i in np.flatnonzero(txn).tolist():
                base = int(table.base_offset[i])
                if cut is not None and base >= cut:
                    break
                pid = int(table.producer_id[i])
                if control[i]:
                    ended = pending.pop(pid, None)
                    if ended is not None and _control_type(buf, table, i) == ControlType.COMMIT:
                        for hi, lo, offsets, key_len, value_len in ended.parts:
                            sel = np.flatnonzero((offsets >= low) & (offsets < high))
                            index.apply(hi[sel], lo[sel], offsets[sel], key_len[sel], value_len[sel])
                            if len(sel):
                                applied_max = max(applied_max, int(offsets[sel[-1]]))
                    continue
                entry = pending.setdefault(pid, _Pending(base))
                one = np.zeros(len(table), dtype=np.bool_)
                one[i] = True
                for run in record_runs(buf, table, one, self.workspace):
                    records += len(run)
                    entry.parts.append(
                        (
                            run.hi.copy(),
                            run.lo.copy(),
                            run.offset.copy(),
                            run.key_len.copy(),
                            run.value_len.copy(),
                        )
                    )
            self._note_gaps(table, end)
            chunk_end = int(last[-1]) + 1
            end = chunk_end if cut is None else min(chunk_end, cut)
        if cut is not None:
            end = cut
        return end, cut, [p.first_offset for p in pending.values()], applied_max, records


def _gap_end(table: BatchTable, previous_end: int) -> int:
    """The end offset of the last batch after or inside which offsets are missing (0 if none)."""
    base = table.base_offset
    last = table.last_offset
    expected = np.empty(len(base), dtype=np.int64)
    expected[0] = previous_end
    expected[1:] = last[:-1] + 1
    between = base > expected
    inside = table.records_count < (last - base + 1)
    gaps = np.flatnonzero(between | inside)
    return int(last[gaps[-1]]) + 1 if len(gaps) else 0


def _first_after(buf: U8Array, table: BatchTable, as_of_ms: int, low: int) -> int | None:
    """The first offset in these batches of a data record stamped after ``as_of_ms``, if any."""
    data = (table.attributes & ATTR_CONTROL) == 0
    best: int | None = None
    for run in record_runs(buf, table, data):
        late = np.flatnonzero((run.timestamp > as_of_ms) & (run.offset >= low))
        if len(late):
            found = int(run.offset[late].min())
            best = found if best is None else min(best, found)
    return best
