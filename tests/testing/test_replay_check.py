"""``assert_compaction_safe``: what a user's test sees (worked example (b) and the API's contract).

A deliberately naive consumer is caught with the smallest variant that breaks it, printed with
the records it lacks; a correct one passes every variant; ``compare=`` accepts state that
legitimately differs; the source may be records, a fixture-broker topic or a cluster topic; a
failure found by sampling a large log is shrunk to the smallest failing plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kompakt.testing import InProcessBroker
from kompakt.testing.compaction_log import LogBuilder, LogRecord, SourceLog
from kompakt.testing.compactions import Pass
from kompakt.testing.replay_check import (
    CompactionCheckError,
    CompactionUnsafeError,
    assert_compaction_safe,
    check_compaction_safe,
    latest_values,
    topic_source,
)

DAY = 86_400_000


def event(kind: str, total: int) -> str:
    return json.dumps({"type": kind, "total": total})


ORDERS = [
    ("order-1", event("created", 10)),  # 0
    ("order-2", event("created", 5)),  # 1
    ("order-1", event("updated", 12)),  # 2
    ("order-2", event("updated", 7)),  # 3
    ("order-1", event("updated", 15)),  # 4
]


def naive_orders(records: list[LogRecord]) -> dict[bytes | None, int]:
    """Assumes a "created" event precedes every "updated" event of an order: true as written."""
    orders: dict[bytes | None, int] = {}
    for r in records:
        assert r.value is not None
        e = json.loads(r.value)
        if e["type"] == "updated" and r.key not in orders:
            raise KeyError(f"update of {r.key!r} before its creation")
        orders[r.key] = e["total"]
    return orders


def robust_orders(records: list[LogRecord]) -> dict[bytes | None, int]:
    """An update carries the whole state, so it may come first."""
    return {r.key: json.loads(r.value)["total"] for r in records if r.value is not None}


def test_a_consumer_that_needs_the_created_event_is_caught_with_the_smallest_variant() -> None:
    with pytest.raises(CompactionUnsafeError) as caught:
        assert_compaction_safe(ORDERS, naive_orders)
    failure = caught.value.report.failure
    assert failure is not None
    # The smallest legal compaction that breaks it: one pass cleaning [0, 3), which removes
    # order-1's "created" (superseded by its update at offset 2) and nothing else.
    assert failure.variant.plan == (Pass(3),)
    assert [r.offset for r in failure.variant.missing] == [0]
    assert [r.offset for r in failure.variant.records] == [1, 2, 3, 4]
    assert isinstance(failure.error, KeyError)
    text = str(caught.value)
    assert "pass 1: clean [0, 3) at t0" in text
    assert "the variant lacks 1 record(s) of the uncompacted log:" in text
    assert """offset 0: key='order-1' value='{"type": "created", "total": 10}'""" in text
    assert "replay of the variant raised KeyError" in text


def test_a_consumer_that_assumes_contiguous_offsets_is_caught() -> None:
    records = [("a", "1"), ("b", "1"), ("b", "2"), ("c", "1")]

    def contiguous(rs: list[LogRecord]) -> int:
        for before, after in zip(rs, rs[1:], strict=False):
            assert after.offset == before.offset + 1, f"gap between {before.offset} and {after.offset}"
        return len(rs)

    with pytest.raises(CompactionUnsafeError) as caught:
        assert_compaction_safe(records, contiguous)
    failure = caught.value.report.failure
    assert failure is not None
    assert failure.variant.plan == (Pass(3),)  # b=1 at offset 1 goes: a gap between 0 and 2
    assert [r.offset for r in failure.variant.records] == [0, 2, 3]
    assert "gap between 0 and 2" in str(caught.value)


def test_a_correct_consumer_passes_every_variant() -> None:
    report = assert_compaction_safe(ORDERS, robust_orders)
    assert report.ok and report.mode == "exhaustive"
    assert report.checked == 3  # [0,3) and [0,4) and [0,5) differ from the log; the rest repeat
    assert "the state is the same on every one" in report.describe()


def test_tombstones_going_after_their_horizon_are_variants_too() -> None:
    log = LogBuilder()
    log.append(("a", "1"))
    log.append(("a", None))
    log.append(("b", "1"))
    seen: list[list[tuple[int, bytes | None]]] = []

    def record(rs: list[LogRecord]) -> dict[bytes | None, bytes]:
        seen.append([(r.offset, r.value) for r in rs])
        return latest_values(rs)

    assert_compaction_safe(log.build(), record)
    assert [(1, None), (2, b"1")] in seen  # the superseded value gone, the tombstone kept
    assert [(2, b"1")] in seen  # the tombstone gone too, after its horizon

    counted = []

    def count_deletes(rs: list[LogRecord]) -> int:
        counted.append(len(rs))
        return sum(1 for r in rs if r.is_tombstone)

    with pytest.raises(CompactionUnsafeError) as caught:
        assert_compaction_safe(log.build(), count_deletes)
    assert caught.value.report.failure is not None
    plan = caught.value.report.failure.variant.plan
    # Stamped by the first pass, removed by kompakt's re-clean a delete.retention.ms later ...
    assert plan == (Pass(2), Pass(2, DAY, from_log_start=True))
    with pytest.raises(CompactionUnsafeError) as kafka:
        assert_compaction_safe(log.build(), count_deletes, kafka_only=True)
    assert kafka.value.report.failure is not None
    # ... or, by Kafka's cleaner, which starts at its checkpoint, by a pass over new data.
    assert kafka.value.report.failure.variant.plan == (Pass(2), Pass(3, DAY))


def test_compare_accepts_state_that_legitimately_differs() -> None:
    def history(rs: list[LogRecord]) -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.value) for r in rs]

    with pytest.raises(CompactionUnsafeError):
        assert_compaction_safe(ORDERS, history)

    def same_latest(expected: Any, actual: Any) -> bool:
        return dict(expected) == dict(actual)

    assert assert_compaction_safe(ORDERS, history, compare=same_latest).ok

    def explains(expected: Any, actual: Any) -> None:
        assert len(actual) == len(expected), f"{len(actual)} rows instead of {len(expected)}"

    with pytest.raises(CompactionUnsafeError, match="compare: 4 rows instead of 5"):
        assert_compaction_safe(ORDERS, history, compare=explains)


def test_a_replay_that_fails_on_the_whole_log_is_an_error_not_a_finding() -> None:
    def broken(rs: list[LogRecord]) -> None:
        raise ValueError("bad record")

    with pytest.raises(CompactionCheckError, match="replay fails on the uncompacted log of topic-0"):
        assert_compaction_safe(ORDERS, broken)


def test_transactions_aborted_data_is_never_read_committed() -> None:
    log = LogBuilder()
    log.transactional(7, ("a", "aborted"))
    log.append(("b", "1"))
    log.abort(7)
    log.transactional(7, ("a", "kept"))
    log.commit(7)
    log.append(("b", "2"))
    source = log.build()
    seen: list[list[bytes | None]] = []

    def values(rs: list[LogRecord]) -> dict[bytes | None, bytes]:
        seen.append([r.value for r in rs])
        return latest_values(rs)

    assert_compaction_safe(source, values)
    assert all(b"aborted" not in v for v in seen)
    raw: list[list[bytes | None]] = []
    assert_compaction_safe(
        source,
        lambda rs: raw.append([r.value for r in rs]),
        view="read_uncommitted",
        compare=lambda e, a: True,
    )
    assert [b"aborted", b"1", b"kept", b"2"] in raw and [b"kept", b"2"] in raw


def test_a_large_log_is_sampled_and_its_failure_shrunk() -> None:
    """200 records, one key written early and rewritten late: sampling finds a variant that
    drops its first value, and shrinking brings it down to the one pass that just does."""
    records: list[tuple[str, str]] = [("first", "created")]
    records += [(f"k{i % 40}", f"v{i}") for i in range(150)]
    records += [("first", "updated")]  # offset 151
    records += [(f"k{i % 40}", f"w{i}") for i in range(48)]

    def needs_first(rs: list[LogRecord]) -> bool:
        values = [r.value for r in rs if r.key == b"first"]
        assert values[:1] == [b"created"], "the first record of 'first' is gone"
        return True

    report = check_compaction_safe(records, needs_first, max_variants=30, exhaustive=False, seed=7)
    assert report.mode == "sampled" and report.failure is not None
    failure = report.failure
    assert failure.variant.plan == (Pass(152),)  # the smallest cleaned range past the update
    assert failure.shrunk_from is not None and failure.shrunk_from != failure.variant.plan
    assert "shrunk in" in report.describe()


def test_a_topic_of_the_fixture_broker(kompakt_broker: InProcessBroker) -> None:
    kompakt_broker.create_topic("users", cleanup_policy="compact")
    producer = Producer({"bootstrap.servers": kompakt_broker.bootstrap_servers, "linger.ms": 0})
    for key, value in [(b"u1", b"alice"), (b"u2", b"bob"), (b"u1", b"alicia"), (b"u2", None)]:
        producer.produce("users", key=key, value=value)
        producer.flush(10)
    source = kompakt_broker.compaction_source("users")
    assert source == topic_source(kompakt_broker, "users")
    assert len(source.batches) == 4
    report = assert_compaction_safe(source, latest_values)
    assert report.checked >= 3
    with pytest.raises(CompactionUnsafeError):
        assert_compaction_safe(source, lambda rs: [r.key for r in rs])


def test_a_topic_on_a_cluster(kompakt_broker: InProcessBroker) -> None:
    kompakt_broker.create_topic("cdc", cleanup_policy="compact")
    producer = Producer({"bootstrap.servers": kompakt_broker.bootstrap_servers, "linger.ms": 5})
    for i in range(12):
        producer.produce("cdc", key=f"row{i % 4}".encode(), value=f"{i}".encode())
    assert producer.flush(10) == 0
    report = assert_compaction_safe(f"kafka://{kompakt_broker.bootstrap_servers}/cdc", latest_values)
    assert report.records == 12 and report.cut_points == 12  # one cut point per record read


def test_a_captured_kompakt_directory(tmp_path: Path) -> None:
    log = LogBuilder()
    for i in range(6):
        log.append((f"k{i % 2}", f"v{i}"))
    source = log.build(topic="captured")
    from kompakt.testing.compactions import Compactor

    compactor = Compactor(source, tmp_path / "work")
    written = compactor.run((Pass(4),), tmp_path / "capture")  # a log some cleaner already touched
    captured = SourceLog.from_directory(written.partition_dir)
    assert captured.topic == "captured"
    assert list(captured.batches) != list(source.batches)
    assert assert_compaction_safe(written.partition_dir, latest_values).ok
