"""DescribeLogDirs (35), v1–4: the data directory, its partitions' sizes, and its volume.

kompakt has one data directory (Kafka's ``log.dirs`` with one entry). As in Kafka's
``ReplicaManager.describeLogDirs``: null topics means every partition; a requested partition that
is not here is left out, and so is a topic with none; the offset lag is 0 (the leader's high
watermark minus its own log end offset, floored at 0); v4 adds the volume's total and usable bytes.

The answer is bounded by what the broker hosts, whatever the request names: a topic that is not
here is skipped without looking at its partitions, and the partitions of one that is are looked up
one by one, without a set of the requested pairs (a 4 MB request naming a million partitions of an
unknown topic made one of a million tuples, 110 MB, that the process kept).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from kompakt.broker.acl.model import AclOperation
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.log.manager import TopicPartition
from kompakt.log.partition_log import PartitionLog
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_log_dirs as m


def _selected(
    hosted: Mapping[TopicPartition, PartitionLog], requested: Sequence[m.DescribableLogDirTopic] | None
) -> list[tuple[TopicPartition, PartitionLog]]:
    """The hosted partitions the request names (all of them for null topics), in order."""
    if requested is None:
        return sorted(hosted.items())
    by_topic: dict[str, dict[int, PartitionLog]] = {}
    for (topic, partition), partition_log in hosted.items():
        by_topic.setdefault(topic, {})[partition] = partition_log
    chosen: dict[TopicPartition, PartitionLog] = {}
    for requested_topic in requested:
        here = by_topic.get(requested_topic.topic)
        if not here:
            continue
        for partition in requested_topic.partitions:
            found = here.get(partition)
            if found is not None:
                chosen[(requested_topic.topic, int(partition))] = found
    return sorted(chosen.items())


def handle(ctx: RequestContext, request: m.DescribeLogDirsRequest) -> m.DescribeLogDirsResponse:
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        return m.DescribeLogDirsResponse(error_code=codec.ErrorCode.cluster_authorization_failed, results=[])
    logs = ctx.broker.logs
    by_topic: dict[str, list[m.DescribeLogDirsPartition]] = {}
    for (topic, partition), partition_log in _selected(logs.logs(), request.topics):
        by_topic.setdefault(topic, []).append(
            m.DescribeLogDirsPartition(
                partition_index=partition,
                partition_size=partition_log.size_bytes,
                offset_lag=max(partition_log.high_watermark - partition_log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    data_dir = os.path.abspath(logs.data_dir)
    result = m.DescribeLogDirsResult(error_code=codec.ErrorCode.none, log_dir=data_dir, topics=[])
    try:
        volume = os.statvfs(data_dir)
    except OSError:
        result.error_code = codec.ErrorCode.kafka_storage_error
    else:
        result.topics = [
            m.DescribeLogDirsTopic(name=topic, partitions=parts) for topic, parts in by_topic.items()
        ]
        result.total_bytes = volume.f_blocks * volume.f_frsize
        result.usable_bytes = volume.f_bavail * volume.f_frsize
    return m.DescribeLogDirsResponse(error_code=codec.ErrorCode.none, results=[result])


SPEC = HandlerSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, handle, blocking=True)
