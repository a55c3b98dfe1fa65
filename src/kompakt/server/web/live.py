"""The live log map behind the admin endpoint's page: explain reports of every partition (cached
while a partition does not change), the cleaner's progress and record samples around cleans.

``GET /v1/map`` returns :meth:`LiveMap.overview` and ``GET /v1/map/partition`` returns
:meth:`LiveMap.partition`; the page (``GET /``) polls them. Everything here blocks (segment files
are read under the partition lock) and runs in the endpoint's worker threads.

Record samples: the first :attr:`LiveMap.sample_size` records of a partition are kept before and
after its last clean. A compact-now through the admin API is sampled exactly (an
:attr:`~kompakt.server.admin_api.AdminApi.compact_hooks` hook); a clean by a cleaner thread is
noticed by the next poll (its ``last_clean`` changed), whose "before" is the sample taken when the
partition was last seen dirty and eligible.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from kompakt.inspect.explain_report import ConfigInput, PartitionSource, SegmentSource
from kompakt.inspect.log_map import TIER_ELIGIBLE, build_map, partition_entry, segment_tombstones
from kompakt.log.partition_log import PartitionLog
from kompakt.records.record import decode_records
from kompakt.server.admin_api import AdminApi, readers_of

#: Explain reports are reused while the partition's files and state are unchanged, for this long.
CACHE_TTL_S = 2.0
SAMPLE_SIZE = 20
TEXT_LIMIT = 80

#: Overview entries leave out what only the detail view shows.
_DETAIL_ONLY = ("configs", "holds", "keys")

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class _Cached:
    signature: tuple[Any, ...]
    computed_at: float
    now_ms: int
    report: dict[str, Any]
    tombstones: list[dict[str, Any]]


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    text = data.decode("utf-8", errors="backslashreplace")
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def read_sample(partition_log: PartitionLog, limit: int = SAMPLE_SIZE) -> list[dict[str, Any]]:
    """The first ``limit`` data records of the partition: offset, key, value (None: tombstone)."""
    out: list[dict[str, Any]] = []
    with partition_log.lock:
        for segment in partition_log.segments.values():
            for _, batch in segment.iter_batches():
                if batch.is_control:
                    continue
                for record in decode_records(batch):
                    if record.offset < partition_log.log_start_offset:
                        continue
                    out.append(
                        {
                            "offset": record.offset,
                            "key": _text(record.key),
                            "value": _text(record.value),
                            "tombstone": record.is_tombstone,
                        }
                    )
                    if len(out) >= limit:
                        return out
    return out


class LiveMap:
    """The log map of one running broker (one per :class:`AdminApi`, see :func:`live_map_for`)."""

    def __init__(self, api: AdminApi, *, sample_size: int = SAMPLE_SIZE) -> None:
        self.api = api
        self.sample_size = sample_size
        self._lock = threading.Lock()
        self._cache: dict[TopicPartition, _Cached] = {}
        self._cleaning_since: dict[TopicPartition, int] = {}
        self._samples: dict[TopicPartition, dict[str, Any]] = {}
        self._pending_before: dict[TopicPartition, dict[str, Any]] = {}
        self._seen_clean_ms: dict[TopicPartition, int | None] = {}
        api.compact_hooks.append(self.on_compact)

    # ------------------------------------------------------------------ samples

    def _snapshot(self, partition_log: PartitionLog, trigger: str) -> dict[str, Any]:
        return {
            "taken_at_ms": self.api.clock.now_ms(),
            "trigger": trigger,
            "records": read_sample(partition_log, self.sample_size),
        }

    def on_compact(self, partition_log: PartitionLog, phase: str) -> None:
        tp = (partition_log.topic, partition_log.partition)
        snapshot = self._snapshot(partition_log, "compact now")
        last = self._last_clean_ms(tp)
        with self._lock:
            if phase == "before":
                self._pending_before[tp] = snapshot
                return
            before = self._pending_before.pop(tp, None)
            self._samples[tp] = {"before": before, "after": snapshot}
            self._seen_clean_ms[tp] = last

    def _last_clean_ms(self, tp: TopicPartition) -> int | None:
        cleaner = self.api.cleaner
        if cleaner is None:
            return None
        record = cleaner.metrics.per_partition().get(tp)
        return record.cleaned_at_ms if record is not None else None

    def _track_cleaner_cleans(
        self, logs: dict[TopicPartition, PartitionLog], entries: list[dict[str, Any]]
    ) -> None:
        """Notice cleans by cleaner threads (sampled after the fact) and keep a "before" sample
        of partitions the cleaner is about to clean."""
        for entry in entries:
            tp = (entry["topic"], entry["partition"])
            last = entry["last_clean"]["cleaned_at_ms"] if entry["last_clean"] else None
            with self._lock:
                seen = self._seen_clean_ms.get(tp)
                known = tp in self._seen_clean_ms
                if not known:
                    self._seen_clean_ms[tp] = last
            if known and last is not None and last != seen and not entry["cleaning_now"]:
                after = self._snapshot(logs[tp], "cleaner thread")
                with self._lock:
                    before = self._pending_before.pop(tp, None)
                    self._samples[tp] = {"before": before, "after": after}
                    self._seen_clean_ms[tp] = last
            elif entry["tier"] == TIER_ELIGIBLE and not entry["cleaning_now"]:
                with self._lock:
                    has_before = tp in self._pending_before
                if not has_before:
                    snapshot = self._snapshot(logs[tp], "cleaner thread")
                    with self._lock:
                        self._pending_before.setdefault(tp, snapshot)

    # ------------------------------------------------------------------ explain, cached

    def _explain(
        self, partition_log: PartitionLog, now_ms: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        api = self.api
        tp = (partition_log.topic, partition_log.partition)
        cleaner = api.cleaner
        checkpoint = cleaner.manager.all_cleaner_checkpoints().get(tp) if cleaner is not None else None
        reason = cleaner.manager.uncleanable().get(tp) if cleaner is not None else None
        meta = api.broker.logs.topics().get(partition_log.topic)
        overrides = dict(meta.configs) if meta is not None else {}
        readers = readers_of(partition_log, cleaner)
        with partition_log.lock:
            segments = tuple(
                SegmentSource(seg.base_offset, seg.log_path, seg.size, seg.created_ms)
                for seg in partition_log.segments.values()
            )
            signature = (
                tuple((s.base_offset, s.size_bytes) for s in segments),
                partition_log.log_start_offset,
                checkpoint,
                reason,
                tuple(sorted(overrides.items())),
                readers,
            )
            with self._lock:
                cached = self._cache.get(tp)
            if (
                cached is not None
                and cached.signature == signature
                and time.monotonic() - cached.computed_at < CACHE_TTL_S
                and abs(now_ms - cached.now_ms) < CACHE_TTL_S * 1000
            ):
                return cached.report, cached.tombstones
            source = PartitionSource(
                topic=partition_log.topic,
                partition=partition_log.partition,
                segments=segments,
                log_start_offset=partition_log.log_start_offset,
                cleaner_checkpoint=checkpoint,
                uncleanable_reason=reason,
                readers=readers,
            )
            configs = ConfigInput(
                overrides=overrides,
                override_origins=dict.fromkeys(overrides, "topic config"),
                broker=api.broker.broker_config,
                broker_origin="broker config",
            )
            from kompakt.inspect.explain import explain_partition  # native kernels: first use only

            report = explain_partition(source, configs, now_ms).to_dict()
            tombstones = segment_tombstones(source)
        with self._lock:
            self._cache[tp] = _Cached(signature, time.monotonic(), now_ms, report, tombstones)
        return report, tombstones

    # ------------------------------------------------------------------ the map

    def cleaner_status(self, now_ms: int) -> dict[str, Any]:
        """The cleaner's threads and what it cleans right now (with since when, broker time)."""
        cleaner = self.api.cleaner
        if cleaner is None:
            return {"enabled": False, "threads": 0, "in_progress": [], "time_since_last_run_ms": None}
        in_progress = sorted(
            tp for tp, state in cleaner.manager.states().items() if str(state) == "in-progress"
        )
        with self._lock:
            for tp in list(self._cleaning_since):
                if tp not in in_progress:
                    del self._cleaning_since[tp]
            for tp in in_progress:
                self._cleaning_since.setdefault(tp, now_ms)
            since = dict(self._cleaning_since)
        last_run = cleaner.manager.time_of_last_run_ms
        return {
            "enabled": True,
            "threads": cleaner.thread_count,
            "in_progress": [
                {"topic": t, "partition": p, "name": f"{t}-{p}", "since_ms": since[(t, p)]}
                for t, p in in_progress
            ],
            "time_since_last_run_ms": (now_ms - last_run) if last_run > 0 else None,
        }

    def _entries(
        self, topic: str | None, partition: int | None = None
    ) -> tuple[int, dict[str, Any], list[dict[str, Any]], dict[TopicPartition, PartitionLog]]:
        api = self.api
        now_ms = api.clock.now_ms()
        cleaner = self.cleaner_status(now_ms)
        since = {(c["topic"], c["partition"]): c["since_ms"] for c in cleaner["in_progress"]}
        logs = {(lg.topic, lg.partition): lg for lg in api.partition_logs(topic, partition)}
        live = {(p["topic"], p["partition"]): p for p in api.partitions(topic)["partitions"]}
        entries = []
        for tp, partition_log in logs.items():
            report, tombstones = self._explain(partition_log, now_ms)
            entries.append(
                partition_entry(
                    report,
                    live=live.get(tp),
                    tombstones_by_segment=tombstones,
                    in_progress_since_ms=since.get(tp),
                )
            )
        self._track_cleaner_cleans(logs, entries)
        return now_ms, cleaner, entries, logs

    def overview(self, topic: str | None = None) -> dict[str, Any]:
        """Every partition (of ``topic``) as the page's bars, in cleaning order."""
        now_ms, cleaner, entries, _ = self._entries(topic)
        for entry in entries:
            for name in _DETAIL_ONLY:
                entry.pop(name, None)
            entry["tombstones"].pop("listed", None)
        return build_map(entries, now_ms, source="live", cleaner=cleaner)

    def partition(self, topic: str, partition: int) -> dict[str, Any]:
        """One partition with everything the detail view shows, record samples included."""
        now_ms, cleaner, entries, logs = self._entries(topic, partition)
        (entry,) = entries
        tp = (topic, partition)
        with self._lock:
            samples = dict(self._samples.get(tp) or {})
        samples["current"] = self._snapshot(logs[tp], "now")
        entry["samples"] = samples
        return {"now_ms": now_ms, "cleaner": cleaner, "partition": entry}


_maps: weakref.WeakKeyDictionary[AdminApi, LiveMap] = weakref.WeakKeyDictionary()
_maps_lock = threading.Lock()


def live_map_for(api: AdminApi) -> LiveMap:
    """The :class:`LiveMap` of ``api``, created (and hooked into compact-now) on first use."""
    with _maps_lock:
        live = _maps.get(api)
        if live is None:
            live = _maps[api] = LiveMap(api)
        return live
