"""A consumer group's own configs (GROUP config resources) drive its members' sessions and
heartbeats, from the next heartbeat on, as Kafka's ``consumerGroupSessionTimeoutMs(groupId)``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.clock import FakeClock
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.groups.consumer.test_membership import NOW_MS, TOPIC, Cluster, describe, heartbeat, join
from tests.broker.topic_admin.test_configs import incremental

GROUP = 32
SET, DELETE = 0, 1
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def cluster(tmp_path: Path, clock: FakeClock) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "data", clock)
    c.logs.create_topic(TOPIC, 4)
    yield c
    c.logs.close()


def interval_ms(response: Any) -> int:
    """The heartbeat interval a ConsumerGroupHeartbeat response gives (kio decodes a timedelta)."""
    return int(response.heartbeat_interval.total_seconds() * 1000)


def members(c: Cluster, group: str) -> list[str]:
    return [m.member_id for m in describe(c, group).members]


def test_a_groups_session_timeout_and_heartbeat_interval_apply_to_it_alone(
    cluster: Cluster, clock: FakeClock
) -> None:
    own = join(cluster, "m1", group="g")
    other = join(cluster, "x1", group="other")
    assert (interval_ms(own), interval_ms(other)) == (5_000, 5_000)

    # Set while m1 is a member: its next heartbeat carries the new interval and restarts its
    # session with the new timeout.
    changed = incremental(cluster.dispatcher, GROUP, "g", [(SESSION, SET, "50000"), (HEARTBEAT, SET, "6000")])
    assert changed.error_code is E.none
    again = heartbeat(cluster, "m1", own.member_epoch, owned=[0, 1, 2, 3], group="g")
    assert interval_ms(again) == 6_000
    assert (
        interval_ms(heartbeat(cluster, "x1", other.member_epoch, owned=[0, 1, 2, 3], group="other")) == 5_000
    )

    clock.advance(47_000)  # past the broker's 45 s, within the group's 50 s
    cluster.broker.groups.tick(clock.monotonic_ms())
    assert (members(cluster, "g"), members(cluster, "other")) == (["m1"], [])
    clock.advance(4_000)
    cluster.broker.groups.tick(clock.monotonic_ms())
    assert members(cluster, "g") == []


def test_deleting_the_groups_config_brings_back_the_brokers(cluster: Cluster) -> None:
    assert incremental(cluster.dispatcher, GROUP, "g", [(HEARTBEAT, SET, "6000")]).error_code is E.none
    joined = heartbeat(cluster, "m1", 0, topics=[TOPIC], owned=[], group="g")
    assert interval_ms(joined) == 6_000
    assert incremental(cluster.dispatcher, GROUP, "g", [(HEARTBEAT, DELETE, None)]).error_code is E.none
    assert interval_ms(heartbeat(cluster, "m1", joined.member_epoch, owned=[], group="g")) == 5_000
