"""CurrentAssignmentBuilder's rules: revoke before assign, withhold partitions others still own."""

from __future__ import annotations

import uuid

import pytest

from kompakt.broker.groups.consumer.reconciliation import MemberAssignmentState, MemberState, reconcile
from kompakt.broker.groups.errors import FencedMemberEpochError

T = uuid.UUID(int=7)


def free(_topic: uuid.UUID, _partition: int) -> int:
    return -1


def parts(*p: int) -> dict[uuid.UUID, frozenset[int]]:
    return {T: frozenset(p)} if p else {}


def test_stable_member_gets_a_free_target_at_once() -> None:
    member = MemberAssignmentState(member_epoch=1, previous_member_epoch=0)
    after = reconcile(member, 2, parts(0, 1), free, [])
    assert (after.member_epoch, after.previous_member_epoch, after.state) == (2, 1, MemberState.STABLE)
    assert after.assigned_partitions == parts(0, 1)


def test_revocation_comes_first_and_waits_for_the_member() -> None:
    member = MemberAssignmentState(
        member_epoch=2, previous_member_epoch=1, assigned_partitions=parts(0, 1, 2)
    )
    revoking = reconcile(member, 3, parts(0), free, [(T, (0, 1, 2))])
    assert revoking.state is MemberState.UNREVOKED_PARTITIONS
    assert revoking.member_epoch == 2  # stays in its epoch until it has let go
    assert revoking.assigned_partitions == parts(0)
    assert revoking.partitions_pending_revocation == parts(1, 2)
    # still reports partition 2: no progress
    assert reconcile(revoking, 3, parts(0), free, [(T, (0, 2))]) is revoking
    done = reconcile(revoking, 3, parts(0), free, [(T, (0,))])
    assert (done.state, done.member_epoch, done.partitions_pending_revocation) == (MemberState.STABLE, 3, {})


def test_partitions_owned_by_another_member_are_withheld() -> None:
    owner_epochs = {(T, 1): 4}
    member = MemberAssignmentState(member_epoch=4, previous_member_epoch=3, assigned_partitions=parts(0))
    after = reconcile(member, 5, parts(0, 1), lambda t, p: owner_epochs.get((t, p), -1), [(T, (0,))])
    assert after.state is MemberState.UNRELEASED_PARTITIONS
    assert (after.member_epoch, after.assigned_partitions) == (5, parts(0))
    owner_epochs.clear()  # the other member revoked it
    released = reconcile(after, 5, parts(0, 1), free, [(T, (0,))])
    assert (released.state, released.assigned_partitions) == (MemberState.STABLE, parts(0, 1))


def test_unknown_state_fences_a_member_that_owns_partitions() -> None:
    member = MemberAssignmentState(member_epoch=3, state=MemberState.UNKNOWN)
    with pytest.raises(FencedMemberEpochError):
        reconcile(member, 4, parts(0), free, [(T, (0,))])
    assert reconcile(member, 4, parts(0), free, []).member_epoch == 4
