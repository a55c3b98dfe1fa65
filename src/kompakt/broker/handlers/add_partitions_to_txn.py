"""AddPartitionsToTxn (24), v0–5: partitions join the producer's transaction.

v0–3 are the client's request: one transaction, its partitions, one error for every partition.
Partitions that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, without touching the transaction (Kafka's ``handleAddPartitionsToTxnRequest``).
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

v4+ (KIP-890) batch transactions and carry ``verify_only``: with it the coordinator only checks
that the partitions are already in the Ongoing transaction (TRANSACTION_ABORTABLE for one that
is not, at v4 as at v5, as Kafka 4.1 answers), which is the question a partition leader asks before it
accepts a transactional write. In this single node the produce path asks the coordinator
directly (``TransactionCoordinator.verified``); the wire form serves tools and tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

TopicPartition = tuple[str, int]


class _Topic(Protocol):
    name: str
    partitions: Sequence[int]


class _Transaction(Protocol):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    topics: Sequence[_Topic]


class _RequestV3(Protocol):
    v3_and_below_transactional_id: str
    v3_and_below_producer_id: int
    v3_and_below_producer_epoch: int
    v3_and_below_topics: Sequence[_Topic]


class _RequestV4(Protocol):
    transactions: Sequence[_Transaction]


def _results(errors: dict[TopicPartition, codec.ErrorCode]) -> list[dict[str, object]]:
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": error})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


def _add(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    verify_only: bool,
) -> dict[TopicPartition, codec.ErrorCode]:
    coordinator = ctx.broker.txn
    if coordinator is None:
        return dict.fromkeys(partitions, codec.ErrorCode.coordinator_not_available)
    missing = [tp for tp in partitions if not ctx.broker.partition_exists(*tp)]
    if missing:
        errors = dict.fromkeys(partitions, codec.ErrorCode.operation_not_attempted)
        errors.update(dict.fromkeys(missing, codec.ErrorCode.unknown_topic_or_partition))
        return errors
    if verify_only:
        # Answered as the coordinator decides, at v4 too (Kafka 4.1 translates TRANSACTION_ABORTABLE
        # for old producers on the partition leader, not in this response).
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    error = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
    if error is codec.ErrorCode.producer_fenced and ctx.api_version < 2:
        error = codec.ErrorCode.invalid_producer_epoch
    return dict.fromkeys(partitions, error)


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    if ctx.api_version <= 3:
        old = cast(_RequestV3, request)
        partitions = list(dict.fromkeys((t.name, p) for t in old.v3_and_below_topics for p in t.partitions))
        errors = _add(
            ctx,
            old.v3_and_below_transactional_id,
            old.v3_and_below_producer_id,
            old.v3_and_below_producer_epoch,
            partitions,
            verify_only=False,
        )
        return codec.build_response(request, {"results_by_topic_v3_and_below": _results(errors)})
    transactions = cast(_RequestV4, request).transactions
    results = []
    for txn in transactions:
        partitions = list(dict.fromkeys((t.name, p) for t in txn.topics for p in t.partitions))
        errors = _add(
            ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions, txn.verify_only
        )
        results.append({"transactional_id": txn.transactional_id, "topic_results": _results(errors)})
    return codec.build_response(
        request, {"error_code": codec.ErrorCode.none, "results_by_transaction": results}
    )


SPEC = HandlerSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, handle, blocking=True)
