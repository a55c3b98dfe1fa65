"""Topic auto-creation, shared by Metadata and Produce.

Kafka creates an unknown topic when a client asks for it with ``allow_auto_topic_creation`` and
the broker's ``auto.create.topics.enable`` is on, with ``num.partitions`` partitions and no
overrides. Internal names (``__consumer_offsets``) are never auto-created by a client request.
"""

from __future__ import annotations

import logging

from kompakt.broker.context import OFFSETS_TOPIC, Broker
from kompakt.errors import TopicExistsError
from kompakt.log.topic_store import TopicMetadata

log = logging.getLogger(__name__)


def auto_create_topic(broker: Broker, name: str) -> TopicMetadata | None:
    """Create ``name`` if the broker allows it; the topic's metadata, or None when not allowed.

    Raises InvalidTopicError for an illegal name (Kafka's INVALID_TOPIC_EXCEPTION).
    """
    config = broker.broker_config
    if not config.auto_create_topics_enable or name == OFFSETS_TOPIC:
        return None
    logs = broker.logs
    try:
        meta = logs.create_topic(name, config.num_partitions)
    except TopicExistsError:
        return logs.topics().get(name)
    log.info("Auto-created topic %s with %d partition(s)", name, meta.partitions)
    return meta
