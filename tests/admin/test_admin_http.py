"""Every admin HTTP endpoint: status codes, JSON shapes and effects."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from kompakt.admin.client import AdminClient, AdminRequestError
from kompakt.testing import InProcessBroker

from .conftest import COMPACTED, produce

DEADLINE_S = 10.0


def http(method: str, url: str, body: bytes | None = None) -> tuple[int, Any]:
    """One request as the admin client sends it: a POST says its body is JSON."""
    headers = {"Content-Type": "application/json"} if method == "POST" else {}
    request = urllib.request.Request(url, method=method, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def fill(broker: InProcessBroker) -> None:
    produce(
        broker.bootstrap_servers,
        COMPACTED,
        [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None), (b"c", b"1"), (b"a", b"3")],
    )


def test_partitions_lists_every_partition_with_segments(broker: InProcessBroker) -> None:
    fill(broker)
    status, data = http("GET", f"{broker.admin_url}/v1/partitions")
    assert status == 200
    assert isinstance(data["now_ms"], int)
    parts = {(p["topic"], p["partition"]): p for p in data["partitions"]}
    p0 = parts[(COMPACTED, 0)]
    assert (p0["log_start_offset"], p0["log_end_offset"], p0["high_watermark"]) == (0, 6, 6)
    assert p0["cleanup_policy"] == ["compact"]
    assert p0["segment_count"] == 1 and p0["size_bytes"] > 0
    assert p0["segments"] == [
        {
            "base_offset": 0,
            "next_offset": 6,
            "size_bytes": p0["size_bytes"],
            "largest_timestamp_ms": p0["segments"][0]["largest_timestamp_ms"],
            "active": True,
        }
    ]
    assert p0["dirty_ratio"] == 0.0  # everything is in the active segment
    assert p0["cleaning_state"] == "idle" and p0["uncleanable"] is False and p0["last_clean"] is None
    broker.roll(COMPACTED, 0)
    p0 = AdminClient(broker.admin_url).partitions(COMPACTED)["partitions"][0]
    assert p0["dirty_ratio"] == 1.0 and p0["cleanable_bytes"] > 0 and p0["first_uncleanable_offset"] == 6
    status, data = http("GET", f"{broker.admin_url}/v1/partitions?topic=nope")
    assert (status, data) == (404, {"error": "unknown topic 'nope'"})


def test_roll_then_compact_wait_removes_duplicates(broker: InProcessBroker) -> None:
    fill(broker)
    status, rolled = http("POST", f"{broker.admin_url}/v1/roll?topic={COMPACTED}&partition=0")
    assert status == 200
    assert rolled["partitions"] == [
        {"topic": COMPACTED, "partition": 0, "rolled": True, "active_base_offset": 6}
    ]
    status, data = http("POST", f"{broker.admin_url}/v1/compact?topic={COMPACTED}&partition=0&wait=true")
    assert status == 200
    (stats,) = data["partitions"]
    assert stats["partition"] == 0 and stats["passes"] == 1 and stats["end_offset"] == 6
    assert (stats["records_read"], stats["records_written"]) == (6, 3)
    assert stats["bytes_written"] < stats["bytes_read"] and stats["seconds"] >= 0
    assert stats["tombstones_removed"] == 0  # a tombstone survives its first clean
    stored = [(r.offset, r.key, r.value) for r in broker.records(COMPACTED, 0)]
    assert stored == [(3, b"b", None), (4, b"c", b"1"), (5, b"a", b"3")]
    last = broker.partitions(COMPACTED)[0]["last_clean"]
    assert last["records_removed"] == 3 and last["end_offset"] == 6


def test_compact_without_wait_is_accepted_and_runs(broker: InProcessBroker) -> None:
    fill(broker)
    broker.roll(COMPACTED)
    status, data = http("POST", f"{broker.admin_url}/v1/compact?topic={COMPACTED}")
    assert status == 202
    assert data == {"topic": COMPACTED, "partitions": [0, 1], "status": "started"}
    broker.admin.wait_background(DEADLINE_S)
    assert broker.partitions(COMPACTED)[0]["last_clean"] is not None
    assert [r.offset for r in broker.records(COMPACTED, 0)] == [3, 4, 5]


def test_compact_refuses_a_non_compacted_topic_and_unknown_partitions(broker: InProcessBroker) -> None:
    broker.create_topic("plain")
    status, data = http("POST", f"{broker.admin_url}/v1/compact?topic=plain&wait=true")
    assert status == 409 and "cleanup.policy=delete" in data["error"]
    status, data = http("POST", f"{broker.admin_url}/v1/roll?topic={COMPACTED}&partition=7")
    assert status == 404 and "compacted-7" in data["error"]
    status, data = http("POST", f"{broker.admin_url}/v1/roll")
    assert (status, data) == (400, {"error": "missing parameter 'topic'"})
    status, data = http("POST", f"{broker.admin_url}/v1/roll?topic={COMPACTED}&partition=x")
    assert status == 400 and "integer" in data["error"]


def test_retry_clears_an_uncleanable_mark(broker: InProcessBroker) -> None:
    cleaner = broker.admin.cleaner
    assert cleaner is not None
    cleaner.manager.mark_uncleanable((COMPACTED, 1), "IOError: disk on fire")
    p1 = broker.partitions(COMPACTED)[1]
    assert p1["uncleanable"] is True and p1["uncleanable_reason"] == "IOError: disk on fire"
    status, data = http("POST", f"{broker.admin_url}/v1/retry?topic={COMPACTED}&partition=1")
    assert status == 200
    assert data == {
        "topic": COMPACTED,
        "partition": 1,
        "cleared": True,
        "previous_reason": "IOError: disk on fire",
    }
    assert broker.partitions(COMPACTED)[1]["uncleanable"] is False
    status, data = http("POST", f"{broker.admin_url}/v1/retry?topic={COMPACTED}&partition=1")
    assert status == 200 and data["cleared"] is False
    status, data = http("POST", f"{broker.admin_url}/v1/retry?topic={COMPACTED}")
    assert status == 400


def test_clock_show_and_advance(broker: InProcessBroker) -> None:
    status, shown = http("GET", f"{broker.admin_url}/v1/clock")
    assert status == 200 and shown["mode"] == "manual"
    start = shown["now_ms"]
    status, data = http("POST", f"{broker.admin_url}/v1/clock/advance?ms=1500")
    assert (status, data) == (200, {"mode": "manual", "now_ms": start + 1500, "advanced_ms": 1500})
    status, data = http("POST", f"{broker.admin_url}/v1/clock/advance?by=25h")
    assert status == 200 and data["now_ms"] == start + 1500 + 25 * 3_600_000
    status, data = http("POST", f"{broker.admin_url}/v1/clock/advance", json.dumps({"by": "90s"}).encode())
    assert status == 200 and data["advanced_ms"] == 90_000
    assert broker.now_ms() == data["now_ms"]
    for query in ("by=-5s", "by=soon", "", "ms=1&by=1s"):
        status, data = http("POST", f"{broker.admin_url}/v1/clock/advance?{query}")
        assert status == 400, query
        assert data["error"]
    assert broker.now_ms() == start + 1500 + 25 * 3_600_000 + 90_000


def test_clock_is_409_on_the_system_clock(real_clock_broker: InProcessBroker) -> None:
    url = real_clock_broker.admin_url
    for method, path in (("GET", "/v1/clock"), ("POST", "/v1/clock/advance?by=1h")):
        status, data = http(method, url + path)
        assert status == 409
        assert data == {
            "error": "the broker runs on the system clock; start it with `kompakt serve --clock manual`"
        }
    with pytest.raises(AdminRequestError, match="system clock"):
        AdminClient(url).advance_clock("1h")


def test_unknown_paths_methods_and_bad_bodies(broker: InProcessBroker) -> None:
    assert http("GET", f"{broker.admin_url}/v2/nothing") == (404, {"error": "no such endpoint: /v2/nothing"})
    status, data = http("GET", f"{broker.admin_url}/v1/compact?topic={COMPACTED}")
    assert status == 405 and "POST" in data["error"]
    status, data = http("POST", f"{broker.admin_url}/v1/roll", b"[1, 2]")
    assert status == 400 and "JSON object" in data["error"]
    status, data = http("POST", f"{broker.admin_url}/v1/roll", b"{not json")
    assert status == 400 and "not JSON" in data["error"]


def test_keep_alive_serves_several_requests_on_one_connection(broker: InProcessBroker) -> None:
    import http.client

    host, port = broker.admin_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for _ in range(3):
            conn.request("GET", "/v1/clock")
            response = conn.getresponse()
            assert response.status == 200
            assert json.loads(response.read())["mode"] == "manual"
    finally:
        conn.close()


def test_explain_endpoint_reports_live_state(broker: InProcessBroker) -> None:
    fill(broker)
    status, data = http("GET", f"{broker.admin_url}/v1/explain?topic={COMPACTED}&partition=0")
    assert status == 200
    (report,) = data["partitions"]
    assert (report["topic"], report["partition"], report["now_ms"]) == (COMPACTED, 0, data["now_ms"])
    assert report["log_end_offset"] == 6 and report["eligible"] is False
    assert isinstance(report["verdict"], str) and report["verdict"]
    broker.roll(COMPACTED, 0)
    report = AdminClient(broker.admin_url).explain(COMPACTED, 0)["partitions"][0]
    assert report["dirty_ratio"] == 1.0 and report["eligible"] is True
    both = AdminClient(broker.admin_url).explain(COMPACTED)["partitions"]
    assert [r["partition"] for r in both] == [0, 1]
    status, data = http("GET", f"{broker.admin_url}/v1/explain?topic=nope")
    assert status == 404
