"""A write of group records that fails changes nothing and is answered, as Kafka answers it
(``appendGroupMetadataErrorToResponseError``): the records never reach the replay, so the groups
and offsets are as they were, and the request that needed the write hears of it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kompakt.broker.groups import GroupCoordinator, GroupLog, JoinRequest, OffsetCommitEntry
from kompakt.broker.groups.consumer.heartbeat import HeartbeatRequest
from kompakt.errors import LogDirectoryError
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.groups.conftest import GroupsDir


class Disk:
    """Makes every append of group records fail while ``full`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        append = GroupLog.append

        def failing(log: GroupLog, *args: Any, **kwargs: Any) -> None:
            if self.full:
                raise LogDirectoryError("the log directory failed")
            append(log, *args, **kwargs)

        monkeypatch.setattr(GroupLog, "append", failing)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    yield Disk(monkeypatch)


def join(coordinator: GroupCoordinator, member: str = "", instance: str | None = None) -> Any:
    request = JoinRequest("g", member, instance, 10_000, 20_000, "consumer", (("range", b"s"),), "c", "h")
    return coordinator.join(request)


def test_a_failed_assignment_write_answers_the_sync_and_rebalances(groups_dir: GroupsDir, disk: Disk) -> None:
    coordinator = groups_dir.coordinator()
    a = join(coordinator).result()
    disk.full = True
    synced = coordinator.sync("g", a.generation_id, a.member_id, None, None, None, {a.member_id: b"A"})
    assert synced.result().error is E.not_coordinator  # KAFKA_STORAGE_ERROR, as Kafka maps it
    group = coordinator.group("g")
    assert group is not None and group.persisted is None and group.members[a.member_id].assignment == b""
    assert group.state.value == "PreparingRebalance"
    disk.full = False
    rejoined = join(coordinator, a.member_id).result()
    synced = coordinator.sync("g", rejoined.generation_id, a.member_id, None, None, None, {a.member_id: b"A"})
    assert synced.result().assignment == b"A"


def test_a_failed_static_replacement_keeps_the_old_member(groups_dir: GroupsDir, disk: Disk) -> None:
    coordinator = groups_dir.coordinator()
    old = join(coordinator, instance="i").result()
    coordinator.sync("g", old.generation_id, old.member_id, "i", None, None, {old.member_id: b"A"}).result()
    disk.full = True
    replaced = join(coordinator, instance="i").result()
    assert replaced.error is E.not_coordinator
    assert coordinator.heartbeat("g", old.generation_id, old.member_id, "i") is E.none


def test_a_failed_offset_commit_stores_nothing(groups_dir: GroupsDir, disk: Disk) -> None:
    coordinator = groups_dir.coordinator()
    disk.full = True
    entries = [OffsetCommitEntry("t", 0, 5, 0, None)]
    assert coordinator.commit_offsets("g", -1, "", None, entries) == [E.unknown_server_error]
    assert coordinator.fetch_offsets("g", [("t", 0)]) == [("t", 0, None)]


def test_a_failed_consumer_heartbeat_is_an_error_and_creates_no_group(
    groups_dir: GroupsDir, disk: Disk
) -> None:
    coordinator = groups_dir.coordinator()
    disk.full = True
    request = HeartbeatRequest(
        "g",
        str(uuid.uuid4()),
        0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        owned_partitions=[],
    )
    with pytest.raises(LogDirectoryError):
        coordinator.consumer_group_heartbeat(request, 1)
    assert not coordinator.consumer.has_group("g")
    assert coordinator.list_groups() == []
