"""The admin endpoint's ``/metrics``: Kafka's cleaner and broker metrics in Prometheus's format.

Every family is built at scrape time from the live broker state (a custom collector), so nothing
is counted twice and nothing is kept between scrapes. Loaded on the first scrape only: it imports
prometheus_client, which a broker that is never scraped does not need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from kompakt.server.request_metrics import LATENCY_BUCKETS_S

if TYPE_CHECKING:
    from kompakt.server.admin_api import AdminApi

#: Kafka's cleaner gauges: JMX type and name, exported as ``kafka_log_<type>_<name>`` lower-cased
#: with dashes as underscores (what the Prometheus JMX exporter's common rules produce).
KAFKA_CLEANER_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("LogCleaner", "max-buffer-utilization-percent", "Largest offset-map utilization of the last cleans."),
    ("LogCleaner", "cleaner-recopy-percent", "Bytes written over bytes read by the last cleans, percent."),
    ("LogCleaner", "max-clean-time-secs", "Longest duration of the last clean of any cleaner thread."),
    ("LogCleaner", "max-compaction-delay-secs", "Largest delay past max.compaction.lag.ms at selection."),
    ("LogCleaner", "DeadThreadCount", "Cleaner threads that died."),
    ("LogCleanerManager", "max-dirty-percent", "Dirty percent of the dirtiest log at the last selection."),
    ("LogCleanerManager", "time-since-last-run-ms", "Milliseconds since the cleaner last ran a selection."),
    ("LogCleanerManager", "uncleanable-partitions-count", "Partitions marked uncleanable (KIP-346)."),
    ("LogCleanerManager", "uncleanable-bytes", "Cleanable bytes held in uncleanable partitions."),
)


def kafka_metric_name(group: str, jmx_type: str, name: str) -> str:
    """``("kafka.log", "LogCleaner", "max-clean-time-secs")`` ->
    ``kafka_log_logcleaner_max_clean_time_secs``: JMX names as Prometheus metric names."""
    raw = f"{group}_{jmx_type}_{name}".lower()
    return "".join(c if c.isalnum() else "_" for c in raw)


class _Collector:
    """Builds every metric family at scrape time from the live broker state."""

    def __init__(self, api: AdminApi) -> None:
        self._api = api

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        api = self._api
        now_ms = api.clock.now_ms()
        yield from self._cleaner_metrics(now_ms)
        yield from self._broker_metrics()
        yield from self._partition_metrics()
        yield from self._reader_metrics()
        yield from self._request_metrics()
        clock = GaugeMetricFamily(
            "kompakt_clock_now_ms", "The broker's wall-clock time for log rules.", labels=["mode"]
        )
        clock.add_metric(["manual" if api.manual_clock is not None else "system"], float(now_ms))
        yield clock

    def _cleaner_metrics(self, now_ms: int) -> Iterator[Metric]:
        cleaner = self._api.cleaner
        snapshot = cleaner.metrics.snapshot(now_ms) if cleaner is not None else {}
        for jmx_type, name, doc in KAFKA_CLEANER_GAUGES:
            labels = ["logDirectory"] if name.startswith("uncleanable-") else []
            family = GaugeMetricFamily(kafka_metric_name("kafka.log", jmx_type, name), doc, labels=labels)
            family.add_metric([self._api.log_dir] if labels else [], snapshot.get(name, 0.0))
            yield family
        io = CounterMetricFamily(
            "kompakt_cleaner_io_bytes", "Bytes read and written by the cleaner (throttled I/O)."
        )
        io.add_metric([], snapshot.get("cleaner-io-total-bytes", 0.0))
        yield io
        threads = GaugeMetricFamily("kompakt_cleaner_threads", "Cleaner threads running.")
        threads.add_metric([], float(cleaner.thread_count if cleaner is not None else 0))
        yield threads

    def _broker_metrics(self) -> Iterator[Metric]:
        for name, value in self._api.broker.metrics.snapshot().items():
            metric = name.removesuffix("PerSec")
            family = CounterMetricFamily(
                kafka_metric_name("kafka.server", "BrokerTopicMetrics", metric),
                f"Kafka's BrokerTopicMetrics {name} meter, as a counter.",
            )
            family.add_metric([], float(value))
            yield family

    def _reader_metrics(self) -> Iterator[Metric]:
        """kompakt's unread-tombstone report (beyond Kafka): per group with a committed offset on a
        compacted partition, the stamped tombstones it has not read and the time left before the
        first of them may be removed."""
        labels = ["topic", "partition", "group"]
        unread = GaugeMetricFamily(
            "kompakt_tombstones_unread_by_group",
            "Tombstones scheduled for removal (delete horizon stamped) at or above the group's "
            "committed offset.",
            labels=labels,
        )
        seconds = GaugeMetricFamily(
            "kompakt_tombstones_unread_first_removal_seconds",
            "Seconds until the first tombstone the group has not read may be removed (0: at the next "
            "clean); absent when it has read them all.",
            labels=labels,
        )
        held = GaugeMetricFamily(
            "kompakt_tombstones_hold_offset",
            "The offset from which the partition's readers (kompakt.tombstone.retain.for.groups, "
            "backups) hold tombstones past their delete horizon.",
            labels=["topic", "partition"],
        )
        for p in self._api.readers()["partitions"]:
            tp = [p["topic"], str(p["partition"])]
            if p["hold_offset"] is not None:
                held.add_metric(tp, float(p["hold_offset"]))
            for g in p["groups"]:
                unread.add_metric([*tp, g["group"]], float(g["unread_tombstones"]))
                if g["seconds_until_removal"] is not None:
                    seconds.add_metric([*tp, g["group"]], float(g["seconds_until_removal"]))
        yield unread
        yield seconds
        yield held

    def _partition_metrics(self) -> Iterator[Metric]:
        info = self._api.partitions()["partitions"]
        labels = ["topic", "partition"]

        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"kompakt_partition_{name}", doc, labels=labels)

        families = {
            "dirty_ratio": gauge("dirty_ratio", "Cleanable bytes over clean + cleanable bytes (compacted)."),
            "size_bytes": gauge("log_size_bytes", "Bytes in the partition's segments."),
            "segment_count": gauge("segments", "Segments in the partition's log."),
            "log_start_offset": gauge("log_start_offset", "The partition's log start offset."),
            "log_end_offset": gauge("log_end_offset", "The partition's log end offset."),
            "uncleanable": gauge("uncleanable", "1 when the partition is marked uncleanable (KIP-346)."),
        }
        last = {
            "bytes_read": gauge("last_clean_bytes_read", "Bytes read by the partition's last clean."),
            "bytes_written": gauge(
                "last_clean_bytes_written", "Bytes written by the partition's last clean."
            ),
            "records_read": gauge("last_clean_records_read", "Records read by the partition's last clean."),
            "records_written": gauge(
                "last_clean_records_written", "Records written by the partition's last clean."
            ),
            "tombstones_removed": gauge(
                "last_clean_tombstones_removed", "Tombstones removed by the partition's last clean."
            ),
            "duration_s": gauge("last_clean_duration_seconds", "Duration of the partition's last clean."),
            "cleaned_at_ms": gauge(
                "last_clean_timestamp_ms", "Broker time (ms) at which the partition was last cleaned."
            ),
        }
        for p in info:
            values = [p["topic"], str(p["partition"])]
            for key, family in families.items():
                value = p[key]
                if value is None:
                    continue
                family.add_metric(values, float(value))
            if p["last_clean"] is not None:
                for key, family in last.items():
                    family.add_metric(values, float(p["last_clean"][key]))
        yield from families.values()
        yield from last.values()

    def _request_metrics(self) -> Iterator[Metric]:
        metrics = self._api.request_metrics
        snapshot = metrics.snapshot() if metrics is not None else {}
        kafka_count = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Kafka's RequestMetrics RequestsPerSec meter, as a counter.",
            labels=["request"],
        )
        count = CounterMetricFamily("kompakt_requests", "Requests served, by API.", labels=["api"])
        errors = CounterMetricFamily(
            "kompakt_request_errors", "Requests whose handler failed, by API.", labels=["api"]
        )
        latency = HistogramMetricFamily(
            "kompakt_request_duration_seconds",
            "Time from decoding a request to handing its response to the socket, by API.",
            labels=["api"],
        )
        for api, stats in sorted(snapshot.items()):
            kafka_count.add_metric([api], float(stats.count))
            count.add_metric([api], float(stats.count))
            errors.add_metric([api], float(stats.errors))
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, n in zip((*map(str, LATENCY_BUCKETS_S), "+Inf"), stats.buckets, strict=True):
                cumulative += n
                buckets.append((bound, float(cumulative)))
            latency.add_metric([api], buckets, stats.sum_s)
        yield kafka_count
        yield count
        yield errors
        yield latency


def exposition(api: AdminApi) -> Callable[[], bytes]:
    """A function rendering ``api``'s metrics in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(api))
    return lambda: generate_latest(registry)
