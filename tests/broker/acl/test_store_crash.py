"""``kompakt-acls.json`` under a crash and a power cut: a CreateAcls or DeleteAcls interrupted at
any file operation leaves, after the cut, exactly the old set or the new one; a change that
returned survives every cut."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kompakt.broker.acl.authorizer import Authorizer
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
from kompakt.broker.acl.store import AclStore
from kompakt.testing.faults import SimulatedCrashError
from kompakt.testing.power_cut import PowerCutFileOps


def binding(name: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL),
        AccessControlEntry("User:alice", "*", AclOperation.READ, PermissionType.ALLOW),
    )


BEFORE = {binding("a"), binding("b")}
EVERYTHING = AclBindingFilter(
    ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, PermissionType.ANY
)


@pytest.mark.parametrize("change", ["create", "delete"])
@pytest.mark.parametrize("seed", range(4))
def test_an_interrupted_change_leaves_the_old_or_the_new_set(tmp_path: Path, change: str, seed: int) -> None:
    after = BEFORE | {binding("c")} if change == "create" else set()
    crash_at = 0
    while True:
        data_dir = tmp_path / f"{change}-{crash_at}"
        data_dir.mkdir()
        Authorizer(AclStore(data_dir)).create(sorted(BEFORE))  # durable before the fault model
        ops = PowerCutFileOps(random.Random(seed * 1000 + crash_at), crash_at=crash_at)
        authorizer = Authorizer(AclStore(data_dir, ops))
        try:
            if change == "create":
                authorizer.create([binding("c")])
            else:
                authorizer.delete([EVERYTHING])
            finished = True
        except SimulatedCrashError:
            finished = False
        ops.cut()
        survived = set(Authorizer(AclStore(data_dir)).bindings())
        if finished:
            assert survived == after  # acknowledged: durable through any cut
            break
        assert survived in (BEFORE, after)
        crash_at += 1
    assert crash_at > 2  # the change really went through several file operations
