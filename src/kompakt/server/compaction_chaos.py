"""Compaction chaos: clean compacted topics at random legal moments as records arrive.

``kompakt serve --compaction-chaos SEED`` (and the pytest fixture's option) makes a broker's
compacted topics look, within seconds, like production's after months: after an append to a
compacted partition the broker may roll its active segment, and may clean it, far more often than
any real configuration would. An application's own integration tests then read logs with
superseded values gone, offsets with gaps, tombstones and markers gone.

Every clean is one the cleaner could run: :func:`~kompakt.cleaner.compact_now.cleanable_range`
bounds it (the active segment, the last stable offset, ``min.compaction.lag.ms`` on the broker's
clock), it starts at the checkpoint or, as kompakt's compact-now does, at the log start, and it
runs the real :class:`~kompakt.cleaner.cleaner.Cleaner` under the cleaner manager's
``IN_PROGRESS`` state. What chaos moves is time for the delete horizons: each partition has a
*chaos clock* that starts at the broker's and jumps ahead by ``delete.retention.ms`` (plus a
millisecond) at random, and the passes stamp and check horizons on it. So tombstones and markers
go after a few passes, while the broker's own clock (transaction timeouts, offset expiry, the
manual clock a test moves) is left alone; horizons stamped in the future of the broker's clock
only make its own cleaner keep them longer.

Deterministic for a given seed: each partition draws from its own ``random.Random`` seeded by
``SEED/topic/partition``, once per append, and the clean runs in the appending request's thread
before the producer is answered, so the same appends in the same order get the same rolls and
cleans. The broker's cleaner threads would clean on their own schedule; ``kompakt serve`` and the
fixture turn them off (``log.cleaner.enable=false``) unless the configuration sets it. Appends
are seen where a produce or a transaction marker wakes parked fetches
(:meth:`ChaosFetchWaiters.notify`): records clients produce and markers, not the coordinators' own
``__consumer_offsets`` and ``__transaction_state`` writes.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kompakt.broker.fetch_waiters import FetchWaiters
from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.compact_now import cleanable_range
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.clock import Clock
from kompakt.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Chances, per append to a compacted partition, of a roll and of a clean.
ROLL_PROBABILITY = 0.5
CLEAN_PROBABILITY = 0.35
#: Chance that a clean moves the partition's chaos clock past the horizons stamped so far.
EXPIRE_PROBABILITY = 0.5
#: Chance that a clean starts at the log start (kompakt's compact-now) rather than the checkpoint.
FROM_START_PROBABILITY = 0.25


@dataclass(slots=True)
class _PartitionChaos:
    rng: random.Random
    now_ms: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    rolls: int = 0
    cleans: int = 0


class CompactionChaos:
    """Random legal rolls and cleans of compacted partitions, seeded (see the module docstring)."""

    def __init__(
        self,
        seed: int,
        cleaner: LogCleaner,
        logs: Callable[[], Mapping[TopicPartition, PartitionLog]],
        clock: Clock,
    ) -> None:
        self.seed = seed
        self.cleaner = cleaner
        self._logs = logs
        self.clock = clock
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, _PartitionChaos] = {}
        #: One cleaner (one offset map) for every chaos clean, used by one clean at a time.
        self._cleaner: Cleaner | None = None
        self._clean_lock = threading.Lock()

    def _state(self, tp: TopicPartition) -> _PartitionChaos:
        with self._lock:
            state = self._partitions.get(tp)
            if state is None:
                rng = random.Random(f"{self.seed}/{tp[0]}/{tp[1]}")  # noqa: S311 - chaos, not security
                state = self._partitions[tp] = _PartitionChaos(rng, self.clock.now_ms())
            return state

    def counts(self) -> dict[TopicPartition, tuple[int, int]]:
        """``(rolls, cleans)`` chaos made per partition so far."""
        with self._lock:
            return {tp: (s.rolls, s.cleans) for tp, s in self._partitions.items()}

    def after_append(self, topic: str, partition: int) -> None:
        """Draw this append's roll and clean for the partition; never raises (a failed chaos
        clean is logged and the append stands)."""
        partition_log = self._logs().get((topic, partition))
        if partition_log is None or not partition_log.config.compact:
            return
        state = self._state((topic, partition))
        with state.lock:
            rng = state.rng
            roll = rng.random() < ROLL_PROBABILITY
            clean = rng.random() < CLEAN_PROBABILITY
            expire = rng.random() < EXPIRE_PROBABILITY
            from_start = rng.random() < FROM_START_PROBABILITY
            try:
                if roll and partition_log.active_segment.size > 0:
                    partition_log.roll()
                    state.rolls += 1
                if clean:
                    step = partition_log.config.delete_retention_ms + 1 if expire else 1
                    state.now_ms = max(state.now_ms, self.clock.now_ms()) + step
                    if self._clean(partition_log, from_start, state.now_ms):
                        state.cleans += 1
            except Exception:  # noqa: BLE001 - chaos must never fail a produce
                log.exception("compaction chaos on %s-%d failed", topic, partition)

    def _clean(self, partition_log: PartitionLog, from_start: bool, now_ms: int) -> bool:
        """One compact-now from the checkpoint or the log start, horizons at ``now_ms``; the
        range is the cleaner's own at the broker's time."""
        tp = (partition_log.topic, partition_log.partition)
        manager = self.cleaner.manager
        manager.begin_cleaning(tp, 30.0)
        end = manager.all_cleaner_checkpoints().get(tp, partition_log.log_start_offset)
        cleaned = False
        try:
            first = partition_log.log_start_offset if from_start else end
            start, bound = cleanable_range(partition_log, first, self.clock.now_ms())
            with self._clean_lock:
                if self._cleaner is None:
                    self._cleaner = self.cleaner.new_cleaner(-2)
                while start < bound:
                    result = self._cleaner.clean(partition_log, start, bound, now_ms)
                    cleaned = True
                    if result.end_offset <= start:
                        break
                    start = end = result.end_offset
            if cleaned:
                log.debug("compaction chaos cleaned %s-%d up to %d", *tp, end)
        finally:
            manager.done_cleaning(tp, end)
        return cleaned


class ChaosFetchWaiters(FetchWaiters):
    """The fetch registry of a chaos broker: every append that wakes parked fetches (a produce,
    a transaction marker) first gives chaos its turn, in the appending thread."""

    def __init__(self, chaos: CompactionChaos) -> None:
        super().__init__()
        self.chaos = chaos

    def notify(self, topic: str, partition: int) -> int:
        self.chaos.after_append(topic, partition)
        return super().notify(topic, partition)


__all__ = ["ChaosFetchWaiters", "CompactionChaos"]
