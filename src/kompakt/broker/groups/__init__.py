"""The classic consumer-group coordinator (sans-IO, clock-injected) and committed offsets."""

from kompakt.broker.groups.config import GroupConfig
from kompakt.broker.groups.coordinator import (
    GroupCoordinator,
    GroupDescription,
    GroupListing,
    JoinRequest,
    MemberDescription,
    OffsetCommitEntry,
)
from kompakt.broker.groups.group import Group, GroupState, JoinedMember, JoinResult, Member, SyncResult
from kompakt.broker.groups.offsets import CommittedOffset, InMemoryOffsetStore, OffsetStore

__all__ = [
    "CommittedOffset",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "GroupState",
    "InMemoryOffsetStore",
    "JoinRequest",
    "JoinResult",
    "JoinedMember",
    "Member",
    "MemberDescription",
    "OffsetCommitEntry",
    "OffsetStore",
    "SyncResult",
]
