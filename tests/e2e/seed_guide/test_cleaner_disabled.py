"""Issue 8 item 4: ``log.cleaner.enable=false`` is honoured and reported as deprecated.

As Kafka documents: with the cleaner disabled no cleaner thread runs, and compacted topics are
neither compacted nor retention-trimmed (their retention is the cleaner's job; only the periodic
retention task of ``delete``-only topics still runs). Kafka 4.4 deprecates the config, so
``kompakt serve`` prints a ``warning:`` line when it is set; DescribeConfigs through a client shows
the value the broker runs with.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.cimpl import NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kompakt.config.broker import BrokerConfig
from kompakt.testing.broker import InProcessBroker
from tests.support.serve import BrokerProcess, start_broker

from .conftest import (
    DEADLINE_S,
    AdminClient,
    ConfigResource,
    key_values,
    log_start,
    produce,
    source_name,
    wait_for_log_start,
)

pytestmark = pytest.mark.clients

KEYS = (b"k1", b"k2")
ROUNDS = 3
RECORDS = [(key, b"round-%d" % r) for r in range(ROUNDS) for key in KEYS]
SMALL = {
    "retention.ms": "1000",
    "segment.ms": "100",
    "min.compaction.lag.ms": "0",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}
CLEANER_THREAD_PREFIX = "kafka-log-cleaner-thread-"


@pytest.fixture
def kompakt_broker_config(request: pytest.FixtureRequest) -> dict[str, str]:
    enable = getattr(request, "param", "false")
    return {
        "log.cleaner.enable": enable,
        "log.retention.check.interval.ms": "50",
        "log.initial.task.delay.ms": "0",
    }


def cleaner_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(CLEANER_THREAD_PREFIX)]


@pytest.mark.parametrize("kompakt_broker_config", ["false", "true"], indirect=True)
def test_compact_delete_topic_is_left_alone_without_the_cleaner(
    kompakt_broker: InProcessBroker, admin: AdminClient, kompakt_broker_config: dict[str, str]
) -> None:
    """``compact,delete`` with a 1 s retention: untouched with the cleaner disabled; compacted and
    trimmed with it enabled (the same steps, so the test can tell the two apart)."""
    enabled = kompakt_broker_config["log.cleaner.enable"] == "true"
    assert kompakt_broker.app.broker is not None and kompakt_broker.app.broker.cleaner is not None
    assert kompakt_broker.app.broker.cleaner.thread_count == (1 if enabled else 0)
    assert bool(cleaner_threads()) == enabled

    futures = admin.create_topics(
        [
            NewTopic("changelog", 1, 1, config={**SMALL, "cleanup.policy": "compact,delete"}),
            NewTopic("control-delete", 1, 1, config={**SMALL, "cleanup.policy": "delete"}),
        ]
    )
    for future in futures.values():
        future.result(DEADLINE_S)
    for topic in ("changelog", "control-delete"):
        for r in range(ROUNDS):
            produce(kompakt_broker.bootstrap_servers, topic, RECORDS[r * len(KEYS) : (r + 1) * len(KEYS)])
            kompakt_broker.roll(topic)

    kompakt_broker.advance_clock("2h")
    wait_for_log_start(kompakt_broker, "control-delete", len(RECORDS), "delete-only topic trimmed")
    if enabled:
        wait_for_log_start(kompakt_broker, "changelog", len(RECORDS), "compacted topic trimmed")
        assert key_values(kompakt_broker, "changelog") == []
        return
    # Two more clock moves, each followed by a full retention pass over every log: any cleaner
    # activity (it wakes on every clock move) would have had its chance.
    for extra in (1, 2):
        produce(kompakt_broker.bootstrap_servers, "control-delete", RECORDS[:1])
        kompakt_broker.roll("control-delete")
        kompakt_broker.advance_clock("2h")
        wait_for_log_start(kompakt_broker, "control-delete", len(RECORDS) + extra, "trimmed again")

    assert log_start(kompakt_broker, "changelog") == 0
    assert key_values(kompakt_broker, "changelog") == RECORDS  # every duplicate is still there
    (info,) = kompakt_broker.partitions("changelog")
    assert info["last_clean"] is None
    assert cleaner_threads() == []
    (explained,) = kompakt_broker.explain("changelog")
    assert explained["verdict"].startswith("will be cleaned at the next cleaner pass: ")
    assert explained["verdict"].endswith(
        "; but log.cleaner.enable=false, so no cleaner thread runs: only compact-now cleans it "
        "(and its retention waits too)"
    )
    # An explicit compact-now still cleans (what the pytest plugin documents this setting for).
    kompakt_broker.compact_now("changelog")
    assert key_values(kompakt_broker, "changelog") == RECORDS[-len(KEYS) :]


def test_describe_broker_config_through_clients(kompakt_broker: InProcessBroker, admin: AdminClient) -> None:
    resource = ConfigResource("broker", "0")
    entries = admin.describe_configs([resource])[resource].result(DEADLINE_S)
    entry = entries["log.cleaner.enable"]
    assert (entry.value, source_name(entry)) == ("false", "STATIC_BROKER_CONFIG")
    assert not entry.is_default and entry.is_read_only

    kp_admin = KafkaAdminClient(bootstrap_servers=kompakt_broker.bootstrap_servers)
    try:
        described = kp_admin.describe_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "0", configs=None)], config_filter="all"
        )
    finally:
        kp_admin.close()
    kp_entry = described["broker"]["0"]["log.cleaner.enable"]
    assert (kp_entry["value"], kp_entry["config_source"]) == ("false", "STATIC_BROKER_CONFIG")


def test_deprecation_warning_only_when_disabled() -> None:
    """Only ``false`` warns: ``log.cleaner.enable=true`` is the default spelled out (issue 28)."""
    assert BrokerConfig().deprecation_warnings() == []
    assert BrokerConfig.from_properties({"log.cleaner.enable": "true"}).deprecation_warnings() == []
    (warning,) = BrokerConfig.from_properties({"log.cleaner.enable": "false"}).deprecation_warnings()
    assert warning.startswith("log.cleaner.enable is deprecated")


@pytest.fixture
def serve_without_cleaner(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path / "data", "--override", "log.cleaner.enable=false")
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


def test_serve_override_prints_the_deprecation_warning(serve_without_cleaner: BrokerProcess) -> None:
    stderr = serve_without_cleaner.stderr_path.read_text()
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, stderr
    assert warnings[0].startswith("warning: log.cleaner.enable is deprecated")

    admin = AdminClient({"bootstrap.servers": serve_without_cleaner.bootstrap})
    resource = ConfigResource("broker", "0")
    entry = admin.describe_configs([resource])[resource].result(DEADLINE_S)["log.cleaner.enable"]
    assert (entry.value, source_name(entry)) == ("false", "STATIC_BROKER_CONFIG")
    del admin
