"""The offline tools on a real Kafka 4.1.2 log directory, read with its metadata log (issue 31).

``tests/log/fixtures/kafka41_cluster`` is a stopped KRaft node's directory with compacted and
delete topics and their overrides, a deleted topic, broker-level overrides (the cluster default and
broker 1's own), ``__consumer_offsets`` (50 partitions, one used) and ``__cluster_metadata-0`` with
snapshots; ``describe_configs.json`` is what the live broker's DescribeConfigs returned for every
topic just before it stopped. Before the metadata log was read, every topic there was "not
compacting: cleanup.policy is delete", ``log compact`` compacted nothing (or, with
``--config cleanup.policy=compact``, everything, the delete topic and the metadata log included),
every run warned about ``quorum-state`` and ``*.checkpoint``, and the tables listed 50 empty
``__consumer_offsets`` partitions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kompakt.log.metadata_files import random_kafka_uuid, write_partition_metadata

FIXTURE = Path(__file__).parent.parent / "log" / "fixtures" / "kafka41_cluster"
LOGS = FIXTURE / "logs"
SERVER_PROPERTIES = FIXTURE / "server.properties"
DESCRIBED: dict[str, Any] = json.loads((FIXTURE / "describe_configs.json").read_text())
NOW = "2026-12-05T00:00:00Z"

#: DescribeConfigs' source -> how the offline report must name where the value came from.
ORIGINS = {
    "DYNAMIC_TOPIC_CONFIG": "topic override (metadata log)",
    "DYNAMIC_BROKER_CONFIG": "metadata log (broker 1)",
    "DYNAMIC_DEFAULT_BROKER_CONFIG": "metadata log (cluster default)",
    "STATIC_BROKER_CONFIG": f"server.properties {SERVER_PROPERTIES}",
    "DEFAULT_CONFIG": "Kafka default",
}
WARNINGS = ("quorum-state", ".checkpoint", "unknown file", "WARNING")


def compacted_topics() -> set[str]:
    return {
        name
        for name, topic in DESCRIBED["topics"].items()
        if "compact" in topic["configs"]["cleanup.policy"]["value"].split(",")
    }


def explain(cli: Any, *args: str) -> list[dict[str, Any]]:
    result = cli("log", "explain", str(LOGS), "-o", "json", "--now", NOW, *args)
    assert result.code == 0, result.err
    assert not any(w in result.err for w in WARNINGS), result.err
    reports: list[dict[str, Any]] = result.json()
    return reports


def files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def kafka_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "logs"
    shutil.copytree(LOGS, copy)
    return copy


# --------------------------------------------------------------------------------------------
# explain and the static map


def test_explain_gives_each_topic_the_live_brokers_configs_and_verdict(cli: Any) -> None:
    reports = explain(cli, "--server-properties", str(SERVER_PROPERTIES))
    assert sorted({r["topic"] for r in reports}) == sorted(DESCRIBED["topics"])  # no __cluster_metadata
    assert len(reports) == sum(t["partitions"] for t in DESCRIBED["topics"].values())
    compared = 0
    for report in reports:
        live = DESCRIBED["topics"][report["topic"]]["configs"]
        for row in report["configs"]:
            entry = live.get(row["name"]) or DESCRIBED["broker"].get(row["name"])
            if entry is None:
                continue  # kompakt's own settings (kompakt.tombstone.*) are not Kafka's
            where = f"{report['topic']}-{report['partition']} {row['name']}"
            assert row["value"] == entry["value"], where
            assert row["source"].startswith(ORIGINS[entry["source"]]), (where, row["source"])
            compared += 1
        policy = live["cleanup.policy"]["value"].split(",")
        delete_only = report["verdict"] == "not compacting: cleanup.policy is delete"
        assert delete_only == ("compact" not in policy), (report["topic"], report["verdict"])
    assert compared > 500


def test_explain_without_server_properties_still_reads_the_metadata_log(cli: Any) -> None:
    reports = {f"{r['topic']}-{r['partition']}": r for r in explain(cli)}
    assert reports["events-0"]["verdict"] == "not compacting: cleanup.policy is delete"
    for name in ("orders-0", "__consumer_offsets-1", "plain-0", "customers-0"):
        assert not reports[name]["verdict"].startswith("not compacting"), name
    segment_bytes = {r["name"]: r for r in reports["orders-0"]["configs"]}["segment.bytes"]
    assert (segment_bytes["value"], segment_bytes["source"]) == ("1048576", "topic override (metadata log)")
    plain = {r["name"]: r for r in reports["plain-0"]["configs"]}["cleanup.policy"]
    assert (plain["value"], plain["source"]) == (
        "compact",
        "metadata log (cluster default): log.cleanup.policy",
    )


def test_the_summary_leaves_out_empty_internal_partitions_and_the_metadata_log(cli: Any) -> None:
    result = cli("log", "explain", str(LOGS), "--summary", "--now", NOW)
    assert result.code == 0, result.err
    assert "49 empty partitions of __consumer_offsets not listed" in result.err
    assert "__consumer_offsets-1" in result.out  # the one holding the group's offsets
    assert "__consumer_offsets-0 " not in result.out and "__cluster_metadata" not in result.out
    assert "orders-0" in result.out and "events-0" in result.out
    assert not any(w in result.err for w in WARNINGS), result.err


def test_the_static_map_takes_the_metadata_log_too(cli: Any, tmp_path: Path) -> None:
    page = tmp_path / "map.html"
    result = cli("log", "explain", str(LOGS), "--html", str(page), "--now", NOW)
    assert result.code == 0, result.err
    assert "wrote the log map of 9 partitions" in result.out
    html = page.read_text()
    assert "orders-0" in html and "__cluster_metadata" not in html
    assert "cleanup.policy is delete" in html  # events only
    assert html.count("cleanup.policy is delete") < 5


def test_explaining_the_metadata_log_itself_is_a_usage_error(cli: Any) -> None:
    result = cli("log", "explain", str(LOGS / "__cluster_metadata-0"), "--now", NOW)
    assert result.code == 2
    assert "KRaft's metadata log, not a topic" in result.err


# --------------------------------------------------------------------------------------------
# compact


def test_compact_compacts_exactly_the_compacted_topics(cli: Any, kafka_copy: Path) -> None:
    before = files(kafka_copy)
    result = cli("log", "compact", str(kafka_copy), "-o", "json")
    assert result.code == 0, result.err
    assert not any(w in result.err for w in WARNINGS), result.err
    rows = result.json()
    assert {r["partition"].rpartition("-")[0] for r in rows} == compacted_topics()
    assert len(rows) == sum(DESCRIBED["topics"][t]["partitions"] for t in compacted_topics())
    orders = {r["partition"]: r for r in rows if r["partition"].startswith("orders-")}
    assert all(r["passes"] == 1 and r["end_offset"] == 100 for r in orders.values())
    after = files(kafka_copy)
    untouched = [n for n in before if n.startswith(("__cluster_metadata-0/", "events-0/"))]
    assert untouched and all(after[n] == before[n] for n in untouched)
    assert set(after) - set(before) <= {".lock"}
    checkpoint = (kafka_copy / "cleaner-offset-checkpoint").read_text()
    assert "__cluster_metadata" not in checkpoint and "events" not in checkpoint
    assert "__cluster_metadata" not in (kafka_copy / "replication-offset-checkpoint").read_text()
    epoch = json.loads((LOGS / ".kafka_cleanshutdown").read_text())["brokerEpoch"]
    assert json.loads((kafka_copy / ".kafka_cleanshutdown").read_text())["brokerEpoch"] == epoch


def test_compact_config_stays_an_override(cli: Any, kafka_copy: Path) -> None:
    before = files(kafka_copy)
    result = cli("log", "compact", str(kafka_copy), "--config", "cleanup.policy=compact", "-o", "json")
    assert result.code == 0, result.err
    compacted = {r["partition"] for r in result.json()}
    assert "events-0" in compacted and "__cluster_metadata-0" not in compacted
    assert not any(w in result.err for w in WARNINGS), result.err
    after = files(kafka_copy)
    assert all(after[n] == before[n] for n in before if n.startswith("__cluster_metadata-0/"))


def test_compact_leaves_a_stray_partition_alone(cli: Any, kafka_copy: Path) -> None:
    ghost = kafka_copy / "ghost-0"
    shutil.copytree(kafka_copy / "orders-0", ghost)
    write_partition_metadata(ghost, random_kafka_uuid())
    before = files(ghost)
    result = cli("log", "compact", str(kafka_copy), "--config", "cleanup.policy=compact", "-o", "json")
    assert result.code == 0, result.err
    assert "ghost-0" not in {r["partition"] for r in result.json()}
    assert "ghost-0 (topic 'ghost' is not in the metadata log" in result.err
    assert files(ghost) == before


# --------------------------------------------------------------------------------------------
# verify, dump


def test_verify_is_clean_and_lists_no_empty_internal_partitions(cli: Any) -> None:
    result = cli("log", "verify", str(LOGS))
    assert result.code == 0, result.err
    assert "49 empty partitions of __consumer_offsets not listed" in result.err
    assert "__consumer_offsets-0 " not in result.out and "__consumer_offsets-1" in result.out
    assert not any(w in result.err for w in WARNINGS), result.err
    report = cli("log", "verify", str(LOGS), "-o", "json").json()
    assert report["ok"] and report["notes"] == []
    assert len(report["partitions"]) == 59  # the JSON keeps every partition


def test_verify_reports_a_stray_directory_and_a_damaged_snapshot(cli: Any, kafka_copy: Path) -> None:
    ghost = kafka_copy / "ghost-0"
    shutil.copytree(kafka_copy / "events-0", ghost)
    write_partition_metadata(ghost, random_kafka_uuid())
    snapshot = sorted((kafka_copy / "__cluster_metadata-0").glob("*.checkpoint"))[-1]
    data = bytearray(snapshot.read_bytes())
    data[100] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    report = cli("log", "verify", str(kafka_copy), "-o", "json")
    assert report.code == 1
    defects = {(Path(d["file"]).name, d["message"].split(":")[0]) for d in report.json()["defects"]}
    assert ("ghost-0", "not in the metadata log") in defects
    assert (snapshot.name, "CRC mismatch (stored 0x") in {(f, m[:23]) for f, m in defects}


def test_dump_decodes_the_metadata_log(cli: Any) -> None:
    result = cli(
        "log", "dump", str(LOGS / "__cluster_metadata-0"), "--cluster-metadata-decoder", "-o", "json"
    )
    assert result.code == 0, result.err
    payloads = [r["payload"] for b in result.json()[0]["batches"] for r in b["records"]]
    topics = {p["data"]["name"] for p in payloads if isinstance(p, dict) and p["type"] == "TOPIC_RECORD"}
    assert topics == set(DESCRIBED["topics"]) | {"gone"}
    assert any(isinstance(p, dict) and p["type"] == "REMOVE_TOPIC_RECORD" for p in payloads)
    assert not [p for p in payloads if isinstance(p, str)]  # every record decoded
    snapshot = sorted((LOGS / "__cluster_metadata-0").glob("*.checkpoint"))[-1]
    dumped = cli("log", "dump", str(snapshot), "--cluster-metadata-decoder", "-o", "json")
    assert dumped.code == 0, dumped.err
    kinds = [r["payload"]["type"] for b in dumped.json()[0]["batches"] for r in b["records"]]
    assert kinds[0] == "SnapshotHeaderRecord" and kinds[-1] == "SnapshotFooterRecord"


def test_dump_prints_control_record_keys_escaped(cli: Any) -> None:
    result = cli("log", "dump", str(LOGS / "__cluster_metadata-0"), "--records", "--max-batches", "3")
    assert result.code == 0, result.err
    assert '"\\x00\\x00\\x00\\x02"' in result.out  # the LeaderChange record's key
    assert not any(ch in result.out for ch in "\x00\x01\x02\x05\x06\x1b")


def test_kafka_dump_log_passes_the_cluster_metadata_decoder(cli: Any) -> None:
    segment = LOGS / "__cluster_metadata-0" / "00000000000000000000.log"
    result = cli("kafka-dump-log", "--files", str(segment), "--cluster-metadata-decoder", "--output", "json")
    assert result.code == 0, result.err
    assert '"type": "TOPIC_RECORD"' in result.out


# --------------------------------------------------------------------------------------------
# table, sizing


def test_table_notes_a_topic_that_is_not_compacted(cli: Any) -> None:
    result = cli("table", "counts", "events", "--log-dir", str(LOGS))
    assert result.code == 0, result.err
    assert "cleanup.policy=delete (its own override in the metadata log): it is not compacted" in result.err
    quiet = cli("table", "counts", "orders", "--log-dir", str(LOGS))
    assert quiet.code == 0 and "note:" not in quiet.err, quiet.err


def test_table_notes_partitions_held_by_other_brokers(cli: Any, kafka_copy: Path) -> None:
    shutil.rmtree(kafka_copy / "orders-1")  # as on a broker that holds only partition 0
    result = cli("table", "counts", "orders", "--log-dir", str(kafka_copy))
    assert result.code == 0, result.err
    assert "holds partitions [0] of topic 'orders', whose partitions [1] are on broker(s) [1]" in result.err


def test_table_has_no_table_of_the_metadata_log(cli: Any) -> None:
    result = cli("table", "counts", "__cluster_metadata", "--log-dir", str(LOGS))
    assert result.code == 1
    assert "no partition of topic '__cluster_metadata'" in result.err


def test_sizing_takes_the_directorys_cleaner_settings(cli: Any) -> None:
    result = cli("sizing", "--keys", "1000000", "--log-dir", str(LOGS), "-o", "json")
    assert result.code == 0, result.err
    sized = result.json()
    broker = DESCRIBED["broker"]
    assert sized["threads"] == int(broker["log.cleaner.threads"]["value"]) == 2
    assert sized["dedupe_buffer_size"] == int(broker["log.cleaner.dedupe.buffer.size"]["value"])
    assert sized["sources"] == {
        "log.cleaner.threads": "metadata log (broker 1)",
        "log.cleaner.dedupe.buffer.size": "metadata log (cluster default)",
        "log.cleaner.io.buffer.load.factor": "Kafka default",
    }
    flagged = cli("sizing", "--keys", "1", "--log-dir", str(LOGS), "--threads", "4", "-o", "json").json()
    assert (flagged["threads"], flagged["sources"]["log.cleaner.threads"]) == (4, "--threads")
