"""The group coordinator: classic and KIP-848 consumer groups and their committed offsets, kept in
``__consumer_offsets`` (Kafka 4.1's ``group-coordinator`` module, split by role as it is).

``coordinator.py`` routes every request to a manager by group type and runs it as "records,
append, replay"; ``classic/`` and ``consumer/`` hold the two membership managers and their group
models, ``offsets.py`` the committed offsets of both, ``migration.py`` the conversion of a live
group between the two protocols, and ``records/`` the record schemas and the log they are written
to. ``docs/design.md`` ("Groups") has the rules the layout keeps.
"""

from kompakt.broker.groups.classic.group import (
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    JoinedMember,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from kompakt.broker.groups.classic.membership import GroupDescription, MemberDescription
from kompakt.broker.groups.config import ConsumerGroupConfig, GroupConfig
from kompakt.broker.groups.coordinator import GroupCoordinator, GroupListing
from kompakt.broker.groups.offsets import OffsetCommitEntry
from kompakt.broker.groups.records.log import OFFSETS_TOPIC, GroupLog
from kompakt.broker.groups.records.placement import partition_for
from kompakt.broker.groups.records.schemas import CommittedOffset

__all__ = [
    "OFFSETS_TOPIC",
    "ClassicGroup",
    "ClassicGroupMember",
    "CommittedOffset",
    "ConsumerGroupConfig",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "GroupLog",
    "GroupState",
    "JoinRequest",
    "JoinResult",
    "JoinedMember",
    "MemberDescription",
    "OffsetCommitEntry",
    "SyncResult",
    "partition_for",
]
