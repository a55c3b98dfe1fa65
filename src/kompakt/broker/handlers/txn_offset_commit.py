"""TxnOffsetCommit (28), v0–4: a transactional producer commits a group's offsets (KIP-98/447).

The offsets are written to the group's ``__consumer_offsets`` partition in a transactional batch
and stay invisible (OffsetFetch does not return them; with ``require_stable`` it answers
UNSTABLE_OFFSET_COMMIT) until the transaction's COMMIT marker reaches that partition; an ABORT
drops them (``TopicOffsetStore.commit_transactional`` / ``complete_transaction``).

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
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups import CommittedOffset
from kompakt.broker.groups.errors import GroupError
from kompakt.broker.groups.offsets_topic import OFFSETS_TOPIC, TopicOffsetStore, partition_for
from kompakt.broker.handlers.add_offsets_to_txn import offsets_partitions
from kompakt.errors import KompaktError
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


def _group_error(ctx: RequestContext, group_id: str, generation_id: int, member_id: str) -> codec.ErrorCode:
    """``validateOffsetCommit`` of the group's type for a transactional commit: a KIP-848 group
    checks the member epoch (the consumer group metadata's generation), a classic group the
    generation."""
    consumer_groups = ctx.broker.groups.consumer
    if consumer_groups.has_group(group_id):
        try:
            consumer_groups.check_commit(
                group_id, member_id, generation_id, ctx.api_version, transactional=True
            )
        except GroupError as exc:
            return error_code_for(exc)
        return codec.ErrorCode.none
    group = ctx.broker.groups.group(group_id)
    if generation_id < 0 and not member_id:
        return codec.ErrorCode.none
    if group is None:
        return codec.ErrorCode.illegal_generation
    if member_id not in group.members:
        return codec.ErrorCode.unknown_member_id
    if generation_id != group.generation_id:
        return codec.ErrorCode.illegal_generation
    return codec.ErrorCode.none


def _commit(ctx: RequestContext, req: _Request) -> dict[tuple[str, int], codec.ErrorCode]:
    wanted = [(t.name, p) for t in req.topics for p in t.partitions]
    keys = [(topic, p.partition_index) for topic, p in wanted]
    broker = ctx.broker
    store = broker.offset_store
    coordinator = broker.txn
    if coordinator is None or not isinstance(store, TopicOffsetStore):
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
            error = _group_error(
                ctx, req.group_id, getattr(req, "generation_id", -1), getattr(req, "member_id", "")
            )
        if error is not codec.ErrorCode.none:
            return dict.fromkeys(keys, error)
        errors: dict[tuple[str, int], codec.ErrorCode] = {}
        max_metadata = broker.groups.config.offset_metadata_max_bytes  # offset.metadata.max.bytes
        now_ms = broker.clock.now_ms()
        entries: list[tuple[str, int, CommittedOffset]] = []
        for topic, p in wanted:
            key = (topic, p.partition_index)
            if not broker.partition_exists(topic, p.partition_index):
                errors[key] = codec.ErrorCode.unknown_topic_or_partition
            elif p.committed_metadata is not None and len(p.committed_metadata.encode()) > max_metadata:
                errors[key] = codec.ErrorCode.offset_metadata_too_large
            else:
                epoch: int = getattr(p, "committed_leader_epoch", -1)
                entries.append(
                    (
                        topic,
                        p.partition_index,
                        CommittedOffset(p.committed_offset, epoch, p.committed_metadata, now_ms),
                    )
                )
                errors[key] = codec.ErrorCode.none
        try:
            store.commit_transactional(req.group_id, req.producer_id, req.producer_epoch, entries)
        except (KompaktError, OSError):
            return {
                k: codec.ErrorCode.unknown_server_error if e is codec.ErrorCode.none else e
                for k, e in errors.items()
            }
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
