"""``kompakt backup|restore`` from YAML files, the inspection commands, and ``log dump`` on a backup."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kompakt.cli import backup_cmd, log_cmd
from kompakt.cli.output import CliUsageError
from kompakt.errors import KompaktError
from tests.support.serve import BrokerProcess

from .conftest import consume_all, create_topic, produce

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]


def _app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    backup_cmd.register(app)
    log_cmd.register(app)
    return app


APP = _app()


def run(*args: str) -> tuple[int, str]:
    """In-process, with kompakt errors mapped to exit codes as ``kompakt.cli.main`` does."""
    result = CliRunner().invoke(APP, list(args))
    if isinstance(result.exception, KompaktError):
        return (2 if isinstance(result.exception, CliUsageError) else 1), str(result.exception)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def _write(path: Path, data: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_backup_restore_commands(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "cli-src", 1, {"cleanup.policy": "compact", "delete.retention.ms": "3600000"})
    produce(broker, "cli-src", [(b"a", b"1"), (b"b", b""), (b"a", None), (b"c", b"3")])
    store = tmp_path / "store"
    backup_yaml = _write(
        tmp_path / "backup.yaml",
        {
            "backup_id": "cli",
            "source": {"bootstrap_servers": [broker.bootstrap], "topics": {"include": ["cli-*"]}},
            "storage": {"backend": "filesystem", "path": str(store)},
            "backup": {"compression": "zstd", "compression_level": 5, "start_offset": "earliest"},
        },
    )
    code, out = run("backup", "--config", str(backup_yaml), "--output", "json")
    assert code == 0, out
    summary = json.loads(out)
    assert (summary["status"], summary["records"]) == ("complete", 4)

    code, out = run("backup", "list", str(store), "-o", "json")
    assert code == 0 and [b["backup_id"] for b in json.loads(out)] == ["cli"]
    code, out = run("backup", "describe", f"{store}/cli", "-o", "json")
    manifest = json.loads(out)
    assert manifest["format"] == "kompakt-backup" and manifest["version"] == 1
    assert manifest["topics"]["cli-src"]["configs"]["delete.retention.ms"] == "3600000"
    code, out = run("backup", "describe", f"{store}/cli")
    assert code == 0 and "cli-src-0" in out

    # The backup segment is a Kafka segment: log dump reads it, null and empty kept apart.
    segment = store / "cli" / manifest["partitions"][0]["files"][0]["path"]
    code, out = run("log", "dump", str(segment), "--records", "-o", "json")
    assert code == 0, out
    (dumped,) = json.loads(out)
    records = [r for b in dumped["batches"] for r in b["records"]]
    assert [(r["key"], r["value"]) for r in records] == [("a", "1"), ("b", ""), ("a", None), ("c", "3")]
    assert {b["codec"] for b in dumped["batches"]} == {"zstd"}

    restore_yaml = _write(
        tmp_path / "restore.yaml",
        {
            "backup_id": "cli",
            "target": {"bootstrap_servers": broker.bootstrap},
            "storage": {"backend": "filesystem", "path": str(store)},
            "restore": {"topic_mapping": {"cli-src": "cli-dst"}, "create_topics": True},
        },
    )
    code, out = run("validate-restore", "--config", str(restore_yaml))
    assert code == 0 and "ok: the restore can run" in out, out
    code, out = run("restore", "--config", str(restore_yaml), "-o", "json")
    assert code == 0, out
    assert json.loads(out)["records"] == 4
    assert [(r.key, r.value) for r in consume_all(broker, "cli-dst")] == [
        (b"a", b"1"),
        (b"b", b""),
        (b"a", None),
        (b"c", b"3"),
    ]
    # Now the target exists: validation says so; a second restore would duplicate, which is allowed.
    # The old spelling still works (issue 28), says the new one on stderr, and is not listed.
    old = CliRunner().invoke(APP, ["backup", "validate-restore", "-c", str(restore_yaml), "-o", "json"])
    assert old.exit_code == 0 and json.loads(old.stdout)["topics"][0]["action"] == "existing"
    assert "'kompakt backup validate-restore' is now 'kompakt validate-restore'" in old.stderr
    listed = CliRunner().invoke(APP, ["backup", "--help"], env={"COLUMNS": "200"})
    assert "list" in listed.stdout and "validate-restore" not in listed.stdout

    # Offline restore through the CLI into a fresh directory.
    offline_yaml = _write(
        tmp_path / "offline.yaml",
        {"backup_id": "cli", "target": {"data_dir": str(tmp_path / "dir")}, "storage": {"path": str(store)}},
    )
    code, out = run("restore", "-c", str(offline_yaml), "-o", "json")
    assert code == 0, out
    assert json.loads(out)["partitions"][0]["log_end_offset"] == 4


def test_cli_errors(broker: BrokerProcess, tmp_path: Path) -> None:
    bad = _write(
        tmp_path / "bad.yaml",
        {
            "backup_id": "x",
            "source": {"bootstrap_servers": broker.bootstrap},
            "backup": {"compression": "brotli"},
        },
    )
    code, out = run("backup", "--config", str(bad))
    assert code == 2 and "backup.compression" in out
    code, out = run("backup")
    assert code == 2 and "--config" in out
    unknown = _write(
        tmp_path / "unknown.yaml", {"backup_id": "x", "source": {"bootstrap_servers": "h:1"}, "stoarge": {}}
    )
    code, out = run("backup", "-c", str(unknown))
    assert code == 2 and "stoarge" in out
    code, out = run("backup", "describe", f"{tmp_path}/none")
    assert code == 1 and "no backup 'none'" in out

    # The real entry point: one line on stderr, exit 1, for an unreachable cluster.
    down = _write(
        tmp_path / "down.yaml",
        {
            "backup_id": "down",
            "source": {"bootstrap_servers": "127.0.0.1:1", "timeout_s": 1},
            "storage": {"path": str(tmp_path / "s")},
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", "backup", "--config", str(down)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("error: cannot reach the cluster at 127.0.0.1:1")
    assert len(proc.stderr.strip().splitlines()) == 1
