"""Online migration of a live group between the classic and the consumer protocol, as Kafka 4.1
does it (KIP-848; ``group.consumer.migration.policy``), through the wire.

A classic member joins a consumer group and is reconciled like the others (JoinGroup answered at
once with its member epoch, SyncGroup with its partitions, Heartbeat asking it to rejoin); when the
last member of the consumer protocol leaves, the group becomes a classic group again and
rebalances. The other way, a member of the consumer protocol joining a live classic group turns it
into a consumer group with the classic members in it. Every conversion is one batch of records,
so a restart replays into the group that was converted. FakeClock, real log in tmp_path.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.broker.groups.config import ConsumerGroupConfig
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call

TOPIC = "orders"
GROUP = "g"


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v1: the topics, no user data, no owned partitions."""
    return (
        struct.pack(">hi", 1, len(topics)) + b"".join(_string(t) for t in topics) + struct.pack(">ii", -1, 0)
    )


def assignment(parts: list[int]) -> bytes:
    """ConsumerProtocolAssignment v1 of TOPIC's ``parts``, no user data."""
    body = struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return struct.pack(">hi", 1, 1) + _string(TOPIC) + body + struct.pack(">i", -1)


def partitions(data: bytes) -> list[int]:
    """The partitions of a ConsumerProtocolAssignment (one topic, as here)."""
    if not data:
        return []
    (topics,) = struct.unpack_from(">i", data, 2)
    if topics == 0:
        return []
    pos = 6 + 2 + struct.unpack_from(">h", data, 6)[0]
    (count,) = struct.unpack_from(">i", data, pos)
    return sorted(struct.unpack_from(f">{count}i", data, pos + 4))


#: A classic member's subscription to TOPIC.
SUBSCRIPTION = subscription(TOPIC)


class Cluster:
    """A broker over a data directory that can be reopened (a restart)."""

    def __init__(self, data_dir: Path, clock: FakeClock, policy: str) -> None:
        self.data_dir, self.clock, self.policy = data_dir, clock, policy
        self.open()
        if TOPIC not in self.logs.topics():
            self.logs.create_topic(TOPIC, 4)

    def open(self) -> None:
        config = BrokerConfig.from_properties({"offsets.topic.num.partitions": "3"})
        self.logs = LogManager(self.data_dir, config, self.clock)
        self.logs.open()
        self.broker = Broker.create(
            clock=self.clock,
            group_config=GroupConfig(group_initial_rebalance_delay_ms=0),
            consumer_group_config=ConsumerGroupConfig(migration_policy=self.policy),
            log_manager=self.logs,
        )
        self.dispatcher = Dispatcher(self.broker)

    def restart(self) -> None:
        self.logs.close()
        self.open()

    def topic_id(self) -> uuid.UUID:
        return self.logs.topics()[TOPIC].topic_id

    # -- the consumer protocol -----------------------------------------------------------------

    def heartbeat(self, member: str, epoch: int, owned: list[int] | None = None) -> Any:
        values = {
            "group_id": GROUP,
            "member_id": member,
            "member_epoch": epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000 if epoch == 0 else -1,
            "subscribed_topic_names": [TOPIC] if epoch == 0 else None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None
            if owned is None
            else ([{"topic_id": self.topic_id(), "partitions": owned}] if owned else []),
        }
        return call(self.dispatcher, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, values)

    # -- the classic protocol ------------------------------------------------------------------

    def join(self, member: str = "", subscription: bytes = SUBSCRIPTION) -> Any:
        values = {
            "group_id": GROUP,
            "session_timeout": 10_000,
            "rebalance_timeout": 20_000,
            "member_id": member,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}],
            "reason": None,
        }
        response = call(self.dispatcher, ApiKey.JOIN_GROUP, 7, values)
        if response.error_code == E.member_id_required:  # KIP-394: come back with the id handed out
            response = call(self.dispatcher, ApiKey.JOIN_GROUP, 7, values | {"member_id": response.member_id})
        return response

    def sync(self, member: str, generation: int, assignments: dict[str, bytes] | None = None) -> Any:
        values = {
            "group_id": GROUP,
            "generation_id": generation,
            "member_id": member,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        }
        return call(self.dispatcher, ApiKey.SYNC_GROUP, 5, values)

    def classic_heartbeat(self, member: str, generation: int) -> E:
        values = {
            "group_id": GROUP,
            "generation_id": generation,
            "member_id": member,
            "group_instance_id": None,
        }
        return E(call(self.dispatcher, ApiKey.HEARTBEAT, 4, values).error_code)

    def leave(self, member: str) -> Any:
        values = {"group_id": GROUP, "members": [{"member_id": member, "group_instance_id": None}]}
        return call(self.dispatcher, ApiKey.LEAVE_GROUP, 5, values)

    # -- what an operator sees -----------------------------------------------------------------

    def group_type(self) -> tuple[str, str]:
        response = call(self.dispatcher, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        return next((g.group_type, g.group_state) for g in response.groups if g.group_id == GROUP)

    def describe(self) -> Any:
        values = {"group_ids": [GROUP], "include_authorized_operations": False}
        return call(self.dispatcher, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, values).groups[0]


def assigned(response: Any) -> list[int]:
    return sorted(p for tp in response.assignment.topic_partitions for p in tp.partitions)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(tmp_path: Path, clock: FakeClock) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "data", clock, "bidirectional")
    yield c
    c.logs.close()


def consumer_group_with_a_classic_member(cluster: Cluster) -> tuple[str, str]:
    """C (consumer protocol) owns two partitions, K (classic) the other two, both reconciled."""
    consumer = str(uuid.uuid4())
    first = cluster.heartbeat(consumer, 0, [])
    assert (first.error_code, first.member_epoch, assigned(first)) == (E.none, 1, [0, 1, 2, 3])
    joined = cluster.join()
    assert joined.error_code == E.none
    classic, generation = joined.member_id, joined.generation_id
    # answered at once, its member epoch as the generation, as a follower (no member list)
    assert (generation, joined.protocol_type, joined.protocol_name, joined.leader) == (
        2,
        "consumer",
        "range",
        "",
    )
    assert list(joined.members) == []
    synced = cluster.sync(classic, generation)
    assert synced.error_code == E.none and partitions(synced.assignment) == []  # C still owns them
    # C revokes two partitions; then K is asked to rejoin and collects them
    revoke = cluster.heartbeat(consumer, 1, [0, 1, 2, 3])
    kept = assigned(revoke)
    assert revoke.member_epoch == 1 and len(kept) == 2
    assert cluster.heartbeat(consumer, 1, kept).member_epoch == 2
    assert cluster.classic_heartbeat(classic, generation) == E.rebalance_in_progress
    rejoined = cluster.join(classic)
    assert rejoined.error_code == E.none and rejoined.generation_id == 2
    collected = cluster.sync(classic, 2)
    assert partitions(collected.assignment) == sorted({0, 1, 2, 3} - set(kept))
    assert cluster.classic_heartbeat(classic, 2) == E.none
    return consumer, classic


def test_a_classic_member_joins_a_consumer_group_and_the_group_goes_back_to_classic(cluster: Cluster) -> None:
    consumer, classic = consumer_group_with_a_classic_member(cluster)
    assert cluster.group_type() == ("consumer", "Stable")
    described = cluster.describe()
    assert {(m.member_id, m.member_type) for m in described.members} == {(consumer, 1), (classic, 0)}

    # the last member of the consumer protocol leaves: a classic group of K, which rebalances
    assert cluster.heartbeat(consumer, -1).error_code == E.none
    assert cluster.group_type() == ("classic", "PreparingRebalance")
    assert cluster.classic_heartbeat(classic, 2) == E.rebalance_in_progress
    rejoined = cluster.join(classic)
    assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (E.none, 3, classic)
    assert [m.member_id for m in rejoined.members] == [classic]
    everything = assignment([0, 1, 2, 3])
    assert partitions(cluster.sync(classic, 3, {classic: everything}).assignment) == [0, 1, 2, 3]
    assert cluster.group_type() == ("classic", "Stable")

    # the conversion is in the log: a restart has the classic group, not the consumer group
    cluster.restart()
    assert cluster.group_type() == ("classic", "Stable")
    assert cluster.classic_heartbeat(classic, 3) == E.none


def test_a_consumer_member_upgrades_a_live_classic_group(cluster: Cluster) -> None:
    joined = cluster.join()
    classic = joined.member_id
    everything = assignment([0, 1, 2, 3])
    assert partitions(cluster.sync(classic, 1, {classic: everything}).assignment) == [0, 1, 2, 3]
    assert cluster.group_type() == ("classic", "Stable")

    consumer = str(uuid.uuid4())
    first = cluster.heartbeat(consumer, 0, [])
    assert first.error_code == E.none
    # the classic group became a consumer group at its generation, K owning its partitions; the
    # newcomer bumped the epoch and waits for K to release half of them
    assert (first.member_epoch, assigned(first)) == (2, [])
    assert cluster.group_type()[0] == "consumer"
    described = cluster.describe()
    assert {(m.member_id, m.member_type) for m in described.members} == {(consumer, 1), (classic, 0)}
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)

    # K is behind the group epoch: its heartbeat asks it to rejoin, and the rejoin revokes
    assert cluster.classic_heartbeat(classic, 1) == E.rebalance_in_progress
    rejoin = cluster.join(classic)
    assert rejoin.error_code == E.none and rejoin.generation_id == 2
    kept = partitions(cluster.sync(classic, 2).assignment)
    assert len(kept) == 2
    second = cluster.heartbeat(consumer, 2, [])
    assert second.member_epoch == 2 and assigned(second) == sorted({0, 1, 2, 3} - set(kept))
    assert cluster.group_type() == ("consumer", "Stable")

    # the classic member leaves with LeaveGroup: the group stays a consumer group
    assert cluster.leave(classic).error_code == E.none
    assert cluster.group_type() == ("consumer", "Assigning")  # until the remaining member heartbeats
    assert [m.member_id for m in cluster.describe().members] == [consumer]


@pytest.mark.parametrize(
    ("policy", "upgrade", "downgrade"),
    [
        ("disabled", False, False),
        ("upgrade", True, False),
        ("downgrade", False, True),
        ("bidirectional", True, True),
    ],
)
def test_the_migration_policy_decides_which_way_a_group_may_convert(
    tmp_path: Path, clock: FakeClock, policy: str, upgrade: bool, downgrade: bool
) -> None:
    cluster = Cluster(tmp_path / "data", clock, policy)
    try:
        # a classic member may join a consumer group whatever the policy (Kafka checks none there)
        consumer, classic = consumer_group_with_a_classic_member(cluster)
        assert cluster.heartbeat(consumer, -1).error_code == E.none
        assert cluster.group_type()[0] == ("classic" if downgrade else "consumer")
        if not downgrade:
            return
        rejoined = cluster.join(classic)
        cluster.sync(classic, rejoined.generation_id, {classic: b""})
        answer = cluster.heartbeat(str(uuid.uuid4()), 0, [])
        if upgrade:
            assert answer.error_code == E.none and cluster.group_type()[0] == "consumer"
        else:
            assert answer.error_code == E.group_id_not_found
            assert "online upgrade is disabled" in answer.error_message
            assert cluster.group_type()[0] == "classic"
    finally:
        cluster.logs.close()


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced(cluster: Cluster, clock: FakeClock) -> None:
    consumer, classic = consumer_group_with_a_classic_member(cluster)
    # a second consumer member bumps the epoch: K is asked to rejoin and does not
    assert cluster.heartbeat(str(uuid.uuid4()), 0, []).error_code == E.none
    assert cluster.classic_heartbeat(classic, 2) == E.rebalance_in_progress
    clock.advance(9_000)  # K's session (10 s) is kept alive by its heartbeats...
    assert cluster.classic_heartbeat(classic, 2) == E.rebalance_in_progress
    clock.advance(9_000)
    assert cluster.classic_heartbeat(classic, 2) == E.rebalance_in_progress
    clock.advance(3_000)  # ...but not its rebalance timeout (20 s) to rejoin
    assert cluster.classic_heartbeat(classic, 2) == E.unknown_member_id
    assert classic not in {m.member_id for m in cluster.describe().members}
