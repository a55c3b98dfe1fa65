"""Offline restore into a stopped Kafka 4 log directory (issue 31, item 3).

The target is a copy of ``tests/log/fixtures/kafka41_cluster`` (a real Kafka 4.1.2 node's
directory; ``restore-target`` is an empty compacted topic of 2 partitions there). Kafka loads only
the partitions its metadata log assigns to the node, with the topic id of ``partition.metadata``;
anything else it renames ``-stray`` and never serves. So a restore of a topic the metadata log does
not list must be refused before a byte is written, with one line saying what to do, and
``validate-restore`` must say the same; a restore into a topic it lists fills that topic's
directories and leaves no kompakt file behind.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from kompakt.backup.backup import run_backup
from kompakt.backup.errors import BackupError
from kompakt.backup.offline import plan_offline, run_offline_restore
from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records

from .conftest import CompactedSource, backup_config, restore_config
from .test_cli import run

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]

FIXTURE = Path(__file__).parent.parent / "log" / "fixtures" / "kafka41_cluster" / "logs"


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` and its bytes' digest: what "nothing was written" compares."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def kafka_dir(tmp_path: Path) -> Path:
    target = tmp_path / "kafka-logs"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.fixture(scope="module")
def backup(compacted: CompactedSource, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("kafka4-backup")
    run_backup(backup_config(compacted.broker, store, "k4", topics=["off-src"]))
    return store


def test_a_topic_missing_from_the_metadata_log_is_refused_before_writing(
    backup: Path, kafka_dir: Path
) -> None:
    before = tree(kafka_dir)
    config = restore_config(None, backup, "k4", data_dir=kafka_dir)
    with pytest.raises(BackupError) as caught:
        run_offline_restore(config)
    message = str(caught.value)
    assert "topic 'off-src' does not exist in this Kafka cluster" in message
    assert "create it on the cluster first (1 partition, cleanup.policy=compact)" in message
    assert "restore through the protocol (target.bootstrap_servers)" in message
    assert tree(kafka_dir) == before  # not a byte: no partition, no kompakt-topics.json, no lock
    plan, _ = plan_offline(config)
    assert not plan.ok and "does not exist in this Kafka cluster" in plan.problems[0]
    assert tree(kafka_dir) == before


def test_validate_restore_says_the_same(backup: Path, kafka_dir: Path, tmp_path: Path) -> None:
    restore_yaml = tmp_path / "restore.yaml"
    restore_yaml.write_text(
        yaml.safe_dump(
            {"backup_id": "k4", "target": {"data_dir": str(kafka_dir)}, "storage": {"path": str(backup)}}
        )
    )
    code, out = run("backup", "validate-restore", "-c", str(restore_yaml))
    assert code == 1, out
    assert "does not exist in this Kafka cluster" in out
    assert "create it on the cluster first" in out


def test_a_topic_the_metadata_log_lists_is_filled_in_place(
    compacted: CompactedSource, backup: Path, kafka_dir: Path
) -> None:
    before = tree(kafka_dir)
    config = restore_config(
        None, backup, "k4", data_dir=kafka_dir, restore={"topic_mapping": {"off-src": "restore-target"}}
    )
    outcome = run_offline_restore(config)
    source = compacted.records["off-src"]
    assert outcome.records == len(source)
    restored = [
        (r.offset, r.key, r.value)
        for segment in sorted((kafka_dir / "restore-target-0").glob("*.log"))
        for view in iter_batches(segment.read_bytes())
        for r in decode_records(view)
    ]
    assert restored == [(r.offset, r.key, r.value) for r in source]
    after = tree(kafka_dir)
    assert not (kafka_dir / "kompakt-topics.json").exists()
    assert not any(name.startswith("kompakt") for name in after)
    # The topic id Kafka knows, the metadata log and the other topics are as Kafka left them.
    unchanged = [
        n
        for n in before
        if n.startswith(("__cluster_metadata-0/", "orders-", "events-", "restore-target-1/"))
        or (n.endswith("partition.metadata") and "-delete/" not in n)
    ]
    assert unchanged and all(after[n] == before[n] for n in unchanged)
    epoch = json.loads((FIXTURE / ".kafka_cleanshutdown").read_text())["brokerEpoch"]
    assert json.loads((kafka_dir / ".kafka_cleanshutdown").read_text())["brokerEpoch"] == epoch


def test_a_policy_the_metadata_log_contradicts_is_refused(backup: Path, kafka_dir: Path) -> None:
    before = tree(kafka_dir)
    config = restore_config(
        None, backup, "k4", data_dir=kafka_dir, restore={"topic_mapping": {"off-src": "events"}}
    )
    with pytest.raises(BackupError, match=r"cleanup.policy=delete \(its own config, metadata log\)"):
        run_offline_restore(config)
    assert tree(kafka_dir) == before
