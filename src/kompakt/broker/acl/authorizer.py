"""Kafka's ``StandardAuthorizer``: who may do what, decided from ACL bindings.

The decision (``StandardAuthorizerData.authorize``), in order:

1. a super user (``super.users``, ``User:admin;User:ops``) may do anything;
2. the ACLs that apply to the resource are those of its exact literal name, of the literal
   wildcard ``*`` and every PREFIXED pattern the name starts with; of these, an entry applies to
   the caller when its principal is the caller's or ``User:*`` and its host is the client's
   address or ``*``;
3. an applying DENY wins over any ALLOW; a DENY names its operation exactly (or ``ALL``); an
   ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and ALTER_CONFIGS allows
   DESCRIBE_CONFIGS (Kafka's implied operations);
4. no applying ACL at all: ``allow.everyone.if.no.acl.found`` decides (false by default).

``authorize_by_resource_type`` is Kafka's ``Authorizer.authorizeByResourceType``: whether the
caller may do an operation on *some* resource of a type (InitProducerId asks it for WRITE on any
topic, the idempotent producer's alternative to IDEMPOTENT_WRITE on the cluster).

Thread-safety: handlers run on the event loop and in worker threads. Changes are serialized by a
lock, written to the ACL file first and then installed as a new immutable index in one
assignment; checks read the index without a lock, so they never wait for a CreateAcls and never
see a half-applied one, nor one that is not yet durable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

from kompakt.broker.acl.model import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    validate_new_binding,
)
from kompakt.broker.acl.store import AclStore

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def _entry_result(
    operation: AclOperation, principals: Sequence[str], host: str, entry: AccessControlEntry
) -> PermissionType | None:
    """``StandardAuthorizerData.findResult``: ALLOW/DENY if this entry applies, else None."""
    if entry.principal not in principals:
        return None
    if entry.host != WILDCARD and entry.host != host:
        return None
    if entry.operation != AclOperation.ALL:
        if entry.permission == PermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if entry.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if entry.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != entry.operation:
                return None
        elif operation != entry.operation:
            return None
    return entry.permission


class Authorizer:
    """The bindings, the super users and the default, and the decisions made from them."""

    def __init__(
        self, store: AclStore | None, *, super_users: Iterable[str] = (), allow_if_no_acl: bool = False
    ) -> None:
        self._store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._lock = threading.Lock()
        self._bindings: tuple[AclBinding, ...] = ()
        #: The bindings by resource type: a check reads only its type's (Metadata asks per topic).
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._set(tuple(store.load()) if store is not None else ())

    # ---- decisions ----------------------------------------------------------------------

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the named resource."""
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        allowed = False
        index = self._index.get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        for binding in index.applying(name):
            result = _entry_result(operation, principals, host, binding.entry)
            if result == PermissionType.DENY:
                return False
            if result == PermissionType.ALLOW:
                allowed = True
        return allowed or self.allow_if_no_acl

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``Authorizer.authorizeByResourceType``: allowed on at least one resource of the
        type, an ALLOW not dominated by a DENY of the same literal name or of a prefix of it."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[ResourcePattern] = []
        for binding in self._by_type.get(resource_type, ()):
            pattern, entry = binding.pattern, binding.entry
            if entry.host not in (host, WILDCARD) or entry.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if entry.operation not in (operation, AclOperation.ALL):
                continue
            if entry.permission == PermissionType.DENY:
                if pattern.pattern_type == PatternType.LITERAL:
                    if pattern.name == WILDCARD:
                        return False
                    deny_literal.add(pattern.name)
                else:
                    deny_prefixed.add(pattern.name)
            else:
                allows.append(pattern)
        if any(p.pattern_type == PatternType.LITERAL and p.name == WILDCARD for p in allows):
            return True
        for pattern in allows:
            if pattern.pattern_type == PatternType.LITERAL and pattern.name in deny_literal:
                continue
            if any(pattern.name[:i] in deny_prefixed for i in range(1, len(pattern.name) + 1)):
                continue
            return True
        return False

    # ---- the ACL APIs -------------------------------------------------------------------

    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    def describe(self, selector: AclBindingFilter) -> list[AclBinding]:
        return [binding for binding in self._bindings if selector.matches(binding)]

    def create(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add bindings (an existing one is a no-op, as in Kafka); per binding, None or Kafka's
        INVALID_REQUEST message. The valid ones are durable before this returns."""
        errors: list[str | None] = []
        with self._lock:
            current = list(self._bindings)
            present = set(current)
            for binding in bindings:
                try:
                    validate_new_binding(binding)
                except ValueError as error:
                    errors.append(str(error))
                    continue
                errors.append(None)
                if binding not in present:
                    present.add(binding)
                    current.append(binding)
            self._install(current)
        return errors

    def delete(self, selectors: Sequence[AclBindingFilter]) -> list[list[AclBinding] | str]:
        """Remove what each filter matches; per filter, the bindings removed or Kafka's
        INVALID_REQUEST message for a filter it refuses."""
        results: list[list[AclBinding] | str] = []
        with self._lock:
            current = list(self._bindings)
            for selector in selectors:
                reason = selector.unknown_reason()
                if reason is not None:
                    results.append(reason)
                    continue
                removed = [binding for binding in current if selector.matches(binding)]
                results.append(removed)
                if removed:
                    gone = set(removed)
                    current = [binding for binding in current if binding not in gone]
            self._install(current)
        return results

    def _install(self, bindings: list[AclBinding]) -> None:
        new = tuple(bindings)
        if new == self._bindings:
            return
        if self._store is not None:
            self._store.save(new)
        self._set(new)

    def _set(self, bindings: tuple[AclBinding, ...]) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in bindings:
            by_type.setdefault(binding.pattern.resource_type, []).append(binding)
        # One assignment each: a concurrent check sees the old tables or the new ones.
        self._by_type = {rtype: tuple(found) for rtype, found in by_type.items()}
        self._index = {rtype: _TypeIndex(found) for rtype, found in by_type.items()}
        self._bindings = bindings


class _TypeIndex:
    """One resource type's bindings, looked up as Kafka's sorted array is walked: the literal
    name, the literal ``*``, and the PREFIXED patterns the name starts with (one dict lookup per
    prefix length in use), so a check costs the same with ten ACLs or ten thousand."""

    __slots__ = ("_literal", "_prefix_lengths", "_prefixed")

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        literal: dict[str, list[AclBinding]] = {}
        prefixed: dict[str, list[AclBinding]] = {}
        for binding in bindings:
            table = literal if binding.pattern.pattern_type == PatternType.LITERAL else prefixed
            table.setdefault(binding.pattern.name, []).append(binding)
        self._literal = {name: tuple(found) for name, found in literal.items()}
        self._prefixed = {name: tuple(found) for name, found in prefixed.items()}
        self._prefix_lengths = sorted({len(name) for name in prefixed})

    def applying(self, name: str) -> Iterator[AclBinding]:
        yield from self._literal.get(name, ())
        if name != WILDCARD:
            yield from self._literal.get(WILDCARD, ())
        for length in self._prefix_lengths:
            if length > len(name):
                break
            yield from self._prefixed.get(name[:length], ())
