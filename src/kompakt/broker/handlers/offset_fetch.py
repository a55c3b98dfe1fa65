"""OffsetFetch (9), v1–9.

v2 makes ``topics`` nullable (null = every partition the group committed) and adds a top-level error
code; v5 returns the committed leader epoch; v7 adds ``require_stable``: a partition with a
transactional commit still undecided answers UNSTABLE_OFFSET_COMMIT (retriable), as Kafka does, so
an exactly-once consumer never starts from an offset its producer's transaction may still move;
v8 batches groups; v9 (KIP-848) names the consumer-group member and its epoch, checked as Kafka's
``ConsumerGroup.validateOffsetFetch`` does (STALE_MEMBER_EPOCH). A partition without a committed
offset answers offset -1 and no error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.errors import GroupError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


class _Topic(Protocol):
    name: str
    partition_indexes: Sequence[int]


class _Group(Protocol):
    group_id: str
    topics: Sequence[_Topic] | None


class _SingleGroupRequest(Protocol):
    """v1–7."""

    group_id: str
    topics: Sequence[_Topic] | None


class _BatchRequest(Protocol):
    """v8."""

    groups: Sequence[_Group]


def _topics(
    ctx: RequestContext, group_id: str, topics: Sequence[_Topic] | None, require_stable: bool = False
) -> list[dict[str, object]]:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    by_topic: dict[str, list[dict[str, object]]] = {}
    groups = ctx.broker.groups
    for topic, partition, committed in groups.fetch_offsets(group_id, wanted):
        if require_stable and groups.has_pending_transactional(group_id, topic, partition):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": codec.ErrorCode.unstable_offset_commit,
                }
            )
            continue
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": committed.offset if committed else -1,
                "committed_leader_epoch": committed.leader_epoch if committed else -1,
                "metadata": (committed.metadata if committed else None) or "",
                "error_code": codec.ErrorCode.none,
            }
        )
    if topics is not None:
        for topic_request in topics:
            by_topic.setdefault(topic_request.name, [])
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    if ctx.api_version >= 8:
        batch = cast(_BatchRequest, request)
        groups = []
        for g in batch.groups:
            try:
                ctx.broker.groups.validate_offset_fetch(
                    g.group_id, getattr(g, "member_id", None), getattr(g, "member_epoch", -1)
                )
            except GroupError as exc:
                groups.append({"group_id": g.group_id, "topics": [], "error_code": error_code_for(exc)})
                continue
            groups.append(
                {
                    "group_id": g.group_id,
                    "topics": _topics(
                        ctx, g.group_id, g.topics, bool(getattr(request, "require_stable", False))
                    ),
                    "error_code": codec.ErrorCode.none,
                }
            )
        return codec.build_response(request, {"groups": groups})
    single = cast(_SingleGroupRequest, request)
    return codec.build_response(
        request,
        {
            "topics": _topics(
                ctx, single.group_id, single.topics, bool(getattr(request, "require_stable", False))
            ),
            "error_code": codec.ErrorCode.none,
        },
    )


SPEC = HandlerSpec(ApiKey.OFFSET_FETCH, 1, 9, handle)
