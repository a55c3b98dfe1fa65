"""Does an application's state survive compaction? Replay it over every legal compaction of its log.

An application that rebuilds state from a compacted topic (a cache, a CDC sink, a stream
processor's store, a coordinator) is usually tested against the log as it was written. In
production it replays the log as the cleaner left it: superseded values gone, offsets with gaps,
tombstones gone after their horizon, markers gone, records of different keys now adjacent.
:func:`assert_compaction_safe` runs the application's ``replay(records) -> state`` on the whole
log and on each variant :mod:`kompakt.testing.compactions` produces with the real cleaner, and
fails with the smallest variant whose state differs, printing which records that variant lacks::

    from kompakt.testing.replay_check import assert_compaction_safe

    def test_cache_survives_compaction():
        records = [("user-1", "alice"), ("user-2", "bob"), ("user-1", None)]
        assert_compaction_safe(records, lambda rs: {r.key: r.value for r in rs if r.value is not None})

The source may be records the test produces (``(key, value)`` tuples, or a
:class:`~kompakt.testing.compaction_log.LogBuilder` log with transactions), a topic of the
fixture broker (:func:`topic_source`), a captured partition directory of kompakt or Kafka, or a
topic on any cluster (``kafka://HOST:PORT/TOPIC``, read by a ``read_committed`` consumer).
``replay`` gets the variant's records (a list of :class:`~kompakt.testing.compaction_log.LogRecord`)
or, with ``replay_on="directory"``, the variant's data directory (a broker or a coordinator's own
loader can open it). ``compare(expected, actual)`` replaces ``==`` for state that legitimately
differs (a history table): return False or raise AssertionError to fail.

Small logs are checked exhaustively (every variant of the view's family); larger ones on
``max_variants`` plans drawn with ``seed``, and a failure is then shrunk (fewer passes, smaller
cut points) as hypothesis shrinks an example. ``kompakt log replay-check`` runs the same check
from the command line.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from kompakt.errors import KompaktError, OperatorError
from kompakt.log.partition_log import PartitionLog
from kompakt.testing.compaction_log import (
    DEFAULT_TIMESTAMP_MS,
    LogRecord,
    SourceLog,
    SourceLogError,
    View,
)
from kompakt.testing.compactions import (
    CompactionSpace,
    Pass,
    Plan,
    Variant,
    plan_size,
)

S = TypeVar("S")

ReplayOn = Literal["records", "directory"]
Replay = Callable[[Any], Any]
Compare = Callable[[Any, Any], object]

#: Plans checked exhaustively at most; a larger family is sampled.
DEFAULT_EXHAUSTIVE_LIMIT = 2000
#: Variants sampled from a family too large to check whole.
DEFAULT_SAMPLES = 100
#: Passes the log view's search runs before it stops (keeping what it found) and samples instead.
DEFAULT_SEARCH_PASSES = 600
#: Candidate plans a failure found by sampling is shrunk through at most.
SHRINK_BUDGET = 200
#: Records of a failing variant listed in a report.
REPORT_RECORDS = 12


class CompactionCheckError(OperatorError):
    """The check could not run: the source cannot be read, or replay fails on the whole log."""


@dataclass(slots=True)
class Failure:
    """The smallest variant found whose state differs from the whole log's."""

    variant: Variant
    expected: Any
    actual: Any = None
    error: BaseException | None = None
    compare_message: str | None = None
    shrunk_from: Plan | None = None
    shrink_steps: int = 0


@dataclass(slots=True)
class CheckReport:
    """What a check did: the source, the view, how variants were chosen, what it found."""

    source: str
    view: View
    mode: str  # "exhaustive" or "sampled"
    plans: int
    checked: int
    distinct: int
    seconds: float
    records: int
    cut_points: int
    failure: Failure | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def describe(self) -> str:
        """The report as text: a summary, or the failure with the variant's passes and the
        records it lacks."""
        head = (
            f"{self.source}: {self.checked} variant(s) replayed ({self.distinct} distinct, "
            f"{self.mode}, {self.view} view, {self.records} records, {self.cut_points} cut points) "
            f"in {self.seconds:.1f} s"
        )
        if self.failure is None:
            return f"{head}: the state is the same on every one"
        return f"{head}\n{describe_failure(self, self.failure)}"


def describe_failure(report: CheckReport, failure: Failure) -> str:
    variant = failure.variant
    lines = [
        f"replay gives a different state on a legal compaction of {report.source} "
        f"(the {report.view} view; the smallest failing variant"
        + (f", shrunk in {failure.shrink_steps} step(s)" if failure.shrunk_from is not None else "")
        + "):"
    ]
    lines += [f"  {line}" for line in variant.describe().splitlines()]
    missing = variant.missing
    lines.append(f"the variant lacks {len(missing)} record(s) of the uncompacted log:")
    lines += [f"  {r.describe()}" for r in missing[:REPORT_RECORDS]]
    if len(missing) > REPORT_RECORDS:
        lines.append(f"  ... and {len(missing) - REPORT_RECORDS} more")
    lines.append(f"state on the uncompacted log: {_short(failure.expected)}")
    if failure.error is not None:
        lines.append(f"replay of the variant raised {type(failure.error).__name__}: {failure.error}")
    else:
        lines.append(f"state on the variant:         {_short(failure.actual)}")
    if failure.compare_message:
        lines.append(f"compare: {failure.compare_message}")
    if variant.directory is not None:
        lines.append(f"the variant's data directory: {variant.directory}")
    return "\n".join(lines)


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CompactionUnsafeError(AssertionError):
    """Raised by :func:`assert_compaction_safe`; ``report`` has the failing variant."""

    def __init__(self, report: CheckReport) -> None:
        super().__init__(report.describe())
        self.report = report


# --------------------------------------------------------------------------------------------
# Sources


def topic_source(broker: Any, topic: str, partition: int = 0) -> SourceLog:
    """A topic partition of a running :class:`~kompakt.testing.InProcessBroker` (the fixture
    broker), as it is now."""
    logs = broker.admin.broker.logs
    return SourceLog.from_partition_log(logs.get_log(topic, partition))


def cluster_source(spec: str, partition: int = 0, *, timeout_s: float = 30.0) -> SourceLog:
    """A topic partition on any cluster (``kafka://HOST:PORT/TOPIC``) as a ``read_committed``
    consumer reads it: each record becomes a one-record batch at its offset (a consumer sees no
    batches, markers or aborted data), so every record boundary is a cut point."""
    from kompakt.table.cluster import ClusterTopic, parse_source
    from kompakt.testing.compaction_log import LogBuilder

    bootstrap, topic = parse_source(spec)
    if topic is None:
        raise CompactionCheckError(f"{spec!r} names no topic")
    builder = LogBuilder(timestamp_ms=DEFAULT_TIMESTAMP_MS)
    start: int | None = None
    with ClusterTopic(bootstrap, topic, timeout_s=timeout_s) as cluster:
        for batch in cluster.read(partition):
            for message in batch.messages:
                offset = int(message.offset())
                if start is None:
                    start = offset
                builder.next_offset = offset
                builder.timestamp_ms = int(message.timestamp()[1])
                headers = tuple((str(k), v) for k, v in (message.headers() or ()))
                builder.append((message.key(), message.value(), headers))
        low, _high = cluster.watermarks(partition)
    source = builder.build(topic=topic)
    return SourceLog(
        source.batches,
        topic=topic,
        partition=partition,
        log_start_offset=low if start is None else min(low, start),
        origin=f"{spec} partition {partition}",
    )


def sources_for(
    spec: str, *, topic: str | None = None, partitions: Sequence[int] | None = None, timeout_s: float = 30.0
) -> list[SourceLog]:
    """Every partition ``spec`` names, as sources: a partition directory, a data directory
    (``topic`` picks one topic when it holds several), or ``kafka://HOST:PORT/TOPIC``."""
    wanted = None if partitions is None else set(partitions)
    if spec.startswith("kafka://"):
        from kompakt.table.cluster import ClusterTopic, parse_source

        bootstrap, named = parse_source(spec)
        if named is None:
            raise CompactionCheckError(f"{spec!r} names no topic")
        with ClusterTopic(bootstrap, named, timeout_s=timeout_s) as cluster:
            ids = cluster.partitions
        chosen = [p for p in ids if wanted is None or p in wanted]
        if not chosen:
            raise CompactionCheckError(f"{spec}: no partition {sorted(wanted or [])} (it has {ids})")
        return [cluster_source(spec, p, timeout_s=timeout_s) for p in chosen]
    from kompakt.inspect.log_files import resolve_target, topic_partitions

    try:
        target = resolve_target(Path(spec))
    except KompaktError as exc:
        raise CompactionCheckError(str(exc)) from exc
    found = [p for p in topic_partitions(target) if topic is None or p.topic == topic]
    topics = sorted({p.topic for p in found})
    if len(topics) > 1:
        raise CompactionCheckError(f"{spec} holds the topics {', '.join(topics)}: name one with --topic")
    chosen_dirs = [p for p in found if wanted is None or p.partition in wanted]
    if not chosen_dirs:
        raise CompactionCheckError(f"{spec}: no partition directory to check")
    try:
        return [SourceLog.from_directory(p.path) for p in sorted(chosen_dirs, key=lambda p: p.partition)]
    except SourceLogError as exc:
        raise CompactionCheckError(str(exc)) from exc


SourceLike = SourceLog | PartitionLog | Path | str | Iterable[tuple[Any, ...]]


def as_source(source: SourceLike) -> SourceLog:
    """A :class:`SourceLog` from whatever the caller has (see the module docstring)."""
    if isinstance(source, SourceLog):
        return source
    if isinstance(source, PartitionLog):
        return SourceLog.from_partition_log(source)
    if isinstance(source, str) and source.startswith("kafka://"):
        return cluster_source(source)
    if isinstance(source, (str, Path)):
        return SourceLog.from_directory(Path(source))
    return SourceLog.from_records(source)


# --------------------------------------------------------------------------------------------
# The check


def load_app(spec: str) -> Callable[..., Any]:
    """``module:function`` (or ``module.function``) as the callable it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise CompactionCheckError(f"{spec!r} is not module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CompactionCheckError(f"cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CompactionCheckError(f"{module_name!r} has no {attr!r}") from None
    if not callable(target):
        raise CompactionCheckError(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]


@dataclass(slots=True)
class _Outcome:
    ok: bool
    actual: Any = None
    error: BaseException | None = None
    message: str | None = None


class CompactionCheck:
    """One check of one partition (the engine behind :func:`check_compaction_safe` and the CLI)."""

    def __init__(
        self,
        source: SourceLog,
        replay: Replay,
        *,
        compare: Compare | None = None,
        view: View = "read_committed",
        replay_on: ReplayOn = "records",
        max_variants: int = DEFAULT_SAMPLES,
        exhaustive_limit: int = DEFAULT_EXHAUSTIVE_LIMIT,
        exhaustive: bool | None = None,
        seed: int = 0,
        kafka_only: bool = False,
        max_passes: int = 4,
        work_dir: Path | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.source = source
        self.replay = replay
        self.compare = compare
        self.view: View = view
        self.replay_on: ReplayOn = replay_on
        self.max_variants = max_variants
        self.exhaustive_limit = exhaustive_limit
        self.exhaustive = exhaustive
        self.seed = seed
        self.max_passes = max_passes
        self.on_progress = on_progress
        self.space = CompactionSpace(
            source,
            view=view,
            kafka_only=kafka_only,
            work_dir=work_dir,
            keep_directories=replay_on == "directory",
        )
        self._expected: Any = None

    def close(self) -> None:
        self.space.close()

    def __enter__(self) -> CompactionCheck:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- replaying --------------------------------------------------------------------------

    def _input(self, variant: Variant | None) -> Any:
        if self.replay_on == "records":
            return list(self.space.full.records) if variant is None else variant.records
        if variant is None:
            result = self.space.compactor.run((), rolls=[])
            return result.directory
        if variant.directory is None:
            raise CompactionCheckError("a variant's directory was not kept")
        return variant.directory

    def _judge(self, variant: Variant) -> _Outcome:
        try:
            actual = self.replay(self._input(variant))
        except Exception as exc:  # noqa: BLE001 - the application's failure is the finding
            return _Outcome(False, error=exc)
        expected = self._expected
        if self.compare is None:
            return _Outcome(bool(actual == expected), actual)
        try:
            verdict = self.compare(expected, actual)
        except AssertionError as exc:
            return _Outcome(False, actual, message=str(exc) or "compare raised AssertionError")
        return _Outcome(verdict is None or bool(verdict), actual)

    def _realize(self, plan: Plan, rolls: Sequence[int] | None = None) -> Variant:
        return self.space.realize(plan, rolls=rolls, keep=self.replay_on == "directory")

    # ---- the run ----------------------------------------------------------------------------

    def plans(self) -> tuple[str, list[Plan]]:
        """``("exhaustive" | "sampled", plans)`` for this source and view.

        The record views' family is the normal form: whole when it has at most
        ``exhaustive_limit`` plans, else ``max_variants`` drawn with ``seed``. The ``log`` view is
        searched whole when the search ends within its budget; otherwise (or with ``exhaustive``
        False) it gets what the search found, the two-pass normal form (whole when small enough)
        and ``max_variants`` random deeper sequences.
        """
        space = self.space
        size = space.normal_form_size()
        whole = self.exhaustive or (self.exhaustive is None and size <= self.exhaustive_limit)
        if self.view != "log":
            if whole:
                return "exhaustive", space.normal_form()
            return "sampled", space.sample(self.max_variants, self.seed)
        plans: set[Plan] = set()
        if self.exhaustive is not False:
            limit = None if self.exhaustive else DEFAULT_SEARCH_PASSES
            found, complete = space.search_complete(max_passes=self.max_passes, limit=limit)
            if complete:
                return "exhaustive", [plan for plan, _ in found]
            plans.update(plan for plan, _ in found)
        plans.update(space.normal_form() if size <= self.exhaustive_limit else [])
        plans.update(space.sample(self.max_variants, self.seed))
        return "sampled", sorted(plans, key=plan_size)

    def run(self) -> CheckReport:
        started = time.monotonic()
        try:
            self._expected = self.replay(self._input(None))
        except Exception as exc:
            raise CompactionCheckError(
                f"replay fails on the uncompacted log of {self.source.name}: {type(exc).__name__}: {exc}"
            ) from exc
        mode, plans = self.plans()
        rolls = sorted({p.upper for plan in plans for p in plan})
        seen: set[bytes] = {self.space.full.offsets.tobytes()}
        checked = 0
        failure: Failure | None = None
        for i, plan in enumerate(plans, 1):
            variant = self._realize(plan, rolls)
            variant.index = i
            key = _view_key(variant)
            if self.on_progress is not None:
                self.on_progress(i, len(plans))
            if key in seen:
                _discard(variant)
                continue
            seen.add(key)
            checked += 1
            outcome = self._judge(variant)
            if outcome.ok:
                _discard(variant)
                continue
            failure = Failure(variant, self._expected, outcome.actual, outcome.error, outcome.message)
            if mode == "sampled":
                failure = self._shrink(failure)
            break
        if failure is not None:
            failure.variant.directory = _keep(failure.variant)
        return CheckReport(
            self.source.origin if self.source.origin != "records" else self.source.name,
            self.view,
            mode,
            len(plans),
            checked,
            len(seen) - 1,
            time.monotonic() - started,
            len(self.space.full),
            len(self.space.cut_points),
            failure,
        )

    # ---- shrinking ----------------------------------------------------------------------------

    def _candidates(self, plan: Plan) -> Iterator[Plan]:
        """Plans smaller than ``plan``, most promising first: fewer passes, earlier cut points
        (halving the distance to the start, then one cut point back), times at zero."""
        cuts = self.space.cut_points
        if len(plan) > 1:
            for drop in range(len(plan)):
                rest = plan[:drop] + plan[drop + 1 :]
                yield _normalize(rest)
        for index, p in enumerate(plan):
            position = cuts.index(p.upper)
            floor = cuts.index(plan[index - 1].upper) if index > 0 else 0
            tried: set[int] = set()
            for target in _shrink_targets(position, floor):
                if target in tried:
                    continue
                tried.add(target)
                lowered = Pass(cuts[target], p.at_ms, p.from_log_start)
                candidate = plan[:index] + (lowered,) + plan[index + 1 :]
                if all(a.upper <= b.upper for a, b in zip(candidate, candidate[1:], strict=False)):
                    yield candidate

    def _shrink(self, failure: Failure) -> Failure:
        """Greedy shrinking: take the first smaller plan that still fails, until none does."""
        original = failure.variant.plan
        current = failure
        budget = SHRINK_BUDGET
        steps = 0
        improved = True
        while improved and budget > 0:
            improved = False
            for candidate in self._candidates(current.variant.plan):
                if budget <= 0:
                    break
                if not candidate or plan_size(candidate) >= plan_size(current.variant.plan):
                    continue
                try:
                    self.space.compactor.check_plan(candidate)
                except ValueError:
                    continue
                budget -= 1
                variant = self._realize(candidate)
                outcome = self._judge(variant)
                if outcome.ok:
                    _discard(variant)
                    continue
                _discard(current.variant)
                current = Failure(variant, self._expected, outcome.actual, outcome.error, outcome.message)
                steps += 1
                improved = True
                break
        current.shrunk_from = original
        current.shrink_steps = steps
        return current


def _normalize(plan: Plan) -> Plan:
    """A plan whose first pass is no re-clean (a re-clean needs a cleaned log to start over)."""
    out: list[Pass] = []
    for p in plan:
        if p.from_log_start and (not out or out[-1].upper != p.upper):
            p = Pass(p.upper, p.at_ms, False)
        out.append(p)
    return tuple(out)


def _shrink_targets(position: int, floor: int) -> Iterator[int]:
    yield floor
    distance = position - floor
    while distance > 1:
        distance //= 2
        yield position - distance
    if position - 1 >= floor:
        yield position - 1


def _view_key(variant: Variant) -> bytes:
    import numpy as np

    if variant.offsets is not None:
        return np.ascontiguousarray(variant.offsets, dtype=np.int64).tobytes()
    return np.array([r.offset for r in variant.records], dtype=np.int64).tobytes()


def _discard(variant: Variant) -> None:
    if variant.directory is not None:
        shutil.rmtree(variant.directory, ignore_errors=True)
        variant.directory = None


def _keep(variant: Variant) -> Path | None:
    """Move a failing variant's directory out of the scratch space (which is removed), so the
    report can point at it."""
    if variant.directory is None:
        return None
    kept = Path(tempfile.mkdtemp(prefix="kompakt-failing-variant-"))
    target = kept / "data"
    shutil.copytree(variant.directory, target)
    return target


def check_compaction_safe(
    source: SourceLike,
    replay: Replay,
    *,
    compare: Compare | None = None,
    view: View = "read_committed",
    replay_on: ReplayOn = "records",
    max_variants: int = DEFAULT_SAMPLES,
    exhaustive: bool | None = None,
    seed: int = 0,
    kafka_only: bool = False,
    max_passes: int = 4,
    on_progress: Callable[[int, int], None] | None = None,
) -> CheckReport:
    """Run the check and return its report (see :func:`assert_compaction_safe`)."""
    try:
        log = as_source(source)
    except SourceLogError as exc:
        raise CompactionCheckError(str(exc)) from exc
    with CompactionCheck(
        log,
        replay,
        compare=compare,
        view=view,
        replay_on=replay_on,
        max_variants=max_variants,
        exhaustive=exhaustive,
        seed=seed,
        kafka_only=kafka_only,
        max_passes=max_passes,
        on_progress=on_progress,
    ) as check:
        return check.run()


def assert_compaction_safe(
    source: SourceLike,
    replay: Replay,
    *,
    compare: Compare | None = None,
    view: View = "read_committed",
    replay_on: ReplayOn = "records",
    max_variants: int = DEFAULT_SAMPLES,
    exhaustive: bool | None = None,
    seed: int = 0,
    kafka_only: bool = False,
    max_passes: int = 4,
) -> CheckReport:
    """Fail (:class:`CompactionUnsafeError`, an AssertionError) with the smallest legal
    compaction of ``source`` on which ``replay`` gives a different state than on the whole log.

    ``view`` is what ``replay`` reads: ``read_committed`` (default), ``read_uncommitted`` or
    ``log`` (markers included, as a coordinator loads its topic). ``exhaustive`` forces (True)
    or forbids (False) checking the whole family; by default small logs are checked whole and
    larger ones on ``max_variants`` plans drawn with ``seed``. ``kafka_only`` leaves out
    kompakt's re-clean from the log start. Returns the report when the state survives.
    """
    report = check_compaction_safe(
        source,
        replay,
        compare=compare,
        view=view,
        replay_on=replay_on,
        max_variants=max_variants,
        exhaustive=exhaustive,
        seed=seed,
        kafka_only=kafka_only,
        max_passes=max_passes,
    )
    if report.failure is not None:
        raise CompactionUnsafeError(report)
    return report


def latest_values(records: Iterable[LogRecord]) -> dict[bytes | None, bytes]:
    """The reference replay: the latest value per key, tombstoned keys absent (what compaction
    promises to keep)."""
    state: dict[bytes | None, bytes] = {}
    for r in records:
        if r.value is None:
            state.pop(r.key, None)
        else:
            state[r.key] = r.value
    return state


__all__ = [
    "DEFAULT_EXHAUSTIVE_LIMIT",
    "DEFAULT_SAMPLES",
    "CheckReport",
    "CompactionCheck",
    "CompactionCheckError",
    "CompactionUnsafeError",
    "Failure",
    "as_source",
    "assert_compaction_safe",
    "check_compaction_safe",
    "cluster_source",
    "describe_failure",
    "latest_values",
    "load_app",
    "topic_source",
]
