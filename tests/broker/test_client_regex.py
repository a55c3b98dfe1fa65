"""Client regexes (KIP-848 subscriptions, ListTransactions v2 patterns) have RE2J's syntax and
match in linear time, through the wire as a client sends them.

Python's backtracking ``re`` takes seconds for ``(a+)+$`` against a 27-character ``aaaa…b`` and
accepts syntax RE2J refuses (look-around); Kafka answers INVALID_REGULAR_EXPRESSION for the latter.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import HANDLERS, Dispatcher
from kompakt.broker.txn.coordinator import TransactionCoordinator
from kompakt.broker.txn.state_manager import TxnConfig
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from tests.support.wire import call

#: Backtracking needs ~2^30 steps to fail on it (half a minute or more); an automaton 31.
SLOW_NAME = "a" * 30 + "b"
EVIL = "(a+)+$"
#: The longest pattern accepted (``kompakt.broker.client_regex.MAX_PATTERN_CHARS``).
MAX_PATTERN_CHARS = 8192
#: Generous for a loaded machine (the automaton takes milliseconds), and still far below what
#: backtracking takes on the name above.
FAST_S = 10.0


@pytest.fixture
def wire(broker: Broker) -> Dispatcher:
    assert broker.log_manager is not None and broker.producer_ids is not None
    broker.txn = TransactionCoordinator(
        broker.log_manager, broker.clock, broker.producer_ids, TxnConfig(transaction_log_num_partitions=1)
    )
    return Dispatcher(broker)


def heartbeat(wire: Dispatcher, regex: str, group: str = "g", member_id: str | None = None) -> Any:
    return call(
        wire,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": group,
            "member_id": member_id or str(uuid.uuid4()),
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": regex,
            "server_assignor": None,
            "topic_partitions": [],
        },
    )


def assigned_topics(wire: Dispatcher, response: Any) -> set[str]:
    assert response.error_code is ErrorCode.none, response.error_message
    assert wire.broker.log_manager is not None
    by_id = {meta.topic_id: name for name, meta in wire.broker.log_manager.topics().items()}
    return {by_id[t.topic_id] for t in response.assignment.topic_partitions}


def list_transactions(wire: Dispatcher, pattern: str) -> Any:
    return call(wire, ApiKey.LIST_TRANSACTIONS, 2, {"transactional_id_pattern": pattern})


def init_transactional_id(wire: Dispatcher, transactional_id: str) -> None:
    response = call(
        wire,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": transactional_id, "transaction_timeout": 60_000},
    )
    assert response.error_code is ErrorCode.none


def test_a_pathological_subscription_regex_resolves_at_once(wire: Dispatcher) -> None:
    assert wire.broker.log_manager is not None
    wire.broker.log_manager.create_topic(SLOW_NAME, 1)
    wire.broker.log_manager.create_topic("aaaa", 2)
    started = time.monotonic()
    response = heartbeat(wire, EVIL)
    elapsed = time.monotonic() - started
    assert assigned_topics(wire, response) == {"aaaa"}
    assert elapsed < FAST_S, f"the heartbeat took {elapsed:.2f} s"


@pytest.mark.parametrize(
    "regex",
    [
        "(?=orders).*",  # look-ahead: Python has it, RE2J does not
        "(?<!x)orders",  # look-behind
        r"(o)\1rders",  # a backreference
        "orders(",  # unbalanced
    ],
)
def test_a_subscription_regex_re2j_rejects_is_invalid_regular_expression(
    wire: Dispatcher, regex: str
) -> None:
    response = heartbeat(wire, regex)
    assert response.error_code is ErrorCode.invalid_regular_expression
    assert response.error_message.startswith(
        f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
    )


def test_an_overlong_subscription_regex_is_refused(wire: Dispatcher) -> None:
    regex = "a" * (MAX_PATTERN_CHARS + 1)
    response = heartbeat(wire, regex)
    assert response.error_code is ErrorCode.invalid_regular_expression
    assert f"at most {MAX_PATTERN_CHARS}" in response.error_message


def test_a_subscription_regex_matches_whole_names_with_re2_syntax(wire: Dispatcher) -> None:
    assert wire.broker.log_manager is not None
    for name in ("orders", "orders-eu", "old-orders", "__internal-orders"):
        wire.broker.log_manager.create_topic(name, 1)
    # \Q...\E quoting and named classes are RE2J syntax too; matching is anchored at both ends.
    assert assigned_topics(wire, heartbeat(wire, r"\Qorders\E(-[[:alpha:]]+)?")) == {"orders", "orders-eu"}
    assert assigned_topics(wire, heartbeat(wire, ".*orders", group="g2")) == {"orders", "old-orders"}


def test_a_new_topic_joins_a_regex_subscription_at_the_next_heartbeat(wire: Dispatcher) -> None:
    assert wire.broker.log_manager is not None
    wire.broker.log_manager.create_topic("orders", 1)
    member = str(uuid.uuid4())
    assert assigned_topics(wire, heartbeat(wire, "orders.*", member_id=member)) == {"orders"}
    wire.broker.log_manager.create_topic("orders-eu", 1)
    assert assigned_topics(wire, heartbeat(wire, "orders.*", member_id=member)) == {"orders", "orders-eu"}


def test_list_transactions_with_a_pathological_pattern_answers_at_once(wire: Dispatcher) -> None:
    init_transactional_id(wire, SLOW_NAME)
    init_transactional_id(wire, "aaaa")
    started = time.monotonic()
    response = list_transactions(wire, EVIL)
    elapsed = time.monotonic() - started
    assert response.error_code is ErrorCode.none
    assert [t.transactional_id for t in response.transaction_states] == ["aaaa"]
    assert elapsed < FAST_S, f"ListTransactions took {elapsed:.2f} s"


@pytest.mark.parametrize(
    "pattern",
    [
        "app-(?=1)",
        "(?<=a)pp",
        "a{1001}",  # RE2J's repetition limit is 1000
        "(",
        pytest.param("x" * (MAX_PATTERN_CHARS + 1), id="overlong"),
    ],
)
def test_a_list_transactions_pattern_re2j_rejects_is_invalid_regular_expression(
    wire: Dispatcher, pattern: str
) -> None:
    init_transactional_id(wire, "app-1")
    response = list_transactions(wire, pattern)
    assert response.error_code is ErrorCode.invalid_regular_expression
    assert not response.transaction_states


def test_regex_handlers_run_off_the_event_loop() -> None:
    """The server runs ``blocking`` handlers in a worker thread: a regex over many names never
    holds the loop that serves every other connection."""
    assert HANDLERS[ApiKey.CONSUMER_GROUP_HEARTBEAT].blocking
    assert HANDLERS[ApiKey.LIST_TRANSACTIONS].blocking
