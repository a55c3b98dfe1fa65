"""KIP-430 authorized operations: what the caller may do on a topic, a group or the cluster.

Metadata, DescribeCluster and DescribeGroups can ask which operations the caller may perform on a
topic, the cluster or a group. Kafka (``AuthHelper.authorizedOperations``) asks its authorizer
about every operation its ACLs know for the resource type (``AclEntry.supportedOperations``) and
reports those allowed; without an authorizer, all of them. The answer is a bit field with bit
``1 << op.code`` per operation (``Utils.to32BitField``). Not asked for, the field keeps its schema
default ``Integer.MIN_VALUE``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kompakt.broker.acl.model import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kompakt.broker.context import RequestContext


#: The schema default of every ``*_authorized_operations`` field: "not requested".
NOT_REQUESTED = -(2**31)

_OPS = AclOperation
TOPIC_OPERATIONS = frozenset(
    {_OPS.READ, _OPS.WRITE, _OPS.CREATE, _OPS.DESCRIBE, _OPS.DELETE, _OPS.ALTER, _OPS.DESCRIBE_CONFIGS,
     _OPS.ALTER_CONFIGS}
)  # fmt: skip
GROUP_OPERATIONS = frozenset(
    {_OPS.READ, _OPS.DESCRIBE, _OPS.DELETE, _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS}
)
CLUSTER_OPERATIONS = frozenset(
    {_OPS.CREATE, _OPS.CLUSTER_ACTION, _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS, _OPS.IDEMPOTENT_WRITE,
     _OPS.ALTER, _OPS.DESCRIBE}
)  # fmt: skip


def bit_field(operations: frozenset[AclOperation]) -> int:
    """``Utils.to32BitField``: one bit per operation code."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


#: What each resource type reports when the caller asks (no authorizer: everything).
TOPIC_AUTHORIZED_OPERATIONS = bit_field(TOPIC_OPERATIONS)
GROUP_AUTHORIZED_OPERATIONS = bit_field(GROUP_OPERATIONS)
CLUSTER_AUTHORIZED_OPERATIONS = bit_field(CLUSTER_OPERATIONS)


_SUPPORTED = {
    ResourceType.TOPIC: TOPIC_OPERATIONS,
    ResourceType.GROUP: GROUP_OPERATIONS,
    ResourceType.CLUSTER: CLUSTER_OPERATIONS,
}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The caller's operations on one resource as a bit field (every supported one without an
    authorizer, as Kafka reports them)."""
    supported = _SUPPORTED[resource_type]
    if ctx.broker.authorizer is None:
        return bit_field(supported)
    return bit_field(frozenset(op for op in supported if ctx.authorized(op, resource_type, name)))


def cluster_authorized_operations(ctx: RequestContext) -> int:
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
