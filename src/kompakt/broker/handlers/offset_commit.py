"""OffsetCommit (8), v2–9.

v2–4 carry a per-request ``retention_time`` (-1 = broker default); v6 adds the committed leader
epoch; v7 adds ``group_instance_id``; v9 (KIP-848) carries a consumer-group member's epoch in
``generation_id_or_member_epoch`` (a stale one is refused with STALE_MEMBER_EPOCH, and a member of
the consumer protocol must use v9). Partitions that do not exist are refused with
UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees them, as Kafka does.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.groups import OffsetCommitEntry
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
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    topics: Sequence[_Topic]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    errors: dict[tuple[str, int], codec.ErrorCode] = {}
    entries: list[OffsetCommitEntry] = []
    for topic in req.topics:
        for p in topic.partitions:
            if not ctx.broker.partition_exists(topic.name, p.partition_index):
                errors[(topic.name, p.partition_index)] = codec.ErrorCode.unknown_topic_or_partition
                continue
            leader_epoch: int = getattr(p, "committed_leader_epoch", -1)
            entries.append(
                OffsetCommitEntry(
                    topic.name, p.partition_index, p.committed_offset, leader_epoch, p.committed_metadata
                )
            )
    retention: datetime.timedelta | None = getattr(req, "retention_time", None)
    retention_ms = codec.duration_ms(retention) if retention is not None else None
    results = ctx.broker.groups.commit_offsets(
        req.group_id,
        req.generation_id_or_member_epoch,
        req.member_id,
        getattr(req, "group_instance_id", None),
        entries,
        retention_ms if retention_ms is not None and retention_ms >= 0 else None,
        api_version=ctx.api_version,
    )
    for entry, error in zip(entries, results, strict=True):
        errors[(entry.topic, entry.partition)] = error
    return codec.build_response(
        request,
        {
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": errors[(topic.name, p.partition_index)],
                        }
                        for p in topic.partitions
                    ],
                }
                for topic in req.topics
            ]
        },
    )


SPEC = HandlerSpec(ApiKey.OFFSET_COMMIT, 2, 9, handle)
