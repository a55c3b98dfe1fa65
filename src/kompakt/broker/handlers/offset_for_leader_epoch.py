"""OffsetForLeaderEpoch (23), v2–4: the end offset of a leader epoch, for offset validation.

Every partition has had exactly one leader epoch, 0, so the answer is simple and matches what
Kafka's leader-epoch cache gives for its latest epoch: epoch 0 → ``(0, log end offset)``; any
other requested epoch (newer than ours, or -1) → ``(-1, -1)`` (UNDEFINED_EPOCH and
UNDEFINED_EPOCH_OFFSET, error NONE). ``current_leader_epoch`` (the fencing check) must be -1
or 0: a larger one is UNKNOWN_LEADER_EPOCH. librdkafka uses exactly v2 for consumer position
validation and only truncates when the end offset is below its position, which never happens
here because positions never pass the high watermark, and HW = LEO on a single node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.errors import KompaktError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

LEADER_EPOCH = 0


class _Partition(Protocol):
    partition: int
    current_leader_epoch: int
    leader_epoch: int


class _Topic(Protocol):
    topic: str
    partitions: Sequence[_Partition]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    logs = ctx.broker.logs
    answer = []
    for topic in cast(Sequence[_Topic], getattr(request, "topics", ())):
        partitions = []
        for p in topic.partitions:
            entry: dict[str, object] = {
                "error_code": codec.ErrorCode.none,
                "partition": p.partition,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            try:
                partition_log = logs.get_log(topic.topic, p.partition)
                if p.current_leader_epoch > LEADER_EPOCH:
                    entry["error_code"] = codec.ErrorCode.unknown_leader_epoch
                elif p.leader_epoch == LEADER_EPOCH:
                    entry.update(leader_epoch=LEADER_EPOCH, end_offset=partition_log.log_end_offset)
            except KompaktError as exc:
                entry["error_code"] = error_code_for(exc)
            partitions.append(entry)
        answer.append({"topic": topic.topic, "partitions": partitions})
    return codec.build_response(request, {"topics": answer})


SPEC = HandlerSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, handle)
