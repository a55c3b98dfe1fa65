"""CreateTopics (19), v2–7: create topics with partitions and config overrides, or only validate.

Each topic succeeds or fails on its own (see :func:`kompakt.broker.topic_admin.create_topic` for the
rules). v5+ answers with the partition count, replication factor and every config of the topic
(so clients need no DescribeConfigs round trip); v7 adds the topic id. A topic named twice in one
request fails with INVALID_REQUEST, as in Kafka, and is not created.
"""

from __future__ import annotations

from kompakt.broker import topic_admin
from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.per_item import answer_each
from kompakt.config.describe import ConfigEntry
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import create_topics as m


def _config(entry: ConfigEntry) -> m.CreatableTopicConfigs:
    return m.CreatableTopicConfigs(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.sensitive,
    )


def _failure(topic: m.CreatableTopic, error: topic_admin.AdminError) -> m.CreatableTopicResult:
    return m.CreatableTopicResult(
        name=topic.name,
        topic_id=topic_admin.ZERO_UUID,
        error_code=error.code,
        error_message=error.message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


def handle(ctx: RequestContext, request: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
    broker = ctx.broker
    # KafkaApis.handleCreateTopicsRequest: CREATE on the cluster, or on each topic.
    cluster_create = ctx.authorized_cluster(AclOperation.CREATE)

    def create(topic: m.CreatableTopic) -> m.CreatableTopicResult:
        if not (cluster_create or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, topic.name)):
            raise topic_admin.AdminError(codec.ErrorCode.topic_authorization_failed, "Authorization failed.")
        created = topic_admin.create_topic(
            broker.logs,
            broker.broker_config,
            broker.node_id,
            topic.name,
            int(topic.num_partitions),
            int(topic.replication_factor),
            [(int(a.partition_index), [int(b) for b in a.broker_ids]) for a in topic.assignments],
            [(c.name, c.value) for c in topic.configs],
            validate_only=request.validate_only,
        )
        if not ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name):
            # ReplicationControlManager: created, but its configs (and sizes) are not shown.
            return m.CreatableTopicResult(
                name=topic.name,
                topic_id=created.topic_id,
                error_code=codec.ErrorCode.none,
                num_partitions=-1,
                replication_factor=-1,
                configs=[],
                topic_config_error_code=codec.ErrorCode.topic_authorization_failed,
            )
        return m.CreatableTopicResult(
            name=topic.name,
            topic_id=created.topic_id,
            error_code=codec.ErrorCode.none,
            num_partitions=created.num_partitions,
            replication_factor=created.replication_factor,
            configs=[_config(entry) for entry in created.configs],
        )

    results = answer_each(
        request.topics, lambda topic: topic.name, create, _failure, duplicate="Duplicate topic name."
    )
    return m.CreateTopicsResponse(topics=results)


SPEC = HandlerSpec(ApiKey.CREATE_TOPICS, 2, 7, handle, blocking=True)
