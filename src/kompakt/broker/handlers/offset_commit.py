"""OffsetCommit (8), v2–9.

v2–4 carry a per-request ``retention_time`` (-1 = broker default); v6 adds the committed leader
epoch; v7 adds ``group_instance_id``; v9 (KIP-848) carries a consumer-group member's epoch in
``generation_id_or_member_epoch`` (a stale one is refused with STALE_MEMBER_EPOCH, and a member of
the consumer protocol must use v9). Partitions that do not exist are refused with
UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees them, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.groups import OffsetCommitEntry
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import offset_commit as m

#: ``(topic, partition) -> error`` for every partition a commit names.
CommitErrors = dict[tuple[str, int], codec.ErrorCode]


class CommitPartition(Protocol):
    """A partition of an OffsetCommit or a TxnOffsetCommit request (the two views agree on it)."""

    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class CommitTopic(Protocol):
    """A topic of an OffsetCommit or a TxnOffsetCommit request."""

    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[CommitPartition]: ...


def commit_entries(
    ctx: RequestContext, topics: Sequence[CommitTopic]
) -> tuple[CommitErrors, list[OffsetCommitEntry]]:
    """The partitions of a commit as entries for the group coordinator; those of a topic the
    caller may not READ are TOPIC_AUTHORIZATION_FAILED, the ones this broker does not have
    UNKNOWN_TOPIC_OR_PARTITION, and neither is committed (Kafka's rule for both OffsetCommit
    and TxnOffsetCommit)."""
    broker = ctx.broker
    errors: CommitErrors = {}
    entries: list[OffsetCommitEntry] = []
    for topic in topics:
        readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if not readable:
                errors[(topic.name, p.partition_index)] = codec.ErrorCode.topic_authorization_failed
                continue
            if not broker.partition_exists(topic.name, p.partition_index):
                errors[(topic.name, p.partition_index)] = codec.ErrorCode.unknown_topic_or_partition
                continue
            entries.append(
                OffsetCommitEntry(
                    topic.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata,
                )
            )
    return errors, entries


def record_results(
    errors: CommitErrors, entries: Sequence[OffsetCommitEntry], results: Sequence[codec.ErrorCode]
) -> None:
    """Add the coordinator's answer for each committed entry to ``errors``."""
    for entry, error in zip(entries, results, strict=True):
        errors[(entry.topic, entry.partition)] = error


def handle(ctx: RequestContext, request: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        denied = codec.ErrorCode.group_authorization_failed
        return _answer(
            request, {(t.name, p.partition_index): denied for t in request.topics for p in t.partitions}
        )
    errors, entries = commit_entries(ctx, request.topics)
    # -1 (and the versions without the field) leave the retention to offsets.retention.minutes.
    retention_ms = codec.duration_ms(request.retention_time)
    results = ctx.broker.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        request.group_instance_id,
        entries,
        retention_ms if retention_ms >= 0 else None,
        api_version=ctx.api_version,
    )
    record_results(errors, entries, results)
    return _answer(request, errors)


def _answer(request: m.OffsetCommitRequest, errors: CommitErrors) -> m.OffsetCommitResponse:
    return m.OffsetCommitResponse(
        topics=[
            m.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    m.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


SPEC = HandlerSpec(ApiKey.OFFSET_COMMIT, 2, 9, handle)
