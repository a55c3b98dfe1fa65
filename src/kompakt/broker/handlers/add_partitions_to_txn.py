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

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.txn.metadata import TV_0, TV_2
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import add_partitions_to_txn as m

TopicPartition = tuple[str, int]


def _results(errors: dict[TopicPartition, codec.ErrorCode]) -> list[m.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[m.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            m.AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=error)
        )
    return [
        m.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
        for name, parts in by_topic.items()
    ]


def _partitions(topics: Sequence[m.AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


def _add(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    verify_only: bool,
) -> dict[TopicPartition, codec.ErrorCode]:
    coordinator = ctx.broker.txn
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, codec.ErrorCode.transactional_id_authorization_failed)
    if coordinator is None:
        return dict.fromkeys(partitions, codec.ErrorCode.coordinator_not_available)
    # KafkaApis: one partition refused (no WRITE on its topic, or unknown) fails the request;
    # the others are OPERATION_NOT_ATTEMPTED.
    unwritable = [
        tp for tp in partitions if not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, tp[0])
    ]
    missing = [tp for tp in partitions if tp not in unwritable and not ctx.broker.partition_exists(*tp)]
    if missing or unwritable:
        errors = dict.fromkeys(partitions, codec.ErrorCode.operation_not_attempted)
        errors.update(dict.fromkeys(unwritable, codec.ErrorCode.topic_authorization_failed))
        errors.update(dict.fromkeys(missing, codec.ErrorCode.unknown_topic_or_partition))
        return errors
    if verify_only:
        # Answered as the coordinator decides, at v4 too (Kafka 4.1 translates TRANSACTION_ABORTABLE
        # for old producers on the partition leader, not in this response).
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    # Kafka's transactionVersionForAddPartitionsToTxn: v4+ (a broker adding a partition for a
    # transactions-v2 producer) is version 2.
    version = TV_2 if ctx.api_version > 3 else TV_0
    error = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions, version)
    if error is codec.ErrorCode.producer_fenced and ctx.api_version < 2:
        error = codec.ErrorCode.invalid_producer_epoch
    return dict.fromkeys(partitions, error)


def handle(ctx: RequestContext, request: m.AddPartitionsToTxnRequest) -> m.AddPartitionsToTxnResponse:
    if ctx.api_version <= 3:
        errors = _add(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            _partitions(request.v3_and_below_topics),
            verify_only=False,
        )
        return m.AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(errors))
    if not ctx.authorized_cluster(AclOperation.CLUSTER_ACTION):
        # v4+ is the brokers' verification call (KIP-890): a cluster action.
        return m.AddPartitionsToTxnResponse(
            error_code=codec.ErrorCode.cluster_authorization_failed, results_by_transaction=[]
        )
    results = []
    for txn in request.transactions:
        errors = _add(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            _partitions(txn.topics),
            txn.verify_only,
        )
        results.append(
            m.AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_results(errors))
        )
    return m.AddPartitionsToTxnResponse(error_code=codec.ErrorCode.none, results_by_transaction=results)


SPEC = HandlerSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, handle, blocking=True)
