"""ACL data as Kafka's ``org.apache.kafka.common.acl`` and ``resource`` packages define it.

The enum codes are the wire codes (CreateAcls/DescribeAcls/DeleteAcls carry them as int8), so a
code a client sends that Kafka does not know parses to ``UNKNOWN``, as Kafka's ``fromCode`` does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Self

#: The name every ACL on the cluster resource carries (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"
#: The resource name or host that matches any (``ResourcePattern.WILDCARD_RESOURCE``, ``*``).
WILDCARD = "*"
#: The principal that matches every principal of its type.
WILDCARD_PRINCIPAL = "User:*"


class _Coded(enum.IntEnum):
    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
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
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def kafka_name(value: enum.Enum) -> str:
    """Kafka's ``toString`` of an ACL enum as kafka-acls prints it (``Read``, ``IdempotentWrite``)."""
    return "".join(part.capitalize() for part in value.name.split("_"))


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """A resource (or a family of them): type, name, LITERAL or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (``User:alice``) from where (a host or ``*``) may or may not do what."""

    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select by (Kafka's ``AclBindingFilter``): ``None``
    strings and ``ANY`` enums match anything; pattern type ``MATCH`` selects every pattern that
    applies to the named resource (the literal name, the ``*`` wildcard and matching prefixes)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def pattern_matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)

    def entry_matches(self, entry: AccessControlEntry) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (PermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_matches(binding.pattern) and self.entry_matches(binding.entry)

    def unknown_reason(self) -> str | None:
        """Why DeleteAcls refuses this filter (``AclControlManager.validateFilter``), or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == AclOperation.UNKNOWN or self.permission == PermissionType.UNKNOWN:
            return "Unknown entryFilter."
        return None


class InvalidAclError(ValueError):
    """A CreateAcls binding Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


def validate_new_binding(binding: AclBinding) -> None:
    """Kafka's CreateAcls checks (``AclApis.handleCreateAcls`` then
    ``AclControlManager.validateNewAcl``), in their order, with their messages."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise InvalidAclError("Invalid empty resource name specified")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAclError(f"Invalid resourceType {pattern.resource_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAclError(f"Invalid operation {entry.operation.name}")
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise InvalidAclError(f"Invalid permissionType {entry.permission.name}")
    if ":" not in entry.principal:
        raise InvalidAclError(
            f"Could not parse principal from `{entry.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )
