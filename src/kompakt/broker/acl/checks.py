"""Checks several handlers share, as Kafka's ``KafkaApis`` and ``ConfigHelper`` write them."""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import RequestContext
from kompakt.broker.topic_admin import AdminError
from kompakt.broker.topic_admin import ResourceType as ConfigResourceType
from kompakt.protocol.codec import ErrorCode

#: ``Errors.X.message()``, which DescribeConfigs answers with (AlterConfigs answers no message).
_DEFAULT_MESSAGES = {
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}


def check_config_resource(ctx: RequestContext, resource_type: int, name: str, *, alter: bool) -> None:
    """Raise the AdminError Kafka answers when the caller may not describe (DESCRIBE_CONFIGS) or
    alter (ALTER_CONFIGS) one config resource: a broker or its loggers are the cluster's."""
    operation = AclOperation.ALTER_CONFIGS if alter else AclOperation.DESCRIBE_CONFIGS
    if resource_type == ConfigResourceType.TOPIC:
        allowed, code = (
            ctx.authorized(operation, ResourceType.TOPIC, name),
            ErrorCode.topic_authorization_failed,
        )
    elif resource_type == ConfigResourceType.GROUP:
        allowed, code = (
            ctx.authorized(operation, ResourceType.GROUP, name),
            ErrorCode.group_authorization_failed,
        )
    elif resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
        allowed, code = ctx.authorized_cluster(operation), ErrorCode.cluster_authorization_failed
    else:
        return  # answered by the handler's own "unsupported resource type" rule
    if not allowed:
        raise AdminError(code, None if alter else _DEFAULT_MESSAGES[code])
