"""The exact offline restore, corrupted backups, and bad input that must fail before writing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kompakt.backup.backup import run_backup
from kompakt.backup.errors import BackupError, StorageError
from kompakt.backup.offline import run_offline_restore
from kompakt.backup.restore import plan_restore, run_restore
from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records
from tests.support.serve import BrokerProcess

from .conftest import (
    COMPACT_CONFIGS,
    CompactedSource,
    Rec,
    backup_config,
    consume_all,
    create_topic,
    produce,
    restore_config,
)

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]


def _dir_records(data_dir: Path, topic: str) -> tuple[list[Rec], list[int | None], int, int]:
    """Records, per-batch delete horizons of tombstone batches, log start and end of a stopped dir."""
    records: list[Rec] = []
    horizons: list[int | None] = []
    for segment in sorted((data_dir / f"{topic}-0").glob("*.log")):
        data = segment.read_bytes()
        for view in iter_batches(data):
            decoded = decode_records(view)
            if any(r.value is None for r in decoded):
                horizons.append(view.delete_horizon_ms)
            records += [Rec(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded]
    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        log = manager.get_log(topic, 0)
        return records, horizons, log.log_start_offset, log.log_end_offset
    finally:
        manager.close()


def test_offline_restore_reproduces_offsets_and_gaps(
    compacted: CompactedSource, broker: BrokerProcess, tmp_path: Path
) -> None:
    source = compacted.records["off-src"]
    before_ms = int(time.time() * 1000)
    result = run_backup(backup_config(compacted.broker, tmp_path, "off", topics=["off-src"]))
    entry = result.manifest.partitions[("off-src", 0)]

    data_dir = tmp_path / "restored"
    outcome = run_offline_restore(restore_config(None, tmp_path, "off", data_dir=data_dir))
    assert outcome.records == len(source)
    records, horizons, start, end = _dir_records(data_dir, "off-src")
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in source
    ]
    assert (start, end) == (entry.start_offset, entry.end_offset)
    assert horizons and all(h is not None and h >= before_ms + 86_400_000 for h in horizons)
    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        assert manager.topics()["off-src"].configs == COMPACT_CONFIGS
    finally:
        manager.close()

    # A second restore into the same (now non-empty) partition is refused before writing.
    with pytest.raises(BackupError, match="already holds data"):
        run_offline_restore(restore_config(None, tmp_path, "off", data_dir=data_dir))
    # A running broker's directory is locked.
    with pytest.raises(BackupError, match="lock"):
        run_offline_restore(
            restore_config(
                None, tmp_path, "off", data_dir=broker.data_dir, restore={"topic_mapping": {"off-src": "x"}}
            )
        )

    # With erasure, the other records keep their offsets exactly.
    erased_dir = tmp_path / "erased"
    run_offline_restore(
        restore_config(
            None,
            tmp_path,
            "off",
            data_dir=erased_dir,
            restore={"erasure": {"keys": ["k1"], "on_match": "tombstone"}},
        )
    )
    erased, _, _, erased_end = _dir_records(erased_dir, "off-src")
    expected = [(r.offset, r.key, r.value if r.key != b"k1" else None) for r in source]
    assert [(r.offset, r.key, r.value) for r in erased] == expected
    assert erased_end == entry.end_offset


def test_corrupted_backup_is_detected(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "corrupt", 1, {"cleanup.policy": "compact"})
    produce(broker, "corrupt", [(f"c{i}".encode(), b"payload" * 20) for i in range(100)])
    result = run_backup(
        backup_config(broker, tmp_path, "cor", topics=["corrupt"], backup={"compression": "none"})
    )
    (file,) = result.manifest.partitions[("corrupt", 0)].files
    path = tmp_path / "cor" / file.path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    config = restore_config(broker, tmp_path, "cor", restore={"topic_mapping": {"corrupt": "corrupt-dst"}})
    plan, _ = plan_restore(config)
    assert not plan.ok and "checksum mismatch" in plan.problems[0] and file.path in plan.problems[0]
    with pytest.raises(BackupError, match="checksum mismatch"):
        run_restore(config)
    assert "corrupt-dst" not in consume_topics(broker)
    with pytest.raises(BackupError, match="checksum mismatch"):
        run_offline_restore(restore_config(None, tmp_path, "cor", data_dir=tmp_path / "never"))
    assert not (tmp_path / "never").exists()

    path.write_bytes(bytes(data[: len(data) // 3]))  # truncated
    plan, _ = plan_restore(config)
    assert not plan.ok and "checksum mismatch" in plan.problems[0]


def consume_topics(broker: BrokerProcess) -> set[str]:
    from .conftest import admin

    client = admin(broker)
    return set(client.list_topics(timeout=10).topics)


def test_bad_input_fails_before_writing(broker: BrokerProcess, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(BackupError, match="cannot reach the cluster"):
        run_backup(backup_config("127.0.0.1:1", tmp_path, "down", timeout_s=1.5))
    assert time.monotonic() - started < 15
    with pytest.raises(BackupError, match="'no-such-topic'.*do not exist"):
        run_backup(backup_config(broker, tmp_path, "missing", topics=["no-such-topic"]))
    assert not (tmp_path / "missing").exists()

    # Restoring a compacted topic onto an existing delete topic is refused.
    create_topic(broker, "pol-src", 1, {"cleanup.policy": "compact"})
    produce(broker, "pol-src", [(b"k", b"v")])
    run_backup(backup_config(broker, tmp_path, "pol", topics=["pol-src"]))
    create_topic(broker, "pol-dst", 1, {"cleanup.policy": "delete"})
    config = restore_config(broker, tmp_path, "pol", restore={"topic_mapping": {"pol-src": "pol-dst"}})
    with pytest.raises(BackupError, match="cleanup.policy=delete"):
        run_restore(config)
    assert consume_all(broker, "pol-dst") == []

    with pytest.raises(BackupError, match="no backup 'nope'"):
        run_restore(restore_config(broker, tmp_path, "nope"))
    # A storage path that cannot be a directory (root ignores permission bits, so use a file).
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StorageError, match="cannot create"):
        run_backup(
            backup_config(broker, tmp_path, "ro", topics=["pol-src"], storage={"path": str(blocker / "sub")})
        )
