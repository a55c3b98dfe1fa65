"""The broker's reader positions for the cleaner's hold: committed offsets from the group
coordinator, named groups that exist (from 0 where they have nothing), backups' groups; a deleted
group or one whose offsets expired stops holding. Manual clock."""

from __future__ import annotations

from kompakt.broker.groups import GroupConfig, GroupCoordinator, GroupLog, OffsetCommitEntry
from kompakt.broker.readers import BACKUP_READER_PREFIX, GroupReaderPositions
from kompakt.clock import FakeClock

RETENTION_MINUTES = 10


def _setup() -> tuple[FakeClock, GroupCoordinator, GroupReaderPositions]:
    clock = FakeClock()
    config = GroupConfig(offsets_retention_minutes=RETENTION_MINUTES)
    coordinator = GroupCoordinator(config, clock, GroupLog.scratch(clock))
    return clock, coordinator, GroupReaderPositions(coordinator)


def _commit(coordinator: GroupCoordinator, group: str, topic: str, partition: int, offset: int) -> None:
    errors = coordinator.commit_offsets(
        group, -1, "", None, [OffsetCommitEntry(topic, partition, offset, -1, None)]
    )
    assert [e.name for e in errors] == ["none"]


def test_named_groups_hold_from_their_offset_or_from_zero_and_every_group_is_reported() -> None:
    _, coordinator, positions = _setup()
    _commit(coordinator, "named", "t", 0, 40)
    _commit(coordinator, "elsewhere", "other", 0, 7)  # exists, nothing on t-0
    _commit(coordinator, "unnamed", "t", 0, 3)
    _commit(coordinator, f"{BACKUP_READER_PREFIX}nightly", "t", 0, 25)
    readers = positions.positions("t", 0, ("named", "elsewhere", "never-seen"))
    assert dict(readers.committed) == {"named": 40, "unnamed": 3, f"{BACKUP_READER_PREFIX}nightly": 25}
    assert dict(readers.holding) == {"named": 40, "elsewhere": 0, f"{BACKUP_READER_PREFIX}nightly": 25}


def test_a_deleted_group_stops_holding() -> None:
    _, coordinator, positions = _setup()
    _commit(coordinator, "named", "t", 0, 40)
    assert dict(positions.positions("t", 0, ("named",)).holding) == {"named": 40}
    assert [(g, e.name) for g, e in coordinator.delete_groups(["named"])] == [("named", "none")]
    readers = positions.positions("t", 0, ("named",))
    assert dict(readers.holding) == {} and dict(readers.committed) == {}


def test_a_group_whose_offsets_expired_stops_holding() -> None:
    clock, coordinator, positions = _setup()
    _commit(coordinator, "named", "t", 0, 40)
    clock.advance(RETENTION_MINUTES * 60_000 + 1)
    coordinator.expire_offsets()
    assert dict(positions.positions("t", 0, ("named",)).holding) == {}
