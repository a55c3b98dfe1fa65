"""The legal compactions of a partition, produced by the real cleaner on real segment files.

A *variant* of a log is what the log looks like after some sequence of cleaning passes that
kompakt's cleaner (Kafka's, plus kompakt's re-clean from the log start) could have run over it.
Each pass (:class:`Pass`) cleans ``[first dirty offset, upper)``: ``upper`` is a first
uncleanable offset, a batch boundary at or below the last stable offset, that never moves back;
the first dirty offset is the previous pass's end (the cleaner checkpoint), or the log start for
a re-clean. A pass runs at an instant: it stamps the tombstones and markers it keeps with
``now + delete.retention.ms`` and removes the ones whose stamp has passed. Nothing here models
the cleaner: :class:`Compactor` writes the source's batches into a data directory with segment
boundaries at the cut points (a roll before each), and runs :class:`~kompakt.cleaner.cleaner.Cleaner`
passes on it with a manual clock, so every variant is a directory a broker can serve and a state
the cleaner reaches.

Which pass sequences are worth running (the generator's part, :class:`CompactionSpace`):

* For the record views (``read_committed``, ``read_uncommitted``) a variant is fixed by two cut
  points. Every pass rewrites every segment below its end, so a record is gone once some pass
  reaches a later record of its key, or when it is aborted data below the last pass's ``upper``:
  that depends only on the final ``U``. A tombstone survives until a pass after the one that
  stamped it runs past its horizon; the passes stamp in offset order, so the tombstones removed
  are those below some boundary ``B <= U``. Every ``(U, B)`` is reached by at most two passes:
  ``[clean to U]``, ``[clean to B; a delete.retention.ms later, clean to U]`` and, kompakt's
  re-clean, ``[clean to U; later, re-clean from the log start to U]`` (``B = U``). So the
  *normal form* enumerates ``O(cut points x tombstone boundaries)`` plans, each run once. The
  property test (``tests/testing/test_compaction_space.py``) compares it with a brute-force
  enumeration of pass sequences on small logs: the same states.
* For the ``log`` view (markers too) the order of passes matters more (a marker goes only after
  its transaction's data is gone, in a later pass than the one that removed the data, and a
  horizon later), so :meth:`CompactionSpace.search` explores pass sequences breadth first, up to
  ``max_passes``, choosing each pass's instant among the ones that change an outcome (just after
  the previous pass, or exactly at a horizon stamped in the files, or at a producer's
  expiration), and merges sequences that reach the same files.
* Large logs are sampled (:meth:`CompactionSpace.sample`): plans drawn from the same families
  with a seeded ``random.Random``; :mod:`kompakt.testing.compaction_strategies` draws them with
  hypothesis instead.

Plans are ordered small first: fewer passes, then the smaller cleaned range, so the first failing
variant of an exhaustive run is already the smallest one.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.cleaner.sizing import SLOT_BYTES
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE
from kompakt.log.config import LogConfig
from kompakt.log.files import OsFileOps, partition_dir_name
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.log.segments import ManualScheduler
from kompakt.records.batch import RecordBatchView
from kompakt.records.native import I64Array
from kompakt.testing.compaction_log import (
    BatchHeader,
    CompactionModelError,
    LogRecord,
    SourceLog,
    SourceView,
    View,
    scan_partition,
    visible_offsets,
)

DAY_MS: Final = 86_400_000
#: Kafka's ``delete.retention.ms`` and ``producer.id.expiration.ms`` defaults.
DEFAULT_DELETE_RETENTION_MS: Final = DAY_MS
DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = DAY_MS
LONG_MAX: Final = 2**63 - 1
#: The earliest instant the generator's clock starts at (any fixed instant works; timestamps and
#: horizons of a captured log push it later, so they all lie in its past).
CLOCK_START_MS: Final = 1_700_000_000_000

#: Topic configs every run uses over the source's own: segments end only at the cut points, and
#: nothing but the passes' own bounds limits what is cleanable.
RUN_TOPIC_CONFIGS: Final[Mapping[str, str]] = {
    "cleanup.policy": "compact",
    "segment.bytes": str(2**31 - 1),
    "segment.ms": str(LONG_MAX),
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": str(LONG_MAX),
    "file.delete.delay.ms": "0",
    "message.timestamp.type": "CreateTime",
}


class _ScratchFileOps(OsFileOps):
    """The real file operations without fsync: variants are scratch directories, rebuilt from the
    source if the machine stops, and a million-record check must not wait for disks."""

    def fsync(self, fd: int) -> None:
        pass

    def fsync_dir(self, path: Path) -> None:
        pass


SCRATCH_FILE_OPS: Final = _ScratchFileOps()


@dataclass(frozen=True, slots=True, order=True)
class Pass:
    """One cleaning pass: the cleanable range ends at ``upper`` (a batch boundary), the pass runs
    ``at_ms`` after the generator's start instant, from the checkpoint or (``from_log_start``,
    kompakt's re-clean) from the log start."""

    upper: int
    at_ms: int = 0
    from_log_start: bool = False

    def describe(self, first_dirty: int, delete_retention_ms: int) -> str:
        what = "re-clean from the log start" if self.from_log_start else "clean"
        return f"{what} [{first_dirty}, {self.upper}) at {_instant(self.at_ms, delete_retention_ms)}"


def _instant(at_ms: int, retention_ms: int) -> str:
    if at_ms == 0:
        return "t0"
    if retention_ms > 0 and at_ms % retention_ms == 0:
        n = at_ms // retention_ms
        return f"t0 + {'' if n == 1 else f'{n} x '}delete.retention.ms"
    if retention_ms > 0 and at_ms > retention_ms:
        n, rest = divmod(at_ms, retention_ms)
        return f"t0 + {n} x delete.retention.ms + {rest} ms"
    return f"t0 + {at_ms} ms"


Plan = tuple[Pass, ...]


def plan_size(plan: Plan) -> tuple[int, int, tuple[int, ...]]:
    """The order plans are tried in and shrunk by: fewer passes, then a smaller final range,
    then smaller earlier cut points."""
    if not plan:
        return (0, 0, ())
    return (len(plan), plan[-1].upper, tuple(p.upper for p in plan))


def describe_plan(plan: Plan, start_offset: int, delete_retention_ms: int) -> list[str]:
    """One line per pass, with the first dirty offset each pass starts from."""
    lines = []
    checkpoint = start_offset
    for i, p in enumerate(plan, 1):
        first_dirty = start_offset if p.from_log_start else checkpoint
        lines.append(f"pass {i}: {p.describe(first_dirty, delete_retention_ms)}")
        checkpoint = p.upper
    return lines


@dataclass(slots=True)
class Variant:
    """One legal compaction of the source: the passes that made it, the records the view shows,
    the records of the uncompacted view it lacks (:attr:`missing`), and (when kept) its data
    directory.

    ``segments`` are the base offsets the written log rolled at before the passes ran: with
    ``plan`` they are the whole recipe, so the run can be repeated byte for byte.
    """

    plan: Plan
    records: list[LogRecord]
    segments: tuple[int, ...]
    start_offset: int
    delete_retention_ms: int
    directory: Path | None = None
    index: int = 0
    #: The offsets of :attr:`records`, ascending (what tells variants apart, without a pass over
    #: the records).
    offsets: I64Array | None = None
    #: The uncompacted view, from which :attr:`missing` is listed when asked for: only a
    #: report needs it, and a million-record log's variants each lack up to a million records.
    full: SourceView | None = None
    _missing: list[LogRecord] | None = None

    @property
    def missing(self) -> list[LogRecord]:
        """The records of the uncompacted view this variant lacks, in offset order."""
        if self._missing is None:
            if self.full is None or self.offsets is None:
                return []
            self._missing = self.full.lacking(self.offsets)
        return self._missing

    @property
    def partition_dir(self) -> Path | None:
        """The ``<topic>-<partition>`` directory inside :attr:`directory`."""
        if self.directory is None:
            return None
        found = [p for p in self.directory.iterdir() if p.is_dir() and any(p.glob("*.log"))]
        return found[0] if found else None

    def describe(self) -> str:
        lines = describe_plan(self.plan, self.start_offset, self.delete_retention_ms) or ["no pass"]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What running a plan left: the data directory and the cleaner checkpoint."""

    directory: Path
    partition_dir: Path
    checkpoint: int


class Compactor:
    """Writes the source's batches into data directories and runs plans of real cleaner passes.

    The clock starts at ``t0``, after every timestamp and stamped horizon of the source (a
    captured log's stamps count as passed; a test's records are stamped at one instant), and
    each pass sets it to ``t0 + at_ms``. The offset map is sized for every record of the source,
    so a pass always reaches its ``upper`` (a map that fills would end a pass early: that cut
    inside a batch is not one of the generator's).
    """

    def __init__(
        self,
        source: SourceLog,
        work_dir: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.source = source
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.headers: list[BatchHeader] = source.headers()
        configs = dict(source.configs)
        self.delete_retention_ms = int(configs.get("delete.retention.ms", DEFAULT_DELETE_RETENTION_MS))
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.topic_configs = {**configs, **RUN_TOPIC_CONFIGS}
        self.broker_config = BrokerConfig.from_properties({"log.cleaner.enable": "false"})
        self.log_config = LogConfig.from_overrides(self.topic_configs, self.broker_config)
        latest = max(
            [CLOCK_START_MS - 1]
            + [h.max_timestamp for h in self.headers]
            + [h.delete_horizon_ms for h in self.headers if h.delete_horizon_ms is not None]
        )
        self.t0 = latest + 1
        self.start_offset = source.start_offset
        self.end_offset = source.end_offset
        self.stable_offset = _last_stable_offset(self.headers, self.end_offset)
        #: The legal ``upper`` of a pass: every batch boundary after the log start, up to the LSO.
        self.cut_points: list[int] = _cut_points(self.headers, self.start_offset, self.stable_offset)
        records = sum(max(h.records, 0) for h in self.headers)
        slots = max(int(records / 0.75) + 16, 64)
        self._offset_map = HashedOffsetMap(slots * SLOT_BYTES, 0.75)
        self._bases: dict[tuple[int, ...], Path] = {}
        self._counter = itertools.count()

    # ---- writing ---------------------------------------------------------------------------

    def _manager(self, directory: Path, clock: FakeClock, scheduler: ManualScheduler) -> LogManager:
        manager = LogManager(directory, self.broker_config, clock, scheduler, file_ops=SCRATCH_FILE_OPS)
        manager.open()
        return manager

    def base(self, rolls: Iterable[int]) -> tuple[Path, tuple[int, ...]]:
        """A data directory holding the source with a segment starting at each of ``rolls`` (and
        one empty active segment at the end); cached per set of rolls."""
        bases = {self.start_offset}
        bases.update(r for r in rolls if self.start_offset < r < self.end_offset)
        key = tuple(sorted(bases))
        found = self._bases.get(key)
        if found is not None:
            return found, key
        directory = self.work_dir / f"base-{next(self._counter)}"
        clock = FakeClock(self.t0)
        scheduler = ManualScheduler(clock)
        manager = self._manager(directory, clock, scheduler)
        try:
            source = self.source
            manager.create_topic(source.topic, source.partition + 1, self.topic_configs)
            log = manager.get_log(source.topic, source.partition)
            if self.start_offset > 0:
                log.truncate_fully_and_start_at(self.start_offset)
            wanted = set(key) - {self.start_offset}
            for raw in source.batches:
                if log.log_end_offset in wanted:
                    log.roll()
                log.append_with_offsets(raw)
            log.roll()
        finally:
            manager.close()
        scheduler.run_due(LONG_MAX)
        self._bases[key] = directory
        return directory, key

    def run(
        self, plan: Plan, directory: Path | None = None, *, rolls: Iterable[int] | None = None
    ) -> RunResult:
        """Run ``plan`` on a copy of the base with the plan's cut points (or ``rolls``) and return
        the data directory it left (``directory``, or a new one in the work directory)."""
        self.check_plan(plan)
        base, _segments = self.base(rolls if rolls is not None else [p.upper for p in plan])
        out = directory if directory is not None else self.work_dir / f"variant-{next(self._counter)}"
        if out.exists():
            shutil.rmtree(out)
        copy_tree(base, out)
        return self.run_in_place(out, plan)

    def run_in_place(self, out: Path, plan: Plan, *, checkpoint: int | None = None) -> RunResult:
        """Run ``plan``'s passes on the data directory ``out`` as it is (its cleaner checkpoint is
        ``checkpoint``, the log start when None).

        The partition log is opened directly, with the scratch file operations (the data
        directory's own files were written with the base and stay valid: cleaning changes no
        recovery point, log start or high watermark); the cleaner checkpoint is written last.
        """
        clock = FakeClock(self.t0)
        scheduler = ManualScheduler(clock)
        source = self.source
        tp = (source.topic, source.partition)
        partition_dir = out / partition_dir_name(*tp)
        end = self.start_offset if checkpoint is None else checkpoint
        log = PartitionLog(
            partition_dir,
            source.topic,
            source.partition,
            self.log_config,
            clock,
            scheduler=scheduler,
            log_start_offset=self.start_offset,
            recovery_point=self.end_offset,
            had_clean_shutdown=True,
            rng=random.Random(0),
            file_ops=SCRATCH_FILE_OPS,
        )
        try:
            cleaner = Cleaner(
                0, self._offset_map, clock, producer_id_expiration_ms=self.producer_id_expiration_ms
            )
            for p in plan:
                now = self.t0 + p.at_ms
                if now > clock.now_ms():
                    clock.set(now)
                first_dirty = self.start_offset if p.from_log_start else end
                if p.upper <= first_dirty:
                    continue  # nothing is dirty: the cleaner would not pick the log
                _check_segment_base(log, p.upper)
                result = cleaner.clean(log, first_dirty, p.upper, now)
                if result.end_offset != p.upper:
                    raise CompactionModelError(
                        f"a pass over [{first_dirty}, {p.upper}) ended at {result.end_offset}"
                    )
                end = result.end_offset
                scheduler.run_due(LONG_MAX)
        finally:
            log.close()
        scheduler.run_due(LONG_MAX)
        _write_cleaner_checkpoint(out, tp, end)
        return RunResult(out, partition_dir, end)

    def check_plan(self, plan: Plan) -> None:
        """Refuse a plan no cleaner runs: an upper that is no cut point, a bound that moves back,
        or time that runs backwards."""
        cuts = set(self.cut_points)
        previous_upper, previous_at = self.start_offset, -1
        for p in plan:
            if p.upper not in cuts:
                raise ValueError(
                    f"{p.upper} is not a batch boundary at or below the last stable offset "
                    f"{self.stable_offset}"
                )
            if p.upper < previous_upper:
                raise ValueError(
                    f"the first uncleanable offset moves back from {previous_upper} to {p.upper}"
                )
            if p.at_ms < previous_at:
                raise ValueError("the passes' instants must not go backwards")
            previous_upper, previous_at = p.upper, p.at_ms

    def close(self) -> None:
        shutil.rmtree(self.work_dir, ignore_errors=True)


#: Where scratch directories go when the machine has a RAM file system with room: creating a
#: file there costs ~15 µs, on a journaled disk ~0.6 ms, and an exhaustive check creates thousands.
RAM_DIR: Final = Path("/dev/shm")  # noqa: S108 - a private mkdtemp below it, never a fixed name


def scratch_dir(source: SourceLog) -> Path:
    """A new private temporary directory for ``source``'s variants: in ``/dev/shm`` when it
    exists and has room for a few copies of the log, else in the system's temporary directory."""
    size = sum(len(raw) for raw in source.batches)
    try:
        if RAM_DIR.is_dir() and shutil.disk_usage(RAM_DIR).free > 8 * size + (64 << 20):
            return Path(tempfile.mkdtemp(prefix="kompakt-compactions-", dir=RAM_DIR))
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="kompakt-compactions-"))


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a data directory's files (contents only: the cleaner reads no file times of v2 logs)."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)


def _write_cleaner_checkpoint(data_dir: Path, tp: tuple[str, int], offset: int) -> None:
    """``cleaner-offset-checkpoint`` in Kafka's format (version 0, one entry), written plainly: a
    scratch directory needs no atomic replace."""
    text = f"0\n1\n{tp[0]} {tp[1]} {offset}\n"
    (data_dir / CLEANER_OFFSET_CHECKPOINT_FILE).write_text(text)


def _check_segment_base(log: PartitionLog, offset: int) -> None:
    if offset >= log.log_end_offset:
        return
    floor = log.segments.floor(offset)
    if floor is None or floor.base_offset != offset:
        raise CompactionModelError(f"{offset} is not a segment base offset of the written log")


def _last_stable_offset(headers: Sequence[BatchHeader], end: int) -> int:
    """The first offset of the earliest transaction left open at the end (a marker decides one)."""
    open_first: dict[int, int] = {}
    for h in headers:
        if not h.transactional:
            continue
        if h.control:
            open_first.pop(h.producer_id, None)
        else:
            open_first.setdefault(h.producer_id, h.base_offset)
    return min(open_first.values()) if open_first else end


def _cut_points(headers: Sequence[BatchHeader], start: int, stable: int) -> list[int]:
    """Every batch boundary as the offset after its batch: where a roll at that moment starts the
    next segment (the log end offset, which a gap in the offsets leaves below the next batch)."""
    return sorted({h.next_offset for h in headers if start < h.next_offset <= stable})


# --------------------------------------------------------------------------------------------
# The generator


@dataclass(slots=True)
class SpaceSummary:
    """How big the space of a source is, for reports and for choosing exhaustive or sampled."""

    batches: int
    cut_points: int
    tombstone_boundaries: int
    plans: int


class CompactionSpace:
    """The legal compactions of ``source`` as one view shows them (see the module docstring).

    ``kafka_only`` leaves out kompakt's re-clean from the log start (a pass whose range is the
    whole cleaned log): Kafka's cleaner only starts at its checkpoint. Variants are realized in
    ``work_dir`` (a temporary directory by default, removed by :meth:`close`).
    """

    def __init__(
        self,
        source: SourceLog,
        *,
        view: View = "read_committed",
        kafka_only: bool = False,
        work_dir: Path | None = None,
        keep_directories: bool = False,
    ) -> None:
        self.source = source
        self.view: View = view
        self.kafka_only = kafka_only
        self.keep_directories = keep_directories
        self._owned = work_dir is None
        self.work_dir = scratch_dir(source) if work_dir is None else work_dir
        self.compactor = Compactor(source, self.work_dir)
        self.full = SourceView(source, view)
        self._tombstone_bounds: list[int] | None = None

    def close(self) -> None:
        if self._owned:
            self.compactor.close()

    def __enter__(self) -> CompactionSpace:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- the families ----------------------------------------------------------------------

    @property
    def cut_points(self) -> list[int]:
        return self.compactor.cut_points

    @property
    def delete_retention_ms(self) -> int:
        return self.compactor.delete_retention_ms

    def tombstone_bounds(self) -> list[int]:
        """The cut points just after each batch that holds a tombstone (or, in the ``log``
        view, a marker): the boundaries ``B`` that separate different sets of expired stamps."""
        if self._tombstone_bounds is None:
            stamped: set[int] = set()
            cuts = self.cut_points
            marks = self._stampable_batch_ends()
            for end in marks:
                i = int(np.searchsorted(np.array(cuts, dtype=np.int64), end, side="left"))
                if i < len(cuts):
                    stamped.add(cuts[i])
            self._tombstone_bounds = sorted(stamped)
        return self._tombstone_bounds

    def _stampable_batch_ends(self) -> list[int]:
        ends = []
        control_too = self.view == "log"
        tombstones = np.array(
            sorted(r.offset for r, ctrl in self.full.decoded if not ctrl and r.is_tombstone), dtype=np.int64
        )
        for h in self.compactor.headers:
            if h.control:
                stamps = control_too
            else:
                # Linear in batches (a search per batch), not batches x tombstones.
                i = int(np.searchsorted(tombstones, h.base_offset, side="left"))
                stamps = i < len(tombstones) and int(tombstones[i]) <= h.last_offset
            if stamps:
                ends.append(h.next_offset)
        return ends

    def normal_form(self) -> list[Plan]:
        """Every ``(U, B)`` plan of the record views, smallest first (see the module docstring)."""
        r = self.delete_retention_ms
        plans: list[Plan] = []
        bounds = self.tombstone_bounds()
        for u in self.cut_points:
            plans.append((Pass(u),))
            for b in bounds:
                if b >= u:
                    break
                plans.append((Pass(b), Pass(u, r)))
            if not self.kafka_only and bounds and bounds[0] <= u:
                plans.append((Pass(u), Pass(u, r, from_log_start=True)))
        return sorted(plans, key=plan_size)

    def normal_form_size(self) -> int:
        """``len(self.normal_form())`` without making (and sorting) the plans: a large log's
        family runs to hundreds of thousands, and is then sampled, not listed."""
        bounds = self.tombstone_bounds()
        total = 0
        for u in self.cut_points:
            total += 1 + bisect.bisect_left(bounds, u)
            if not self.kafka_only and bounds and bounds[0] <= u:
                total += 1
        return total

    def summary(self) -> SpaceSummary:
        return SpaceSummary(
            len(self.source.batches),
            len(self.cut_points),
            len(self.tombstone_bounds()),
            self.normal_form_size() if self.view != "log" else -1,
        )

    def sample_plan(self, rng: random.Random) -> Plan:
        """One random plan of the view's family: ``(U, B)`` for the record views; for the ``log``
        view up to four passes at rising cut points and instants."""
        cuts = self.cut_points
        if not cuts:
            return ()
        r = self.delete_retention_ms
        if self.view != "log":
            u = rng.choice(cuts)
            bounds = [b for b in self.tombstone_bounds() if b <= u]
            roll = rng.random()
            if not bounds or roll < 0.4:
                return (Pass(u),)
            b = rng.choice(bounds)
            if b == u:
                if self.kafka_only:
                    return (Pass(u),)
                return (Pass(u), Pass(u, r, from_log_start=True))
            return (Pass(b), Pass(u, r))
        n = rng.randint(1, 4)
        uppers = sorted(rng.choice(cuts) for _ in range(n))
        plan: list[Pass] = []
        at = 0
        for i, u in enumerate(uppers):
            if i:
                at += rng.choice((1, r, r + 1))
            again = bool(plan) and u == plan[-1].upper
            if again and self.kafka_only:
                continue
            plan.append(Pass(u, at, from_log_start=again))
        return tuple(plan)

    def sample(self, n: int, seed: int = 0) -> list[Plan]:
        """``n`` distinct random plans (fewer when the family is smaller), smallest first."""
        rng = random.Random(seed)
        seen: set[Plan] = set()
        attempts = 0
        while len(seen) < n and attempts < n * 20:
            attempts += 1
            plan = self.sample_plan(rng)
            if plan:
                seen.add(plan)
        return sorted(seen, key=plan_size)

    # ---- realizing -------------------------------------------------------------------------

    def offsets_of(self, partition_dir: Path) -> I64Array:
        """The offsets the view shows in a variant's partition directory."""
        return visible_offsets(scan_partition(partition_dir), self.view)

    def realize(
        self, plan: Plan, *, index: int = 0, rolls: Iterable[int] | None = None, keep: bool | None = None
    ) -> Variant:
        """Run ``plan`` with the real cleaner and read the variant back through the view."""
        result = self.compactor.run(plan, rolls=rolls)
        _, segments = self.compactor.base(rolls if rolls is not None else [p.upper for p in plan])
        offsets = self.offsets_of(result.partition_dir)
        records = self.full.kept(offsets, f"the variant {describe_plan(plan, 0, 0)}")
        kept = self.keep_directories if keep is None else keep
        if not kept:
            shutil.rmtree(result.directory, ignore_errors=True)
        return Variant(
            plan,
            records,
            segments,
            self.compactor.start_offset,
            self.delete_retention_ms,
            result.directory if kept else None,
            index,
            offsets,
            self.full,
        )

    def variants(self, plans: Sequence[Plan], *, keep: bool | None = None) -> Iterator[Variant]:
        """The variants of ``plans`` in order, realized on one base that rolls at every cut point
        any of them uses (one write of the source for all of them)."""
        rolls = sorted({p.upper for plan in plans for p in plan})
        for i, plan in enumerate(plans, 1):
            yield self.realize(plan, index=i, rolls=rolls, keep=keep)

    def exhaustive_plans(self, *, max_passes: int = 4, limit: int | None = None) -> list[Plan]:
        """Every plan of the view's family: the normal form, or for the ``log`` view the search."""
        if self.view != "log":
            plans = self.normal_form()
            return plans if limit is None else plans[:limit]
        return [plan for plan, _ in self.search(max_passes=max_passes, limit=limit)]

    # ---- the search (log view) ---------------------------------------------------------------

    def search(self, *, max_passes: int = 4, limit: int | None = None) -> list[tuple[Plan, I64Array]]:
        """The search's distinct views and their first plans (see :meth:`search_complete`)."""
        return self.search_complete(max_passes=max_passes, limit=limit)[0]

    def search_complete(
        self, *, max_passes: int = 4, limit: int | None = None
    ) -> tuple[list[tuple[Plan, I64Array]], bool]:
        """Pass sequences breadth first, up to ``max_passes``, one per distinct state of the files
        (see the module docstring); returns each distinct view's first plan and its offsets.

        ``limit`` bounds the passes run; the flag says whether the search ended within it (if not,
        what it found is returned, smallest first: run :meth:`sample` for the rest).
        """
        compactor = self.compactor
        base, _ = compactor.base(self.cut_points)
        root = self.work_dir / f"search-{next(compactor._counter)}"  # noqa: SLF001 - own class
        root.mkdir()
        initial = root / "s0"
        copy_tree(base, initial)
        expirations = self._producer_expirations()
        states: dict[bytes, None] = {}
        found: dict[bytes, tuple[Plan, I64Array]] = {}
        frontier: list[_State] = [_State((), initial, compactor.start_offset, -1)]
        counter = itertools.count(1)
        explored = 0
        complete = True
        try:
            for _depth in range(max_passes):
                next_frontier: list[_State] = []
                for state in frontier:
                    for p in self._moves(state, expirations):
                        if limit is not None and explored >= limit:
                            complete = False
                            break
                        out = root / f"s{next(counter)}"
                        copy_tree(state.directory, out)
                        result = compactor.run_in_place(out, (p,), checkpoint=state.checkpoint)
                        explored += 1
                        key = _state_key(result.partition_dir, result.checkpoint, p.at_ms)
                        if key in states:
                            shutil.rmtree(out)
                            continue
                        states[key] = None
                        plan = (*state.plan, p)
                        offsets = self.offsets_of(result.partition_dir)
                        view_key = offsets.tobytes()
                        if view_key not in found or plan_size(plan) < plan_size(found[view_key][0]):
                            found[view_key] = (plan, offsets)
                        next_frontier.append(_State(plan, out, result.checkpoint, p.at_ms))
                for state in frontier:
                    if state.plan:
                        shutil.rmtree(state.directory, ignore_errors=True)
                frontier = next_frontier
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return sorted(found.values(), key=lambda item: plan_size(item[0])), complete

    def _producer_expirations(self) -> list[int]:
        """The instants (``at_ms``) at which a producer of the source expires: the cleaner keeps a
        producer's last batch while it is active, which can keep a marker's transaction seen."""
        last: dict[int, int] = {}
        for h in self.compactor.headers:
            if h.producer_id >= 0:
                last[h.producer_id] = max(last.get(h.producer_id, -1), h.max_timestamp)
        t0 = self.compactor.t0
        return sorted({ts + self.compactor.producer_id_expiration_ms - t0 for ts in last.values()})

    def _moves(self, state: _State, expirations: Sequence[int]) -> Iterator[Pass]:
        """The passes worth running from ``state``: every later cut point, and a re-clean, each at
        every instant that changes an outcome."""
        horizons = _stamped_horizons(state.directory) if state.plan else []
        t0 = self.compactor.t0
        instants = {state.at_ms + 1 if state.plan else 0}
        instants.update(h - t0 for h in horizons if h - t0 > state.at_ms)
        instants.update(e for e in expirations if e > state.at_ms)
        for at in sorted(instants):
            for u in self.cut_points:
                if u > state.checkpoint:
                    yield Pass(u, at)
                elif u == state.checkpoint and state.plan and not self.kafka_only:
                    yield Pass(u, at, from_log_start=True)


@dataclass(frozen=True, slots=True)
class _State:
    plan: Plan
    directory: Path
    checkpoint: int
    at_ms: int


def _stamped_horizons(data_dir: Path) -> list[int]:
    horizons: set[int] = set()
    for part in data_dir.iterdir():
        if not part.is_dir():
            continue
        for seg in part.glob("*.log"):
            data = seg.read_bytes()
            pos = 0
            while pos + 61 <= len(data):
                view = RecordBatchView(data, pos)
                h = view.delete_horizon_ms
                if h is not None:
                    horizons.add(h)
                pos += view.size
    return sorted(horizons)


def _state_key(partition_dir: Path, checkpoint: int, at_ms: int) -> bytes:
    """The files that decide every later pass (segments and indexes), the checkpoint and the
    instant, as one key."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{checkpoint}:{at_ms}".encode())
    for path in sorted(partition_dir.iterdir()):
        if path.suffix in (".log", ".txnindex") and path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.digest()


__all__ = [
    "CLOCK_START_MS",
    "DEFAULT_DELETE_RETENTION_MS",
    "RUN_TOPIC_CONFIGS",
    "CompactionSpace",
    "Compactor",
    "Pass",
    "Plan",
    "RunResult",
    "SpaceSummary",
    "Variant",
    "describe_plan",
    "plan_size",
]
