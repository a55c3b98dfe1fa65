"""Produce (0), v3–12: validate each partition's batch, append it, wake parked fetches.

Runs in a worker thread (``blocking``): appends write to segment files. acks=0 gets no response
at all (Kafka never answers it); acks 1 and -1 are the same thing on a single node. Invalid acks
get INVALID_REQUIRED_ACKS on every partition.

Per partition: unknown topic → auto-created per ``auto.create.topics.enable``, else
UNKNOWN_TOPIC_OR_PARTITION; validation (``broker/validation.py``) in Kafka's order with Kafka's
messages and per-record errors; then the partition log's append, whose producer-state check
raises for idempotence violations. A retried duplicate batch is answered with the offset it was
first written at and error NONE, without appending, as Kafka does.

A transactional batch is first verified with the transaction coordinator (KIP-890 part 1,
``transaction.partition.verification.enable``): its partition must be in the producer's Ongoing
transaction, and the append happens while the transaction's lock is held, so a late batch can
never land after the transaction's marker. Verification errors are translated for v≤9 clients
as Kafka does: PRODUCER_FENCED → INVALID_PRODUCER_EPOCH, a partition not in the transaction →
INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS or an unavailable coordinator → NOT_ENOUGH_REPLICAS
(retriable, no metadata refresh); from v11 TRANSACTION_ABORTABLE reaches the client as it is.
v12 is a transactions-version-2 producer's (KIP-890 part 2, Kafka's
``produceRequestVersionToTransactionSupportedOperation``): it sends no AddPartitionsToTxn, and its
first transactional batch to a partition adds the partition to the transaction. v10 adds only
optional leader tags to the answer, which a single node leaves at their defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kompakt.broker.acl.model import AclOperation, ResourceType
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
from kompakt.log.partition_log import AppendInfo, PartitionLog
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import produce as m
from kompakt.records.batch import RecordBatchView

log = logging.getLogger(__name__)

_VALID_ACKS = (0, 1, -1)


def _error(
    index: int,
    code: codec.ErrorCode,
    message: str | None = None,
    record_errors: Sequence[tuple[int, str]] = (),
) -> m.PartitionProduceResponse:
    return m.PartitionProduceResponse(
        index=index,
        error_code=code,
        base_offset=-1,
        log_append_time=-1,
        log_start_offset=-1,
        record_errors=[
            m.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=text)
            for i, text in record_errors
        ],
        error_message=message,
    )


def _appended(
    index: int, base_offset: int, log_append_time: int, log_start_offset: int
) -> m.PartitionProduceResponse:
    return m.PartitionProduceResponse(
        index=index,
        error_code=codec.ErrorCode.none,
        base_offset=base_offset,
        log_append_time=log_append_time,
        log_start_offset=log_start_offset,
        record_errors=[],
    )


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


_VERIFY_ERRORS = {
    codec.ErrorCode.producer_fenced: codec.ErrorCode.invalid_producer_epoch,
    codec.ErrorCode.transaction_abortable: codec.ErrorCode.invalid_txn_state,
    codec.ErrorCode.concurrent_transactions: codec.ErrorCode.not_enough_replicas,
    codec.ErrorCode.coordinator_not_available: codec.ErrorCode.not_enough_replicas,
}


def _append_transactional(
    broker: Broker,
    transactional_id: str | None,
    partition_log: PartitionLog,
    batch: memoryview,
    log_append_time_ms: int | None,
    api_version: int,
) -> AppendInfo | m.PartitionProduceResponse:
    """Verify a transactional batch with the coordinator and append it under the transaction's lock."""
    coordinator = broker.txn
    view = RecordBatchView(batch)
    if coordinator is None:
        return _error(partition_log.partition, codec.ErrorCode.invalid_txn_state, "no coordinator")
    add = api_version > 11
    # A v2 producer's partitions join its transaction only here, so Kafka verifies them even with
    # verification disabled (``ReplicaManager.maybeSendPartitionsToTransactionCoordinator``).
    if not add and not coordinator.config.transaction_partition_verification_enable:
        return partition_log.append(batch, log_append_time_ms=log_append_time_ms, in_place=True)
    tp = (partition_log.topic, partition_log.partition)
    with coordinator.verified(
        transactional_id, view.producer_id, view.producer_epoch, [tp], add=add
    ) as errors:
        error = errors[tp]
        if error is not codec.ErrorCode.none:
            passes = error is codec.ErrorCode.transaction_abortable and api_version > 10
            answer: codec.ErrorCode = error if passes else _VERIFY_ERRORS.get(error, error)
            return _error(
                partition_log.partition,
                answer,
                f"Unable to verify the partition has been added to the transaction: {error.name}",
            )
        return partition_log.append(
            batch, log_append_time_ms=log_append_time_ms, transaction_version_2=add, in_place=True
        )


def produce_partition(
    broker: Broker,
    topic: str,
    partition: int,
    records: bytes | None,
    transactional_id: str | None = None,
    api_version: int = 9,
) -> m.PartitionProduceResponse:
    """Validate and append one partition's records; the partition's response entry."""
    partition_log: PartitionLog | None = None
    try:
        partition_log = _log_for(broker, topic, partition)
        validated = validate_produce(
            records or b"", topic, partition, partition_log.config, broker.clock.now_ms()
        )
        if RecordBatchView(validated.batch).is_transactional:
            appended = _append_transactional(
                broker,
                transactional_id,
                partition_log,
                validated.batch,
                validated.log_append_time_ms,
                api_version,
            )
            if isinstance(appended, m.PartitionProduceResponse):
                return appended
            info = appended
        else:
            # The batch is a view of the request's frame, nothing reads it after this append: the
            # log sets its offsets in place when the frame is writable (a large one, see the server).
            info = partition_log.append(
                validated.batch, log_append_time_ms=validated.log_append_time_ms, in_place=True
            )
    except DuplicateSequenceError as exc:
        log.debug("duplicate batch for %s-%d: %s", topic, partition, exc)
        log_start_offset = partition_log.log_start_offset if partition_log is not None else -1
        return _appended(partition, exc.first_offset, -1, log_start_offset)
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
    return _appended(partition, info.first_offset, info.log_append_time_ms, info.log_start_offset)


def handle(ctx: RequestContext, request: m.ProduceRequest) -> m.ProduceResponse | None:
    broker = ctx.broker
    acks = request.acks
    responses = []
    txn_id = request.transactional_id
    # KafkaApis.handleProduceRequest: transactional records need WRITE on the transactional id
    # (else the whole request is refused), then every topic needs WRITE.
    txn_denied = txn_id is not None and not ctx.authorized(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
    )
    for topic in request.topic_data:
        partitions = []
        writable = ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        for data in topic.partition_data:
            if txn_denied:
                partitions.append(_error(data.index, codec.ErrorCode.transactional_id_authorization_failed))
            elif acks not in _VALID_ACKS:
                partitions.append(_error(data.index, codec.ErrorCode.invalid_required_acks))
            elif not writable:
                partitions.append(_error(data.index, codec.ErrorCode.topic_authorization_failed))
            else:
                partitions.append(
                    produce_partition(
                        broker,
                        topic.name,
                        data.index,
                        data.records,
                        request.transactional_id,
                        ctx.api_version,
                    )
                )
        responses.append(m.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return None
    return m.ProduceResponse(responses=responses)


SPEC = HandlerSpec(ApiKey.PRODUCE, 3, 12, handle, blocking=True)
