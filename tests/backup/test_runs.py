"""Runs that fail, get interrupted or never end: the manifest never claims more than it holds."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kompakt.backup.backup import BackupResult, run_backup
from kompakt.backup.config import parse_restore_config
from kompakt.backup.errors import BackupError, StorageError
from kompakt.backup.manifest import load_manifest
from kompakt.backup.reader import RestoreSource
from kompakt.backup.storage import FilesystemStorage, StagedObject
from tests.support.serve import BrokerProcess

from .conftest import COMPACT_CONFIGS, backup_config, create_topic, produce

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]


class FlakyStorage(FilesystemStorage):
    """Fails the n-th write of a segment file, like a full disk or a dropped connection."""

    def __init__(self, root: Path, fail_at: int) -> None:
        super().__init__(root)
        self.segment_puts = 0
        self.fail_at = fail_at

    def put(self, key: str, data: bytes) -> None:
        if key.endswith(".log"):
            self.segment_puts += 1
            if self.segment_puts == self.fail_at:
                raise StorageError(f"cannot write {key}: No space left on device")
        super().put(key, data)


def test_failed_run_is_incomplete_and_resumes(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "flaky", 1)
    produce(broker, "flaky", [(f"f{i}".encode(), b"z" * 2000) for i in range(300)])
    config = backup_config(
        broker,
        tmp_path,
        "flaky",
        topics=["flaky"],
        backup={"compression": "none", "segment_max_bytes": 100_000, "batch_max_bytes": 20_000},
    )
    storage = FlakyStorage(tmp_path, fail_at=3)
    with pytest.raises(StorageError, match="No space left"):
        run_backup(config, storage=storage)
    manifest = load_manifest(storage, "flaky")
    assert manifest.status == "incomplete"
    assert manifest.runs[-1].status == "failed" and "No space" in (manifest.runs[-1].error or "")
    entry = manifest.partitions[("flaky", 0)]
    assert 0 < entry.end_offset < 300
    assert entry.records == entry.end_offset == sum(f.records for f in entry.files)
    # A restore refuses an incomplete backup unless asked.
    restore = {
        "backup_id": "flaky",
        "target": {"bootstrap_servers": broker.bootstrap},
        "storage": {"path": str(tmp_path)},
    }
    with pytest.raises(BackupError, match="incomplete"):
        RestoreSource.open(parse_restore_config(restore))

    result = run_backup(config, storage=FilesystemStorage(tmp_path))
    assert result.manifest.status == "complete"
    entry = result.manifest.partitions[("flaky", 0)]
    assert (entry.records, entry.end_offset, entry.gaps) == (300, 300, [])
    offsets = [o for f in entry.files for o in (f.first_offset, f.last_offset)]
    assert offsets == sorted(offsets) and entry.files[0].first_offset == 0
    assert [r.status for r in result.manifest.runs] == ["failed", "complete"]


def test_continuous_mode_until_stopped(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "cont", 2)
    produce(broker, "cont", [(b"a", b"1")], partition=0)
    config = backup_config(
        broker,
        tmp_path,
        "cont",
        topics=["cont"],
        backup={"continuous": True, "poll_interval_ms": 100, "checkpoint_interval_ms": 100},
    )
    stop = threading.Event()
    outcome: list[BackupResult | BaseException] = []

    def target() -> None:
        try:
            outcome.append(run_backup(config, stop=stop))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    storage = FilesystemStorage(tmp_path)
    deadline = time.monotonic() + 30
    produced = False
    try:
        while True:
            assert time.monotonic() < deadline, "continuous backup did not pick up new records"
            if storage.exists("cont/manifest.json"):
                manifest = load_manifest(storage, "cont")
                if manifest.records >= 1 and not produced:
                    produce(broker, "cont", [(b"b", b"2"), (b"c", b"3")], partition=1)
                    produced = True
                if manifest.records == 3:
                    break
            thread.join(0.05)
    finally:
        stop.set()
        thread.join(30)
    (result,) = outcome
    assert isinstance(result, BackupResult), result
    assert result.manifest.status == "complete" and result.run.mode == "continuous"
    assert result.manifest.partitions[("cont", 1)].end_offset == 2


def test_registering_as_a_reader_waits_for_a_coordinator_that_moves(
    broker: BrokerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a multi-broker Kafka cluster the group's coordinator moves or loads (a broker stopped,
    ``__consumer_offsets`` just created): the reader registration's commit met NOT_COORDINATOR
    and the whole backup failed (found on Apache Kafka 4.1.2 by tools/realkafka_multibroker.py).
    It is tried again, as librdkafka looks the coordinator up again after that answer."""
    import confluent_kafka

    from kompakt.backup import backup as backup_module

    create_topic(broker, "moving", 1, COMPACT_CONFIGS)
    produce(broker, "moving", [(b"k", b"v")])
    refusals = {"left": 2}

    class MovingCoordinator:
        def __init__(self, conf: dict[str, object]) -> None:
            self._consumer = confluent_kafka.Consumer(conf)

        def commit(self, *args: object, **kwargs: object) -> object:
            if refusals["left"]:
                refusals["left"] -= 1
                error = confluent_kafka.KafkaError(confluent_kafka.KafkaError.NOT_COORDINATOR)
                raise confluent_kafka.KafkaException(error)
            return self._consumer.commit(*args, **kwargs)

        def __getattr__(self, name: str) -> object:
            return getattr(self._consumer, name)

    names = {n: getattr(confluent_kafka, n) for n in dir(confluent_kafka) if not n.startswith("__")}
    names["Consumer"] = MovingCoordinator
    monkeypatch.setattr(backup_module, "KAFKA", SimpleNamespace(**names))
    result = run_backup(backup_config(broker, tmp_path, "moving", topics=["moving"]))
    assert result.manifest.status == "complete" and refusals["left"] == 0
    assert result.manifest.partitions[("moving", 0)].records == 1


class _FullDisk(StagedObject):
    """A staged segment file whose seventh write (in the second file) fails, as on a full disk,
    after writing half of it."""

    writes = 0

    def write(self, *pieces: bytes | bytearray | memoryview) -> None:
        _FullDisk.writes += 1
        if _FullDisk.writes == 7:
            super().write(bytes(pieces[-1])[: len(pieces[-1]) // 2])
            raise StorageError(f"cannot write {self.path}: No space left on device")
        super().write(*pieces)


class FullDiskStorage(FilesystemStorage):
    def stage(self, key: str) -> StagedObject:
        return _FullDisk(self._path(key))


def test_a_write_failing_inside_a_segment_commits_none_of_it(broker: BrokerProcess, tmp_path: Path) -> None:
    """The backup writes a segment as it grows (issue 33): a write that fails half way through
    the file leaves nothing of that segment, no temporary file, and a run that resumes."""
    create_topic(broker, "fulldisk", 1)
    produce(broker, "fulldisk", [(f"f{i}".encode(), b"z" * 2000) for i in range(300)])
    config = backup_config(
        broker,
        tmp_path,
        "fulldisk",
        topics=["fulldisk"],
        backup={"compression": "none", "segment_max_bytes": 100_000, "batch_max_bytes": 20_000},
    )
    with pytest.raises(StorageError, match="No space left"):
        run_backup(config, storage=FullDiskStorage(tmp_path))
    storage = FilesystemStorage(tmp_path)
    manifest = load_manifest(storage, "fulldisk")
    assert manifest.status == "incomplete" and manifest.runs[-1].status == "failed"
    entry = manifest.partitions[("fulldisk", 0)]
    assert entry.files and entry.records == entry.end_offset == sum(f.records for f in entry.files) < 300
    assert sorted(storage.list("fulldisk/topics/")) == sorted(f"fulldisk/{f.path}" for f in entry.files)
    assert not list(tmp_path.rglob("*.tmp"))

    result = run_backup(config, storage=storage)
    entry = result.manifest.partitions[("fulldisk", 0)]
    assert (result.manifest.status, entry.records, entry.end_offset, entry.gaps) == ("complete", 300, 300, [])
