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
