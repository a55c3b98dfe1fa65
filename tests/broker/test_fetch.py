"""Fetch: whole batches across gaps, byte limits, errors with empty records, long polls."""

from __future__ import annotations

from typing import Any

import pytest

from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.clock import FakeClock
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from tests.support.wire import call, decode, dispatch, fetch_values, produce_values

from .conftest import NOW_MS

V = 12


def batch_at(base: int, *keys: bytes, last_offset_delta: int | None = None, value: bytes = b"v") -> bytes:
    return build_batch(
        [SimpleRecord(k, value, NOW_MS) for k in keys], base_offset=base, last_offset_delta=last_offset_delta
    )


@pytest.fixture
def gappy(log_manager: LogManager) -> str:
    """A compacted-looking log: batches at 0-1 and 5-6 (offsets 2-4 gone), then 7."""
    log_manager.create_topic("gappy", 1)
    partition_log = log_manager.get_log("gappy", 0)
    partition_log.append_with_offsets(batch_at(0, b"a", b"b"))
    partition_log.append_with_offsets(batch_at(5, b"c", b"d"))
    partition_log.append_with_offsets(batch_at(7, b"e"))
    return "gappy"


def fetch_one(dispatcher: Dispatcher, topic: str, offset: int, version: int = V, **kw: int) -> Any:
    response = call(dispatcher, ApiKey.FETCH, version, fetch_values([(topic, 0, offset)], **kw))
    if version >= 7:  # fetch sessions (KIP-227): always declined with session 0
        assert (response.error_code, response.session_id) == (E.none, 0)
    return response.responses[0].partitions[0]


def base_offsets(records: bytes) -> list[int]:
    return [view.base_offset for view in iter_batches(records)]


@pytest.mark.parametrize(
    ("offset", "expected"), [(0, [0, 5, 7]), (1, [0, 5, 7]), (3, [5, 7]), (6, [5, 7]), (7, [7])]
)
def test_reads_whole_batches_across_gaps(
    dispatcher: Dispatcher, gappy: str, offset: int, expected: list[int]
) -> None:
    part = fetch_one(dispatcher, gappy, offset)
    assert part.error_code == E.none
    assert base_offsets(part.records) == expected
    assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (8, 8, 0)


def test_read_at_end_is_empty_bytes(dispatcher: Dispatcher, gappy: str) -> None:
    part = fetch_one(dispatcher, gappy, 8)
    assert part.error_code == E.none
    assert part.records == b""


@pytest.mark.parametrize("version", [4, 11, 12])
def test_error_partitions_carry_empty_records_not_null(dispatcher: Dispatcher, version: int) -> None:
    part = fetch_one(dispatcher, "missing", 0, version=version)
    assert part.error_code == E.unknown_topic_or_partition
    assert part.records is not None
    assert part.records == b""


def test_out_of_range_fills_offsets(dispatcher: Dispatcher, gappy: str, log_manager: LogManager) -> None:
    past = fetch_one(dispatcher, gappy, 9)
    assert past.error_code == E.offset_out_of_range
    assert (past.records, past.high_watermark, past.log_start_offset) == (b"", 8, 0)
    partition_log = log_manager.get_log(gappy, 0)
    partition_log.increment_log_start_offset(5)
    below = fetch_one(dispatcher, gappy, 2)
    assert below.error_code == E.offset_out_of_range
    assert (below.records, below.log_start_offset) == (b"", 5)


def test_first_batch_whole_beyond_max_bytes_then_only_whole_batches(
    dispatcher: Dispatcher, log_manager: LogManager
) -> None:
    log_manager.create_topic("big", 2)
    for partition in (0, 1):
        partition_log = log_manager.get_log("big", partition)
        partition_log.append_with_offsets(batch_at(0, b"a", value=b"x" * 1000))
        partition_log.append_with_offsets(batch_at(1, b"b", value=b"x" * 1000))
    values = fetch_values([("big", 0, 0), ("big", 1, 0)], max_bytes=10, partition_max_bytes=10)
    response = call(dispatcher, ApiKey.FETCH, V, values)
    first, second = response.responses[0].partitions
    assert base_offsets(first.records) == [0]  # one whole batch (KIP-74), never a partial one
    assert second.records == b""  # the response budget is spent
    values = fetch_values([("big", 0, 0), ("big", 1, 0)], max_bytes=1_000_000, partition_max_bytes=1500)
    first, second = call(dispatcher, ApiKey.FETCH, V, values).responses[0].partitions
    assert base_offsets(first.records) == [0] and base_offsets(second.records) == [0]
    values = fetch_values([("big", 0, 0), ("big", 1, 0)], max_bytes=2500, partition_max_bytes=1_000_000)
    first, second = call(dispatcher, ApiKey.FETCH, V, values).responses[0].partitions
    assert base_offsets(first.records) == [0, 1] and second.records == b""


def test_broker_fetch_max_bytes_caps_the_request(
    clock: FakeClock, log_manager: LogManager, timers: ManualTimers
) -> None:
    """``fetch.max.bytes`` bounds the response below what the client asked (Kafka's min rule)."""
    from kompakt.config.broker import BrokerConfig

    log_manager.create_topic("big", 1)
    partition_log = log_manager.get_log("big", 0)
    for offset in range(3):
        partition_log.append_with_offsets(batch_at(offset, b"k", value=b"x" * 1000))
    broker = Broker.create(
        clock=clock,
        log_manager=log_manager,
        timers=timers,
        broker_config=BrokerConfig.from_properties({"fetch.max.bytes": "2500"}),
    )
    values = fetch_values([("big", 0, 0)], max_bytes=1_000_000, partition_max_bytes=1_000_000)
    records = call(Dispatcher(broker), ApiKey.FETCH, V, values).responses[0].partitions[0].records
    assert base_offsets(records) == [0, 1]  # two ~1 KB batches fit 2,500 bytes, the third does not
    values = fetch_values([("big", 0, 0)], max_bytes=10, partition_max_bytes=10)
    records = call(Dispatcher(broker), ApiKey.FETCH, V, values).responses[0].partitions[0].records
    assert base_offsets(records) == [0]  # the first batch is still whole


def test_read_uncommitted_has_null_aborted_list(dispatcher: Dispatcher, gappy: str) -> None:
    assert fetch_one(dispatcher, gappy, 0).aborted_transactions is None
    committed = fetch_one(dispatcher, gappy, 0, isolation_level=1)
    assert committed.aborted_transactions == ()
    assert base_offsets(committed.records) == [0, 5, 7]


# ---- long poll -------------------------------------------------------------------------------


def _park(dispatcher: Dispatcher, topic: str, offset: int, max_wait_ms: int = 500) -> Deferred[Any]:
    result = dispatch(
        dispatcher, ApiKey.FETCH, V, fetch_values([(topic, 0, offset)], max_wait_ms=max_wait_ms)
    )
    assert isinstance(result, Deferred)
    return result


def test_long_poll_woken_by_append(
    dispatcher: Dispatcher, gappy: str, broker: Broker, timers: ManualTimers
) -> None:
    parked = _park(dispatcher, gappy, 8)
    assert not parked.done
    assert broker.fetch_waiters.pending() == 1
    call(
        dispatcher,
        ApiKey.PRODUCE,
        9,
        produce_values(gappy, 0, build_batch([SimpleRecord(b"z", b"1", NOW_MS)])),
    )
    assert parked.done
    part = decode(parked.result(), ApiKey.FETCH, V).responses[0].partitions[0]
    assert base_offsets(part.records) == [8]
    assert broker.fetch_waiters.pending() == 0
    assert timers.pending() == 0  # the deadline was cancelled


def test_long_poll_times_out_with_empty_records(
    dispatcher: Dispatcher, gappy: str, broker: Broker, timers: ManualTimers, clock: FakeClock
) -> None:
    parked = _park(dispatcher, gappy, 8, max_wait_ms=500)
    clock.advance(499)
    assert timers.advance() == 0 and not parked.done
    clock.advance(1)
    assert timers.advance() == 1
    part = decode(parked.result(), ApiKey.FETCH, V).responses[0].partitions[0]
    assert (part.error_code, part.records, part.high_watermark) == (E.none, b"", 8)
    assert broker.fetch_waiters.pending() == 0


def test_append_to_other_partition_does_not_wake(
    dispatcher: Dispatcher, gappy: str, log_manager: LogManager
) -> None:
    log_manager.create_topic("other", 1)
    parked = _park(dispatcher, gappy, 8)
    call(
        dispatcher,
        ApiKey.PRODUCE,
        9,
        produce_values("other", 0, build_batch([SimpleRecord(b"z", b"1", NOW_MS)])),
    )
    assert not parked.done


def test_no_wait_when_data_or_error_or_zero_wait(dispatcher: Dispatcher, gappy: str) -> None:
    values = fetch_values([(gappy, 0, 0)], max_wait_ms=500)
    assert not isinstance(dispatch(dispatcher, ApiKey.FETCH, V, values), Deferred)
    values = fetch_values([(gappy, 0, 8), ("missing", 0, 0)], max_wait_ms=500)
    assert not isinstance(dispatch(dispatcher, ApiKey.FETCH, V, values), Deferred)
    values = fetch_values([(gappy, 0, 8)], max_wait_ms=0)
    assert not isinstance(dispatch(dispatcher, ApiKey.FETCH, V, values), Deferred)


def test_min_bytes_waits_for_enough(
    dispatcher: Dispatcher, gappy: str, timers: ManualTimers, clock: FakeClock
) -> None:
    values = fetch_values([(gappy, 0, 7)], max_wait_ms=100, min_bytes=1_000_000)
    parked = dispatch(dispatcher, ApiKey.FETCH, V, values)
    assert isinstance(parked, Deferred) and not parked.done
    clock.advance(100)
    timers.advance()
    part = decode(parked.result(), ApiKey.FETCH, V).responses[0].partitions[0]
    assert base_offsets(part.records) == [7]
