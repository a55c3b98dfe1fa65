"""Online migration of a live group between the classic and the consumer protocol, with real
clients: the same confluent-kafka script against any broker, printing what an operator can see.

A development tool first (run it against Apache Kafka 4.1 and against kompakt and compare), and the
body of ``test_online_migration.py``::

    .venv/bin/python -m tests.e2e.groups.online_migration 127.0.0.1:49092

The script (one group, one 4-partition topic, unique names per run):

1. ``consumer`` (``group.protocol=consumer``) joins and owns all four partitions;
2. ``classic`` (``group.protocol=classic``, the range assignor) joins the consumer group: two each;
3. ``consumer`` leaves: the group goes back to the classic protocol, ``classic`` owns all four;
4. ``consumer-2`` joins the classic group: it becomes a consumer group again, two each;
5. ``classic`` leaves: ``consumer-2`` owns all four, the group stays a consumer group.

After each step it waits until the members own what they should (every partition owned exactly
once, as evenly as the step says) and records the group's type, state and members (by client id,
with the partitions each owns) from DescribeConsumerGroups. The printed JSON is the outcome.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = 60.0
PARTITIONS = 4


def _consumer(bootstrap: str, group: str, name: str, protocol: str) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "classic":
        conf |= {
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
        }
    return Consumer(conf)


def _owned(c: Consumer) -> list[int]:
    return sorted(p.partition for p in c.assignment())


def _wait(members: dict[str, Consumer], done: Callable[[dict[str, list[int]]], bool]) -> dict[str, list[int]]:
    start = time.monotonic()
    while True:
        for c in members.values():
            c.poll(0.05)
        owned = {name: _owned(c) for name, c in members.items()}
        if done(owned):
            return owned
        if time.monotonic() - start > DEADLINE_S:
            raise TimeoutError(f"members did not reach the expected ownership: {owned}")


def _split(*counts: int) -> Callable[[dict[str, list[int]]], bool]:
    """Every partition owned exactly once, the members owning these many each (in some order)."""

    def done(owned: dict[str, list[int]]) -> bool:
        every = [p for parts in owned.values() for p in parts]
        return sorted(every) == list(range(PARTITIONS)) and sorted(len(p) for p in owned.values()) == sorted(
            counts
        )

    return done


def _describe(admin: AdminClient, group: str, members: dict[str, Consumer]) -> dict[str, Any]:
    """The group as DescribeConsumerGroups shows it, once its membership matches ``members`` and it
    is Stable (or at the deadline, as it is then)."""
    start = time.monotonic()
    while True:
        for c in members.values():
            c.poll(0.05)
        described = admin.describe_consumer_groups([group])[group].result(10)
        names = sorted(m.client_id for m in described.members)
        settled = names == sorted(members) and described.state.name == "STABLE"
        if settled or time.monotonic() - start > DEADLINE_S:
            return {
                "type": described.type.name,
                "state": described.state.name,
                "members": names,
                "assigned": {
                    m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                    for m in described.members
                },
            }


def run(bootstrap: str) -> list[dict[str, Any]]:
    """The script; one entry per step."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"migration-{suffix}", f"migration-group-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    members: dict[str, Consumer] = {}
    outcome: list[dict[str, Any]] = []

    def step(name: str, done: Callable[[dict[str, list[int]]], bool]) -> None:
        owned = _wait(members, done)
        outcome.append(
            {"step": name, "owned": {m: len(p) for m, p in owned.items()}, **_describe(admin, group, members)}
        )

    try:
        members["consumer"] = _consumer(bootstrap, group, "consumer", "consumer")
        members["consumer"].subscribe([topic])
        step("consumer joins", _split(4))
        members["classic"] = _consumer(bootstrap, group, "classic", "classic")
        members["classic"].subscribe([topic])
        step("classic joins the consumer group", _split(2, 2))
        members.pop("consumer").close()
        step("consumer leaves: back to classic", _split(4))
        members["consumer-2"] = _consumer(bootstrap, group, "consumer-2", "consumer")
        members["consumer-2"].subscribe([topic])
        step("consumer-2 joins the classic group", _split(2, 2))
        members.pop("classic").close()
        step("classic leaves", _split(4))
    finally:
        for c in members.values():
            c.close()
    for entry in outcome:  # what differs between runs: the partitions each member got
        entry["assigned"] = {m: len(p) for m, p in entry["assigned"].items()}
    return outcome


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092"), indent=1))
