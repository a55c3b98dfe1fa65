"""The rules the group coordinator's layout keeps (docs/design.md, "Groups"), each checked here:

1. managers decide and raise ``GroupError``s; they never touch the log (no import of it, and no
   append at run time that does not come from the coordinator);
2. only the coordinator appends to ``__consumer_offsets``;
3. the state the log describes (committed and pending offsets, consumer groups, what the log says
   of each classic group) changes only when the coordinator replays records;
4. the tests run on the production format: there is no in-memory offset store any more.

Rules 1-3 are checked while one scenario drives every kind of operation (classic and consumer
groups, offsets, transactions, expiry, deletion, the online migration both ways, timers, a
restart); the last tests show that a manager breaking a rule fails them.
"""

from __future__ import annotations

import ast
import sys
import tomllib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kompakt.broker.groups as groups_package
from kompakt.broker.groups import GroupCoordinator, GroupLog, JoinRequest, OffsetCommitEntry
from kompakt.broker.groups.consumer.heartbeat import HeartbeatRequest
from kompakt.broker.groups.offsets import OffsetManager
from kompakt.broker.groups.records import consumer_protocol as cp
from kompakt.broker.groups.result import Result
from kompakt.clock import FakeClock
from kompakt.log.partition_log import PartitionLog
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.builder import SimpleRecord, build_batch
from tests.broker.groups.conftest import GroupsDir

GROUPS = Path(groups_package.__file__).parent
ROOT = GROUPS.parents[3]
MANAGERS = ["offsets.py", "migration.py", "result.py", "classic", "consumer", "records/schemas.py"]
TOPIC = "orders"


def _manager_files() -> list[Path]:
    files: list[Path] = []
    for name in MANAGERS:
        path = GROUPS / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


# ---------------------------------------------------------------------------------------------- the guards


class Guards:
    """Watches a scenario: every append of group records, and the state the log describes."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.appends = 0
        self._expected: dict[int, object] = {}

    @staticmethod
    def snapshot(coordinator: GroupCoordinator) -> object:
        return (
            coordinator.offsets.snapshot(),
            coordinator.classic.snapshot(),
            coordinator.consumer.snapshot(),
        )

    def replayed(self, coordinator: GroupCoordinator) -> None:
        self._expected[id(coordinator)] = self.snapshot(coordinator)

    def check_unchanged(self, coordinator: GroupCoordinator, where: str) -> None:
        expected = self._expected.get(id(coordinator))
        if expected is not None and self.snapshot(coordinator) != expected:
            self.violations.append(f"state the log describes changed outside replay (seen at {where})")
            self.replayed(coordinator)  # report each change once

    def append_called(self, caller: str) -> None:
        self.appends += 1
        if caller != "_apply":
            self.violations.append(f"GroupLog.append called from {caller}, not GroupCoordinator._apply")

    def partition_append(self) -> None:
        """A ``__consumer_offsets`` append: the nearest groups module on the stack must be the
        group log (the transaction coordinator's markers come from outside the package)."""
        frame = sys._getframe(2)
        while frame is not None:
            path = Path(frame.f_code.co_filename)
            if GROUPS in path.parents:
                if path != GROUPS / "records" / "log.py":
                    self.violations.append(f"{path.relative_to(GROUPS)} appended to __consumer_offsets")
                return
            frame = frame.f_back  # type: ignore[assignment]


@pytest.fixture
def guards(monkeypatch: pytest.MonkeyPatch) -> Guards:
    g = Guards()
    original_apply = GroupCoordinator._apply
    original_replay = GroupCoordinator._replay
    original_load = GroupCoordinator.load
    original_marker = GroupCoordinator.complete_transaction
    original_append = GroupLog.append
    original_partition_append = PartitionLog.append

    def apply(self: GroupCoordinator, result: Result[Any]) -> Any:
        g.check_unchanged(self, "an operation's end, before its records were written")
        return original_apply(self, result)

    def replay(self: GroupCoordinator, *args: Any, **kwargs: Any) -> None:
        original_replay(self, *args, **kwargs)
        g.replayed(self)

    def load(self: GroupCoordinator) -> None:
        original_load(self)
        g.replayed(self)

    def marker(self: GroupCoordinator, *args: Any) -> None:
        original_marker(self, *args)
        g.replayed(self)

    def append(self: GroupLog, *args: Any, **kwargs: Any) -> None:
        g.append_called(sys._getframe(1).f_code.co_name)
        original_append(self, *args, **kwargs)

    def partition_append(self: PartitionLog, *args: Any, **kwargs: Any) -> Any:
        if self.topic == "__consumer_offsets":
            g.partition_append()
        return original_partition_append(self, *args, **kwargs)

    monkeypatch.setattr(GroupCoordinator, "_apply", apply)
    monkeypatch.setattr(GroupCoordinator, "_replay", replay)
    monkeypatch.setattr(GroupCoordinator, "load", load)
    monkeypatch.setattr(GroupCoordinator, "complete_transaction", marker)
    monkeypatch.setattr(GroupLog, "append", append)
    monkeypatch.setattr(PartitionLog, "append", partition_append)
    for name, method in vars(GroupCoordinator).items():
        if callable(method) and not name.startswith("_") and name not in ("load", "complete_transaction"):
            monkeypatch.setattr(GroupCoordinator, name, _checked(g, method, name))
    return g


def _checked(g: Guards, method: Callable[..., Any], name: str) -> Callable[..., Any]:
    def run(self: GroupCoordinator, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        g.check_unchanged(self, f"the end of GroupCoordinator.{name}")
        return result

    return run


# ---------------------------------------------------------------------------------------------- the scenario


def classic_join(
    coordinator: GroupCoordinator, group: str, member: str = "", instance: str | None = None
) -> Any:
    metadata = cp.encode_subscription(cp.Subscription((TOPIC,)), version=1)
    request = JoinRequest(
        group, member, instance, 10_000, 20_000, "consumer", (("range", metadata),), "c", "h"
    )
    return coordinator.join(request).result()


def consumer_heartbeat(
    coordinator: GroupCoordinator, group: str, member: str, epoch: int, owned: Any = None
) -> Any:
    request = HeartbeatRequest(
        group,
        member,
        epoch,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        subscribed_topic_names=(TOPIC,) if epoch == 0 else None,
        owned_partitions=[] if epoch == 0 else owned,
    )
    return coordinator.consumer_group_heartbeat(request, 1)


def exercise(groups_dir: GroupsDir, clock: FakeClock) -> None:
    """Every kind of operation the coordinator runs, each of which writes records."""
    groups_dir.logs.create_topic(TOPIC, 4)
    coordinator = groups_dir.coordinator()
    everything = cp.encode_assignment({TOPIC: [0, 1, 2, 3]}, 1)
    # classic: join, sync (stores the assignment), commit, a static member replaced, leave (Empty)
    a = classic_join(coordinator, "classic", instance="a")
    assert (
        coordinator.sync("classic", 1, a.member_id, "a", None, None, {a.member_id: everything}).result().error
        == E.none
    )
    entry = OffsetCommitEntry(TOPIC, 0, 5, 0, "m")
    assert coordinator.commit_offsets("classic", 1, a.member_id, "a", [entry]) == [E.none]
    replaced = classic_join(coordinator, "classic", instance="a")
    assert replaced.error == E.none
    assert coordinator.leave("classic", [(replaced.member_id, "a")])[0] == E.none
    # offsets: simple commits, OffsetDelete, a topic's deletion, a transaction committed and one aborted
    assert (
        coordinator.commit_offsets("simple", -1, "", None, [entry, OffsetCommitEntry(TOPIC, 1, 6, 0, None)])
        == [E.none] * 2
    )
    assert coordinator.delete_offsets("simple", [(TOPIC, [1])])[0] == E.none
    for producer_id, committed in ((7, True), (8, False)):
        assert coordinator.commit_transactional_offsets("txn", producer_id, 0, [entry]) == [E.none]
        coordinator.complete_transaction(coordinator.partition_of("txn"), producer_id, committed)
    coordinator.on_topic_deleted("gone", [0])
    # consumer groups: two members reconcile, one leaves
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    consumer_heartbeat(coordinator, "modern", first, 0)
    consumer_heartbeat(coordinator, "modern", second, 0)
    assert consumer_heartbeat(coordinator, "modern", second, -1).member_epoch == -1
    # migration: a classic member joins a consumer group, the group goes back to classic, forward again
    consumer_heartbeat(coordinator, "mixed", first, 0)
    k = classic_join(coordinator, "mixed")
    assert (
        k.error == E.none
        and coordinator.sync("mixed", k.generation_id, k.member_id, None, None, None, {}).result().error
        == E.none
    )
    consumer_heartbeat(coordinator, "mixed", first, -1)
    assert {g.group_id: g.group_type for g in coordinator.list_groups()}["mixed"] == "classic"
    again = classic_join(coordinator, "mixed", k.member_id)
    assert (
        coordinator.sync(
            "mixed", again.generation_id, k.member_id, None, None, None, {k.member_id: everything}
        )
        .result()
        .error
        == E.none
    )
    assert consumer_heartbeat(coordinator, "mixed", second, 0).member_epoch > 0
    # timers (sessions run out), expiry, deletion
    clock.advance(60_000)
    coordinator.tick(clock.monotonic_ms())
    assert dict(coordinator.delete_groups(["mixed", "modern"])) == {"mixed": E.none, "modern": E.none}
    clock.advance(7 * 24 * 3_600_000 + 1)
    assert coordinator.expire_offsets() > 0
    # a restart replays it all
    groups_dir.restart()
    groups_dir.coordinator()


# ---------------------------------------------------------------------------------------------- the rules


def test_rules_1_2_3_hold_across_every_kind_of_operation(
    guards: Guards, groups_dir: GroupsDir, clock: FakeClock
) -> None:
    exercise(groups_dir, clock)
    assert guards.violations == []
    assert guards.appends > 20  # the scenario did write


def test_rule_1_managers_do_not_import_the_log() -> None:
    forbidden = ("kompakt.log", "kompakt.broker.groups.records.log", "kompakt.broker.groups.coordinator")
    offenders = []
    for path in _manager_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            offenders += [f"{path.relative_to(GROUPS)}: {n}" for n in names if n.startswith(forbidden)]
    assert offenders == []


def test_every_groups_module_is_placed_in_the_layers_contract() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(
        c
        for c in pyproject["tool"]["importlinter"]["contracts"]
        if c.get("containers") == ["kompakt.broker.groups"]
    )
    placed = {m.strip() for layer in contract["layers"] for m in layer.replace(":", "|").split("|")}
    modules = {
        ".".join(p.relative_to(GROUPS).with_suffix("").parts)
        for p in GROUPS.rglob("*.py")
        if p.name != "__init__.py"
    }
    assert modules - placed == set()


def test_rule_4_no_in_memory_offset_store_is_left() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src" / "kompakt").rglob("*.py"))
    assert "OffsetStore" not in source


# ---------------------------------------------------------------------------------------- a broken rule fails


def test_a_manager_that_changes_offsets_outside_replay_fails(
    guards: Guards, groups_dir: GroupsDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = OffsetManager.commit

    def eager(self: OffsetManager, group: str, *args: Any, **kwargs: Any) -> Any:
        self._offsets.setdefault(group, {})  # a manager "remembering" before the log has it
        return commit(self, group, *args, **kwargs)

    monkeypatch.setattr(OffsetManager, "commit", eager)
    coordinator = groups_dir.coordinator()
    coordinator.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 0, 1, 0, None)])
    assert guards.violations and "outside replay" in guards.violations[0]


def test_a_manager_that_appends_by_itself_fails(
    guards: Guards, groups_dir: GroupsDir, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = OffsetManager.commit

    def writes(self: OffsetManager, group: str, *args: Any, **kwargs: Any) -> Any:
        result = commit(self, group, *args, **kwargs)
        GroupLog(groups_dir.logs, clock).append(result.records)  # a manager writing its own records
        return result

    monkeypatch.setattr(OffsetManager, "commit", writes)
    coordinator = groups_dir.coordinator()
    coordinator.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 0, 1, 0, None)])
    assert any("GroupLog.append called from writes" in v for v in guards.violations)


def test_a_manager_that_appends_to_the_partition_by_itself_fails(
    guards: Guards, groups_dir: GroupsDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = OffsetManager.commit

    def writes(self: OffsetManager, group: str, *args: Any, **kwargs: Any) -> Any:
        result = commit(self, group, *args, **kwargs)
        groups_dir.logs.get_log("__consumer_offsets", 0).append(build_batch([SimpleRecord(b"k", b"v", 0)]))
        return result

    coordinator = groups_dir.coordinator()
    coordinator.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 0, 1, 0, None)])  # the topic
    monkeypatch.setattr(OffsetManager, "commit", writes)
    coordinator.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 0, 2, 0, None)])
    assert any("appended to __consumer_offsets" in v for v in guards.violations)
