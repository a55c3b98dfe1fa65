"""The cleaner manager: per-partition cleaning states, the uncleanable set and the checkpoint.

Theory of operation
-------------------
Every partition has at most one cleaning state (no entry means "none")::

              grab_filthiest / deletable_logs
      none ───────────────────────────────────► IN_PROGRESS
       ▲ ▲                                        │   │
       │ └──────── done_cleaning / done_deleting ─┘   │ abort_and_pause_cleaning
       │                                              ▼
       │ resume (n == 1)                           ABORTED
       │                                              │ done_cleaning / done_deleting
       │        abort_and_pause (from none)           ▼
       └──────────── PAUSED(n) ◄──────────────────────┘   (→ PAUSED(1), wakes the waiters)
                     │     ▲
                     └─────┘ abort_and_pause: n+1;  resume: n-1 (n > 1)

* Selection and compacted-log retention move a partition from none to IN_PROGRESS; only the
  cleaner thread that did so moves it back, with ``done_cleaning`` (which also writes the
  checkpoint) or ``done_deleting``.
* Truncation, partition deletion and log-directory moves call ``abort_and_pause_cleaning``. If a
  clean is running the state becomes ABORTED and the caller **blocks** until the cleaner thread
  notices (``check_cleaning_aborted`` raises at its next check point) and calls
  ``done_cleaning``, which turns ABORTED into PAUSED(1) without touching the checkpoint. Pauses
  nest: each ``abort_and_pause_cleaning`` needs one ``resume_cleaning``.
* The retention task pauses idle non-compacted partitions with
  ``pause_cleaning_for_non_compacted_partitions`` so that a policy switch to ``compact`` cannot
  start a clean under its feet; it resumes them when done.
* Any other transition is a caller bug and raises :class:`IllegalCleanerStateError`.

The uncleanable set (partition → reason) is kept in memory only, as in Kafka; beyond Kafka,
``clear_uncleanable`` lets an operator retry a partition without a restart.

The ``cleaner-offset-checkpoint`` is reached only through the injected :class:`CheckpointStore`;
each write is read-modify-write of the whole file, keeping only partitions that still exist. The
broker's store is a :class:`CleanerCheckpointFile`: an unreadable file reads as no entries (every
log is cleaned from its start, as in Kafka's ``LogCleanerManager.allCleanerCheckpoints``) and its
bytes are kept beside it when the next write replaces it.

Thread safety: every method takes the manager's one lock (a reentrant lock under a
``threading.Condition``), so selection, state changes and checkpoint writes are serialized. The
checkpoint store is called with the lock held.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from kompakt.cleaner.planning import (
    CleanableLog,
    L,
    Selection,
    SelectionError,
    TopicPartition,
    calculate_cleanable_bytes,
    cleanable_offsets,
    grab_filthiest,
    log_name,
    topic_partition,
)
from kompakt.cleaner.planning import deletable_logs as plan_deletable_logs
from kompakt.errors import CleaningAbortedError, CorruptCheckpointError, IllegalCleanerStateError
from kompakt.log.checkpoint import OffsetCheckpointFile
from kompakt.log.files import atomic_write_bytes

logger = logging.getLogger(__name__)


class CheckpointStore(Protocol):
    """The ``cleaner-offset-checkpoint`` file (``kompakt.log.checkpoint.OffsetCheckpointFile``)."""

    def read(self) -> dict[TopicPartition, int]: ...

    def write(self, entries: Mapping[TopicPartition, int], /) -> None: ...


#: Suffix of a cleaner checkpoint that could not be read, kept when a write replaces it.
CORRUPT_SUFFIX = ".corrupt-"


class CleanerCheckpointFile:
    """The ``cleaner-offset-checkpoint`` as the cleaner uses it: a bad file never stops cleaning.

    Kafka's ``LogCleanerManager.allCleanerCheckpoints`` logs a checkpoint it cannot read and
    carries on as if it had no entries, so every log is cleaned from its start and the next
    checkpoint write replaces the file (Kafka's ``CheckpointFileWithFailureHandler.read`` also
    takes the whole log directory offline; kompakt does not, since the file only saves work).
    A corrupt checkpoint costs only a re-clean, never a dead cleaner thread or a failing admin
    endpoint. Unlike Kafka, the bytes it could not read are not overwritten unseen: the write
    that replaces them first copies them to ``cleaner-offset-checkpoint.corrupt-<ms>`` beside
    the file, for an operator to inspect; if that copy fails, the write fails too. The problem
    is logged once per bad file, not on every read (selection reads the file each pass). Called
    under the manager's lock, like any :class:`CheckpointStore`.
    """

    def __init__(self, path: str | Path, now_ms: Callable[[], int]) -> None:
        self._file = OffsetCheckpointFile(path)
        self._now_ms = now_ms
        self._problem: str | None = None

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> dict[TopicPartition, int]:
        try:
            entries = self._file.read()
        except (CorruptCheckpointError, OSError) as exc:
            problem = str(exc) if isinstance(exc, CorruptCheckpointError) else f"{type(exc).__name__}: {exc}"
            if problem != self._problem:
                logger.warning(
                    "Cannot read the cleaner checkpoint %s (%s); cleaning every compacted log from the "
                    "log start. The next checkpoint write replaces the file and keeps its bytes as %s%s<ms>.",
                    self.path,
                    problem,
                    self.path.name,
                    CORRUPT_SUFFIX,
                )
            self._problem = problem
            return {}
        self._problem = None
        return entries

    def write(self, entries: Mapping[TopicPartition, int], /) -> None:
        if self._problem is not None:
            self._quarantine()
        self._file.write(entries)
        self._problem = None

    def _quarantine(self) -> None:
        """Copy the unreadable file aside before it is replaced (a vanished file needs nothing)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        base = f"{self.path.name}{CORRUPT_SUFFIX}{self._now_ms()}"
        target = self.path.with_name(base)
        n = 1
        while target.exists():
            target = self.path.with_name(f"{base}.{n}")
            n += 1
        atomic_write_bytes(target, data)
        logger.warning("Kept the unreadable cleaner checkpoint %s as %s", self.path, target.name)


class CleaningStateKind(Enum):
    IN_PROGRESS = "in-progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class CleaningState:
    """One partition's state; ``paused_count`` is the nesting depth of PAUSED (0 otherwise)."""

    kind: CleaningStateKind
    paused_count: int = 0

    def __str__(self) -> str:
        if self.kind is CleaningStateKind.PAUSED:
            return f"paused({self.paused_count})"
        return str(self.kind.value)


IN_PROGRESS = CleaningState(CleaningStateKind.IN_PROGRESS)
ABORTED = CleaningState(CleaningStateKind.ABORTED)


def paused(count: int) -> CleaningState:
    return CleaningState(CleaningStateKind.PAUSED, count)


def _tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


class CleanerManager:
    """Cleaning states, uncleanable partitions and the cleaner checkpoint. Thread-safe.

    ``live_partitions``, when given, returns the partitions currently in the log pool; checkpoint
    writes drop entries for anything else (partitions deleted since the last write).
    ``start_ms`` seeds ``time_of_last_run_ms`` so ``time-since-last-run-ms`` starts at zero.
    """

    def __init__(
        self,
        checkpoints: CheckpointStore,
        *,
        start_ms: int,
        live_partitions: Callable[[], Collection[TopicPartition]] | None = None,
    ) -> None:
        self._checkpoints = checkpoints
        self._live_partitions = live_partitions
        self._cond = threading.Condition(threading.RLock())
        self._states: dict[TopicPartition, CleaningState] = {}
        self._uncleanable: dict[TopicPartition, str] = {}
        self._time_of_last_run_ms = start_ms
        self._max_dirty_percent = 0.0
        self._max_compaction_delay_ms = 0

    # ----------------------------------------------------------------------------- inspection

    def cleaning_state(self, tp: TopicPartition) -> CleaningState | None:
        with self._cond:
            return self._states.get(tp)

    def states(self) -> dict[TopicPartition, CleaningState]:
        with self._cond:
            return dict(self._states)

    def is_cleaning_in_state_paused(self, tp: TopicPartition) -> bool:
        with self._cond:
            state = self._states.get(tp)
            return state is not None and state.kind is CleaningStateKind.PAUSED

    def is_cleaning_in_state_aborted(self, tp: TopicPartition) -> bool:
        with self._cond:
            return self._states.get(tp) == ABORTED

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """The cleaner thread's check point: raise if someone aborted this partition's clean."""
        if self.is_cleaning_in_state_aborted(tp):
            raise CleaningAbortedError(f"cleaning of {_tp_name(tp)} was aborted")

    @property
    def time_of_last_run_ms(self) -> int:
        with self._cond:
            return self._time_of_last_run_ms

    def time_since_last_run_ms(self, now_ms: int) -> int:
        with self._cond:
            return now_ms - self._time_of_last_run_ms

    @property
    def max_dirty_percent(self) -> float:
        """``100 ×`` the highest cleanable ratio seen by the last selection."""
        with self._cond:
            return self._max_dirty_percent

    @property
    def max_compaction_delay_ms(self) -> int:
        """The largest max-lag overrun seen by the last selection (any thread)."""
        with self._cond:
            return self._max_compaction_delay_ms

    # ----------------------------------------------------------------------------- selection

    def grab_filthiest_compacted_log(
        self,
        logs: Iterable[L],
        now_ms: int,
        *,
        delete_horizons: Mapping[TopicPartition, int | None] | None = None,
    ) -> Selection[L]:
        """Choose the next log to clean and mark it IN_PROGRESS.

        Invalid checkpoints found on the way are rewritten now, whether or not their log is
        chosen. If evaluating a log fails, the resets found so far are still written and the
        :class:`~kompakt.cleaner.planning.SelectionError` propagates; the caller marks that
        partition uncleanable.
        """
        with self._cond:
            self._time_of_last_run_ms = now_ms
            checkpoints = self._checkpoints.read()
            pairs = [(log, checkpoints.get(topic_partition(log))) for log in logs]
            try:
                selection = grab_filthiest(
                    pairs, now_ms, self._states, self._uncleanable, delete_horizons=delete_horizons
                )
            except SelectionError as exc:
                if exc.checkpoint_resets:
                    self._update_checkpoints(exc.checkpoint_resets)
                raise
            if selection.checkpoint_resets:
                self._update_checkpoints(selection.checkpoint_resets)
            self._max_dirty_percent = selection.max_dirty_percent
            self._max_compaction_delay_ms = selection.max_compaction_delay_ms
            if selection.chosen is not None:
                self._states[selection.chosen.topic_partition] = IN_PROGRESS
            return selection

    def begin_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Mark ``tp`` IN_PROGRESS for an on-demand clean (compact-now).

        Waits while a cleaner thread or a retention pass holds the partition; raises
        TimeoutError if that lasts longer than ``timeout_s``, and IllegalCleanerStateError if
        cleaning is paused or aborted (the partition is being truncated or deleted).
        """
        with self._cond:

            def settled() -> bool:
                return self._states.get(tp) != IN_PROGRESS

            if not self._cond.wait_for(settled, timeout_s):
                raise TimeoutError(f"{tp[0]}-{tp[1]} stayed busy for {timeout_s} s")
            state = self._states.get(tp)
            if state is not None:
                raise IllegalCleanerStateError(f"cannot compact {tp[0]}-{tp[1]} now: cleaning is {state}")
            self._states[tp] = IN_PROGRESS

    def deletable_logs(self, logs: Iterable[L]) -> list[L]:
        """Compacted logs for the cleaner thread's retention pass, each marked IN_PROGRESS.

        The caller runs segment deletion on each and then calls :meth:`done_deleting`.
        """
        with self._cond:
            chosen = plan_deletable_logs(logs, self._states, self._uncleanable)
            for log in chosen:
                self._states[topic_partition(log)] = IN_PROGRESS
            return chosen

    def pause_cleaning_for_non_compacted_partitions(self, logs: Iterable[L]) -> list[L]:
        """Pause every idle non-compacted partition for the retention task and return them."""
        with self._cond:
            chosen = [
                log for log in logs if not log.config.compact and topic_partition(log) not in self._states
            ]
            for log in chosen:
                self._states[topic_partition(log)] = paused(1)
            return chosen

    # ----------------------------------------------------------------------------- transitions

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Stop any clean of ``tp`` and pause it; blocks until the state is PAUSED.

        On timeout raises :class:`TimeoutError`; the abort stays requested, so the partition
        still ends up PAUSED(1) when the cleaner thread finishes, and the caller owns that pause.
        """
        with self._cond:
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = paused(1)
            elif state == IN_PROGRESS:
                self._states[tp] = ABORTED
            elif state.kind is CleaningStateKind.PAUSED:
                self._states[tp] = paused(state.paused_count + 1)
            else:
                raise IllegalCleanerStateError(
                    f"Compaction for partition {_tp_name(tp)} cannot be aborted and paused since it is in "
                    f"{state} state."
                )
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self.is_cleaning_in_state_paused(tp), timeout_s):
                raise TimeoutError(f"cleaning of {_tp_name(tp)} was not paused within {timeout_s} s")
        logger.info("The cleaning for partition %s is aborted and paused", _tp_name(tp))

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        """Undo one pause of each partition: PAUSED(1) → none, PAUSED(n) → PAUSED(n-1)."""
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if state is None or state.kind is not CleaningStateKind.PAUSED:
                    what = "not paused" if state is None else f"in {state} state"
                    raise IllegalCleanerStateError(
                        f"Compaction for partition {_tp_name(tp)} cannot be resumed since it is {what}."
                    )
                if state.paused_count == 1:
                    del self._states[tp]
                else:
                    self._states[tp] = paused(state.paused_count - 1)
            self._cond.notify_all()

    def abort_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Stop any clean of ``tp`` without leaving it paused (partition deletion)."""
        with self._cond:
            self.abort_and_pause_cleaning(tp, timeout_s)
            self.resume_cleaning([tp])
        logger.info("The cleaning for partition %s is aborted", _tp_name(tp))

    def done_cleaning(self, tp: TopicPartition, end_offset: int) -> None:
        """End a clean: IN_PROGRESS → none with checkpoint ``end_offset``; ABORTED → PAUSED(1).

        The cleaner thread calls this whatever the clean's outcome; after a failure it passes
        the clean's first dirty offset, so the checkpoint does not move. After an abort the
        checkpoint is left alone.
        """
        with self._cond:
            state = self._states.get(tp)
            if state == IN_PROGRESS:
                try:
                    self._update_checkpoints({tp: end_offset})
                finally:
                    # A failed checkpoint write must not leave the partition stuck in progress.
                    del self._states[tp]
            elif state == ABORTED:
                self._states[tp] = paused(1)
            else:
                raise IllegalCleanerStateError(
                    f"In-progress partition {_tp_name(tp)} cannot be in {state or 'no'} state."
                )
            self._cond.notify_all()

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        """End compacted-log retention: the transitions of :meth:`done_cleaning`, no checkpoint."""
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if state == IN_PROGRESS:
                    del self._states[tp]
                elif state == ABORTED:
                    self._states[tp] = paused(1)
                else:
                    raise IllegalCleanerStateError(
                        f"In-progress partition {_tp_name(tp)} cannot be in {state or 'no'} state."
                    )
            self._cond.notify_all()

    # ----------------------------------------------------------------------------- uncleanable

    def mark_uncleanable(self, tp: TopicPartition, reason: str) -> None:
        with self._cond:
            self._uncleanable[tp] = reason
        logger.warning("Marking partition %s as uncleanable: %s", _tp_name(tp), reason)

    def clear_uncleanable(self, tp: TopicPartition) -> bool:
        """Let selection consider ``tp`` again; returns whether it was marked."""
        with self._cond:
            found = self._uncleanable.pop(tp, None) is not None
        if found:
            logger.info("Partition %s is no longer marked uncleanable", _tp_name(tp))
        return found

    def is_uncleanable(self, tp: TopicPartition) -> bool:
        with self._cond:
            return tp in self._uncleanable

    def uncleanable(self) -> dict[TopicPartition, str]:
        with self._cond:
            return dict(self._uncleanable)

    def prune_uncleanable(self, live: Collection[TopicPartition]) -> None:
        """Forget marks of partitions no longer in the log pool
        (``LogCleanerManager.maintainUncleanablePartitions``)."""
        with self._cond:
            for tp in [tp for tp in self._uncleanable if tp not in live]:
                del self._uncleanable[tp]

    def uncleanable_bytes(self, logs: Iterable[CleanableLog], now_ms: int) -> int:
        """Σ cleanable bytes of the uncleanable partitions (the ``uncleanable-bytes`` gauge)."""
        with self._cond:
            marked = [log for log in logs if topic_partition(log) in self._uncleanable]
            if not marked:
                return 0
            checkpoints = self._checkpoints.read()
        total = 0
        for log in marked:
            try:
                offsets = cleanable_offsets(log, checkpoints.get(topic_partition(log)), now_ms)
                _, cleanable = calculate_cleanable_bytes(
                    log.segment_infos(), offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset
                )
            except Exception:
                # The partition is uncleanable precisely because reading it fails; a gauge must
                # not raise, so it counts nothing for this one.
                logger.exception("Cannot compute uncleanable bytes of %s", log_name(log))
                continue
            total += cleanable
        return total

    # ----------------------------------------------------------------------------- checkpoints

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._cond:
            return self._checkpoints.read()

    def update_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        with self._cond:
            self._update_checkpoints({tp: offset})

    def remove_checkpoint(self, tp: TopicPartition) -> None:
        """Drop ``tp``'s entry (partition deletion)."""
        with self._cond:
            self._update_checkpoints({}, remove=tp)

    def maybe_truncate_checkpoint(self, tp: TopicPartition, offset: int, *, compact: bool = True) -> None:
        """After truncation: lower a compacted partition's checkpoint to ``offset`` if above it."""
        if not compact:
            return
        with self._cond:
            existing = self._checkpoints.read().get(tp)
            if existing is not None and existing > offset:
                self._update_checkpoints({tp: offset})

    def _update_checkpoints(
        self, updates: Mapping[TopicPartition, int], remove: TopicPartition | None = None
    ) -> None:
        current = self._checkpoints.read()
        if self._live_partitions is not None:
            live = self._live_partitions()
            current = {tp: off for tp, off in current.items() if tp in live}
        current.update(updates)
        if remove is not None:
            current.pop(remove, None)
        self._checkpoints.write(current)
