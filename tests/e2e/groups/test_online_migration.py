"""Online migration with real clients against ``kompakt serve``: the outcome Apache Kafka 4.1.2
gives for the same confluent-kafka script (``online_migration.py``).

``EXPECTED`` is what the script printed against Kafka 4.1.2 (a KRaft broker built from the release
commit, ``group.initial.rebalance.delay.ms=0``, the default ``group.consumer.migration.policy``
``bidirectional``): a classic member joins a consumer group, the group goes back to the classic
protocol when the consumer member leaves, and forward again when another consumer member joins.
"""

from __future__ import annotations

import pytest

from tests.e2e.groups.online_migration import run
from tests.support.serve import BrokerProcess

pytestmark = pytest.mark.clients

EXPECTED = [
    {
        "step": "consumer joins",
        "owned": {"consumer": 4},
        "type": "CONSUMER",
        "state": "STABLE",
        "members": ["consumer"],
        "assigned": {"consumer": 4},
    },
    {
        "step": "classic joins the consumer group",
        "owned": {"consumer": 2, "classic": 2},
        "type": "CONSUMER",
        "state": "STABLE",
        "members": ["classic", "consumer"],
        "assigned": {"consumer": 2, "classic": 2},
    },
    {
        "step": "consumer leaves: back to classic",
        "owned": {"classic": 4},
        "type": "CLASSIC",
        "state": "STABLE",
        "members": ["classic"],
        "assigned": {"classic": 4},
    },
    {
        "step": "consumer-2 joins the classic group",
        "owned": {"classic": 2, "consumer-2": 2},
        "type": "CONSUMER",
        "state": "STABLE",
        "members": ["classic", "consumer-2"],
        "assigned": {"consumer-2": 2, "classic": 2},
    },
    {
        "step": "classic leaves",
        "owned": {"consumer-2": 4},
        "type": "CONSUMER",
        "state": "STABLE",
        "members": ["consumer-2"],
        "assigned": {"consumer-2": 4},
    },
]


def test_a_live_group_migrates_between_protocols_as_in_kafka(groups_broker: BrokerProcess) -> None:
    assert run(groups_broker.bootstrap) == EXPECTED
