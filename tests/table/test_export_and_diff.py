"""Exports read back by pyarrow and DuckDB, and ``table diff`` across a topic, its backup and its files."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from kompakt.backup.backup import run_backup
from kompakt.backup.config import parse_backup_config
from kompakt.table.export import ExportError, export_tables
from kompakt.table.offline import open_tables
from kompakt.testing import InProcessBroker

from .table_helpers import TOPIC, CliResult, produce


def _fill(broker: InProcessBroker) -> dict[bytes, bytes]:
    items = [(f"key-{i:03d}".encode(), f"value {i} é".encode()) for i in range(60)]
    produce(broker.bootstrap_servers, TOPIC, items)
    produce(broker.bootstrap_servers, TOPIC, [(b"key-001", b"changed"), (b"key-002", None)])
    produce(broker.bootstrap_servers, TOPIC, [(b"key-003", b"with headers")], headers=[("h", b"1")])
    expected = dict(items)
    expected[b"key-001"] = b"changed"
    expected[b"key-003"] = b"with headers"
    del expected[b"key-002"]
    return expected


def test_parquet_export_reads_back_in_pyarrow_and_duckdb(
    broker: InProcessBroker, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    expected = _fill(broker)
    broker.roll(TOPIC)
    broker.compact_now(TOPIC)
    for source in (["--log-dir", str(broker.data_dir)], ["--admin-url", broker.admin_url]):
        out = tmp_path / f"t{source[0]}.parquet"
        got = cli("table", "export", TOPIC, "--format", "parquet", "--out", str(out), *source, "-o", "json")
        assert got.code == 0, got.err
        assert json.loads(got.out)["rows"] == len(expected)
        table = pq.read_table(out)
        assert table.column_names == ["partition", "offset", "timestamp", "key", "value", "headers"]
        rows = table.to_pylist()
        assert {r["key"].encode(): r["value"].encode() for r in rows} == expected
        by_key = {r["key"]: r for r in rows}
        assert by_key["key-003"]["headers"] == [{"key": "h", "value": b"1"}]
        assert by_key["key-004"]["headers"] == []
        con = duckdb.connect()
        found = con.execute(f"select key, value from read_parquet('{out}') order by key").fetchall()
        assert found == sorted((k.decode(), v.decode()) for k, v in expected.items())
        assert con.execute(
            f"select count(*) from read_parquet('{out}') where value = 'changed'"
        ).fetchone() == (1,)


def test_csv_and_binary_exports(broker: InProcessBroker, tmp_path: Path) -> None:
    produce(broker.bootstrap_servers, TOPIC, [(b"a", b"1"), (b"b", None), (b"\xff", b"\xfe")])
    tables = open_tables(broker.data_dir, TOPIC)
    with pytest.raises(ExportError, match="is not UTF-8; export with --encoding base64 or hex"):
        export_tables(tables, tmp_path / "x.csv", fmt="csv")
    out = io.BytesIO()
    stats = export_tables(tables, out, fmt="csv", encoding="hex", include_tombstones=True)
    assert (stats.rows, stats.tombstones) == (3, 1)
    rows = list(csv.DictReader(io.StringIO(out.getvalue().decode())))
    assert sorted((r["key"], r["value"]) for r in rows) == [("61", "31"), ("62", ""), ("ff", "fe")]
    stats = export_tables(tables, tmp_path / "raw.parquet", fmt="parquet", encoding="binary")
    raw = pq.read_table(tmp_path / "raw.parquet").to_pylist()
    assert sorted((r["key"], r["value"]) for r in raw) == [(b"a", b"1"), (b"\xff", b"\xfe")]
    with pytest.raises(ExportError, match="Parquet only"):
        export_tables(tables, tmp_path / "raw.jsonl", fmt="jsonl", encoding="binary")


def test_diff_topic_backup_and_log_dir(
    broker: InProcessBroker, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    _fill(broker)
    broker.roll(TOPIC)
    broker.compact_now(TOPIC)
    root = tmp_path / "backups"
    config = parse_backup_config(
        {
            "backup_id": "b1",
            "source": {"bootstrap_servers": broker.bootstrap_servers, "topics": {"include": [TOPIC]}},
            "storage": {"backend": "filesystem", "path": str(root)},
        }
    )
    run_backup(config)
    topic = f"kafka://{broker.bootstrap_servers}"
    backup = str(root / "b1")
    log_dir = str(broker.data_dir)
    for a, b in ((topic, backup), (backup, log_dir), (log_dir, topic)):
        got = cli("table", "diff", a, b, "--topic", TOPIC, "-o", "json")
        assert got.code == 0, got.out + got.err
        result = json.loads(got.out)
        assert result["equal"] is True
        assert result["keys_a"] == result["keys_b"] == 59
    # offsets moved by another compaction are not a difference
    produce(broker.bootstrap_servers, TOPIC, [(b"key-010", "value 10 é".encode())])
    assert cli("table", "diff", topic, backup, "--topic", TOPIC).code == 0
    produce(
        broker.bootstrap_servers, TOPIC, [(b"key-011", b"planted"), (b"new-key", b"n"), (b"key-012", None)]
    )
    got = cli("table", "diff", topic, backup, "--topic", TOPIC, "-o", "json")
    assert got.code == 1
    result = json.loads(got.out)
    assert (result["value_differs"], result["only_in_a"], result["only_in_b"]) == (1, 1, 1)
    kinds = {(d["kind"], d["key"]) for d in result["examples"]}
    assert kinds == {("value_differs", "key-011"), ("only_in_a", "new-key"), ("only_in_b", "key-012")}
    got = cli("table", "diff", topic, backup, "--topic", TOPIC)
    assert "different: A has 59 live keys, B 59" in got.out
    assert "value differs" in got.out and "key-011" in got.out


def test_diff_by_key_across_partition_counts(broker: InProcessBroker, cli: Callable[..., CliResult]) -> None:
    broker.create_topic("one", 1, cleanup_policy="compact")
    items = [(f"k{i}".encode(), b"v") for i in range(20)]
    produce(broker.bootstrap_servers, TOPIC, items)
    produce(broker.bootstrap_servers, "one", items)
    topic = f"kafka://{broker.bootstrap_servers}"
    got = cli("table", "diff", topic, topic, "--topic", TOPIC, "--topic-b", "one", "-o", "json")
    assert got.code == 1
    assert "pass --by-key" in json.loads(got.out)["notes"][0]
    got = cli("table", "diff", topic, topic, "--topic", TOPIC, "--topic-b", "one", "--by-key", "-o", "json")
    assert got.code == 0 and json.loads(got.out)["equal"] is True
