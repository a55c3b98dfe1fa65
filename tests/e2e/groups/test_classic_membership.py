"""KIP-345 and KIP-394 as a real client sees them (confluent-kafka, librdkafka 2.16).

* A static member (``group.instance.id``) that restarts gets its old partitions back and the other
  member sees no rebalance at all: no revoke, no assign.
* A client that changes its subscription while its first JoinGroup is parked discards the outdated
  answer and joins again; with MEMBER_ID_REQUIRED it does so under the id it already holds, so no
  ghost member is left for every later rebalance to wait for (it used to cost a 45 s session).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.serve import BrokerProcess

pytestmark = pytest.mark.clients

DEADLINE_S = 30.0
Event = tuple[str, str, tuple[int, ...]]


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, count, 1) for name, count in topics]).values():
        future.result(DEADLINE_S)


def consumer(bootstrap: str, group: str, **conf: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 10_000, **conf})


def recorder(events: list[Event], name: str) -> tuple[Callable[..., None], Callable[..., None]]:
    def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
        events.append((name, "assign", tuple(sorted(p.partition for p in partitions))))

    def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
        events.append((name, "revoke", tuple(sorted(p.partition for p in partitions))))

    return on_assign, on_revoke


def poll_until(consumers: list[Consumer], done: Callable[[], bool], deadline_s: float = DEADLINE_S) -> float:
    """Poll every consumer until ``done()``; the seconds it took."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < deadline_s, "not reached before the deadline"
        for c in consumers:
            c.poll(0.05)
    return time.monotonic() - start


def owned(c: Consumer) -> tuple[int, ...]:
    return tuple(sorted(p.partition for p in c.assignment()))


def split_between(one: Consumer, other: Consumer, partitions: int) -> bool:
    return bool(owned(one)) and bool(owned(other)) and len(owned(one)) + len(owned(other)) == partitions


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(groups_broker: BrokerProcess) -> None:
    bootstrap = groups_broker.bootstrap
    topic, group = f"static-{uuid.uuid4().hex[:8]}", f"static-g-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, (topic, 4))
    events: list[Event] = []

    def start(name: str) -> Consumer:
        c = consumer(bootstrap, group, **{"group.instance.id": name})
        on_assign, on_revoke = recorder(events, name)
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return c

    a, b = start("a"), start("b")
    poll_until([a, b], lambda: split_between(a, b, 4))
    a_parts, b_parts = owned(a), owned(b)
    b.close()  # a static member sends no LeaveGroup: the coordinator keeps its slot
    seen = len(events)
    b2 = start("b")
    poll_until([a, b2], lambda: bool(owned(b2)))
    window = time.monotonic() + 3.0  # observe a few heartbeats: a rebalance would show by now
    while time.monotonic() < window:
        a.poll(0.05)
        b2.poll(0.05)
    try:
        assert owned(b2) == b_parts and owned(a) == a_parts
        assert [e for e in events[seen:] if e[0] == "a"] == []  # a was never told to rebalance
        assert [e for e in events[seen:] if e[0] == "b"] == [("b", "assign", b_parts)]
    finally:
        a.close()
        b2.close()


def test_discarded_join_answer_leaves_no_ghost_member(delayed_broker: BrokerProcess) -> None:
    bootstrap = delayed_broker.bootstrap
    suffix = uuid.uuid4().hex[:8]
    t1, t2, group = f"ghost-a-{suffix}", f"ghost-b-{suffix}", f"ghost-g-{suffix}"
    create_topics(bootstrap, (t1, 2), (t2, 2))
    events: list[Event] = []
    conf = {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 45_000}
    first = consumer(bootstrap, group, **conf)
    on_assign, on_revoke = recorder(events, "c1")
    first.subscribe([t1], on_assign=on_assign, on_revoke=on_revoke)
    end = time.monotonic() + 0.5  # its JoinGroup is now parked for the 3 s initial delay
    while time.monotonic() < end:
        first.poll(0.05)
    first.subscribe([t1, t2], on_assign=on_assign, on_revoke=on_revoke)  # outdates that JoinGroup
    second = consumer(bootstrap, group, **conf)
    assign2, revoke2 = recorder(events, "c2")
    second.subscribe([t1, t2], on_assign=assign2, on_revoke=revoke2)
    try:
        took = poll_until(
            [first, second],
            lambda: len(owned(first)) + len(owned(second)) == 4
            and bool(owned(first))
            and bool(owned(second)),
        )
        # Kafka 4.1 takes 6.5 s here (two initial delays and a cooperative round); a ghost member
        # made it 49 s (its 45 s session).
        assert took < 20.0
    finally:
        first.close()
        second.close()
