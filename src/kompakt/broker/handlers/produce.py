"""Produce (0), v3–9: validate each partition's batch, append it, wake parked fetches.

Runs in a worker thread (``blocking``): appends write to segment files. acks=0 gets no response
at all (Kafka never answers it); acks 1 and -1 are the same thing on a single node. Invalid acks
get INVALID_REQUIRED_ACKS on every partition.

Per partition: unknown topic → auto-created per ``auto.create.topics.enable``, else
UNKNOWN_TOPIC_OR_PARTITION; validation (``broker/validation.py``) in Kafka's order with Kafka's
messages and per-record errors; then the partition log's append, whose producer-state check
raises for idempotence violations. A retried duplicate batch is answered with the offset it was
first written at and error NONE, without appending, as Kafka does. Transactions are not
implemented, so transactional batches are refused with INVALID_TXN_STATE.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import Broker, HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.topics import auto_create_topic
from kompakt.broker.validation import RecordErrorsInvalid, RecordErrorsTimestamp, validate_produce
from kompakt.errors import (
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidTopicError,
    KompaktError,
    UnknownTopicOrPartitionError,
)
from kompakt.log.partition_log import PartitionLog
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.records.batch import RecordBatchView

log = logging.getLogger(__name__)

_VALID_ACKS = (0, 1, -1)


class _Partition(Protocol):
    index: int
    records: bytes | None


class _Topic(Protocol):
    name: str
    partition_data: Sequence[_Partition]


class _Request(Protocol):
    acks: int
    topic_data: Sequence[_Topic]


def _error(
    index: int,
    code: codec.ErrorCode,
    message: str | None = None,
    record_errors: Sequence[tuple[int, str]] = (),
) -> dict[str, object]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in record_errors],
        "error_message": message,
    }


def _log_for(broker: Broker, topic: str, partition: int) -> PartitionLog:
    """The partition's log, auto-creating its topic where the broker allows it. A name that
    cannot be a topic is unknown, as Kafka answers a Produce for a topic it does not have
    (``KafkaApis.handleProduceRequest``: UNKNOWN_TOPIC_OR_PARTITION; Kafka creates topics on
    Metadata only, where an illegal name gets INVALID_TOPIC_EXCEPTION)."""
    logs = broker.logs
    try:
        return logs.get_log(topic, partition)
    except UnknownTopicOrPartitionError as unknown:
        try:
            created = topic not in logs.topics() and auto_create_topic(broker, topic) is not None
        except InvalidTopicError:
            raise unknown from None
        if not created:
            raise
        return logs.get_log(topic, partition)


def produce_partition(broker: Broker, topic: str, partition: int, records: bytes | None) -> dict[str, object]:
    """Validate and append one partition's records; the partition's response entry."""
    partition_log: PartitionLog | None = None
    try:
        partition_log = _log_for(broker, topic, partition)
        validated = validate_produce(
            records or b"", topic, partition, partition_log.config, broker.clock.now_ms()
        )
        if RecordBatchView(validated.batch).is_transactional:
            return _error(
                partition,
                codec.ErrorCode.invalid_txn_state,
                "kompakt does not support transactions: transactional batches are refused",
            )
        info = partition_log.append(validated.batch, log_append_time_ms=validated.log_append_time_ms)
    except DuplicateSequenceError as exc:
        log.debug("duplicate batch for %s-%d: %s", topic, partition, exc)
        return {
            "index": partition,
            "error_code": codec.ErrorCode.none,
            "base_offset": exc.first_offset,
            "log_append_time": -1,
            "log_start_offset": partition_log.log_start_offset if partition_log is not None else -1,
            "record_errors": [],
            "error_message": None,
        }
    except (RecordErrorsInvalid, RecordErrorsTimestamp) as exc:
        if exc.null_key_records:
            broker.metrics.mark_no_key_compacted(exc.null_key_records)
        return _error(partition, error_code_for(exc), str(exc), exc.record_errors)
    except KompaktError as exc:
        if isinstance(exc, CorruptRecordError):
            broker.metrics.mark_invalid_crc()
        return _error(partition, error_code_for(exc), str(exc))
    except OSError as exc:
        if partition_log is None or partition_log.write_error is None:
            log.exception("produce to %s-%d failed", topic, partition)
        # else the log reported the failed append itself, once per partition per interval (a full
        # disk fails every append: a traceback each would flood the log).
        return _error(partition, error_code_for(exc), f"I/O error: {exc}")
    broker.fetch_waiters.notify(topic, partition)
    return {
        "index": partition,
        "error_code": codec.ErrorCode.none,
        "base_offset": info.first_offset,
        "log_append_time": info.log_append_time_ms,
        "log_start_offset": info.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload | None:
    req = cast(_Request, request)
    broker = ctx.broker
    acks = req.acks
    responses = []
    for topic in req.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in _VALID_ACKS:
                partitions.append(_error(data.index, codec.ErrorCode.invalid_required_acks))
            else:
                partitions.append(produce_partition(broker, topic.name, data.index, data.records))
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return codec.build_response(request, {"responses": responses})


SPEC = HandlerSpec(ApiKey.PRODUCE, 3, 9, handle, blocking=True)
