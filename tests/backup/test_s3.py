"""The S3 backend against a real S3-compatible HTTP server (moto's server mode on 127.0.0.1)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.backup.backup import run_backup
from kompakt.backup.errors import BackupError, StorageError
from kompakt.backup.manifest import list_backups, load_manifest
from kompakt.backup.restore import plan_restore, run_restore
from kompakt.backup.storage import S3Storage
from tests.support.serve import BrokerProcess

from .conftest import backup_config, consume_all, create_topic, latest_by_key, produce, restore_config

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_s3_round_trip(broker: BrokerProcess, tmp_path: Path, s3_endpoint: str) -> None:
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="backups")
    storage = {"backend": "s3", "bucket": "backups", "prefix": "team/a", "endpoint_url": s3_endpoint}
    create_topic(broker, "s3-src", 1, {"cleanup.policy": "compact"})
    produce(broker, "s3-src", [(f"s{i % 7}".encode(), f"v{i}".encode()) for i in range(60)] + [(b"s1", None)])
    result = run_backup(backup_config(broker, tmp_path, "s3b", topics=["s3-src"], storage=storage))
    assert result.manifest.status == "complete"

    store = S3Storage("backups", "team/a", endpoint_url=s3_endpoint)
    assert list_backups(store) == ["s3b"]
    assert load_manifest(store, "s3b").partitions[("s3-src", 0)].records == 61
    keys = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket="backups")["Contents"]
    assert {k["Key"] for k in keys} == {
        "team/a/s3b/manifest.json",
        "team/a/s3b/topics/s3-src-0/00000000000000000000.log",
    }

    run_restore(
        restore_config(
            broker, tmp_path, "s3b", storage=storage, restore={"topic_mapping": {"s3-src": "s3-dst"}}
        )
    )
    assert latest_by_key(consume_all(broker, "s3-dst")) == latest_by_key(consume_all(broker, "s3-src"))

    # A corrupted object is caught by the dry run.
    (file,) = load_manifest(store, "s3b").partitions[("s3-src", 0)].files
    store.put(f"s3b/{file.path}", store.get(f"s3b/{file.path}")[:-5])
    plan, _ = plan_restore(restore_config(broker, tmp_path, "s3b", storage=storage))
    assert not plan.ok and "checksum mismatch" in plan.problems[0]


def test_s3_missing_bucket_fails_before_copying(
    broker: BrokerProcess, tmp_path: Path, s3_endpoint: str
) -> None:
    storage = {"backend": "s3", "bucket": "no-such-bucket", "endpoint_url": s3_endpoint}
    with pytest.raises(StorageError, match="NoSuchBucket"):
        run_backup(backup_config(broker, tmp_path, "nb", storage=storage))
    with pytest.raises(BackupError, match="NoSuchBucket|no backup"):
        run_restore(restore_config(broker, tmp_path, "nb", storage=storage))
