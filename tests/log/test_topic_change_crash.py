"""A kill at every file operation of CreateTopics, CreatePartitions and DeleteTopics.

After any kill, the reopened directory holds each topic with all its partitions and their records,
or not at all (issue 26: a kill while 200 partitions were being created left 199 of them answering
UNKNOWN_TOPIC_OR_PARTITION for good). The kill is :class:`FaultInjectingFileOps` with ``kill=True``:
the n-th file operation and every later one fail, so no rollback can run, as after ``kill -9``.
The same scenarios with one transient failure (a full disk that then frees up) check that the
manager stays consistent in the running process as well.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import UnknownTopicOrPartitionError
from kompakt.log.manager import LogManager
from kompakt.log.metadata_files import read_partition_metadata
from kompakt.log.segments import ManualScheduler
from kompakt.log.topic_store import TOPICS_FILE, PendingChange, TopicStore
from kompakt.testing.faults import FaultInjectingFileOps, SimulatedCrashError

from .log_helpers import all_records, kv

BROKER = BrokerConfig.from_properties({})
Operation = Callable[[LogManager], object]


def open_manager(data_dir: Path, ops: FaultInjectingFileOps | None = None) -> LogManager:
    clock = FakeClock()
    if ops is None:
        manager = LogManager(data_dir, BROKER, clock, ManualScheduler(clock))
    else:
        manager = LogManager(data_dir, BROKER, clock, ManualScheduler(clock), file_ops=ops)
    manager.open()
    return manager


def seed(data_dir: Path) -> None:
    """Topics that exist before the change: ``keep`` (untouched), ``grow`` and ``victim``."""
    manager = open_manager(data_dir)
    for name, partitions in (("keep", 2), ("grow", 2), ("victim", 3)):
        manager.create_topic(name, partitions, {"cleanup.policy": "compact"})
        for p in range(partitions):
            for i in range(3):
                manager.get_log(name, p).append(kv(10 * p + i))
    manager.close()


def records(manager: LogManager, topic: str, partition: int) -> list[bytes | None]:
    """The keys of every record (``kv`` writes the value as the key too)."""
    return [key for _offset, key in all_records(manager.get_log(topic, partition))]


def seeded_records(partition: int) -> list[bytes | None]:
    return [f"{10 * partition + i:04d}".encode() for i in range(3)]


def assert_whole(manager: LogManager, data_dir: Path) -> None:
    """Every topic the manager lists has every partition open, its directory and its topic id."""
    for name, meta in manager.topics().items():
        assert meta.pending is None, f"{name} still has a pending {meta.pending}"
        for p in range(meta.partitions):
            manager.get_log(name, p)  # raises UNKNOWN_TOPIC_OR_PARTITION for a missing partition
            assert read_partition_metadata(data_dir / f"{name}-{p}") == meta.topic_id
    stored = TopicStore(data_dir).load()
    assert {n: (m.partitions, m.pending) for n, m in stored.items()} == {
        n: (m.partitions, None) for n, m in manager.topics().items()
    }


def check_create(manager: LogManager, data_dir: Path) -> None:
    topics = manager.topics()
    if "new" in topics:
        assert topics["new"].partitions == 5
        assert all(records(manager, "new", p) == [] for p in range(5))
    else:
        assert not any(data_dir.glob("new-[0-9]")), "a directory of a topic that does not exist"


def check_grow(manager: LogManager, data_dir: Path) -> None:
    assert manager.topics()["grow"].partitions in (2, 5)
    assert [records(manager, "grow", p) for p in (0, 1)] == [seeded_records(0), seeded_records(1)]
    if manager.topics()["grow"].partitions == 2:
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.get_log("grow", 2)
        assert not any((data_dir / f"grow-{p}").exists() for p in (2, 3, 4))


def check_delete(manager: LogManager, data_dir: Path) -> None:
    if "victim" in manager.topics() and manager.topics()["victim"].partitions == 1:
        assert records(manager, "victim", 0) == []  # re-created by the first pass below
    elif "victim" in manager.topics():
        assert manager.topics()["victim"].partitions == 3
        assert [records(manager, "victim", p) for p in range(3)] == [seeded_records(p) for p in range(3)]
    else:
        # In the running broker a deletion that failed part way keeps its intent (and what it has
        # not renamed yet) until the next start or the next creation of the name finishes it.
        intent = TopicStore(data_dir).load().get("victim")
        if intent is None:
            assert not any((data_dir / f"victim-{p}").exists() for p in range(3))
        else:
            assert intent.pending is PendingChange.DELETE
        manager.create_topic("victim", 1)  # the name is free again, with a fresh empty log
        assert records(manager, "victim", 0) == []


SCENARIOS: dict[str, tuple[Operation, Callable[[LogManager, Path], None]]] = {
    "create": (lambda m: m.create_topic("new", 5, {"cleanup.policy": "compact"}), check_create),
    "create_partitions": (lambda m: m.create_partitions("grow", 5), check_grow),
    "delete": (lambda m: m.delete_topic("victim"), check_delete),
}


def operations_of(tmp_path: Path, operation: Operation) -> int:
    """How many file operations ``operation`` makes on the seeded directory."""
    data_dir = tmp_path / "count"
    seed(data_dir)
    ops = FaultInjectingFileOps(armed=False)
    manager = open_manager(data_dir, ops)
    with ops.armed():
        operation(manager)
    manager.close()
    assert ops.count > 0
    return ops.count


def check_after_restart(data_dir: Path, check: Callable[[LogManager, Path], None]) -> None:
    for _ in range(2):  # recovery finishes the change; a second start finds nothing to finish
        manager = open_manager(data_dir)
        try:
            assert_whole(manager, data_dir)
            assert [records(manager, "keep", p) for p in (0, 1)] == [seeded_records(0), seeded_records(1)]
            check(manager, data_dir)
        finally:
            manager.close()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_kill_at_every_file_operation(tmp_path: Path, scenario: str) -> None:
    operation, check = SCENARIOS[scenario]
    total = operations_of(tmp_path, operation)
    for fail_at in range(total):
        data_dir = tmp_path / f"kill-{fail_at}"
        seed(data_dir)
        ops = FaultInjectingFileOps(fail_at, armed=False, kill=True)
        manager = open_manager(data_dir, ops)
        # Only the last step, clearing the intent, may fail without raising.
        with ops.armed(), contextlib.suppress(SimulatedCrashError):
            operation(manager)
        assert ops.failed
        manager.close_without_flush()
        check_after_restart(data_dir, check)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_one_failed_file_operation_leaves_the_running_broker_consistent(
    tmp_path: Path, scenario: str
) -> None:
    operation, check = SCENARIOS[scenario]
    total = operations_of(tmp_path, operation)
    for fail_at in range(total):
        data_dir = tmp_path / f"fail-{fail_at}"
        seed(data_dir)
        ops = FaultInjectingFileOps(fail_at, armed=False)
        manager = open_manager(data_dir, ops)
        with ops.armed(), contextlib.suppress(SimulatedCrashError):
            operation(manager)
        for name, meta in manager.topics().items():
            for p in range(meta.partitions):
                manager.get_log(name, p)
        check(manager, data_dir)
        manager.close()
        check_after_restart(data_dir, check)


def test_an_interrupted_creation_is_completed_from_its_intent(tmp_path: Path) -> None:
    """The state a kill leaves after the intent is written: 200 partitions decided, one directory."""
    data_dir = tmp_path / "data"
    ops = FaultInjectingFileOps(armed=False, kill=True)
    manager = open_manager(data_dir, ops)
    ops.fail_at = 8  # the intent is written (5 operations); the first directory is part way
    with ops.armed(), pytest.raises(SimulatedCrashError):
        manager.create_topic("wide", 200)
    manager.close_without_flush()
    assert TopicStore(data_dir).load()["wide"].pending is PendingChange.CREATE
    assert len(list(data_dir.glob("wide-*"))) == 1

    manager = open_manager(data_dir)
    assert manager.topics()["wide"].partitions == 200
    for p in range(200):
        manager.get_log("wide", p).append(kv(p))
    manager.close()
    assert '"pending"' not in (data_dir / TOPICS_FILE).read_text()


def test_an_interrupted_deletion_is_finished_not_resurrected(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    seed(data_dir)
    ops = FaultInjectingFileOps(armed=False, kill=True)
    manager = open_manager(data_dir, ops)
    ops.fail_at = 6  # the intent is written; the first directory is renamed, the others not
    with ops.armed(), pytest.raises(SimulatedCrashError):
        manager.delete_topic("victim")
    manager.close_without_flush()
    assert (data_dir / "victim-1").is_dir() and (data_dir / "victim-2").is_dir()

    manager = open_manager(data_dir)
    assert "victim" not in manager.topics()
    assert not any((data_dir / f"victim-{p}").exists() for p in range(3))
    assert len(list(data_dir.glob("victim-*-delete"))) == 3  # removed after file.delete.delay.ms
    manager.close()


def test_a_lost_partition_directory_is_recreated_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A directory removed outside kompakt after the creation finished: recreated empty, as Kafka
    does for a log its metadata assigns it, and the loss is logged rather than silent."""
    data_dir = tmp_path / "data"
    seed(data_dir)
    for child in (data_dir / "keep-1").iterdir():
        child.unlink()
    (data_dir / "keep-1").rmdir()
    manager = open_manager(data_dir)
    assert records(manager, "keep", 1) == []
    assert records(manager, "keep", 0) == seeded_records(0)
    manager.close()
    assert any("keep" in r.message and "held data before" in r.message for r in caplog.records)
