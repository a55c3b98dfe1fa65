"""StandardAuthorizer's matching rules, on the authorizer itself and against a model.

The model is the rule as Kafka's documentation states it (not its sorted-array search): the ACLs
that apply are those on the literal name, the ``*`` wildcard and any matching prefix, for the
caller's principal or ``User:*``, from the caller's host or ``*``; a DENY of the operation (or ALL)
wins; an ALLOW of the operation, of ALL, or of one that implies it, allows; otherwise the default.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.broker.acl.authorizer import Authorizer
from kompakt.broker.acl.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kompakt.broker.acl.store import ACLS_FILE, AclStore, CorruptAclStoreError

Op, R, P = AclOperation, ResourceType, PatternType
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY


def binding(
    name: str,
    op: AclOperation,
    permission: PermissionType = ALLOW,
    *,
    rtype: ResourceType = R.TOPIC,
    pattern: PatternType = P.LITERAL,
    principal: str = "User:alice",
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, permission)
    )


def authorizer(*bindings: AclBinding, allow_if_no_acl: bool = False) -> Authorizer:
    auth = Authorizer(None, super_users={"User:admin"}, allow_if_no_acl=allow_if_no_acl)
    assert auth.create(list(bindings)) == [None] * len(bindings)
    return auth


def allowed(auth: Authorizer, op: AclOperation, name: str = "orders", *, principal: str = "User:alice",
            host: str = "10.0.0.1", rtype: ResourceType = R.TOPIC) -> bool:  # fmt: skip
    return auth.authorize(principal, host, op, rtype, name)


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not allowed(authorizer(), Op.READ)
    assert allowed(authorizer(allow_if_no_acl=True), Op.READ)
    # An ACL for someone else does not count as one for alice: the default still decides.
    assert allowed(
        authorizer(binding("orders", Op.READ, DENY, principal="User:bob"), allow_if_no_acl=True), Op.READ
    )


def test_deny_beats_allow_whatever_the_pattern() -> None:
    auth = authorizer(binding("orders", Op.READ), binding("ord", Op.READ, DENY, pattern=P.PREFIXED))
    assert not allowed(auth, Op.READ)
    auth = authorizer(binding("*", Op.ALL), binding("orders", Op.WRITE, DENY))
    assert not allowed(auth, Op.WRITE) and allowed(auth, Op.READ)
    # Deny wins over allow.everyone too.
    assert not allowed(authorizer(binding("orders", Op.READ, DENY), allow_if_no_acl=True), Op.READ)


def test_literal_prefixed_and_wildcard_resources() -> None:
    auth = authorizer(binding("pay", Op.READ, pattern=P.PREFIXED), binding("audit", Op.READ))
    assert allowed(auth, Op.READ, "payments") and allowed(auth, Op.READ, "pay")
    assert not allowed(auth, Op.READ, "repay")
    assert allowed(auth, Op.READ, "audit") and not allowed(auth, Op.READ, "audit-2")  # literal is exact
    assert allowed(authorizer(binding("*", Op.READ)), Op.READ, "anything")
    # A PREFIXED "*" is a prefix, not the wildcard.
    assert not allowed(authorizer(binding("*", Op.READ, pattern=P.PREFIXED)), Op.READ, "anything")


def test_principal_and_host_must_match() -> None:
    auth = authorizer(binding("orders", Op.READ, host="10.0.0.1"))
    assert allowed(auth, Op.READ, host="10.0.0.1") and not allowed(auth, Op.READ, host="10.0.0.2")
    assert not allowed(auth, Op.READ, principal="User:bob", host="10.0.0.1")
    everyone = authorizer(binding("orders", Op.READ, principal="User:*"))
    assert allowed(everyone, Op.READ, principal="User:bob")


def test_super_user_ignores_denies() -> None:
    auth = authorizer(binding("*", Op.ALL, DENY, principal="User:*"))
    assert allowed(auth, Op.DELETE, principal="User:admin")
    assert not allowed(auth, Op.DELETE)


def test_implied_operations_only_for_allow() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        auth = authorizer(binding("orders", op))
        assert allowed(auth, Op.DESCRIBE) and not allowed(auth, Op.DESCRIBE_CONFIGS)
    assert allowed(authorizer(binding("orders", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not allowed(authorizer(binding("orders", Op.CREATE)), Op.DESCRIBE)
    # A DENY of READ does not deny DESCRIBE, a DENY of ALL does.
    auth = authorizer(binding("orders", Op.ALL), binding("orders", Op.READ, DENY))
    assert allowed(auth, Op.DESCRIBE) and not allowed(auth, Op.READ)
    assert not allowed(authorizer(binding("orders", Op.ALL), binding("orders", Op.ALL, DENY)), Op.DESCRIBE)


def test_authorize_by_resource_type() -> None:
    def any_topic_write(*bindings: AclBinding) -> bool:
        return authorizer(*bindings).authorize_by_resource_type("User:alice", "10.0.0.1", Op.WRITE, R.TOPIC)

    assert not any_topic_write()
    assert any_topic_write(binding("orders", Op.WRITE))
    assert not any_topic_write(
        binding("orders", Op.WRITE), binding("ord", Op.WRITE, DENY, pattern=P.PREFIXED)
    )
    assert any_topic_write(binding("orders", Op.WRITE), binding("pay", Op.WRITE, DENY, pattern=P.PREFIXED))
    assert not any_topic_write(binding("orders", Op.WRITE), binding("*", Op.WRITE, DENY))
    assert not any_topic_write(binding("orders", Op.READ))


def test_create_validates_as_kafka() -> None:
    auth = authorizer()
    results = auth.create(
        [
            binding("other", Op.ALTER, rtype=R.CLUSTER),
            binding("", Op.READ),
            binding("orders", Op.READ, pattern=P.MATCH),
            binding("orders", Op.ANY),
            binding("orders", Op.READ, principal="alice"),
            binding(CLUSTER_NAME, Op.ALTER, rtype=R.CLUSTER),
        ]
    )
    assert results == [
        "The only valid name for the CLUSTER resource is kafka-cluster",
        "Invalid empty resource name specified",
        "Invalid patternType MATCH",
        "Invalid operation ANY",
        "Could not parse principal from `alice` (no colon is present separating the principal type from "
        "the principal name)",
        None,
    ]
    assert auth.bindings() == (binding(CLUSTER_NAME, Op.ALTER, rtype=R.CLUSTER),)


def test_acls_survive_a_restart_and_a_corrupt_file_is_refused(tmp_path: Path) -> None:
    first = Authorizer(AclStore(tmp_path))
    first.create([binding("orders", Op.READ), binding("pay", Op.WRITE, DENY, pattern=P.PREFIXED)])
    again = Authorizer(AclStore(tmp_path))
    assert set(again.bindings()) == set(first.bindings())
    assert allowed(again, Op.READ) and not allowed(again, Op.WRITE, "payments")
    (tmp_path / ACLS_FILE).write_text("{not json")
    with pytest.raises(CorruptAclStoreError, match=ACLS_FILE):
        Authorizer(AclStore(tmp_path))


# ---- the model ------------------------------------------------------------------------------

_IMPLIES = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}
_OPS = [Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.DELETE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]
_NAMES = ["a", "ab", "abc", "b", "*"]


def model(
    bindings: list[AclBinding], principal: str, host: str, op: AclOperation, name: str, default: bool
) -> bool:
    def applies(b: AclBinding) -> bool:
        p, e = b.pattern, b.entry
        resource = (p.pattern_type == P.LITERAL and p.name in (name, "*")) or (
            p.pattern_type == P.PREFIXED and name.startswith(p.name)
        )
        return resource and e.principal in (principal, "User:*") and e.host in (host, "*")

    mine = [b.entry for b in bindings if applies(b)]
    if any(e.permission == DENY and e.operation in (op, Op.ALL) for e in mine):
        return False
    if any(
        e.permission == ALLOW and (e.operation in (op, Op.ALL) or e.operation in _IMPLIES.get(op, ()))
        for e in mine
    ):
        return True
    return default


bindings_strategy = st.lists(
    st.builds(
        binding,
        st.sampled_from(_NAMES),
        st.sampled_from(_OPS),
        st.sampled_from([ALLOW, DENY]),
        pattern=st.sampled_from([P.LITERAL, P.PREFIXED]),
        principal=st.sampled_from(["User:alice", "User:bob", "User:*"]),
        host=st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    ),
    max_size=8,
)


@settings(max_examples=300)
@given(
    bindings=bindings_strategy,
    principal=st.sampled_from(["User:alice", "User:bob", "User:admin"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from(_OPS[1:]),
    name=st.sampled_from(["a", "ab", "abc", "b", "ba"]),
    default=st.booleans(),
)
def test_authorize_agrees_with_the_model(
    bindings: list[AclBinding], principal: str, host: str, op: AclOperation, name: str, default: bool
) -> None:
    auth = authorizer(*bindings, allow_if_no_acl=default)
    expected = principal == "User:admin" or model(bindings, principal, host, op, name, default)
    assert auth.authorize(principal, host, op, R.TOPIC, name) == expected
