"""The generator of legal compactions (issue 29's acceptance).

1. Every variant the generator yields is a state a real cleaner run reaches: its data directory
   passes ``kompakt log verify``, running its recipe (the same segments, the same passes) again
   from scratch writes the same files byte for byte, and a plain decode of its files, with the
   view's rules written here independently, gives the records the variant hands a replay.
2. For logs of at most 12 batches the generator's variants are exactly the reachable set: the
   record views' normal form (at most two passes per variant) against a brute-force enumeration
   of pass sequences (every upper bound, checkpoint passes and re-cleans, instants on a grid that
   realizes every horizon outcome, three passes deep, identical files merged), and the log view's
   search against one pass deeper.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kompakt.inspect.log_files import list_segments, resolve_target, verify_target
from kompakt.records.batch import RecordBatchView, iter_batches
from kompakt.records.compression import Compression
from kompakt.records.control import ControlType, control_type_of
from kompakt.records.record import decode_records
from kompakt.testing.compaction_log import LogBuilder, LogRecord, SourceLog, View
from kompakt.testing.compaction_strategies import compaction_plans, small_logs
from kompakt.testing.compactions import CompactionSpace, Compactor, Pass, Plan, Variant, copy_tree
from tests.support.profiles import examples

RecordKey = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...], str | None]


def _key(r: LogRecord) -> RecordKey:
    return (r.offset, r.key, r.value, r.timestamp, r.headers, r.control)


def decode_view(partition_dir: Path, view: View) -> list[RecordKey]:
    """The records ``view`` shows in a partition directory, decoded in Python from the files: a
    transaction's data is shown once its COMMIT marker is read, never after an ABORT, and nothing
    from the first offset of a transaction still open at the end."""
    rows: list[tuple[RecordKey, int, bool, bool]] = []  # record, producer, transactional, control
    for segment in list_segments(partition_dir):
        for batch in iter_batches(segment.path.read_bytes()):
            control: str | None = None
            if batch.is_control:
                found = control_type_of(batch)
                control = found.name if isinstance(found, ControlType) else None
            for r in decode_records(batch):
                rows.append(
                    (
                        (r.offset, r.key, r.value, r.timestamp, tuple(r.headers), control),
                        batch.producer_id,
                        batch.is_transactional,
                        batch.is_control,
                    )
                )
    if view == "log":
        return [row[0] for row in rows]
    data = [row for row in rows if not row[3]]
    if view == "read_uncommitted":
        return [row[0] for row in data]
    aborted: set[int] = set()
    pending: dict[int, list[int]] = {}
    for record, pid, transactional, is_control in rows:
        if not transactional:
            continue
        if is_control:
            decided = pending.pop(pid, [])
            if record[5] == "ABORT":
                aborted.update(decided)
        else:
            pending.setdefault(pid, []).append(record[0])
    stable = min((offsets[0] for offsets in pending.values()), default=None)
    return [row[0] for row in data if row[0][0] not in aborted and (stable is None or row[0][0] < stable)]


def segment_files(partition_dir: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(partition_dir.iterdir())
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex")
    }


def check_variant(space: CompactionSpace, variant: Variant, rerun_dir: Path) -> None:
    assert variant.directory is not None and variant.partition_dir is not None
    report = verify_target(resolve_target(variant.directory))
    assert report.ok, [d.describe() for d in report.defects]
    assert [_key(r) for r in variant.records] == decode_view(variant.partition_dir, space.view)
    missing = {r.offset for r in variant.missing}
    assert missing.isdisjoint({r.offset for r in variant.records})
    assert sorted(missing | {r.offset for r in variant.records}) == [r.offset for r in space.full.records]
    # The recipe again, from scratch: the same files, byte for byte.
    again = Compactor(space.source, rerun_dir)
    try:
        rerun = again.run(variant.plan, rolls=variant.segments)
        assert segment_files(rerun.partition_dir) == segment_files(variant.partition_dir)
        assert (rerun.directory / "cleaner-offset-checkpoint").read_text() == (
            variant.directory / "cleaner-offset-checkpoint"
        ).read_text()
    finally:
        again.close()


TRICKY = LogBuilder()
TRICKY.append(("a", "1"), ("b", "1"))
TRICKY.transactional(1, ("a", "t1"))
TRICKY.append(("b", None))
TRICKY.transactional(2, ("c", "t2"), ("b", "t2"))
TRICKY.commit(1)
TRICKY.append(("c", None))
TRICKY.abort(2)
TRICKY.append(("a", None), ("c", "3"))
TRICKY.transactional(1, ("b", None))
TRICKY.commit(1)
TRICKY.append(("a", "4"))
TRICKY.transactional(2, ("c", "open"))  # left open: the LSO stops the cut points here
TRICKY_LOG = TRICKY.build()


@settings(max_examples=examples(6), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    source=small_logs(), view=st.sampled_from(("read_committed", "read_uncommitted", "log")), data=st.data()
)
@example(source=TRICKY_LOG, view="read_committed", data=None).via("a 12-batch log")
def test_every_variant_is_a_state_the_cleaner_reaches(
    tmp_path_factory: pytest.TempPathFactory, source: SourceLog, view: View, data: st.DataObject | None
) -> None:
    with CompactionSpace(source, view=view, keep_directories=True) as space:
        plans: list[Plan] = space.normal_form()[:12] if view != "log" else []
        if data is not None:
            plans += [data.draw(compaction_plans(space)) for _ in range(3)]
        plans += space.sample(3, seed=1)
        for variant in space.variants(plans):
            check_variant(space, variant, tmp_path_factory.mktemp("rerun"))


# --------------------------------------------------------------------------------------------
# Exactness: the generator against a brute force


def _state_digest(partition_dir: Path, checkpoint: int, at_ms: int) -> bytes:
    digest = hashlib.sha256(f"{checkpoint}/{at_ms}".encode())
    for name, content in segment_files(partition_dir).items():
        digest.update(name.encode() + b"\0" + content)
    return digest.digest()


def brute_force_views(space: CompactionSpace, depth: int) -> dict[tuple[int, ...], Plan]:
    """Every view reachable by at most ``depth`` passes: from each state, every upper bound at
    or past the checkpoint (a pass from the checkpoint, and once something is cleaned a re-clean
    from the log start), at every instant of a grid after the previous pass (the same instant,
    1 ms, ``delete.retention.ms`` - 1, ``delete.retention.ms`` and + 1 ms later: enough to expire
    any prefix of the earlier passes' stamps and no more); states with identical files, checkpoint
    and instant are explored once."""
    compactor = space.compactor
    r = compactor.delete_retention_ms
    base, _ = compactor.base(space.cut_points)
    root = space.work_dir / "brute"
    root.mkdir()
    counter = itertools.count()
    start = root / "start"
    copy_tree(base, start)
    views: dict[tuple[int, ...], Plan] = {tuple(int(o) for o in space.full.offsets): ()}
    seen: set[bytes] = set()
    frontier: list[tuple[Plan, Path, int, int]] = [((), start, compactor.start_offset, -1)]

    def moves(plan: Plan, checkpoint: int, at: int) -> Iterator[Pass]:
        instants = [0] if at < 0 else sorted({at, at + 1, at + r - 1, at + r, at + r + 1})
        for when in instants:
            for u in space.cut_points:
                if u > checkpoint:
                    yield Pass(u, when)
                if plan and u >= checkpoint:
                    yield Pass(u, when, from_log_start=True)

    for _ in range(depth):
        following = []
        for plan, directory, checkpoint, at in frontier:
            for move in moves(plan, checkpoint, at):
                out = root / f"s{next(counter)}"
                copy_tree(directory, out)
                result = compactor.run_in_place(out, (move,), checkpoint=checkpoint)
                digest = _state_digest(result.partition_dir, result.checkpoint, move.at_ms)
                if digest in seen:
                    shutil.rmtree(out)
                    continue
                seen.add(digest)
                offsets = tuple(int(o) for o in space.offsets_of(result.partition_dir))
                views.setdefault(offsets, (*plan, move))
                following.append(((*plan, move), out, result.checkpoint, move.at_ms))
        frontier = following
    return views


def generated_views(space: CompactionSpace, plans: list[Plan]) -> dict[tuple[int, ...], Plan]:
    views: dict[tuple[int, ...], Plan] = {tuple(int(o) for o in space.full.offsets): ()}
    for variant in space.variants(plans):
        views.setdefault(tuple(r.offset for r in variant.records), variant.plan)
    return views


EXACT = LogBuilder()
EXACT.append(("a", "1"))
EXACT.append(("b", "1"), ("c", "1"))
EXACT.append(("a", None))
EXACT.transactional(1, ("b", "t"))
EXACT.append(("c", None))
EXACT.commit(1)
EXACT.append(("b", None))
EXACT.transactional(2, ("a", "x"))
EXACT.append(("c", "2"))
EXACT.abort(2)
EXACT.append(("a", "2"), ("b", "2"))
EXACT.append(("c", None))
EXACT_LOG = EXACT.build()


@settings(max_examples=examples(2))
@given(source=small_logs(max_batches=7), view=st.sampled_from(("read_committed", "read_uncommitted")))
@example(source=EXACT_LOG, view="read_committed").via("12 batches: tombstones, a commit, an abort")
def test_normal_form_is_exactly_the_reachable_set(source: SourceLog, view: View) -> None:
    with CompactionSpace(source, view=view) as space:
        plans = space.normal_form()
        assert space.normal_form_size() == len(plans)  # what decides exhaustive or sampled
        generated = generated_views(space, plans)
        brute = brute_force_views(space, depth=3)
    assert set(generated) == set(brute), {
        "only brute force": {k: v for k, v in brute.items() if k not in generated},
        "only generated": {k: v for k, v in generated.items() if k not in brute},
    }


LOG_VIEW = LogBuilder()
LOG_VIEW.transactional(1, ("a", "1"))
LOG_VIEW.commit(1)
LOG_VIEW.append(("b", None))
LOG_VIEW.transactional(2, ("a", "2"))
LOG_VIEW.abort(2)
LOG_VIEW.append(("a", "3"))
LOG_VIEW_LOG = LOG_VIEW.build()


def test_log_view_search_is_exactly_the_reachable_set() -> None:
    """The log view (markers included): the search's variants are the brute force's."""
    with CompactionSpace(LOG_VIEW_LOG, view="log") as space:
        searched = {tuple(int(o) for o in offsets): plan for plan, offsets in space.search(max_passes=4)}
        searched.setdefault(tuple(int(o) for o in space.full.offsets), ())
        brute = brute_force_views(space, depth=4)
    assert set(searched) == set(brute)
    # Markers go last: a marker's removal needs the data gone first, so some variants take passes.
    assert max(len(plan) for plan in searched.values()) >= 3


def test_offset_gaps_cut_where_a_roll_would(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A log with gaps (a captured compacted log, or a consumer's view without markers): every
    boundary is a cut point at the offset after its batch, where a roll then starts a segment."""
    log = LogBuilder(start_offset=3)
    log.append(("a", "1"))
    log.next_offset = 7
    log.append(("a", "2"), ("b", "1"))
    log.next_offset = 12
    log.append(("b", None))
    log.append(("c", "1"))
    source = log.build()
    with CompactionSpace(source, keep_directories=True) as space:
        assert space.cut_points == [4, 9, 13, 14]
        plans = space.normal_form()
        # The tombstone (offset 12) is stamped by a pass to 13 and removed by a later one.
        assert space.normal_form_size() == len(plans)
        assert (Pass(13), Pass(14, space.delete_retention_ms)) in plans
        for variant in space.variants(plans):
            check_variant(space, variant, tmp_path_factory.mktemp("rerun"))


def test_source_records_are_what_the_reference_decoder_reads() -> None:
    """The source's records (decoded by the native scan for speed) are, field for field, what the
    Python reference decoder reads: headers, null keys and values, compressed and LogAppendTime-free
    batches, markers, offset gaps."""
    log = LogBuilder(start_offset=2)
    log.append(("a", "1"), ("b", None), (None, "x"))
    log.append(("h", "v", [("hk", "hv"), ("n", None)]), ("e", b""), compression=Compression.GZIP)
    log.transactional(7, ("t", "1"))
    log.commit(7)
    log.idempotent(3, ("i", "1"), ("j", "2"), compression=Compression.LZ4)
    log.transactional(8, ("u", "1", [("x", "y")]))
    log.abort(8)
    log.next_offset += 5
    log.append(("g", "gap"))
    source = log.build()
    expected = []
    for raw in source.batches:
        batch = RecordBatchView(raw)
        found = control_type_of(batch) if batch.is_control else None
        control = found.name if isinstance(found, ControlType) else None
        for r in decode_records(batch):
            record = LogRecord(
                r.offset,
                r.key,
                r.value,
                r.timestamp,
                tuple(r.headers),
                batch.producer_id,
                batch.is_transactional,
                control,
            )
            expected.append((record, batch.is_control))
    assert source.records() == expected
    assert [r.offset for r, _ in expected] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 18]
