"""GROUP config resources through confluent-kafka's AdminClient against ``kompakt serve``.

``incremental_alter_configs`` and ``describe_configs`` on ``ConfigResource(ResourceType.GROUP, …)``
(librdkafka sends resource type 32, as ``kafka-configs --entity-type groups`` does): Kafka 4.x
accepts them, and kompakt refused them with INVALID_REQUEST before issue 32. The values survive a
restart of the broker (they are persisted with the dynamic broker configs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.support.serve import BrokerProcess, start_broker

pytestmark = pytest.mark.clients

TIMEOUT_S = 20.0
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def alter(admin: AdminClient, group: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op) for name, value, op in entries
        ],
    )
    for future in admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def described(admin: AdminClient, group: str) -> dict[str, tuple[str, ConfigSource]]:
    [future] = admin.describe_configs(
        [ConfigResource(ResourceType.GROUP, group)], request_timeout=TIMEOUT_S
    ).values()
    return {
        name: (entry.value, ConfigSource(int(entry.source)))
        for name, entry in future.result(TIMEOUT_S).items()
    }


def test_group_configs_set_described_refused_and_kept_across_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker: BrokerProcess = start_broker(data_dir, "--admin-port", "-1")
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        fresh = described(admin, "e2e-configs")
        assert len(fresh) == 10
        assert fresh[SESSION] == ("45000", ConfigSource.DEFAULT_CONFIG)

        alter(
            admin,
            "e2e-configs",
            (SESSION, "50000", AlterConfigOpType.SET),
            (HEARTBEAT, "6000", AlterConfigOpType.SET),
        )
        after = described(admin, "e2e-configs")
        assert after[SESSION] == ("50000", ConfigSource.GROUP_CONFIG)
        assert after[HEARTBEAT] == ("6000", ConfigSource.GROUP_CONFIG)

        with pytest.raises(KafkaException) as refused:
            alter(admin, "e2e-configs", (SESSION, "1000", AlterConfigOpType.SET))
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG
        assert error.str() == (
            f"{SESSION} must be greater than or equal to group.consumer.min.session.timeout.ms"
        )
        assert described(admin, "e2e-configs")[SESSION] == ("50000", ConfigSource.GROUP_CONFIG)
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()

    restarted = start_broker(data_dir, "--admin-port", "-1")
    try:
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        kept = described(admin, "e2e-configs")
        assert (kept[SESSION], kept[HEARTBEAT]) == (
            ("50000", ConfigSource.GROUP_CONFIG),
            ("6000", ConfigSource.GROUP_CONFIG),
        )
        alter(admin, "e2e-configs", (SESSION, None, AlterConfigOpType.DELETE))
        assert described(admin, "e2e-configs")[SESSION] == ("45000", ConfigSource.DEFAULT_CONFIG)
    finally:
        assert restarted.stop() == 0, restarted.stderr_path.read_text()
