"""Hypothesis strategies for compaction checks: small logs, and legal compactions of a log.

For a test that draws its own variants (with its own assertions) instead of calling
:func:`~kompakt.testing.replay_check.assert_compaction_safe`::

    from hypothesis import given, strategies as st
    from kompakt.testing.compaction_strategies import compaction_plans
    from kompakt.testing.compactions import CompactionSpace

    @given(st.data())
    def test_index_survives_compaction(data):
        with CompactionSpace(SourceLog.from_records(RECORDS)) as space:
            variant = space.realize(data.draw(compaction_plans(space)))
            assert build_index(variant.records) == build_index(space.full.records)

A plan is drawn as positions in the space's cut points, so hypothesis shrinks a failure towards
fewer passes and earlier cut points, as the check's own shrinking does. Imports hypothesis: only
tests load this module.
"""

from __future__ import annotations

from hypothesis import strategies as st

from kompakt.testing.compaction_log import LogBuilder, SourceLog
from kompakt.testing.compactions import CompactionSpace, Pass, Plan


def compaction_plans(space: CompactionSpace) -> st.SearchStrategy[Plan]:
    """Plans of ``space``'s family: ``(U)``, ``(B, U)`` and kompakt's re-clean ``(U, U)`` for the
    record views; for the ``log`` view up to four passes at rising cut points and instants."""
    cuts = space.cut_points
    if not cuts:
        return st.just(())
    r = space.delete_retention_ms
    if space.view != "log":
        bounds = space.tombstone_bounds()

        @st.composite
        def record_plan(draw: st.DrawFn) -> Plan:
            u = cuts[draw(st.integers(0, len(cuts) - 1))]
            below = [b for b in bounds if b <= u]
            if not below:
                return (Pass(u),)
            which = draw(st.integers(-1, len(below) - 1))
            if which < 0:
                return (Pass(u),)
            b = below[which]
            if b == u:
                return (Pass(u),) if space.kafka_only else (Pass(u), Pass(u, r, from_log_start=True))
            return (Pass(b), Pass(u, r))

        return record_plan()

    @st.composite
    def log_plan(draw: st.DrawFn) -> Plan:
        n = draw(st.integers(1, 4))
        positions = sorted(draw(st.lists(st.integers(0, len(cuts) - 1), min_size=n, max_size=n)))
        plan: list[Pass] = []
        at = 0
        for i, position in enumerate(positions):
            u = cuts[position]
            again = bool(plan) and u == plan[-1].upper
            if i:
                at += draw(st.sampled_from((0, 1, r, r + 1) if again else (1, r, r + 1)))
            if again and space.kafka_only:
                continue
            plan.append(Pass(u, at, from_log_start=again))
        return tuple(plan)

    return log_plan()


@st.composite
def small_logs(
    draw: st.DrawFn,
    *,
    max_batches: int = 12,
    keys: tuple[str, ...] = ("a", "b", "c"),
    transactions: bool = True,
) -> SourceLog:
    """A log of at most ``max_batches`` batches: plain batches of one to three records over a few
    keys (tombstones among them), and with ``transactions`` the batches and markers of two
    transactional producers, interleaved; transactions left open stay open."""
    builder = LogBuilder()
    open_txn: dict[int, bool] = {}
    n = draw(st.integers(1, max_batches))
    record = st.tuples(st.sampled_from(keys), st.one_of(st.none(), st.sampled_from(("1", "2", "3"))))
    for i in range(n):
        kinds = ["plain", "plain"]
        if transactions:
            kinds.append("txn")
            if any(open_txn.values()):
                kinds += ["commit", "abort"]
        kind = draw(st.sampled_from(kinds))
        if kind == "plain":
            recs = draw(st.lists(record, min_size=1, max_size=3))
            builder.append(*[(k, None if v is None else f"{v}@{i}") for k, v in recs])
        elif kind == "txn":
            pid = draw(st.sampled_from((1, 2)))
            recs = draw(st.lists(record, min_size=1, max_size=2))
            builder.transactional(pid, *[(k, None if v is None else f"t{v}@{i}") for k, v in recs])
            open_txn[pid] = True
        else:
            pid = draw(st.sampled_from(sorted(p for p, is_open in open_txn.items() if is_open)))
            (builder.commit if kind == "commit" else builder.abort)(pid)
            open_txn[pid] = False
    return builder.build()


__all__ = ["compaction_plans", "small_logs"]
