"""Compact-now ignores the dirty ratio but not the cleanable bound: the active segment, the last
stable offset and ``min.compaction.lag.ms`` hold it exactly as they hold the cleaner threads and
as ``explain`` reports (issue 14 item 9: one function, ``planning.cleanable_offsets``)."""

from __future__ import annotations

from kompakt.testing import InProcessBroker

from .conftest import produce

LAGGED = "lagged"


def test_compact_now_waits_for_min_compaction_lag(broker: InProcessBroker) -> None:
    broker.create_topic(LAGGED, 1, cleanup_policy="compact", min_compaction_lag_ms=3_600_000)
    produce(broker.bootstrap_servers, LAGGED, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1"), (b"a", b"3")])
    broker.roll(LAGGED, 0)
    [explained] = broker.explain(LAGGED, 0)
    assert explained["first_uncleanable_offset"] == 0  # the one-hour lag holds the whole segment

    [held] = broker.compact_now(LAGGED, 0)
    assert held["passes"] == 0 and held["records_read"] == 0
    assert [r.offset for r in broker.records(LAGGED, 0)] == [0, 1, 2, 3]

    broker.advance_clock("61m")
    [explained] = broker.explain(LAGGED, 0)
    assert explained["first_uncleanable_offset"] == 4
    [cleaned] = broker.compact_now(LAGGED, 0)
    assert cleaned["passes"] == 1 and (cleaned["records_read"], cleaned["records_written"]) == (4, 2)
    assert [(r.offset, r.key, r.value) for r in broker.records(LAGGED, 0)] == [
        (2, b"b", b"1"),
        (3, b"a", b"3"),
    ]
