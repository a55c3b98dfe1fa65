"""``/metrics`` parsed with Prometheus's own text parser."""

from __future__ import annotations

import urllib.request

from confluent_kafka.admin import AdminClient as KafkaAdmin
from prometheus_client.parser import text_string_to_metric_families

from kompakt.server.request_metrics import kafka_request_name
from kompakt.testing import InProcessBroker

from .conftest import COMPACTED, produce

KAFKA_CLEANER_NAMES = {
    "kafka_log_logcleaner_max_buffer_utilization_percent",
    "kafka_log_logcleaner_cleaner_recopy_percent",
    "kafka_log_logcleaner_max_clean_time_secs",
    "kafka_log_logcleaner_max_compaction_delay_secs",
    "kafka_log_logcleaner_deadthreadcount",
    "kafka_log_logcleanermanager_max_dirty_percent",
    "kafka_log_logcleanermanager_time_since_last_run_ms",
    "kafka_log_logcleanermanager_uncleanable_partitions_count",
    "kafka_log_logcleanermanager_uncleanable_bytes",
}


def scrape(url: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    families: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = [(s.name, s.labels, s.value) for s in family.samples]
    return families


def value(families: dict[str, list[tuple[str, dict[str, str], float]]], sample: str, **labels: str) -> float:
    for name, family in families.items():
        for sample_name, sample_labels, sample_value in family:
            if sample_name == sample and all(sample_labels.get(k) == v for k, v in labels.items()):
                return sample_value
        del name
    raise AssertionError(f"no sample {sample} {labels}")


def test_kafka_names_partition_gauges_and_request_counters(broker: InProcessBroker) -> None:
    before = scrape(broker.admin_url)
    assert set(before) >= KAFKA_CLEANER_NAMES
    assert value(before, "kafka_log_logcleanermanager_uncleanable_partitions_count") == 0
    produce(broker.bootstrap_servers, COMPACTED, [(b"k", b"1"), (b"k", b"2"), (b"k", None)])
    broker.roll(COMPACTED, 0)
    broker.compact_now(COMPACTED, 0)
    after = scrape(broker.admin_url)
    p0 = {"topic": COMPACTED, "partition": "0"}
    assert value(after, "kompakt_partition_segments", **p0) == 2
    assert value(after, "kompakt_partition_log_size_bytes", **p0) > 0
    assert value(after, "kompakt_partition_dirty_ratio", **p0) == 0.0
    assert value(after, "kompakt_partition_log_end_offset", **p0) == 3
    assert value(after, "kompakt_partition_last_clean_records_read", **p0) == 3
    assert value(after, "kompakt_partition_last_clean_records_written", **p0) == 1
    assert value(after, "kompakt_partition_last_clean_tombstones_removed", **p0) == 0
    assert value(after, "kompakt_partition_uncleanable", **p0) == 0
    assert 0 < value(after, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
    produce_count = value(after, "kompakt_requests_total", api="Produce")
    assert produce_count >= 1
    assert value(after, "kafka_network_requestmetrics_requests_total", request="Produce") == produce_count
    assert value(after, "kompakt_request_duration_seconds_count", api="Produce") == produce_count
    assert value(after, "kompakt_request_duration_seconds_bucket", api="Produce", le="+Inf") == produce_count
    metadata_before = value(after, "kompakt_requests_total", api="Metadata")
    KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    later = scrape(broker.admin_url)
    assert value(later, "kompakt_requests_total", api="Metadata") > metadata_before
    assert value(later, "kompakt_clock_now_ms", mode="manual") == broker.now_ms()


def test_request_names_follow_kafka() -> None:
    assert kafka_request_name("join_group") == "JoinGroup"
    assert kafka_request_name("api_versions") == "ApiVersions"
