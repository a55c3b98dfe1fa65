"""The log map's data (no browser): ``GET /``, ``/v1/map``, ``/v1/map/partition`` and
``kompakt log explain PATH --html FILE``."""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kompakt.inspect.log_map import TIER_CLEANING, TIER_ELIGIBLE, TIER_NOT_COMPACTED, TIER_WAITING
from kompakt.server.web import DATA_PLACEHOLDER, embed_json, page_html
from kompakt.testing import InProcessBroker
from tests.support.produce import produce, produce_rounds


def get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers["Content-Type"], response.read().decode()


def get_json(url: str) -> Any:
    return json.loads(get(url)[1])


def entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in data["partitions"] if p["name"] == name)


def test_index_serves_the_page_without_external_references(broker: InProcessBroker) -> None:
    content_type, body = get(broker.admin_url + "/")
    assert content_type.startswith("text/html")
    assert DATA_PLACEHOLDER in body
    assert not re.search(r"(src|href)=\"(https?:)?//", body)
    assert "connect-src 'self'" in body


def test_map_sections_ratio_tombstones_and_order(broker: InProcessBroker) -> None:
    broker.create_topic("dirty", 1, cleanup_policy="compact")
    broker.create_topic("held", 1, cleanup_policy="compact", min_compaction_lag_ms=3_600_000)
    broker.create_topic("plain", 1)
    produce_rounds(broker, "dirty", 3, 5)
    produce(broker.bootstrap_servers, "dirty", [(b"key-0", None)])
    broker.roll("dirty")
    produce_rounds(broker, "held", 2, 5)
    produce(broker.bootstrap_servers, "plain", [(b"a", b"1")])

    data = get_json(broker.admin_url + "/v1/map")
    assert data["source"] == "live" and data["cleaner"]["enabled"]
    assert [p["name"] for p in data["partitions"]] == ["dirty-0", "held-0", "plain-0"]
    dirty = entry(data, "dirty-0")
    live = broker.partitions("dirty")[0]
    assert dirty["tier"] == TIER_ELIGIBLE and dirty["queue_position"] == 1
    assert dirty["dirty_ratio"] == pytest.approx(live["dirty_ratio"])
    assert {s["section"] for s in dirty["segments"]} == {"cleanable", "active"}
    assert dirty["first_dirty_offset"] == 0 and dirty["tombstones"]["total"] == 1
    assert sum(s["tombstones"] for s in dirty["segments"]) == 1
    held = entry(data, "held-0")
    assert held["tier"] == TIER_WAITING and held["queue_position"] is None
    assert [s["held_by"] for s in held["segments"] if s["section"] == "uncleanable"] == [
        "min.compaction.lag.ms"
    ] * 2
    plain = entry(data, "plain-0")
    assert plain["tier"] == TIER_NOT_COMPACTED and {s["section"] for s in plain["segments"]} == {
        "not-compacted"
    }
    json.dumps(data, allow_nan=False)  # strict JSON: the page's JSON.parse accepts it

    only = get_json(broker.admin_url + "/v1/map?topic=held")
    assert [p["name"] for p in only["partitions"]] == ["held-0"]


def test_partition_detail_keeps_samples_around_compact_now(broker: InProcessBroker) -> None:
    broker.create_topic("t", 1, cleanup_policy="compact", delete_retention_ms=1000)
    produce_rounds(broker, "t", 2, 3)
    produce(broker.bootstrap_servers, "t", [(b"</script><b>", None)])
    broker.roll("t")
    broker.compact_now("t", 0)
    detail = get_json(broker.admin_url + "/v1/map/partition?topic=t&partition=0")["partition"]
    samples = detail["samples"]
    before = [(r["offset"], r["key"], r["value"]) for r in samples["before"]["records"]]
    after = [(r["offset"], r["key"], r["value"]) for r in samples["after"]["records"]]
    assert before[:3] == [(0, "key-0", "value-0"), (1, "key-1", "value-0"), (2, "key-2", "value-0")]
    assert before[-1] == (6, "</script><b>", None)
    assert [o for o, _, _ in after] == [3, 4, 5, 6]
    assert samples["current"]["records"] == samples["after"]["records"]
    assert detail["last_clean"]["records_read"] == 7 and detail["last_clean"]["records_written"] == 4
    assert detail["configs"] and detail["holds"]
    assert detail["segments"][0]["stamped_batches"] == 1  # the kept tombstone got its horizon
    assert detail["segments"][0]["min_horizon_ms"] is not None


def test_cleaner_thread_progress_and_samples(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "data") as b:  # cleaner threads on (50 ms backoff)
        b.create_topic("t", 1, cleanup_policy="compact", min_compaction_lag_ms=60_000)
        produce_rounds(b, "t", 3, 4)
        cleaner = b.admin.cleaner
        assert cleaner is not None
        # Held by min.compaction.lag.ms: the map samples it as "about to be cleaned" only once
        # eligible; mark it in progress by hand to see the progress report.
        cleaner.manager.begin_cleaning(("t", 0), 5)
        try:
            data = get_json(b.admin_url + "/v1/map")
            assert [c["name"] for c in data["cleaner"]["in_progress"]] == ["t-0"]
            assert entry(data, "t-0")["tier"] == TIER_CLEANING and entry(data, "t-0")["cleaning_now"]
        finally:
            cleaner.manager.done_cleaning(("t", 0), 0)
        get_json(b.admin_url + "/v1/map")  # first sight of the partition
        b.advance_clock("2m")  # the cleaner thread may clean it now
        deadline = time.monotonic() + 20
        samples: dict[str, Any] = {}
        while time.monotonic() < deadline:
            data = get_json(b.admin_url + "/v1/map")
            if entry(data, "t-0")["last_clean"] is not None:
                detail = get_json(b.admin_url + "/v1/map/partition?topic=t&partition=0")["partition"]
                samples = detail["samples"]
                if "after" in samples:
                    break
            time.sleep(0.05)
        assert samples.get("after") is not None, "the cleaner thread's clean was not noticed"
        assert samples["after"]["trigger"] == "cleaner thread"
        assert [r["offset"] for r in samples["after"]["records"]] == [8, 9, 10, 11]


def test_explain_html_writes_one_self_contained_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broker: InProcessBroker
) -> None:
    broker.create_topic("c", 3, cleanup_policy="compact")
    for partition in range(3):
        produce_rounds(broker, "c", 2, 3, partition)
    out = tmp_path / "map.html"
    from kompakt.cli import main as cli_main

    monkeypatch.setattr(sys, "argv", ["kompakt", "log", "explain", str(broker.data_dir), "--html", str(out)])
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main()
    assert exit_info.value.code in (0, None)
    page = out.read_text("utf-8")
    match = re.search(r'<script id="kompakt-map-data" type="application/json">(.*?)</script>', page, re.S)
    assert match is not None
    data = json.loads(match.group(1))
    assert data["source"] == "static"
    assert sorted(p["name"] for p in data["partitions"]) == ["c-0", "c-1", "c-2"]
    assert all(p["configs"] for p in data["partitions"])
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert page_html().count("<script") == page.count("<script")


def test_embedded_json_cannot_close_its_script_element() -> None:
    text = embed_json({"key": "</script><!-- & -->"})
    assert "</" not in text and "<!--" not in text and "&" not in text
    assert json.loads(text) == {"key": "</script><!-- & -->"}
