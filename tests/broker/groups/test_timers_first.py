"""Every group entry point runs the due timers first, as Kafka's timer thread would have run them:
a member whose session expired before the request arrived is gone when the request is decided.

librdkafka's admin test (0081) deletes a group a few milliseconds after its members' sessions
expired; Kafka 4.1 deletes it, and so must kompakt, without waiting for the periodic tick. A
FakeClock moves time past the session and nothing ticks the coordinator: only the request runs it.
Self-contained (the broker is built here) so the same file runs against any commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call

CLASSIC_SESSION_MS = 10_000
#: ``group.consumer.session.timeout.ms``'s default.
CONSUMER_SESSION_MS = 45_000
TOPIC = "t"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def dispatcher(tmp_path: Path, clock: FakeClock) -> Iterator[Dispatcher]:
    config = BrokerConfig.from_properties({"offsets.topic.num.partitions": "3"})
    logs = LogManager(tmp_path / "data", config, clock)
    logs.open()
    logs.create_topic(TOPIC, 2)
    broker = Broker.create(
        clock=clock, log_manager=logs, group_config=GroupConfig(group_initial_rebalance_delay_ms=0)
    )
    yield Dispatcher(broker)
    logs.close()


def classic_member(dispatcher: Dispatcher, group: str) -> None:
    """A classic member in a Stable group (JoinGroup v5 with its KIP-394 round trip, SyncGroup)."""
    join: dict[str, Any] = {
        "group_id": group,
        "session_timeout": CLASSIC_SESSION_MS,
        "rebalance_timeout": CLASSIC_SESSION_MS,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    joined = call(dispatcher, ApiKey.JOIN_GROUP, 5, join)
    joined = call(dispatcher, ApiKey.JOIN_GROUP, 5, join | {"member_id": joined.member_id})
    assert joined.error_code == E.none
    sync = {
        "group_id": group,
        "generation_id": joined.generation_id,
        "member_id": joined.member_id,
        "assignments": [{"member_id": joined.member_id, "assignment": b""}],
    }
    assert call(dispatcher, ApiKey.SYNC_GROUP, 3, sync).error_code == E.none


def consumer_member(dispatcher: Dispatcher, group: str) -> None:
    """A member of the consumer protocol (ConsumerGroupHeartbeat v1, epoch 0)."""
    values = {
        "group_id": group,
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": [TOPIC],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    assert call(dispatcher, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, values).error_code == E.none


def delete(dispatcher: Dispatcher, group: str) -> E:
    response = call(dispatcher, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    return E(response.results[0].error_code)


def listed_state(dispatcher: Dispatcher, group: str) -> str:
    response = call(dispatcher, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return next(g.group_state for g in response.groups if g.group_id == group)


@pytest.mark.parametrize(
    ("join", "session_ms"), [(classic_member, CLASSIC_SESSION_MS), (consumer_member, CONSUMER_SESSION_MS)]
)
def test_delete_groups_sees_a_session_that_expired_before_it(
    dispatcher: Dispatcher, clock: FakeClock, join: Any, session_ms: int
) -> None:
    join(dispatcher, "g")
    assert delete(dispatcher, "g") == E.non_empty_group
    clock.advance(session_ms + 1)  # the session ran out; no tick since
    assert delete(dispatcher, "g") == E.none
    assert delete(dispatcher, "g") == E.group_id_not_found


@pytest.mark.parametrize(
    ("join", "session_ms"), [(classic_member, CLASSIC_SESSION_MS), (consumer_member, CONSUMER_SESSION_MS)]
)
def test_list_groups_sees_a_session_that_expired_before_it(
    dispatcher: Dispatcher, clock: FakeClock, join: Any, session_ms: int
) -> None:
    join(dispatcher, "g")
    assert listed_state(dispatcher, "g") != "Empty"
    clock.advance(session_ms + 1)
    assert listed_state(dispatcher, "g") == "Empty"
