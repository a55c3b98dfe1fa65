"""``kompakt log explain`` and ``log compact`` with the broker's defaults (issue 17).

Kafka's compaction guide compacts every topic with ``log.cleanup.policy=compact`` in
``server.properties``. Offline, explain and compact take that file with ``--server-properties``;
with ``--bootstrap`` they read the broker's own values (DescribeConfigs of the BROKER resource).
Each value is shown with where it came from. Before this, both said "cleanup.policy is delete".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.testing.broker import InProcessBroker
from tests.support.log_dirs import T0, kafka_dir

GUIDE_SERVER_PROPERTIES = """\
# the guide's broker: every topic compacted unless it says otherwise
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
sasl.kerberos.service.name=kafka
log.cleanup.policy=compact
log.cleaner.dedupe.bufer.size=134217728
log.cleaner.threads=2
log.cleaner.io.max.bytes.per.second=15728640
"""


def explain_json(cli: Any, path: Path, *args: str) -> list[dict[str, Any]]:
    result = cli("log", "explain", str(path), "-o", "json", "--now", str(T0), *args)
    assert result.code == 0, result.err
    reports: list[dict[str, Any]] = result.json()
    return reports


def config_row(report: dict[str, Any], name: str) -> dict[str, str]:
    row: dict[str, str] = next(c for c in report["configs"] if c["name"] == name)
    return row


@pytest.fixture
def server_properties(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(GUIDE_SERVER_PROPERTIES)
    return path


def test_without_the_brokers_file_a_kafka_directory_is_explained_as_delete(tmp_path: Path, cli: Any) -> None:
    [report] = explain_json(cli, kafka_dir(tmp_path / "kafka"))
    assert report["verdict"] == "not compacting: cleanup.policy is delete"


def test_a_verdict_that_rests_on_kafkas_default_policy_says_how_to_give_the_broker(
    tmp_path: Path, cli: Any, server_properties: Path
) -> None:
    data = kafka_dir(tmp_path / "kafka")
    result = cli("log", "explain", str(data))
    assert result.code == 0, result.err
    assert "verdict: not compacting: cleanup.policy is delete" in result.out
    assert (
        "note: kt-0 take Kafka's default cleanup.policy=delete; if the broker sets "
        "log.cleanup.policy=compact, give its --server-properties FILE or --bootstrap HOST:PORT"
    ) in result.err
    # With the broker's file, or a policy of the topic's own, there is nothing to say.
    with_file = cli("log", "explain", str(data), "--server-properties", str(server_properties))
    assert "Kafka's default cleanup.policy" not in with_file.err
    own = cli("log", "explain", str(data), "--config", "cleanup.policy=delete")
    assert "verdict: not compacting: cleanup.policy is delete" in own.out
    assert "Kafka's default cleanup.policy" not in own.err


def test_server_properties_log_cleanup_policy_compact_gives_the_right_verdict(
    tmp_path: Path, cli: Any, server_properties: Path
) -> None:
    data = kafka_dir(tmp_path / "kafka")
    [report] = explain_json(cli, data, "--server-properties", str(server_properties))
    assert report["verdict"] != "not compacting: cleanup.policy is delete"
    assert report["verdict"].startswith("will be cleaned at the next cleaner pass"), report["verdict"]
    assert config_row(report, "cleanup.policy") == {
        "name": "cleanup.policy",
        "value": "compact",
        "source": f"server.properties {server_properties}: log.cleanup.policy",
    }
    assert config_row(report, "log.cleaner.threads")["source"] == (
        f"server.properties {server_properties}: log.cleaner.threads"
    )
    # --broker-config wins over the file, and says so.
    [report] = explain_json(
        cli,
        data,
        "--server-properties",
        str(server_properties),
        "--broker-config",
        "log.cleanup.policy=delete",
    )
    assert report["verdict"] == "not compacting: cleanup.policy is delete"
    assert config_row(report, "cleanup.policy")["source"] == "--broker-config: log.cleanup.policy"


def test_settings_kompakt_does_not_use_are_skipped_with_a_note(
    tmp_path: Path, cli: Any, server_properties: Path
) -> None:
    result = cli(
        "log", "explain", str(kafka_dir(tmp_path / "kafka")), "--server-properties", str(server_properties)
    )
    assert result.code == 0, result.err
    # Kafka's own names that change nothing here, and then a typo, which is not silently ignored.
    assert (
        "ignored 2 setting(s) kompakt does not use: process.roles, sasl.kerberos.service.name" in result.err
    )
    assert (
        "ignored 1 setting(s) unknown to Kafka 4.1: log.cleaner.dedupe.bufer.size "
        "(did you mean log.cleaner.dedupe.buffer.size?)" in result.err
    )
    assert "will be cleaned at the next cleaner pass" in result.out


def test_a_missing_server_properties_file_is_a_usage_error(tmp_path: Path, cli: Any) -> None:
    result = cli(
        "log", "explain", str(kafka_dir(tmp_path / "kafka")), "--server-properties", str(tmp_path / "nope")
    )
    assert result.code == 2
    assert "--server-properties: cannot read" in result.err


def test_the_static_map_takes_the_brokers_file(tmp_path: Path, cli: Any, server_properties: Path) -> None:
    html = tmp_path / "map.html"
    data = kafka_dir(tmp_path / "kafka")
    result = cli(
        "log", "explain", str(data), "--html", str(html), "--server-properties", str(server_properties)
    )
    assert result.code == 0, result.err
    page = html.read_text()
    assert "cleanup.policy is delete" not in page
    assert "will be cleaned at the next cleaner pass" in page


def test_offline_compact_takes_the_brokers_file(tmp_path: Path, cli: Any, server_properties: Path) -> None:
    data = kafka_dir(tmp_path / "kafka")
    result = cli("log", "compact", str(data), "-o", "json", "--server-properties", str(server_properties))
    assert result.code == 0, result.err
    [row] = result.json()
    assert row["partition"] == "kt-0" and row["records_written"] < row["records_read"]


@pytest.fixture
def compacting_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    broker = InProcessBroker(tmp_path / "broker-data", overrides={"log.cleanup.policy": "compact"})
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_bootstrap_reads_the_brokers_own_defaults(compacting_broker: InProcessBroker, cli: Any) -> None:
    """The guide's first example on a running broker: the topic has no cleanup.policy of its own,
    the broker compacts by default. explain on its directory with --bootstrap asks the broker."""
    compacting_broker.create_topic("user-profiles")
    data = compacting_broker.data_dir
    [before] = explain_json(cli, data / "user-profiles-0")
    assert before["verdict"] == "not compacting: cleanup.policy is delete"  # no broker info: Kafka's default
    [report] = explain_json(cli, data / "user-profiles-0", "--bootstrap", compacting_broker.bootstrap_servers)
    assert report["verdict"] != "not compacting: cleanup.policy is delete"
    row = config_row(report, "cleanup.policy")
    assert row["value"] == "compact"
    assert row["source"] == (
        f"cluster {compacting_broker.bootstrap_servers}, broker 0 (STATIC_BROKER_CONFIG): log.cleanup.policy"
    )


def test_a_kompakt_directorys_dynamic_broker_configs_apply(
    compacting_broker: InProcessBroker, cli: Any
) -> None:
    """kafka-configs --entity-type brokers --entity-name 0 --alter --add-config log.cleanup.policy=compact
    persists in the data directory; offline explain reads it there."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    compacting_broker.create_topic("t")
    admin = AdminClient({"bootstrap.servers": compacting_broker.bootstrap_servers})
    entry = ConfigEntry("log.cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    [report] = explain_json(cli, compacting_broker.data_dir / "t-0")
    row = config_row(report, "cleanup.policy")
    assert row["value"] == "compact,delete"
    assert row["source"] == ("kompakt-broker-dynamic.json (dynamic, this broker): log.cleanup.policy")


def test_offline_tools_say_when_the_first_run_compiles(
    tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kompakt.cleaner.warmup as warmup

    monkeypatch.setattr(warmup, "kernels_ready", lambda: False)  # no precompiled kernels, cold cache
    result = cli("log", "explain", str(kafka_dir(tmp_path / "kafka")))
    assert result.code == 0, result.err
    assert "compiling native kernels, first run only (typically 5-20 s;" in result.err
    monkeypatch.setattr(warmup, "kernels_ready", lambda: True)
    assert "compiling native kernels" not in cli("log", "explain", str(tmp_path / "kafka")).err
