"""The log map's model: what the compaction picture draws, built from explain reports.

The web page served by the broker's admin endpoint (``GET /``) and the static page written by
``kompakt log explain PATH --html FILE`` draw the same thing from the same JSON, built here:

* one entry per topic-partition (:func:`partition_entry`) with its segments to scale (bytes and
  offsets), each segment's section (clean, cleanable dirty, uncleanable dirty with the reason
  that holds it, active) and tombstone counts and delete horizons (:func:`segment_tombstones`),
  the first dirty offset, the dirty ratio against ``min.cleanable.dirty.ratio``, the
  ``max.compaction.lag.ms`` deadline and the explain verdict;
* the whole map (:func:`build_map`), sorted by what the cleaner will clean next, with the
  cleaner's ranking of :mod:`kompakt.cleaner.planning` (must-clean and ratio-eligible logs by
  must-clean ratio then dirty ratio, then logs eligible only for expired tombstones) ahead of the
  logs that are not eligible (soonest change first), KIP-346 uncleanable ones and non-compacted
  ones.

Pure data in, JSON-ready dicts out: no I/O except :func:`segment_tombstones`, which reads the
segment files of a :class:`~kompakt.inspect.explain.PartitionSource` with the explain engine's
native scan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

from kompakt.config.defs import LONG_MAX
from kompakt.inspect.explain_report import PartitionSource, iso_ms

MAP_FORMAT_VERSION: Final = 1

#: Section names as the explain engine names them, with the labels the page shows.
SECTION_LABELS: Final = {
    "clean": "clean",
    "cleanable": "cleanable dirty",
    "uncleanable": "uncleanable dirty",
    "active": "active segment",
    "not-compacted": "not compacted",
}

#: The order of :func:`build_map`'s tiers (higher is cleaned sooner).
TIER_CLEANING: Final = 5
TIER_ELIGIBLE: Final = 4
TIER_TOMBSTONES_ONLY: Final = 3
TIER_WAITING: Final = 2
TIER_UNCLEANABLE: Final = 1
TIER_NOT_COMPACTED: Final = 0


def segment_tombstones(source: PartitionSource) -> list[dict[str, Any]]:
    """Per segment of ``source``: records, tombstones and the delete horizons stamped in its
    batches (``stamped_batches``, ``min_horizon_ms``, ``max_horizon_ms``; None when unstamped)."""
    from kompakt.inspect.explain_scan import scan_partition  # native kernels: loaded on first use

    scan = scan_partition(source)
    n_segments = len(scan.segments)
    batch_segment = np.asarray(scan.batches.segment, dtype=np.int64)
    tombstones = np.zeros(n_segments, dtype=np.int64)
    records = np.zeros(n_segments, dtype=np.int64)
    if scan.cols.batch:
        rec_batch = np.concatenate(scan.cols.batch)
        rec_tomb = np.concatenate(scan.cols.tombstone)
        rec_segment = batch_segment[rec_batch]
        records = np.bincount(rec_segment, minlength=n_segments)[:n_segments]
        tombstones = np.bincount(rec_segment, weights=rec_tomb, minlength=n_segments)[:n_segments]
    out: list[dict[str, Any]] = []
    for index, seg in enumerate(scan.segments):
        horizons = [
            h
            for h, s in zip(scan.batches.horizon, scan.batches.segment, strict=True)
            if s == index and h is not None
        ]
        out.append(
            {
                "base_offset": seg.info.base_offset,
                "records": int(records[index]) if index < len(records) else 0,
                "tombstones": int(tombstones[index]) if index < len(tombstones) else 0,
                "stamped_batches": len(horizons),
                "min_horizon_ms": min(horizons) if horizons else None,
                "max_horizon_ms": max(horizons) if horizons else None,
            }
        )
    return out


def _config(report: Mapping[str, Any], name: str) -> str | None:
    for row in report.get("configs", ()):
        if row["name"] == name:
            return str(row["value"])
    return None


def is_compacted(report: Mapping[str, Any]) -> bool:
    policy = _config(report, "cleanup.policy")
    if policy is None:
        return not str(report.get("verdict", "")).startswith("not compacting: cleanup.policy")
    return "compact" in [p.strip() for p in policy.split(",")]


def _binding_hold(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((h for h in report.get("holds", ()) if h.get("binding")), None)


def _hold_reason(report: Mapping[str, Any], end_offset: int) -> str:
    """What holds an uncleanable (non-active) segment ending at ``end_offset``: the binding hold
    first (it set the first uncleanable offset), then any other hold at or below the segment."""
    holds = sorted(report.get("holds", ()), key=lambda h: (not h.get("binding"), h["offset"]))
    kinds = [h["kind"] for h in holds if h.get("binding") or h["offset"] < end_offset]
    return ", ".join(dict.fromkeys(kinds)) or "active segment"


def partition_entry(
    report: Mapping[str, Any],
    *,
    live: Mapping[str, Any] | None = None,
    tombstones_by_segment: Sequence[Mapping[str, Any]] | None = None,
    in_progress_since_ms: int | None = None,
) -> dict[str, Any]:
    """One partition of the map from its explain report (``PartitionExplain.to_dict()``).

    ``live`` is the partition's entry of the admin endpoint's ``/v1/partitions`` (cleaning
    state, KIP-346 mark, ``last_clean``); ``tombstones_by_segment`` is :func:`segment_tombstones`.
    """
    compacted = is_compacted(report)
    now_ms = int(report["now_ms"])
    by_base = {int(t["base_offset"]): t for t in tombstones_by_segment or ()}
    segments = []
    for seg in report["segments"]:
        section = seg["section"] if compacted else "not-compacted"
        held_by = _hold_reason(report, seg["end_offset"]) if section == "uncleanable" else None
        tomb = by_base.get(int(seg["base_offset"]))
        segments.append(
            {
                "base_offset": seg["base_offset"],
                "end_offset": seg["end_offset"],
                "size_bytes": seg["size_bytes"],
                "records": seg["records"],
                "section": section,
                "held_by": held_by,
                "largest_timestamp_ms": seg["largest_timestamp_ms"],
                "largest_timestamp": iso_ms(seg["largest_timestamp_ms"]),
                "max_lag_deadline_ms": seg["max_lag_deadline_ms"],
                "overdue": seg["overdue"],
                "tombstones": tomb["tombstones"] if tomb else None,
                "stamped_batches": tomb["stamped_batches"] if tomb else None,
                "min_horizon_ms": tomb["min_horizon_ms"] if tomb else None,
                "max_horizon_ms": tomb["max_horizon_ms"] if tomb else None,
            }
        )
    keys = report["keys"]
    tombs = report["tombstones"]
    max_lag = report["max_lag"]
    binding = _binding_hold(report)
    records = int(keys["records"])
    uncleanable_reason = report.get("uncleanable_reason")
    cleaning_state = "idle"
    last_clean = None
    if live is not None:
        cleaning_state = str(live.get("cleaning_state") or "idle")
        last_clean = live.get("last_clean")
        uncleanable_reason = uncleanable_reason or live.get("uncleanable_reason")
    entry: dict[str, Any] = {
        "topic": report["topic"],
        "partition": report["partition"],
        "name": f"{report['topic']}-{report['partition']}",
        "now_ms": now_ms,
        "compacted": compacted,
        "cleanup_policy": _config(report, "cleanup.policy"),
        "log_start_offset": report["log_start_offset"],
        "first_dirty_offset": report["first_dirty_offset"],
        "first_uncleanable_offset": report["first_uncleanable_offset"],
        "log_end_offset": report["log_end_offset"],
        "last_stable_offset": report["last_stable_offset"],
        "total_bytes": report["total_bytes"],
        "sections": list(report["sections"]),
        "segments": segments,
        "dirty_ratio": report["dirty_ratio"],
        "min_cleanable_dirty_ratio": report["min_cleanable_dirty_ratio"],
        "eligible": bool(report["eligible"]),
        "reason": report.get("reason"),
        "verdict": report["verdict"],
        "binding_hold": dict(binding) if binding is not None else None,
        "holds": list(report.get("holds", ())),
        "tombstones": {
            "total": tombs["total"],
            "live": tombs["live"],
            "stamped_waiting": tombs["stamped_waiting"],
            "past_horizon": tombs["past_horizon"],
            "earliest_waiting_horizon_ms": tombs["earliest_waiting_horizon_ms"],
            "delete_retention_ms": tombs["delete_retention_ms"],
            "density": (tombs["total"] / records) if records else 0.0,
            "listed": list(tombs.get("listed", ())),
        },
        "keys": dict(keys),
        "max_lag": {
            "enabled": max_lag["enabled"],
            "max_compaction_lag_ms": max_lag["max_compaction_lag_ms"],
            "deadline_ms": max_lag["deadline_ms"],
            "deadline": iso_ms(max_lag["deadline_ms"]) if max_lag["deadline_ms"] is not None else None,
            "detail": max_lag["deadline_detail"],
            "delay_ms": max_lag["delay_ms"],
            "must_clean_ratio": max_lag["must_clean_ratio"],
            "overdue": max_lag["delay_ms"] > 0,
        },
        "active_rolls": report["active"]["rolls"],
        "estimated_bytes_after": report["estimated_bytes_after"],
        "cleaning_state": cleaning_state,
        "cleaning_now": cleaning_state == "in-progress",
        "in_progress_since_ms": in_progress_since_ms,
        "uncleanable_reason": uncleanable_reason,
        "last_clean": dict(last_clean) if last_clean is not None else None,
        "configs": list(report.get("configs", ())),
        # The reader hold and each group's unread tombstones (kompakt.cleaner.readers).
        "readers": dict(report["readers"]) if report.get("readers") is not None else None,
    }
    entry["tier"], entry["rank_key"] = _rank(entry)
    return entry


def _next_event_ms(entry: Mapping[str, Any]) -> float:
    """When a waiting partition's state is next expected to change (Long.MAX when unknown; JSON
    has no infinity)."""
    times = [entry["max_lag"]["deadline_ms"], entry["tombstones"]["earliest_waiting_horizon_ms"]]
    hold = entry["binding_hold"]
    if hold is not None:
        times.append(hold.get("until_ms"))
    known = [float(t) for t in times if t is not None]
    return min(known) if known else float(LONG_MAX)


def _rank(entry: Mapping[str, Any]) -> tuple[int, list[float]]:
    """``(tier, key)``: sort by tier descending, then key ascending."""
    ratio = float(entry["dirty_ratio"] or 0.0)
    if not entry["compacted"]:
        return TIER_NOT_COMPACTED, [-float(entry["total_bytes"])]
    if entry["cleaning_now"]:
        return TIER_CLEANING, [0.0]
    if entry["uncleanable_reason"]:
        return TIER_UNCLEANABLE, [-ratio]
    if entry["eligible"]:
        must = entry["max_lag"]["overdue"] and ratio > 0
        if must or ratio > float(entry["min_cleanable_dirty_ratio"]):
            return TIER_ELIGIBLE, [-float(entry["max_lag"]["must_clean_ratio"] if must else 0.0), -ratio]
        return TIER_TOMBSTONES_ONLY, [-ratio]
    return TIER_WAITING, [_next_event_ms(entry), -ratio]


def sort_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the cleaner cleans next first; ``queue_position`` numbers the eligible ones."""
    ordered = sorted(entries, key=lambda e: (-e["tier"], e["rank_key"], e["topic"], e["partition"]))
    position = 0
    for entry in ordered:
        if entry["tier"] in (TIER_ELIGIBLE, TIER_TOMBSTONES_ONLY):
            position += 1
            entry["queue_position"] = position
        else:
            entry["queue_position"] = None
    return ordered


def build_map(
    entries: list[dict[str, Any]],
    now_ms: int,
    *,
    source: str,
    cleaner: Mapping[str, Any] | None = None,
    title: str = "kompakt log map",
) -> dict[str, Any]:
    """The whole map: ``{"version", "source", "title", "now_ms", "now", "cleaner", "partitions"}``.

    ``source`` is ``"live"`` (the broker's page, which polls for updates) or ``"static"`` (an
    exported file); ``cleaner`` describes the running cleaner (threads, what it cleans now).
    """
    return {
        "version": MAP_FORMAT_VERSION,
        "source": source,
        "title": title,
        "now_ms": now_ms,
        "now": iso_ms(now_ms),
        "cleaner": dict(cleaner) if cleaner is not None else None,
        "partitions": sort_entries(entries),
    }
