"""TxnOffsetCommit (28), v0–4: a transactional producer commits a group's offsets (KIP-98/447).

The offsets are written to the group's ``__consumer_offsets`` partition in a transactional batch
and stay invisible (OffsetFetch does not return them; with ``require_stable`` it answers
UNSTABLE_OFFSET_COMMIT) until the transaction's COMMIT marker reaches that partition; an ABORT
drops them (``GroupCoordinator.commit_transactional_offsets`` / ``complete_transaction``).

Checks, in Kafka's order: the transaction must be Ongoing with the group's offsets partition in
it (AddOffsetsToTxn first) and the producer id and epoch current (KIP-890 verification; the
append happens under the transaction's lock); then the group: generation -1 with no member is a
"simple" commit, anything else (v3+, KIP-447) must name a current member and generation. A
fenced epoch is INVALID_PRODUCER_EPOCH; a group partition that is not in the transaction is
INVALID_TXN_STATE (TRANSACTION_ABORTABLE is only for v5+, which is not offered).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.groups import OFFSETS_TOPIC, OffsetCommitEntry, partition_for
from kompakt.broker.handlers.add_offsets_to_txn import offsets_partitions
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Partition(Protocol):
    partition_index: int
    committed_offset: int
    committed_metadata: str | None


class _Topic(Protocol):
    name: str
    partitions: Sequence[_Partition]


class _Request(Protocol):
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: Sequence[_Topic]


def _commit(ctx: RequestContext, req: _Request) -> dict[tuple[str, int], codec.ErrorCode]:
    wanted = [(t.name, p) for t in req.topics for p in t.partitions]
    keys = [(topic, p.partition_index) for topic, p in wanted]
    broker = ctx.broker
    coordinator = broker.txn
    if coordinator is None:
        return dict.fromkeys(keys, codec.ErrorCode.coordinator_not_available)
    if not req.group_id:
        return dict.fromkeys(keys, codec.ErrorCode.invalid_group_id)
    offsets_tp = (OFFSETS_TOPIC, partition_for(req.group_id, offsets_partitions(ctx)))
    with coordinator.verified(
        req.transactional_id, req.producer_id, req.producer_epoch, [offsets_tp]
    ) as verified:
        error = verified[offsets_tp]
        if error is codec.ErrorCode.producer_fenced:
            error = codec.ErrorCode.invalid_producer_epoch
        elif error is codec.ErrorCode.transaction_abortable:
            error = codec.ErrorCode.invalid_txn_state
        if error is codec.ErrorCode.none:
            error = broker.groups.validate_transactional_commit(
                req.group_id,
                getattr(req, "generation_id", -1),
                getattr(req, "member_id", ""),
                ctx.api_version,
            )
        if error is not codec.ErrorCode.none:
            return dict.fromkeys(keys, error)
        errors: dict[tuple[str, int], codec.ErrorCode] = {}
        entries: list[OffsetCommitEntry] = []
        for topic, p in wanted:
            if not broker.partition_exists(topic, p.partition_index):
                errors[(topic, p.partition_index)] = codec.ErrorCode.unknown_topic_or_partition
            else:
                epoch: int = getattr(p, "committed_leader_epoch", -1)
                entries.append(
                    OffsetCommitEntry(
                        topic, p.partition_index, p.committed_offset, epoch, p.committed_metadata
                    )
                )
        results = broker.groups.commit_transactional_offsets(
            req.group_id, req.producer_id, req.producer_epoch, entries
        )
        for entry, entry_error in zip(entries, results, strict=True):
            errors[(entry.topic, entry.partition)] = entry_error
        return errors


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    errors = _commit(ctx, req)
    return codec.build_response(
        request,
        {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": errors[(t.name, p.partition_index)],
                        }
                        for p in t.partitions
                    ],
                }
                for t in req.topics
            ]
        },
    )


SPEC = HandlerSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 4, handle, blocking=True)
