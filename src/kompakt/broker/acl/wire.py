"""The ACL APIs' wire fields to and from :mod:`.model`, shared by the three handlers."""

from __future__ import annotations

from kompakt.broker.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

#: Kafka's answer to an ACL API on a broker without an authorizer (``AclApis``).
NO_AUTHORIZER = "No Authorizer is configured."


def binding_of(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
        AccessControlEntry(
            principal, host, AclOperation.from_code(operation), PermissionType.from_code(permission)
        ),
    )


def filter_of(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.from_code(resource_type),
        name,
        PatternType.from_code(pattern_type),
        principal,
        host,
        AclOperation.from_code(operation),
        PermissionType.from_code(permission),
    )
