"""KIP-430 authorized operations, as Kafka reports them without an authorizer.

Metadata, DescribeCluster and DescribeGroups can ask which operations the caller may perform on a
topic, the cluster or a group. kompakt has no authorizer, and Kafka without one
(``AuthHelper.authorizedOperations``) allows every operation its ACLs know for the resource type
(``AclEntry.supportedOperations``), encoded as a bit field with bit ``1 << op.code`` per operation
(``Utils.to32BitField``). Not asked for, the field keeps its schema default ``Integer.MIN_VALUE``.
"""

from __future__ import annotations

import enum


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


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
