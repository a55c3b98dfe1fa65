"""OSO kafka-backup's configuration keys in kompakt's backup and restore files (issue 17).

Every key of OSO's configuration reference is accepted: the ones that mean the same here act,
OSO-engine tuning keys are noted as having no effect, values kompakt cannot honour are errors, and
an unknown key is an error with the nearest known key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kompakt.backup.config import load_restore_config, parse_backup_config, parse_restore_config
from kompakt.backup.errors import BackupConfigError

BACKUP: dict[str, Any] = {"mode": "backup", "backup_id": "b", "source": {"bootstrap_servers": ["h:1"]}}
RESTORE: dict[str, Any] = {"mode": "restore", "backup_id": "b", "target": {"bootstrap_servers": ["h:1"]}}


def restore(**section: Any) -> Any:
    return parse_restore_config({**RESTORE, "restore": section})


def test_an_unknown_key_names_the_nearest_known_one() -> None:
    with pytest.raises(
        BackupConfigError,
        match=r"restore: unknown key\(s\) consumer_group_stratgy \(did you mean consumer_group_strategy\?\)",
    ):
        restore(consumer_group_stratgy="skip")
    with pytest.raises(BackupConfigError, match=r"did you mean compression\?"):
        parse_backup_config({**BACKUP, "backup": {"compresion": "zstd"}})
    with pytest.raises(
        BackupConfigError, match=r"storage: unknown key\(s\) bukcet \(did you mean bucket\?\)"
    ):
        parse_backup_config({**BACKUP, "storage": {"backend": "s3", "bucket": "x", "bukcet": "y"}})


@pytest.mark.parametrize(
    ("section", "mode", "names", "note"),
    [
        ({}, "skip", None, None),
        ({"consumer_groups": "snapshot"}, "snapshot", None, None),
        ({"consumer_groups": ["g1"]}, "skip", None, "reset_consumer_offsets is false"),
        (
            {
                "consumer_groups": ["g1", "g2"],
                "reset_consumer_offsets": True,
                "consumer_group_strategy": "header-based",
            },
            "snapshot",
            {"g1", "g2"},
            "translated exactly",
        ),
        ({"auto_consumer_groups": True, "consumer_group_strategy": "cluster-scan"}, "snapshot", None, None),
        (
            {"consumer_groups": ["g1"], "reset_consumer_offsets": True, "consumer_group_strategy": "manual"},
            "manual",
            {"g1"},
            None,
        ),
        (
            {"consumer_groups": ["g1"], "reset_consumer_offsets": True},
            "skip",
            None,
            "consumer_group_strategy is skip",
        ),
        (
            {"reset_consumer_offsets": True, "consumer_group_strategy": "timestamp-based"},
            "skip",
            None,
            "no consumer_groups",
        ),
    ],
)
def test_consumer_group_keys(
    section: dict[str, Any], mode: str, names: set[str] | None, note: str | None
) -> None:
    config = restore(**section)
    assert config.consumer_groups == mode
    assert config.group_names == (None if names is None else frozenset(names))
    if note is not None:
        assert any(note in n for n in config.notes), config.notes


def test_restore_keys_that_act() -> None:
    config = restore(
        create_topics=False,
        default_replication_factor=1,
        source_partitions=[0, 2],
        partition_mapping={0: 1, 2: 0},
        include_original_offset_header=True,
        rate_limit_records_per_sec=100,
        rate_limit_bytes_per_sec=1000,
        produce_batch_size=500,
        produce_acks=1,
        produce_timeout_ms=5000,
        dry_run=True,
        offset_report="/tmp/report.json",
    )
    assert not config.create_topics and config.default_replication_factor == 1
    assert (
        config.source_partitions == {0, 2}
        and config.target_partition(0) == 1
        and config.target_partition(5) == 5
    )
    assert config.oso_offset_headers and not config.record_original_offsets
    assert (config.rate_limit_records_per_sec, config.rate_limit_bytes_per_sec) == (100, 1000)
    assert (config.produce_batch_size, config.produce_acks, config.produce_timeout_ms) == (500, 1, 5000)
    assert config.dry_run and config.offset_report == "/tmp/report.json"
    # kompakt creates missing topics by default (OSO: false), with the backed-up configs.
    assert restore().create_topics


def test_keys_kompakt_cannot_honour_are_errors() -> None:
    for section, message in [
        ({"repartitioning": {"orders": {"target_partitions": 6}}}, "repartitioning is not supported"),
        ({"purge_topics": True}, "purge_topics is not supported"),
        ({"consumer_group_strategy": "guess"}, "consumer_group_strategy must be one of"),
        ({"produce_acks": 2}, "produce_acks must be -1, 0 or 1"),
        ({"source_partitions": ["x"]}, "source_partitions must be a list"),
    ]:
        with pytest.raises(BackupConfigError, match=message):
            restore(**section)
    assert not restore(purge_topics=False).notes  # the default value is fine
    with pytest.raises(BackupConfigError, match="partition_mapping needs a restore through the protocol"):
        parse_restore_config(
            {**RESTORE, "target": {"data_dir": "/tmp/x"}, "restore": {"partition_mapping": {0: 1}}}
        )
    for storage, message in [
        ({"backend": "azure", "container_name": "c"}, "azure is not supported"),
        ({"backend": "gcs"}, "gcs is not supported"),
    ]:
        with pytest.raises(BackupConfigError, match=message):
            parse_backup_config({**BACKUP, "storage": storage})
    with pytest.raises(BackupConfigError, match="specific offsets are not supported"):
        parse_backup_config({**BACKUP, "backup": {"start_offset": "specific"}})


def test_osos_engine_keys_are_accepted_with_a_note() -> None:
    config = parse_backup_config(
        {
            **BACKUP,
            "offset_storage": {"db_path": "/data/offsets.db", "sync_interval_secs": 30},
            "metrics": {"enabled": True, "port": 8080},
            "backup": {
                "max_concurrent_partitions": 8,
                "sync_interval_secs": 60,
                "include_offset_headers": True,
                "checkpoint_interval_secs": 30,
                "include_internal_topics": True,
                "internal_topics": ["__consumer_offsets"],
                "fetch_max_bytes": 8388608,
                "segment_max_records": 1000,
                "source_cluster_id": "east",
            },
        }
    )
    joined = "\n".join(config.notes)
    for key in (
        "offset_storage",
        "metrics",
        "backup.sync_interval_secs",
        "backup.include_offset_headers",
    ):
        assert f"{key} has no effect in kompakt" in joined
    # The backup reads that many partitions at once (issue 33): the key acts, no note.
    assert config.max_concurrent_partitions == 8 and "max_concurrent_partitions" not in joined
    assert config.checkpoint_interval_ms == 30_000
    assert config.topics.include_internal and config.topics.matches("__consumer_offsets")
    assert (config.fetch_max_bytes, config.segment_max_records, config.source_cluster_id) == (
        8388608,
        1000,
        "east",
    )


def test_security_and_connection_become_client_settings() -> None:
    config = parse_backup_config(
        {
            **BACKUP,
            "source": {
                "bootstrap_servers": ["h:1"],
                "security": {
                    "security_protocol": "SASL_SSL",
                    "sasl_mechanism": "SCRAM-SHA-512",
                    "sasl_username": "u",
                    "sasl_password": "p",
                    "ssl_ca_location": "/ca.crt",
                },
                "connection": {"tcp_keepalive": True, "tcp_nodelay": False, "connections_per_broker": 4},
                "client_config": {"sasl.username": "override"},
            },
        }
    )
    assert config.client_config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "override",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.crt",
        "socket.keepalive.enable": "true",
        "socket.nagle.disable": "false",
    }
    assert any("connections_per_broker has no effect" in n for n in config.notes)


def test_environment_variables_are_substituted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "restore.yaml"
    path.write_text(
        'mode: restore\nbackup_id: "dr-${DATE}"\n# ${NOT_IN_A_COMMENT}\n'
        "target:\n  bootstrap_servers: [h:1]\n  security:\n    sasl_password: ${PASSWORD}\n"
    )
    monkeypatch.setenv("DATE", "20241201")
    monkeypatch.setenv("PASSWORD", "s3cret")
    config = load_restore_config(path)
    assert config.backup_id == "dr-20241201" and config.client_config["sasl.password"] == "s3cret"
    monkeypatch.delenv("PASSWORD")
    with pytest.raises(BackupConfigError, match=r"restore.yaml:7: environment variable PASSWORD is not set"):
        load_restore_config(path)


def test_storage_prefix_and_s3_keys() -> None:
    config = parse_backup_config(
        {**BACKUP, "storage": {"backend": "filesystem", "path": "/data", "prefix": "cluster-prod"}}
    )
    assert str(config.storage.open().describe()) == "/data/cluster-prod"
    s3 = parse_backup_config(
        {
            **BACKUP,
            "storage": {
                "backend": "s3",
                "bucket": "b",
                "region": "us-west-2",
                "endpoint": "http://minio:9000",
                "access_key": "AK",
                "secret_key": "SK",
                "path_style": True,
                "allow_http": True,
            },
        }
    ).storage
    assert (s3.endpoint_url, s3.access_key, s3.secret_key, s3.path_style) == (
        "http://minio:9000",
        "AK",
        "SK",
        True,
    )
