"""Produce: every ``LogValidator`` / ``UnifiedLog.analyzeAndValidateRecords`` case with Kafka's codes and
messages, appends, idempotence."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.clock import FakeClock
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.batch import RecordBatchView, TimestampType, iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.compression import Compression
from tests.support.wire import call, dispatch, produce_values

from .conftest import NOW_MS

V = 9


def rec(key: bytes | None, value: bytes | None = b"v", ts: int = NOW_MS) -> SimpleRecord:
    return SimpleRecord(key, value, ts)


def produce(dispatcher: Dispatcher, topic: str, records: bytes, partition: int = 0, version: int = V) -> Any:
    response = call(dispatcher, ApiKey.PRODUCE, version, produce_values(topic, partition, records))
    return response.responses[0].partition_responses[0]


@pytest.fixture
def compacted(log_manager: LogManager) -> str:
    log_manager.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    return "compacted"


@pytest.fixture
def plain(log_manager: LogManager) -> str:
    log_manager.create_topic("plain", 1)
    return "plain"


def leo(log_manager: LogManager, topic: str) -> int:
    return log_manager.get_log(topic, 0).log_end_offset


def test_append_assigns_offsets_and_reports_log_start(dispatcher: Dispatcher, plain: str) -> None:
    first = produce(dispatcher, plain, build_batch([rec(b"a"), rec(b"b")]))
    second = produce(dispatcher, plain, build_batch([rec(b"c")]))
    assert (first.error_code, first.base_offset, first.log_start_offset) == (E.none, 0, 0)
    assert (second.error_code, second.base_offset) == (E.none, 2)
    assert first.log_append_time is None  # CreateTime topic: -1 on the wire


def test_acks_zero_gets_no_response(dispatcher: Dispatcher, plain: str, log_manager: LogManager) -> None:
    result = dispatch(
        dispatcher, ApiKey.PRODUCE, V, produce_values(plain, 0, build_batch([rec(b"a")]), acks=0)
    )
    assert result is None
    assert leo(log_manager, plain) == 1


def test_invalid_acks(dispatcher: Dispatcher, plain: str) -> None:
    response = call(dispatcher, ApiKey.PRODUCE, V, produce_values(plain, 0, build_batch([rec(b"a")]), acks=2))
    assert response.responses[0].partition_responses[0].error_code == E.invalid_required_acks


def test_nonzero_base_offset_is_invalid_record(dispatcher: Dispatcher, plain: str) -> None:
    answer = produce(dispatcher, plain, build_batch([rec(b"a")], base_offset=5))
    assert answer.error_code == E.invalid_record
    assert answer.error_message == (
        "The baseOffset of the record batch in the append to plain-0 should be 0, but it is 5"
    )


def test_message_too_large(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("small", 1, {"max.message.bytes": "100"})
    batch = build_batch([rec(b"k", b"x" * 200)])
    answer = produce(dispatcher, "small", batch)
    assert answer.error_code == E.message_too_large
    assert answer.error_message == (
        f"The record batch size in the append to small-0 is {len(batch)} bytes which exceeds the "
        "maximum configured value of 100."
    )
    assert leo(log_manager, "small") == 0


def test_corrupt_crc(dispatcher: Dispatcher, plain: str, broker: Broker, log_manager: LogManager) -> None:
    batch = bytearray(build_batch([rec(b"a")]))
    stored = RecordBatchView(batch).crc
    batch[-1] ^= 0xFF
    answer = produce(dispatcher, plain, bytes(batch))
    assert answer.error_code == E.corrupt_message
    assert answer.error_message == f"Record is corrupt (stored crc = {stored}) in topic partition plain-0."
    assert broker.metrics.invalid_message_crc_records == 1
    assert leo(log_manager, plain) == 0


def test_two_batches_are_invalid(dispatcher: Dispatcher, plain: str) -> None:
    answer = produce(dispatcher, plain, build_batch([rec(b"a")]) + build_batch([rec(b"b")]))
    assert answer.error_code == E.invalid_record
    assert answer.error_message == "Compressed outer record has more than one batch"


def test_old_magic_is_invalid(dispatcher: Dispatcher, plain: str) -> None:
    batch = bytearray(build_batch([rec(b"a")]))
    batch[16] = 1
    answer = produce(dispatcher, plain, bytes(batch))
    assert answer.error_code == E.invalid_record


def test_truncated_record_set_is_corrupt(dispatcher: Dispatcher, plain: str) -> None:
    answer = produce(dispatcher, plain, build_batch([rec(b"a")])[:-3])
    assert answer.error_code == E.corrupt_message


def test_empty_record_set_is_invalid(dispatcher: Dispatcher, plain: str) -> None:
    answer = produce(dispatcher, plain, b"")
    assert answer.error_code == E.invalid_record


# ---- null keys on compacted topics (``UnifiedLogTest.testCompactedTopicConstraints``)
# ------------------------------------------------------

NULL_KEY = "Compacted topic cannot accept message without key in topic partition compacted-0."


def _expect_null_key(answer: Any, indexes: list[int]) -> None:
    assert answer.error_code == E.invalid_record
    errors = [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors]
    assert errors == [(i, NULL_KEY) for i in indexes]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{NULL_KEY}')" for i in indexes[:3])
    assert answer.error_message == (
        f"One or more records have been rejected due to {len(indexes)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )


@pytest.mark.parametrize(
    ("records", "compression", "indexes"),
    [
        ([rec(None), rec(b"k")], Compression.NONE, [0]),
        ([rec(None)], Compression.NONE, [0]),
        ([rec(b"k"), rec(None)], Compression.GZIP, [1]),
        ([rec(b"k"), rec(None)], Compression.ZSTD, [1]),
        ([rec(None), rec(b"a"), rec(None), rec(None), rec(None)], Compression.LZ4, [0, 2, 3, 4]),
    ],
    ids=["unkeyed-keyed", "unkeyed", "gzip-keyed-unkeyed", "zstd-keyed-unkeyed", "lz4-four-errors"],
)
def test_compacted_topic_rejects_null_keys(
    dispatcher: Dispatcher,
    compacted: str,
    broker: Broker,
    log_manager: LogManager,
    records: list[SimpleRecord],
    compression: Compression,
    indexes: list[int],
) -> None:
    answer = produce(dispatcher, compacted, build_batch(records, compression=compression))
    _expect_null_key(answer, indexes)
    assert broker.metrics.no_key_compacted_topic_records == len(indexes)
    assert broker.metrics.snapshot()["NoKeyCompactedTopicRecordsPerSec"] == len(indexes)
    assert leo(log_manager, compacted) == 0


@pytest.mark.parametrize(
    ("records", "compression"),
    [
        ([rec(b"k")], Compression.NONE),
        ([rec(b"k"), rec(b"j")], Compression.NONE),
        ([rec(b"k")], Compression.GZIP),
        ([rec(b"k", None)], Compression.NONE),  # a tombstone
        ([rec(b"", b"")], Compression.NONE),  # a zero-length key and an empty value
    ],
    ids=["keyed", "keyed-keyed", "gzip-keyed", "tombstone", "empty-key"],
)
def test_compacted_topic_accepts_keyed(
    dispatcher: Dispatcher, compacted: str, records: list[SimpleRecord], compression: Compression
) -> None:
    answer = produce(dispatcher, compacted, build_batch(records, compression=compression))
    assert (answer.error_code, answer.record_errors, answer.error_message) == (E.none, (), None)


def test_null_keys_fine_on_delete_topics(dispatcher: Dispatcher, plain: str) -> None:
    assert produce(dispatcher, plain, build_batch([rec(None), rec(None)])).error_code == E.none


# ---- counts and offsets ----------------------------------------------------------------------


def test_count_must_match_offset_range(dispatcher: Dispatcher, plain: str) -> None:
    batch = build_batch([rec(b"a"), rec(b"b")], last_offset_delta=3)
    answer = produce(dispatcher, plain, batch)
    assert answer.error_code == E.invalid_record
    assert answer.error_message == (
        "Inconsistent batch offset range [0, 3] and count of records 2 in topic partition plain-0."
    )


def test_record_offsets_must_be_contiguous(dispatcher: Dispatcher, plain: str) -> None:
    batch = build_batch(
        [SimpleRecord(b"a", b"1", NOW_MS, offset_delta=0), SimpleRecord(b"b", b"2", NOW_MS, offset_delta=2)],
        last_offset_delta=1,
    )
    answer = produce(dispatcher, plain, batch)
    assert answer.error_code == E.invalid_record


def test_declared_count_beyond_the_bytes_is_invalid(dispatcher: Dispatcher, plain: str) -> None:
    batch = bytearray(build_batch([rec(b"a"), rec(b"b")]))
    struct.pack_into(">i", batch, 57, 3)  # count 3
    struct.pack_into(">i", batch, 23, 2)  # last offset delta 2
    from kompakt.records.batch import write_crc

    write_crc(batch, 0)
    answer = produce(dispatcher, plain, bytes(batch))
    assert answer.error_code == E.invalid_record


def test_control_batches_from_clients_are_refused(dispatcher: Dispatcher, plain: str) -> None:
    from kompakt.records.control import ControlType, build_control_batch

    batch = build_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=0, timestamp=NOW_MS)
    assert produce(dispatcher, plain, batch).error_code == E.invalid_record


# ---- timestamps ------------------------------------------------------------------------------


def test_create_time_window(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic(
        "window", 1, {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"}
    )
    ok = produce(dispatcher, "window", build_batch([rec(b"a", ts=NOW_MS - 1000), rec(b"b", ts=NOW_MS + 500)]))
    assert ok.error_code == E.none
    late = produce(dispatcher, "window", build_batch([rec(b"a"), rec(b"b", ts=NOW_MS - 1001)]))
    assert late.error_code == E.invalid_timestamp
    assert late.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [(e.batch_index, e.batch_index_error_message) for e in late.record_errors] == [
        (
            1,
            f"Timestamp {NOW_MS - 1001} of message with offset 1 is out of range. "
            f"The timestamp should be within [{NOW_MS - 1000}, {NOW_MS + 500}]",
        )
    ]
    early = produce(dispatcher, "window", build_batch([rec(b"a", ts=NOW_MS + 501)]))
    assert early.error_code == E.invalid_timestamp
    assert leo(log_manager, "window") == 2


def test_by_default_a_timestamp_more_than_an_hour_ahead_is_refused(
    dispatcher: Dispatcher, plain: str
) -> None:
    """Kafka 4's default message.timestamp.after.max.ms is one hour (KIP-1030); a clock running ahead
    by more is refused with INVALID_TIMESTAMP, as a Kafka 4.1 broker answers it."""
    hour = 3_600_000
    assert produce(dispatcher, plain, build_batch([rec(b"a", ts=NOW_MS + hour)])).error_code == E.none
    ahead = produce(dispatcher, plain, build_batch([rec(b"b", ts=NOW_MS + hour + 1)]))
    assert ahead.error_code == E.invalid_timestamp


def test_client_log_append_time_is_invalid(dispatcher: Dispatcher, plain: str) -> None:
    batch = build_batch([rec(b"a")], timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert produce(dispatcher, plain, batch).error_code == E.invalid_timestamp


def test_log_append_time_topic(dispatcher: Dispatcher, log_manager: LogManager, clock: FakeClock) -> None:
    log_manager.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    clock.advance(1234)
    answer = produce(dispatcher, "lat", build_batch([rec(b"a", ts=5), rec(b"b", ts=6)]))
    assert answer.error_code == E.none
    assert answer.log_append_time is not None
    assert int(answer.log_append_time.timestamp() * 1000) == NOW_MS + 1234
    stored = log_manager.get_log("lat", 0).read(0, 1 << 20).records
    (view,) = list(iter_batches(stored))
    assert view.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert view.max_timestamp == NOW_MS + 1234
    assert view.is_valid()


def test_record_list_too_large(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("tiny-segments", 1, {"internal.segment.bytes": "100"})
    batch = build_batch([rec(b"k", b"x" * 100)])
    answer = produce(dispatcher, "tiny-segments", batch)
    assert answer.error_code == E.record_list_too_large
    assert answer.error_message == (
        f"Message batch size is {len(batch)} bytes in append to partition tiny-segments-0 which exceeds "
        "the maximum configured segment size of 100."
    )


# ---- topics ----------------------------------------------------------------------------------


def test_unknown_topic_is_auto_created(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    answer = produce(dispatcher, "fresh", build_batch([rec(b"a")]), partition=1)
    assert answer.error_code == E.none
    assert log_manager.topics()["fresh"].partitions == 2  # num.partitions


def test_unknown_partition(dispatcher: Dispatcher, plain: str) -> None:
    assert produce(dispatcher, plain, build_batch([rec(b"a")]), partition=7).error_code == (
        E.unknown_topic_or_partition
    )


def test_no_auto_create_when_disabled(clock: FakeClock, tmp_path: object) -> None:
    from pathlib import Path

    from kompakt.config.broker import BrokerConfig

    config = BrokerConfig.from_properties({"auto.create.topics.enable": "false"})
    manager = LogManager(Path(str(tmp_path)) / "d2", config, clock)
    manager.open()
    try:
        broker = Broker.create(clock=clock, log_manager=manager)
        answer = produce(Dispatcher(broker), "nope", build_batch([rec(b"a")]))
        assert answer.error_code == E.unknown_topic_or_partition
        assert "nope" not in manager.topics()
    finally:
        manager.close()


# ---- idempotence -----------------------------------------------------------------------------


def _idempotent(seq: int, *keys: bytes, pid: int = 7, epoch: int = 0) -> bytes:
    return build_batch([rec(k) for k in keys], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_duplicate_batch_answers_original_offset(
    dispatcher: Dispatcher, plain: str, log_manager: LogManager
) -> None:
    produce(dispatcher, plain, build_batch([rec(b"x")]))
    first = produce(dispatcher, plain, _idempotent(0, b"a", b"b"))
    retry = produce(dispatcher, plain, _idempotent(0, b"a", b"b"))
    assert (first.error_code, first.base_offset) == (E.none, 1)
    assert (retry.error_code, retry.base_offset) == (E.none, 1)
    assert leo(log_manager, plain) == 3


def test_out_of_order_sequence(dispatcher: Dispatcher, plain: str) -> None:
    produce(dispatcher, plain, _idempotent(0, b"a"))
    assert produce(dispatcher, plain, _idempotent(5, b"b")).error_code == E.out_of_order_sequence_number


def test_fenced_epoch(dispatcher: Dispatcher, plain: str) -> None:
    produce(dispatcher, plain, _idempotent(0, b"a", epoch=3))
    assert produce(dispatcher, plain, _idempotent(1, b"b", epoch=2)).error_code == E.invalid_producer_epoch


def test_transactional_batch_of_an_unknown_transaction_is_refused(dispatcher: Dispatcher, plain: str) -> None:
    # Without a transactional id in the request there is no transaction to verify it against.
    batch = build_batch([rec(b"a")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
    assert produce(dispatcher, plain, batch).error_code in (E.invalid_txn_state, E.invalid_request)


def test_old_produce_version_v3(dispatcher: Dispatcher, plain: str) -> None:
    answer = produce(dispatcher, plain, build_batch([rec(b"a")]), version=3)
    assert (answer.error_code, answer.base_offset) == (E.none, 0)
