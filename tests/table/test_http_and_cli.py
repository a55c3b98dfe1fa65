"""Lookups, scans and counts through the admin endpoint and ``kompakt table`` (issue 18)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kompakt.table.partitioner import partition_for
from kompakt.testing import InProcessBroker

from .table_helpers import TOPIC, CliResult, produce


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def key_url(broker: InProcessBroker, key: str, query: str = "") -> str:
    return f"{broker.admin_url}/v1/topics/{TOPIC}/keys/{key}" + (f"?{query}" if query else "")


def test_lookup_over_http(broker: InProcessBroker) -> None:
    produce(broker.bootstrap_servers, TOPIC, [(f"user-{i}".encode(), f"v1-{i}".encode()) for i in range(30)])
    produce(broker.bootstrap_servers, TOPIC, [(b"user-3", b"v2-3"), (b"user-4", None), (b"user-5", b"")])
    produce(broker.bootstrap_servers, TOPIC, [(b"with-headers", b"h")], headers=[("trace", b"abc")])
    produce(broker.bootstrap_servers, TOPIC, [(b"\xff\x00bin", b"\x01\x02")])

    status, data = get(key_url(broker, "user-3"))
    assert status == 200
    assert (data["found"], data["value"], data["partition"]) == (True, "v2-3", partition_for(b"user-3", 3))
    assert data["partitioner"] == "murmur2"
    assert data["location"]["segment"] == "00000000000000000000.log"
    assert data["location"]["section"] == "active"

    status, data = get(key_url(broker, "user-5"))
    assert (status, data["found"], data["value"], data["tombstone"]) == (200, True, "", False)

    status, data = get(key_url(broker, "user-4"))
    assert (status, data["found"], data["tombstone"], data["value"]) == (404, False, True, None)
    assert isinstance(data["offset"], int)

    status, data = get(key_url(broker, "nobody"))
    assert (status, data["found"], data["tombstone"], data["location"]) == (404, False, False, None)

    status, data = get(key_url(broker, "with-headers"))
    assert data["headers"] == [
        {"key": "trace", "value": "abc", "value_base64": base64.b64encode(b"abc").decode()}
    ]

    b64 = base64.urlsafe_b64encode(b"\xff\x00bin").decode().rstrip("=")
    status, data = get(key_url(broker, b64, "key_encoding=base64"))
    assert (status, data["value_base64"], data["key"]) == (200, base64.b64encode(b"\x01\x02").decode(), None)
    status, data = get(key_url(broker, "%FF%00bin"))
    assert (status, data["key_base64"]) == (200, base64.b64encode(b"\xff\x00bin").decode())
    status, data = get(key_url(broker, "ff0062696e", "key_encoding=hex"))
    assert status == 200

    right = partition_for(b"user-7", 3)
    assert get(key_url(broker, "user-7", f"partition={right}"))[0] == 200
    assert get(key_url(broker, "user-7", f"partition={(right + 1) % 3}"))[0] == 404
    assert get(key_url(broker, "user-7", "partitioner=any"))[1]["value"] == "v1-7"

    assert get(key_url(broker, "user-7", "key_encoding=rot13")) == (
        400,
        {"error": "unknown key encoding 'rot13' (expected one of utf8, base64, hex)"},
    )
    assert get(key_url(broker, "user-7", "partition=9"))[0] == 404
    status, data = get(f"{broker.admin_url}/v1/topics/missing/keys/x")
    assert (status, data) == (404, {"error": "unknown topic 'missing'"})


def test_lookups_follow_appends_compaction_and_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with InProcessBroker(data_dir, overrides={"log.cleaner.enable": "false"}) as broker:
        broker.create_topic(TOPIC, 1, cleanup_policy="compact", delete_retention_ms=1000)
        produce(broker.bootstrap_servers, TOPIC, [(b"k", b"one"), (b"gone", b"x")])
        assert get(key_url(broker, "k"))[1]["value"] == "one"
        produce(broker.bootstrap_servers, TOPIC, [(b"k", b"two"), (b"gone", None)])
        # the index reads the new records when asked: no wait, no background pass needed
        assert get(key_url(broker, "k"))[1]["value"] == "two"
        assert get(key_url(broker, "gone"))[1]["tombstone"] is True
        broker.roll(TOPIC)
        broker.compact_now(TOPIC)
        broker.advance_clock(2000)
        broker.compact_now(TOPIC)  # the tombstone's horizon has passed: it is removed
        status, data = get(key_url(broker, "k"))
        assert (status, data["value"], data["location"]["section"]) == (200, "two", "clean")
        assert get(key_url(broker, "gone"))[1] == {
            **get(key_url(broker, "gone"))[1],
            "found": False,
            "tombstone": False,
        }
        counts = get(f"{broker.admin_url}/v1/topics/{TOPIC}/table/counts")[1]
        assert (counts["live_keys"], counts["tombstones"]) == (1, 0)
    with InProcessBroker(data_dir, overrides={"log.cleaner.enable": "false"}) as broker:
        assert get(key_url(broker, "k"))[1]["value"] == "two"
        produce(broker.bootstrap_servers, TOPIC, [(b"k", b"three")])
        assert get(key_url(broker, "k"))[1]["value"] == "three"


def test_scan_pages_and_counts_over_http(broker: InProcessBroker) -> None:
    items = [(f"a-{i}".encode(), f"v{i}".encode()) for i in range(12)] + [(b"b-1", b"x"), (b"b-2", None)]
    produce(broker.bootstrap_servers, TOPIC, items)
    produce(broker.bootstrap_servers, TOPIC, [(b"a-0", b"new")])
    seen: dict[str, str] = {}
    cursor: dict[str, int] | None = {"partition": 0, "offset": 0}
    pages = 0
    while cursor is not None:
        query = f"limit=5&from_partition={cursor['partition']}&from_offset={cursor['offset']}"
        page = get(f"{broker.admin_url}/v1/topics/{TOPIC}/table?{query}")[1]
        for row in page["rows"]:
            assert row["key"] not in seen
            seen[row["key"]] = row["value"]
        cursor = page["next"]
        pages += 1
    expected = {f"a-{i}": f"v{i}" for i in range(12)} | {"a-0": "new", "b-1": "x"}
    assert seen == expected
    assert pages == 3
    prefixed = get(f"{broker.admin_url}/v1/topics/{TOPIC}/table?prefix=b-&include_tombstones=true")[1]
    assert sorted((r["key"], r["tombstone"]) for r in prefixed["rows"]) == [("b-1", False), ("b-2", True)]
    counts = get(f"{broker.admin_url}/v1/topics/{TOPIC}/table/counts")[1]
    assert (counts["live_keys"], counts["tombstones"]) == (13, 1)
    assert [p["partition"] for p in counts["partitions"]] == [0, 1, 2]
    assert sum(p["live_keys"] for p in counts["partitions"]) == 13
    assert get(f"{broker.admin_url}/v1/topics/{TOPIC}/table?limit=0")[0] == 400


def test_table_cli_against_the_broker_and_its_files(
    broker: InProcessBroker, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    produce(broker.bootstrap_servers, TOPIC, [(b"alpha", b"1"), (b"beta", b"2"), (b"gamma", None)])
    produce(broker.bootstrap_servers, TOPIC, [(b"alpha", b"3")])
    url = broker.admin_url
    for source in (["--admin-url", url], ["--log-dir", str(broker.data_dir)]):
        got = cli("table", "get", TOPIC, "alpha", *source)
        assert got.code == 0, got.err
        assert "│ 3 " in got.out
        got = cli("table", "get", TOPIC, "616c706861", "--key-encoding", "hex", *source, "-o", "json")
        assert (got.code, json.loads(got.out)["value"]) == (0, "3")
        got = cli("table", "get", TOPIC, "gamma", *source)
        assert got.code == 1
        assert "key gamma is deleted in tbl-" in got.err and "(tombstone at offset" in got.err
        got = cli("table", "get", TOPIC, "delta", *source)
        assert got.code == 1 and "key delta is not in tbl-" in got.err
        got = cli("table", "scan", TOPIC, *source, "-o", "json")
        assert got.code == 0, got.err
        rows = [json.loads(line) for line in got.out.splitlines()]
        assert sorted((r["key"], r["value"]) for r in rows) == [("alpha", "3"), ("beta", "2")]
        got = cli("table", "scan", TOPIC, "--include-tombstones", "--prefix", "g", *source, "-o", "json")
        assert [json.loads(line)["tombstone"] for line in got.out.splitlines()] == [True]
        got = cli("table", "counts", TOPIC, *source, "-o", "json")
        data = json.loads(got.out)
        assert (data["live_keys"], data["tombstones"]) == (2, 1)
        out = tmp_path / f"export-{source[0][2:]}.jsonl"
        got = cli("table", "export", TOPIC, "--format", "jsonl", "--out", str(out), *source)
        assert got.code == 0, got.err
        exported = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted((r["key"], r["value"]) for r in exported) == [("alpha", "3"), ("beta", "2")]
    assert cli("table", "get", TOPIC, "x", "--key-encoding", "nope", "--admin-url", url).code == 2
    assert (
        cli(
            "table", "export", TOPIC, "--format", "xml", "--out", str(tmp_path / "x"), "--admin-url", url
        ).code
        == 2
    )
