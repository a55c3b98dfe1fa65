"""TxnOffsetCommit (28), v0–5: a transactional producer commits a group's offsets (KIP-98/447).

The offsets are written to the group's ``__consumer_offsets`` partition in a transactional batch
and stay invisible (OffsetFetch does not return them; with ``require_stable`` it answers
UNSTABLE_OFFSET_COMMIT) until the transaction's COMMIT marker reaches that partition; an ABORT
drops them (``GroupCoordinator.commit_transactional_offsets`` / ``complete_transaction``).

Checks, in Kafka's order: the transaction must be Ongoing with the group's offsets partition in
it (AddOffsetsToTxn first) and the producer id and epoch current (KIP-890 verification; the
append happens under the transaction's lock); then the group: generation -1 with no member is a
"simple" commit, anything else (v3+, KIP-447) must name a current member and generation. A
fenced epoch is INVALID_PRODUCER_EPOCH; a group partition that is not in the transaction is
INVALID_TXN_STATE before v4, TRANSACTION_ABORTABLE from v4 (Kafka's
``txnOffsetCommitRequestVersionToTransactionSupportedOperation``). v5 is a transactions-version-2
producer's (KIP-890 part 2): it sends no AddOffsetsToTxn, and the commit itself adds the group's
offsets partition to the transaction.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.groups import OFFSETS_TOPIC, partition_for
from kompakt.broker.handlers.add_offsets_to_txn import offsets_partitions
from kompakt.broker.handlers.offset_commit import CommitErrors, commit_entries, record_results
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import txn_offset_commit as m


def _commit(ctx: RequestContext, request: m.TxnOffsetCommitRequest) -> CommitErrors:
    keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    broker = ctx.broker
    coordinator = broker.txn
    if coordinator is None:
        return dict.fromkeys(keys, codec.ErrorCode.coordinator_not_available)
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return dict.fromkeys(keys, codec.ErrorCode.transactional_id_authorization_failed)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return dict.fromkeys(keys, codec.ErrorCode.group_authorization_failed)
    if not request.group_id:
        return dict.fromkeys(keys, codec.ErrorCode.invalid_group_id)
    offsets_tp = (OFFSETS_TOPIC, partition_for(request.group_id, offsets_partitions(ctx)))
    with coordinator.verified(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        [offsets_tp],
        add=ctx.api_version > 4,
    ) as verified:
        error = verified[offsets_tp]
        if error is codec.ErrorCode.producer_fenced:
            error = codec.ErrorCode.invalid_producer_epoch
        elif error is codec.ErrorCode.transaction_abortable and ctx.api_version < 4:
            error = codec.ErrorCode.invalid_txn_state
        if error is codec.ErrorCode.none:
            error = broker.groups.validate_transactional_commit(
                request.group_id, request.generation_id, request.member_id, ctx.api_version
            )
        if error is not codec.ErrorCode.none:
            return dict.fromkeys(keys, error)
        errors, entries = commit_entries(ctx, request.topics)
        results = broker.groups.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, entries
        )
        record_results(errors, entries, results)
        return errors


def handle(ctx: RequestContext, request: m.TxnOffsetCommitRequest) -> m.TxnOffsetCommitResponse:
    errors = _commit(ctx, request)
    return m.TxnOffsetCommitResponse(
        topics=[
            m.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    m.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


SPEC = HandlerSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 5, handle, blocking=True)
