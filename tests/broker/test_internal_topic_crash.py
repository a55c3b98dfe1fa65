"""A kill at every file operation of the first ``__consumer_offsets`` and ``__transaction_state``.

Issue 26: a kill while the first group join was creating ``__consumer_offsets`` (2 of 50
directories present) left 48 partitions unloadable and a group that never formed. Here the first
group join (and the first transactional InitProducerId) runs through the handlers on a broker
whose file operations fail from the n-th on, as after ``kill -9``; the restarted broker must serve
groups (and transactional ids) placed on every partition of the internal topic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import OFFSETS_TOPIC, GroupConfig, partition_for
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.txn.coordinator import TransactionCoordinator
from kompakt.broker.txn.state_manager import TRANSACTION_STATE_TOPIC, TxnConfig
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from kompakt.testing.faults import FaultInjectingFileOps
from tests.support.wire import call

OFFSETS_PARTITIONS = 4
TXN_PARTITIONS = 3
CONFIG = BrokerConfig.from_properties(
    {
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    }
)


class Started:
    """A broker as ``BrokerApp._open`` assembles it: offsets loaded, then transactions."""

    def __init__(self, data_dir: Path, clock: FakeClock, ops: FaultInjectingFileOps | None = None) -> None:
        if ops is None:
            self.manager = LogManager(data_dir, CONFIG, clock)
        else:
            self.manager = LogManager(data_dir, CONFIG, clock, file_ops=ops)
        self.manager.open()
        if "t" not in self.manager.topics():
            self.manager.create_topic("t", 1)  # what the groups commit offsets for
        producer_ids = ProducerIdManager(data_dir)
        broker = Broker.create(
            clock=clock,
            log_manager=self.manager,
            producer_ids=producer_ids,
            group_config=GroupConfig(group_initial_rebalance_delay_ms=0),
        )
        broker.txn = TransactionCoordinator(
            self.manager, clock, producer_ids, TxnConfig(transaction_log_num_partitions=TXN_PARTITIONS)
        )
        broker.txn.load()
        self.dispatcher = Dispatcher(broker)


def form_group(dispatcher: Dispatcher, group: str) -> list[ErrorCode]:
    """Join, sync and commit as a classic consumer would; every error code on the way."""
    join = {
        "group_id": group,
        "session_timeout": 30_000,
        "rebalance_timeout": 1_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"sub"}],
    }
    required = call(dispatcher, ApiKey.JOIN_GROUP, 5, join)
    joined = call(dispatcher, ApiKey.JOIN_GROUP, 5, join | {"member_id": required.member_id})
    synced = call(
        dispatcher,
        ApiKey.SYNC_GROUP,
        3,
        {
            "group_id": group,
            "generation_id": joined.generation_id,
            "member_id": joined.member_id,
            "assignments": [{"member_id": joined.member_id, "assignment": b"a"}],
        },
    )
    committed = call(
        dispatcher,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": joined.generation_id,
            "member_id": joined.member_id,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7}]}],
        },
    )
    fetched = call(
        dispatcher,
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}]},
    )
    offset = fetched.topics[0].partitions[0].committed_offset if fetched.topics else None
    assert offset == 7 or committed.topics[0].partitions[0].error_code != ErrorCode.none
    return [
        joined.error_code,
        synced.error_code,
        committed.topics[0].partitions[0].error_code,
        fetched.error_code,
    ]


def init_transactional(dispatcher: Dispatcher, transactional_id: str) -> ErrorCode:
    response = call(
        dispatcher,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": transactional_id, "transaction_timeout": 60_000},
    )
    return ErrorCode(response.error_code)


def one_name_per_partition(prefix: str, partitions: int, place: Callable[[str, int], int]) -> list[str]:
    names: dict[int, str] = {}
    i = 0
    while len(names) < partitions:
        names.setdefault(place(f"{prefix}{i}", partitions), f"{prefix}{i}")
        i += 1
    return [names[p] for p in range(partitions)]


def txn_partition(transactional_id: str, partitions: int) -> int:
    return partition_for(transactional_id, partitions)  # the same Java hashCode placement


FIRST_USE: dict[str, tuple[str, int, Callable[[Dispatcher], object]]] = {
    "__consumer_offsets": (OFFSETS_TOPIC, OFFSETS_PARTITIONS, lambda d: form_group(d, "first")),
    "__transaction_state": (
        TRANSACTION_STATE_TOPIC,
        TXN_PARTITIONS,
        lambda d: init_transactional(d, "first-txn"),
    ),
}


def check_restarted(data_dir: Path, clock: FakeClock, topic: str, partitions: int) -> None:
    started = Started(data_dir, clock)
    try:
        meta = started.manager.topics().get(topic)
        if meta is not None:
            assert meta.partitions == partitions
            for p in range(partitions):
                started.manager.get_log(topic, p)
        for group in one_name_per_partition("group-", OFFSETS_PARTITIONS, partition_for):
            assert form_group(started.dispatcher, group) == [ErrorCode.none] * 4, group
        for txn_id in one_name_per_partition("txn-", TXN_PARTITIONS, txn_partition):
            assert init_transactional(started.dispatcher, txn_id) == ErrorCode.none, txn_id
    finally:
        started.manager.close()


@pytest.mark.parametrize("first_use", sorted(FIRST_USE))
def test_kill_at_every_file_operation_of_the_first_internal_topic(tmp_path: Path, first_use: str) -> None:
    topic, partitions, use = FIRST_USE[first_use]
    clock = FakeClock(1_700_000_000_000)
    counter = FaultInjectingFileOps(armed=False)
    started = Started(tmp_path / "count", clock, counter)
    with counter.armed():
        use(started.dispatcher)
    creation = [i for i, (op, target) in enumerate(counter.log) if topic in target]
    started.manager.close()
    assert creation, f"the first use did not create {topic}"

    for fail_at in range(creation[0], creation[-1] + 2):
        data_dir = tmp_path / f"kill-{fail_at}"
        ops = FaultInjectingFileOps(fail_at, armed=False, kill=True)
        started = Started(data_dir, clock, ops)
        with ops.armed(), contextlib.suppress(Exception):  # the process is dead from here on
            use(started.dispatcher)
        started.manager.close_without_flush()
        check_restarted(data_dir, clock, topic, partitions)
