"""``kompakt log explain`` on directories built to show each cause of "not compacting".

Every directory is written with a FakeClock so record timestamps are known, and explain runs with
``--now`` so deadlines are exact; each test checks the verdict and the numbers behind it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kompakt.cleaner.offline import compact_directory
from kompakt.clock import FakeClock
from kompakt.inspect.explain import iso_ms
from kompakt.inspect.explain_report import human_bytes
from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kompakt.records.builder import SimpleRecord, build_batch
from tests.support.log_dirs import DAY, HOUR, T0, kafka_dir, keys


def explain(cli: Any, path: Path, *args: str) -> dict[str, Any]:
    result = cli("log", "explain", str(path), "-o", "json", *args)
    assert result.code == 0, result.err
    [report] = result.json()
    return report  # type: ignore[no-any-return]


def seg_sizes(path: Path) -> dict[int, int]:
    part = next(p for p in path.iterdir() if p.is_dir())
    return {int(f.name[:20]): f.stat().st_size for f in sorted(part.glob("*.log"))}


def three_segments(build: Any, **configs: str) -> Path:
    """Segments [0,10) and [10,20) of keys k0..k9 twice, and an active segment [20,23)."""
    b = build()
    log = b.topic("t", cleanup_policy="compact", **configs)
    b.put(log, keys(10))
    log.roll()
    b.put(log, keys(10))
    log.roll()
    b.put(log, keys(3, prefix="z"))
    path: Path = b.close()
    return path


def test_policy_delete(build: Any, cli: Any) -> None:
    b = build()
    log = b.topic("t")
    b.put(log, keys(5))
    log.roll()
    r = explain(cli, b.close(), "--now", str(T0))
    assert r["verdict"] == "not compacting: cleanup.policy is delete"
    assert not r["eligible"]
    policy = next(c for c in r["configs"] if c["name"] == "cleanup.policy")
    assert policy == {"name": "cleanup.policy", "value": "delete", "source": "Kafka default"}


def test_ready_to_clean_with_sections_and_numbers(build: Any, cli: Any) -> None:
    path = three_segments(build)
    sizes = seg_sizes(path)
    r = explain(cli, path, "--now", str(T0 + 1000))
    assert (
        r["verdict"]
        == "will be cleaned at the next cleaner pass: dirty ratio 1.00 > min.cleanable.dirty.ratio 0.5"
    )
    assert (r["first_dirty_offset"], r["first_uncleanable_offset"], r["log_end_offset"]) == (0, 20, 23)
    sections = {s["name"]: s for s in r["sections"]}
    assert sections["cleanable"]["bytes"] == sizes[0] + sizes[10]
    assert sections["active"] == {"name": "active", "first_offset": 20, "end_offset": 23, "bytes": sizes[20]}
    assert r["keys"]["live_keys"] == 13 and r["keys"]["records"] == 23
    assert r["keys"]["dirty_records"] == 20 and r["keys"]["dirty_distinct_keys"] == 10
    assert r["offset_map"]["raw_bytes_needed"] == 240 and r["offset_map"]["fits"]
    assert r["estimated_bytes_after"] == sizes[10] + sizes[20]  # the first segment's keys are all superseded
    policy = next(c for c in r["configs"] if c["name"] == "cleanup.policy")
    assert policy["source"] == "topic override (kompakt-topics.json)"


def test_only_active_segment(build: Any, cli: Any) -> None:
    b = build()
    log = b.topic("t", cleanup_policy="compact", segment_ms=str(HOUR))
    b.put(log, keys(5))
    r = explain(cli, b.close(), "--now", str(T0 + 1000))
    assert r["verdict"].startswith("nothing to clean: all dirty data is in the active segment, which rolls ")
    assert f"at the first append after {iso_ms(T0 + HOUR)}" in r["verdict"]
    assert r["active"]["time_roll_ms"] == T0 + HOUR and r["active"]["age_ms"] == 1000
    # sizes a person reads (issue 28), not "when 1073741524 more bytes arrive"
    assert "when 1.0 GiB more arrive (segment.bytes 1.0 GiB)" in r["verdict"]
    assert r["dirty_ratio"] == 0.0


def test_ratio_below_threshold(build: Any, cli: Any) -> None:
    path = three_segments(build)
    OffsetCheckpointFile(path / CLEANER_OFFSET_CHECKPOINT_FILE).write({("t", 0): 10})
    sizes = seg_sizes(path)
    r = explain(cli, path, "--now", str(T0 + 1000), "--config", "min.cleanable.dirty.ratio=0.6")
    ratio = sizes[10] / (sizes[0] + sizes[10])
    assert abs(r["dirty_ratio"] - ratio) < 1e-12
    assert r["first_dirty_offset"] == 10
    assert r["verdict"].startswith(f"not eligible: dirty ratio {ratio:.2f} <= min.cleanable.dirty.ratio 0.6")
    ratio_cfg = next(c for c in r["configs"] if c["name"] == "min.cleanable.dirty.ratio")
    assert ratio_cfg["source"] == "topic override (--config)"
    assert re.search(r"\(\d+ B more dirty data must roll\)$", r["verdict"]), r["verdict"]
    # the strict >: at exactly the ratio it is still not eligible
    r = explain(cli, path, "--now", str(T0 + 1000), "--config", f"min.cleanable.dirty.ratio={ratio!r}")
    assert not r["eligible"]


def test_min_lag_holds_the_head(build: Any, cli: Any) -> None:
    path = three_segments(build, min_compaction_lag_ms=str(HOUR))
    r = explain(cli, path, "--now", str(T0 + 10 * 60_000))
    assert r["verdict"].startswith(
        f"not eligible until {iso_ms(T0 + HOUR)}, because min.compaction.lag.ms=3600000"
    )
    hold = next(h for h in r["holds"] if h["binding"])
    assert (hold["kind"], hold["offset"], hold["until_ms"]) == ("min.compaction.lag.ms", 0, T0 + HOUR)
    assert r["first_uncleanable_offset"] == 0
    assert explain(cli, path, "--now", str(T0 + HOUR + 1))["eligible"]


def test_max_lag_deadline_then_forced(build: Any, cli: Any) -> None:
    path = three_segments(build, max_compaction_lag_ms=str(HOUR))
    OffsetCheckpointFile(path / CLEANER_OFFSET_CHECKPOINT_FILE).write({("t", 0): 10})
    before = explain(cli, path, "--now", str(T0 + HOUR // 2), "--config", "min.cleanable.dirty.ratio=0.9")
    assert before["verdict"].startswith(f"not eligible until {iso_ms(T0 + HOUR)} (max.compaction.lag.ms)")
    assert before["max_lag"]["deadline_ms"] == T0 + HOUR
    seg10 = next(s for s in before["segments"] if s["base_offset"] == 10)
    assert seg10["estimated_earliest_timestamp_ms"] == T0 and seg10["max_lag_deadline_ms"] == T0 + HOUR
    after = explain(cli, path, "--now", str(T0 + 2 * HOUR), "--config", "min.cleanable.dirty.ratio=0.9")
    assert after["verdict"] == (
        f"will be cleaned at the next cleaner pass: max.compaction.lag.ms exceeded by {HOUR} ms"
    )
    assert after["max_lag"]["must_clean_bytes"] == seg_sizes(path)[10]
    assert after["max_lag"]["must_clean_ratio"] == after["dirty_ratio"]


def _compacted_with_tombstone(build: Any) -> Path:
    b = build()
    log = b.topic("t", cleanup_policy="compact")
    b.put(log, keys(3))
    log.roll()
    b.put(log, [(b"k1", None)])
    log.roll()
    b.put(log, keys(1, prefix="z"))
    path: Path = b.close()
    compact_directory(path, clock=FakeClock(T0 + 1000))  # stamps horizon T0 + 1000 + 1 day
    return path


def test_tombstones_wait_for_delete_retention(build: Any, cli: Any) -> None:
    path = _compacted_with_tombstone(build)
    r = explain(cli, path, "--now", str(T0 + HOUR))
    horizon = T0 + 1000 + DAY
    assert r["verdict"] == (
        f"not eligible until {iso_ms(horizon)}, because 1 tombstones wait for delete.retention.ms=86400000 "
        "(their delete horizon)"
    )
    assert r["tombstones"]["stamped_waiting"] == 1
    assert (
        r["tombstones"]["listed"][0]["key"] == "k1"
        and r["tombstones"]["listed"][0]["delete_horizon_ms"] == horizon
    )


def test_tombstones_past_their_horizon(build: Any, cli: Any) -> None:
    path = _compacted_with_tombstone(build)
    r = explain(cli, path, "--now", str(T0 + 2 * DAY))
    assert r["verdict"] == "will be cleaned at the next cleaner pass: 1 tombstones past their horizon"
    assert r["tombstones"]["past_horizon"] == 1
    assert r["keys"]["live_keys"] == 4 and r["keys"]["live_records"] == 3


def test_open_transaction_pins_the_lso(build: Any, cli: Any) -> None:
    b = build()
    log = b.topic("t", cleanup_policy="compact")
    log.append(
        build_batch(
            [SimpleRecord(b"tx", b"1", timestamp=T0)],
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
    )
    log.roll()
    b.put(log, keys(5))
    log.roll()
    b.put(log, keys(1, prefix="z"))
    r = explain(cli, b.close(), "--now", str(T0 + 1000))
    assert r["last_stable_offset"] == 0 and r["first_uncleanable_offset"] == 0
    assert r["verdict"] == (
        "not eligible until the open transaction completes, because an open transaction of producer 7 "
        "started at offset 0 pins the last stable offset at 0"
    )


def test_offset_map_too_small(build: Any, cli: Any) -> None:
    path = three_segments(build)
    broker = [
        "--broker-config",
        "log.cleaner.dedupe.buffer.size=1100000",
        "--broker-config",
        "log.cleaner.io.buffer.load.factor=0.0001",
    ]
    r = explain(cli, path, "--now", str(T0 + 1000), *broker)
    m = r["offset_map"]
    assert (m["slots"], m["keys_per_pass"], m["dirty_distinct_keys"], m["passes_needed"]) == (45833, 4, 10, 3)
    assert not m["fits"]
    assert (
        "the offset map is too small for one pass: 10 distinct dirty keys, 4 per pass, so it takes 3 passes"
        in (r["verdict"])
    )
    buf = next(c for c in r["configs"] if c["name"] == "log.cleaner.dedupe.buffer.size")
    assert buf["source"] == "--broker-config: log.cleaner.dedupe.buffer.size"


def test_kafka_dir_with_configs_on_the_command_line(tmp_path: Path, cli: Any) -> None:
    root = kafka_dir(tmp_path / "kafka")
    plain = explain(cli, root, "--now", "5000")
    assert plain["verdict"] == "not compacting: cleanup.policy is delete"
    r = explain(cli, root, "--now", "1970-01-01T00:00:05Z", "--config", "cleanup.policy=compact")
    sizes = seg_sizes(root)
    assert r["now_ms"] == 5000
    assert (
        r["verdict"]
        == "will be cleaned at the next cleaner pass: dirty ratio 1.00 > min.cleanable.dirty.ratio 0.5"
    )
    assert (r["first_uncleanable_offset"], r["log_end_offset"]) == (4, 6)
    assert r["sections"][1]["bytes"] == sizes[0]
    assert r["keys"]["records"] == 6 and r["keys"]["null_key_records"] == 1 and r["keys"]["live_keys"] == 4
    assert r["tombstones"]["unstamped_cleanable"] == 1
    table = cli("log", "explain", str(root), "--now", "5000", "--config", "cleanup.policy=compact")
    assert table.code == 0 and "verdict: will be cleaned" in table.out


def test_bad_config_and_unreachable_cluster(tmp_path: Path, cli: Any) -> None:
    root = kafka_dir(tmp_path / "kafka")
    bad = cli("log", "explain", str(root), "--config", "min.cleanable.dirty.ratio=2")
    assert bad.code == 2 and bad.err.startswith("error: ") and bad.err.count("\n") == 1
    assert cli("log", "explain", str(root), "--config", "nonsense").code == 2
    assert cli("log", "explain", str(root), "--now", "yesterday").code == 2
    down = cli("log", "explain", str(root), "--bootstrap", "127.0.0.1:1", "--bootstrap-timeout", "1")
    assert down.code == 1 and "cannot reach the cluster at 127.0.0.1:1" in down.err


@pytest.mark.parametrize(
    ("count", "shown"),
    [(0, "0 B"), (104, "104 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (18_415_269, "17.6 MiB"),
     (1_073_741_824 - 300, "1.0 GiB"), (134_217_728, "128.0 MiB")],
)  # fmt: skip
def test_human_bytes(count: int, shown: str) -> None:
    assert human_bytes(count) == shown
