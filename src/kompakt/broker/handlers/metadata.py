"""Metadata (3), v0–12: this node is the whole cluster and leads every partition.

Topics: a null list (v1+), or an empty list at v0, means every topic; an empty list at v1+ means
none, which librdkafka sends constantly as a broker-list refresh, so that path touches no topic.
Unknown topics are auto-created when the request allows it and ``auto.create.topics.enable`` is
on (``topics.auto_create_topic``); otherwise UNKNOWN_TOPIC_OR_PARTITION. Illegal names get
INVALID_TOPIC_EXCEPTION. Partitions report leader = replicas = isr = this node at leader epoch 0;
a partition whose files are offline reports KAFKA_STORAGE_ERROR with no leader. v10+ carry topic
ids; v10+ requests may name a topic by id only. v8+ may ask for the authorized operations of each
topic and (v8–10) of the cluster (KIP-430), the caller's real ones under an authorizer.

Authorization (``KafkaApis.handleTopicMetadataRequest``): a topic the caller may not DESCRIBE is
left out of an all-topics answer and is TOPIC_AUTHORIZATION_FAILED when named (without saying
whether it exists); auto-creating needs CREATE on the cluster or on the topic.
"""

from __future__ import annotations

import uuid

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.authorized_operations import (
    NOT_REQUESTED,
    authorized_operations,
    cluster_authorized_operations,
)
from kompakt.broker.context import OFFSETS_TOPIC, Broker, HandlerSpec, RequestContext
from kompakt.broker.topics import auto_create_topic
from kompakt.errors import InvalidTopicError
from kompakt.log.topic_store import TopicMetadata, validate_topic_name
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import metadata as m

ZERO_UUID = uuid.UUID(int=0)


def _partitions(broker: Broker, meta: TopicMetadata) -> list[m.MetadataResponsePartition]:
    node = broker.node_id
    offline = broker.logs.offline_partitions
    result: list[m.MetadataResponsePartition] = []
    for index in range(meta.partitions):
        if (meta.name, index) in offline:
            result.append(
                m.MetadataResponsePartition(
                    error_code=codec.ErrorCode.kafka_storage_error,
                    partition_index=index,
                    leader_id=-1,
                    leader_epoch=0,
                    replica_nodes=[node],
                    isr_nodes=[],
                    offline_replicas=[node],
                )
            )
            continue
        result.append(
            m.MetadataResponsePartition(
                error_code=codec.ErrorCode.none,
                partition_index=index,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
        )
    return result


def _topic_entry(broker: Broker, meta: TopicMetadata) -> m.MetadataResponseTopic:
    return m.MetadataResponseTopic(
        error_code=codec.ErrorCode.none,
        name=meta.name,
        topic_id=meta.topic_id,
        is_internal=meta.name == OFFSETS_TOPIC,
        partitions=_partitions(broker, meta),
    )


def _error_entry(
    name: str | None, code: codec.ErrorCode, topic_id: uuid.UUID = ZERO_UUID
) -> m.MetadataResponseTopic:
    return m.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[]
    )


def _lookup(ctx: RequestContext, name: str, allow_create: bool) -> m.MetadataResponseTopic:
    broker = ctx.broker
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        # Kafka does not even look: the answer must not tell whether the topic exists.
        return _error_entry(name, codec.ErrorCode.topic_authorization_failed)
    meta = broker.logs.topics().get(name)
    if meta is not None:
        return _topic_entry(broker, meta)
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _error_entry(name, codec.ErrorCode.invalid_topic_exception)
    if allow_create and broker.broker_config.auto_create_topics_enable:
        if not (
            ctx.authorized_cluster(AclOperation.CREATE)
            or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name)
        ):
            return _error_entry(name, codec.ErrorCode.topic_authorization_failed)
        meta = auto_create_topic(broker, name)
        if meta is not None:
            return _topic_entry(broker, meta)
    return _error_entry(name, codec.ErrorCode.unknown_topic_or_partition)


def _requested_topics(
    ctx: RequestContext, requested: tuple[m.MetadataRequestTopic, ...], allow_create: bool
) -> list[m.MetadataResponseTopic]:
    """The named topics (v10+ may name one by id only), in the order asked."""
    broker = ctx.broker
    topics: list[m.MetadataResponseTopic] = []
    by_id: dict[uuid.UUID, TopicMetadata] | None = None
    for topic in requested:
        name = topic.name
        if name is None:
            topic_id = topic.topic_id or ZERO_UUID
            if by_id is None:
                by_id = {meta.topic_id: meta for meta in broker.logs.topics().values()}
            meta = by_id.get(topic_id)
            if meta is not None and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, meta.name):
                # Topic ids are not secret (Kafka): the id is answered, the name withheld.
                topics.append(_error_entry(None, codec.ErrorCode.topic_authorization_failed, topic_id))
                continue
            topics.append(
                _topic_entry(broker, meta)
                if meta is not None
                else _error_entry(None, codec.ErrorCode.unknown_topic_id, topic_id)
            )
            continue
        topics.append(_lookup(ctx, name, allow_create))
    return topics


def handle(ctx: RequestContext, request: m.MetadataRequest) -> m.MetadataResponse:
    broker = ctx.broker
    requested = request.topics
    topics: list[m.MetadataResponseTopic] = []
    if requested is None or (ctx.api_version == 0 and not requested):
        all_topics = broker.logs.topics()
        # Every topic means every topic the caller may DESCRIBE; the others are not mentioned.
        topics = [
            _topic_entry(broker, all_topics[name])
            for name in sorted(all_topics)
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        ]
    elif requested:
        topics = _requested_topics(ctx, requested, request.allow_auto_topic_creation)
    if ctx.api_version >= 8 and request.include_topic_authorized_operations:
        for entry in topics:
            # Kafka reports them on every topic it answered, unknown ones too, but not on those
            # refused for authorization or named by an unknown id.
            denied = (codec.ErrorCode.unknown_topic_id, codec.ErrorCode.topic_authorization_failed)
            if entry.error_code not in denied and entry.name is not None:
                entry.topic_authorized_operations = authorized_operations(ctx, ResourceType.TOPIC, entry.name)
    include_cluster = 8 <= ctx.api_version <= 10 and request.include_cluster_authorized_operations
    host, port = broker.endpoint(ctx.session.listener_name)
    return m.MetadataResponse(
        brokers=[m.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=cluster_authorized_operations(ctx)
        if include_cluster
        else NOT_REQUESTED,
    )


SPEC = HandlerSpec(ApiKey.METADATA, 0, 12, handle, blocking=True)
