"""The log map in a real headless browser (Debian's chromium through playwright-core).

Live: a compacted topic with duplicates shows a cleanable dirty section and its dirty ratio;
after compact-now the dirty section is gone and the last-clean stats and record samples appear.
Static: ``kompakt log explain PATH --html FILE`` opens with no network and draws every partition.
Screenshots go to ``test-artifacts/``; with ``KOMPAKT_UPDATE_DOCS_SCREENSHOT=1`` the live one also
replaces ``docs/log-map.png``, the README's picture.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from kompakt.testing import InProcessBroker
from tests.support.produce import produce, produce_rounds

from .conftest import ARTIFACTS, ROOT, run_map_check

pytestmark = pytest.mark.xdist_group("web-browser")


def _populate(b: InProcessBroker) -> None:
    b.create_topic("orders", 2, cleanup_policy="compact", delete_retention_ms=60_000)
    b.create_topic("profiles", 1, cleanup_policy="compact", min_compaction_lag_ms=3_600_000)
    b.create_topic("clicks", 1)
    produce_rounds(b, "orders", 3, 10, partition=0)
    b.compact_now("orders", 0)
    produce(b.bootstrap_servers, "orders", [(b"key-3", None), (b"key-7", None)], 0)
    produce_rounds(b, "orders", 2, 10, partition=0)
    produce(b.bootstrap_servers, "orders", [(b"key-1", b"value-active")], 0)
    produce_rounds(b, "orders", 3, 6, partition=1)
    produce_rounds(b, "profiles", 2, 8)
    produce(b.bootstrap_servers, "clicks", [(b"c", b"1"), (b"c", b"2")])


def test_live_map_shows_dirty_section_then_last_clean(broker: InProcessBroker) -> None:
    _populate(broker)
    (info,) = broker.partitions("orders")[:1]
    assert info["partition"] == 0 and info["cleanable_bytes"] > 0
    expected_ratio = f"{info['dirty_ratio']:.2f}"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "log-map-live.png"
    found = run_map_check(
        {
            "mode": "live",
            "url": broker.admin_url + "/",
            "partition": "orders-0",
            "expectedRatio": expected_ratio,
            "compactUrl": broker.admin_url + "/v1/compact?topic=orders&partition=0&wait=true",
            "screenshots": [str(shot)],
            "lookupKey": "key-1",
            "missingKey": "no-such-key",
            "lookupScreenshots": [str(ARTIFACTS / "log-map-key-lookup.png")],
        }
    )
    assert found["blocked"] == [] and found["consoleErrors"] == []
    assert found["ratioText"] == expected_ratio
    assert "cleanable" in found["sectionsBefore"] and "will be cleaned" in found["verdictBefore"]
    # Sorted by what the cleaner takes next: the eligible orders partitions first (dirtiest
    # first), then the one held by min.compaction.lag.ms, the non-compacted topic last.
    assert found["order"][:2] == ["orders-1", "orders-0"]
    assert found["order"][-1] == "clicks-0"
    assert found["order"].index("profiles-0") > 1
    assert found["searchHits"] == ["orders-0"]
    assert "cleanable" not in found["sectionsAfter"]
    (stats,) = found["compact"]["partitions"]
    assert f"records {stats['records_read']} → {stats['records_written']}" in found["lastClean"]
    assert found["detailSegments"] >= 2 and found["struckOut"] > 0
    assert shot.stat().st_size > 10_000
    # the detail view's key lookup (issue 18): the latest value, where it lives, its segment marked
    active = broker.partitions("orders")[0]["segments"][-1]["base_offset"]
    assert "value-active" in found["lookupText"]
    assert "active segment" in found["lookupText"] and f"{active:020d}.log" in found["lookupText"]
    assert found["keySegmentRows"] == [str(active)]
    assert "Key no-such-key is not in orders-0" in found["missingText"]
    if os.environ.get("KOMPAKT_UPDATE_DOCS_SCREENSHOT"):  # refresh the README's picture on demand
        shutil.copyfile(shot, ROOT / "docs" / "log-map.png")


def test_static_html_opens_offline_with_every_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    with InProcessBroker(data, overrides={"log.cleaner.enable": "false"}) as b:
        _populate(b)
        names = [f"{p['topic']}-{p['partition']}" for p in b.partitions()]
    out = tmp_path / "map.html"
    from kompakt.cli import main as cli_main

    monkeypatch.setattr(sys, "argv", ["kompakt", "log", "explain", str(data), "--html", str(out)])
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main()
    assert exit_info.value.code in (0, None)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "log-map-static.png"
    found = run_map_check(
        {"mode": "static", "url": out.as_uri(), "expectPartitions": names, "screenshots": [str(shot)]}
    )
    assert found["blocked"] == [] and found["consoleErrors"] == []
    assert sorted(found["partitions"]) == sorted(names)
    assert {"clean", "cleanable", "uncleanable", "active", "not-compacted"} <= set(found["sections"])
    assert found["status"].startswith("snapshot")
    assert (
        found["lookupHidden"] is True
        and "kompakt table get TOPIC KEY --log-dir PATH" in found["lookupOffline"]
    )


def test_the_map_hides_50_empty_internal_partitions_and_fits_the_width(broker: InProcessBroker) -> None:
    """Issue 17: a broker whose consumer groups made ``__consumer_offsets`` (50 partitions, empty
    here) and an empty topic. By default the map shows only the partitions with data, each bar
    fitted to the row; a toggle shows the rest. Nothing overflows the page, the bars or the
    detail view's tables, at a desktop width and at a narrow one."""
    broker.create_topic("__consumer_offsets", 50, cleanup_policy="compact")
    broker.create_topic("empty-topic", 1, cleanup_policy="compact")
    broker.create_topic(
        "a-very-long-topic-name-that-goes-on-and-on-for-the-layout-test", 1, cleanup_policy="compact"
    )
    broker.create_topic("orders", 1, cleanup_policy="compact")
    produce_rounds(broker, "orders", 3, 10)
    produce_rounds(broker, "a-very-long-topic-name-that-goes-on-and-on-for-the-layout-test", 2, 4)
    broker.roll("orders")  # its active segment is now empty, and must still be seen
    ARTIFACTS.mkdir(exist_ok=True)
    found = run_map_check(
        {
            "mode": "layout",
            "url": broker.admin_url + "/",
            "widths": [1400, 760],
            "partition": "orders-0",
            "screenshots": [str(ARTIFACTS / "log-map-layout.png")],
        }
    )
    assert found["blocked"] == [] and found["consoleErrors"] == []
    for width, seen in found["widths"].items():
        assert sorted(seen["shown"]) == [
            "a-very-long-topic-name-that-goes-on-and-on-for-the-layout-test-0",
            "orders-0",
        ], width
        assert "(51 internal or empty hidden)" in seen["count"], seen["count"]
        assert seen["shownAll"] == 53
        for state in (seen, seen["afterToggle"]):
            assert state["pageOverflow"] <= 0, (width, state)
            assert state["barOverflow"] <= 1, (width, state)
            assert state["minFill"] > 0.98, (width, state)  # fitted to the width by default
        assert seen["detail"]["overflow"] <= 0 and seen["detail"]["tableOverflow"] <= 1, (
            width,
            seen["detail"],
        )
        assert seen["detail"]["pageOverflow"] <= 0, (width, seen["detail"])
        # Issue 28: an empty active segment is drawn (at a fixed width, marked "empty"), and
        # the segment table fits the panel: no scrolling sideways, no row wrapped onto two lines.
        assert seen["activeWidth"]["orders-0"] >= 20, (width, seen["activeWidth"])
        if int(width) >= 1400:
            assert seen["detail"]["segmentTableScroll"] <= 1, (width, seen["detail"])
            heights = seen["detail"]["segmentRowHeights"]
            assert max(heights) <= 1.5 * min(heights), (width, heights)
