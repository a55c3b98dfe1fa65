"""The transaction coordinator's state machine, its log and its markers, on a real data directory.

Scenarios follow Kafka 4.1's TransactionCoordinator (transaction.version 1 paths): what a client
is answered, what lands in ``__transaction_state`` and in the partitions, and what survives a
reload.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.broker.groups import (
    OFFSETS_TOPIC,
    GroupConfig,
    GroupCoordinator,
    GroupLog,
    OffsetCommitEntry,
    partition_for,
)
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.txn.coordinator import TransactionCoordinator
from kompakt.broker.txn.log_format import decode_key, decode_value, encode_key, encode_value
from kompakt.broker.txn.metadata import TransactionState
from kompakt.broker.txn.state_manager import TRANSACTION_STATE_TOPIC, TxnConfig, _to_value
from kompakt.clock import FakeClock
from kompakt.log.manager import LogManager
from kompakt.protocol.codec import ErrorCode
from kompakt.records.batch import RecordBatchView, iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, control_type_of
from kompakt.records.record import decode_records

from .conftest import TOPIC, open_logs

E = ErrorCode

CONFIG = TxnConfig(transaction_log_num_partitions=3, transactional_id_expiration_ms=3_600_000)


def coordinator_for(
    logs: LogManager, clock: FakeClock, offsets: GroupCoordinator | None = None
) -> TransactionCoordinator:
    txn = TransactionCoordinator(logs, clock, ProducerIdManager(logs.data_dir), CONFIG)
    if offsets is not None:
        txn.markers.listeners.append(
            lambda topic, partition, pid, committed: offsets.complete_transaction(partition, pid, committed)
            if topic == OFFSETS_TOPIC
            else None
        )
    txn.load()
    return txn


def groups_for(logs: LogManager, clock: FakeClock) -> GroupCoordinator:
    """The broker's group coordinator over this directory, loaded (as ``BrokerApp._open`` has it)."""
    groups = GroupCoordinator(GroupConfig(), clock, GroupLog(logs, clock))
    groups.load()
    return groups


def fetch(groups: GroupCoordinator) -> dict[tuple[str, int], int]:
    return {(t, p): c.offset for t, p, c in groups.fetch_offsets("g", None) if c is not None}


@pytest.fixture
def txn(logs: LogManager, clock: FakeClock) -> TransactionCoordinator:
    return coordinator_for(logs, clock)


def batches(logs: LogManager, topic: str, partition: int) -> list[tuple[int, str]]:
    """``(base offset, what)`` of every batch: "data", "txn" or the marker type."""
    partition_log = logs.get_log(topic, partition)
    out = []
    for segment in partition_log.segments.values():
        for _, batch in segment.iter_batches():
            out.append(_describe(batch))
    return out


def _describe(batch: RecordBatchView) -> tuple[int, str]:
    if batch.is_control:
        marker = control_type_of(batch)
        return batch.base_offset, marker.name if isinstance(marker, ControlType) else str(marker)
    return batch.base_offset, "txn" if batch.is_transactional else "data"


def state_records(logs: LogManager, transactional_id: str, txn: TransactionCoordinator) -> list[str | None]:
    """The states in ``__transaction_state`` for one id, in order (None for a tombstone)."""
    partition_log = logs.get_log(TRANSACTION_STATE_TOPIC, txn.state.partition_for(transactional_id))
    data = partition_log.read(0, 1 << 20, max_offset=partition_log.log_end_offset).records
    out: list[str | None] = []
    for batch in iter_batches(data):
        for record in decode_records(batch):
            assert record.key is not None
            if decode_key(record.key) == transactional_id:
                out.append(
                    None
                    if record.value is None
                    else TransactionState.from_id(decode_value(record.value).state_id).name
                )
    return out


def produce_txn(logs: LogManager, partition: int, pid: int, epoch: int, seq: int = 0) -> None:
    logs.get_log(TOPIC, partition).append(
        build_batch(
            [SimpleRecord(b"k", b"v", 0)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=True,
        )
    )


def test_init_bumps_the_epoch_and_validates_timeouts(txn: TransactionCoordinator, logs: LogManager) -> None:
    first = txn.init_producer_id("app", 60_000)
    assert (first.error, first.producer_epoch) == (E.none, 0)
    again = txn.init_producer_id("app", 60_000)
    assert (again.error, again.producer_id, again.producer_epoch) == (E.none, first.producer_id, 1)
    assert (
        txn.init_producer_id("app", CONFIG.transaction_max_timeout_ms + 1).error
        is E.invalid_transaction_timeout
    )
    assert txn.init_producer_id("app", 0).error is E.invalid_transaction_timeout
    assert txn.init_producer_id("", 1000).error is E.invalid_request
    # v3+ with the id and epoch the producer holds: a retry after an error keeps the id.
    retried = txn.init_producer_id("app", 60_000, (first.producer_id, 1))
    assert (retried.producer_id, retried.producer_epoch) == (first.producer_id, 2)
    assert txn.init_producer_id("app", 60_000, (first.producer_id + 99, 0)).error is E.producer_fenced
    assert state_records(logs, "app", txn) == ["EMPTY", "EMPTY", "EMPTY"]


def test_commit_writes_markers_to_every_partition_and_completes(
    txn: TransactionCoordinator, logs: LogManager
) -> None:
    r = txn.init_producer_id("app", 60_000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert txn.add_partitions("app", pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) is E.none
    produce_txn(logs, 0, pid, epoch)
    produce_txn(logs, 1, pid, epoch)
    assert logs.get_log(TOPIC, 0).last_stable_offset == 0
    assert txn.end_transaction("app", pid, epoch, commit=True) is E.none
    assert batches(logs, TOPIC, 0) == [(0, "txn"), (1, "COMMIT")]
    assert batches(logs, TOPIC, 1) == [(0, "txn"), (1, "COMMIT")]
    assert logs.get_log(TOPIC, 0).last_stable_offset == 2
    assert state_records(logs, "app", txn) == ["EMPTY", "ONGOING", "PREPARE_COMMIT", "COMPLETE_COMMIT"]
    # A retried EndTxn after completion is answered NONE; the opposite outcome is refused.
    assert txn.end_transaction("app", pid, epoch, commit=True) is E.none
    assert txn.end_transaction("app", pid, epoch, commit=False) is E.invalid_txn_state
    assert txn.end_transaction("app", pid, epoch + 1, commit=True) is E.producer_fenced
    assert txn.end_transaction("app", pid + 1, epoch, commit=True) is E.invalid_producer_id_mapping
    assert txn.end_transaction("nobody", pid, epoch, commit=True) is E.invalid_producer_id_mapping


def test_abort_leaves_an_aborted_transaction_in_the_index(
    txn: TransactionCoordinator, logs: LogManager
) -> None:
    r = txn.init_producer_id("app", 60_000)
    assert txn.add_partitions("app", r.producer_id, r.producer_epoch, [(TOPIC, 0)]) is E.none
    produce_txn(logs, 0, r.producer_id, r.producer_epoch)
    assert txn.end_transaction("app", r.producer_id, r.producer_epoch, commit=False) is E.none
    assert batches(logs, TOPIC, 0) == [(0, "txn"), (1, "ABORT")]
    aborted = logs.get_log(TOPIC, 0).collect_aborted_transactions(0, 2)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(r.producer_id, 0, 1)]


def test_end_without_a_transaction_and_concurrent_states(txn: TransactionCoordinator) -> None:
    r = txn.init_producer_id("app", 60_000)
    assert txn.end_transaction("app", r.producer_id, r.producer_epoch, commit=True) is E.invalid_txn_state
    assert txn.add_partitions("app", r.producer_id, r.producer_epoch + 1, [(TOPIC, 0)]) is E.producer_fenced
    assert (
        txn.add_partitions("app", r.producer_id + 5, r.producer_epoch, [(TOPIC, 0)])
        is E.invalid_producer_id_mapping
    )
    assert txn.add_partitions("ghost", 1, 0, [(TOPIC, 0)]) is E.invalid_producer_id_mapping


def test_init_with_an_ongoing_transaction_fences_and_aborts_it(
    txn: TransactionCoordinator, logs: LogManager
) -> None:
    zombie = txn.init_producer_id("app", 60_000)
    pid, epoch = zombie.producer_id, zombie.producer_epoch
    assert txn.add_partitions("app", pid, epoch, [(TOPIC, 0)]) is E.none
    produce_txn(logs, 0, pid, epoch)
    assert txn.init_producer_id("app", 60_000).error is E.concurrent_transactions
    # The abort marker carries the fenced epoch: the zombie's next write is refused.
    assert batches(logs, TOPIC, 0) == [(0, "txn"), (1, "ABORT")]
    assert logs.get_log(TOPIC, 0).producer_state.producers[pid].epoch == epoch + 1
    successor = txn.init_producer_id("app", 60_000)
    assert (successor.error, successor.producer_id, successor.producer_epoch) == (E.none, pid, epoch + 2)
    assert txn.end_transaction("app", pid, epoch, commit=True) is E.producer_fenced
    with txn.verified("app", pid, epoch, [(TOPIC, 0)]) as errors:
        assert errors == {(TOPIC, 0): E.producer_fenced}
    assert state_records(logs, "app", txn) == [
        "EMPTY", "ONGOING", "PREPARE_ABORT", "COMPLETE_ABORT", "EMPTY",
    ]  # fmt: skip


def test_verification_guards_partitions_outside_the_transaction(txn: TransactionCoordinator) -> None:
    r = txn.init_producer_id("app", 60_000)
    pid, epoch = r.producer_id, r.producer_epoch
    with txn.verified("app", pid, epoch, [(TOPIC, 0)]) as errors:
        assert errors == {(TOPIC, 0): E.transaction_abortable}  # not added: a late or stray write
    txn.add_partitions("app", pid, epoch, [(TOPIC, 0)])
    assert txn.verify_partitions("app", pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == {
        (TOPIC, 0): E.none,
        (TOPIC, 1): E.transaction_abortable,
    }
    txn.end_transaction("app", pid, epoch, commit=True)
    assert txn.verify_partitions("app", pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.transaction_abortable}
    assert txn.verify_partitions("", pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.invalid_request}


def test_timed_out_transaction_is_aborted_by_the_periodic_task(
    txn: TransactionCoordinator, logs: LogManager, clock: FakeClock
) -> None:
    r = txn.init_producer_id("app", 10_000)
    txn.add_partitions("app", r.producer_id, r.producer_epoch, [(TOPIC, 1)])
    produce_txn(logs, 1, r.producer_id, r.producer_epoch)
    clock.advance(10_000)
    assert txn.abort_timed_out_transactions() == 0  # not past the timeout yet
    clock.advance(1)
    assert txn.abort_timed_out_transactions() == 1
    assert batches(logs, TOPIC, 1) == [(0, "txn"), (1, "ABORT")]
    d = txn.describe("app")
    assert (d.state, d.producer_epoch) == ("CompleteAbort", r.producer_epoch + 1)
    assert txn.end_transaction("app", r.producer_id, r.producer_epoch, commit=True) is E.producer_fenced


def test_idle_transactional_ids_expire_with_a_tombstone(
    txn: TransactionCoordinator, logs: LogManager, clock: FakeClock
) -> None:
    txn.init_producer_id("idle", 1000)
    r = txn.init_producer_id("busy", 1000)
    txn.add_partitions("busy", r.producer_id, r.producer_epoch, [(TOPIC, 0)])
    clock.advance(CONFIG.transactional_id_expiration_ms)
    assert txn.expire_transactional_ids() == 1  # an Ongoing transaction never expires
    assert txn.describe("idle").error is E.transactional_id_not_found
    assert txn.describe("busy").state == "Ongoing"
    assert state_records(logs, "idle", txn) == ["EMPTY", None]


def test_state_survives_a_reload_and_decided_transactions_are_completed(
    data_dir: Path, clock: FakeClock
) -> None:
    logs = open_logs(data_dir, clock)
    txn = coordinator_for(logs, clock)
    ongoing = txn.init_producer_id("ongoing", 60_000)
    txn.add_partitions("ongoing", ongoing.producer_id, ongoing.producer_epoch, [(TOPIC, 0)])
    produce_txn(logs, 0, ongoing.producer_id, ongoing.producer_epoch)
    decided = txn.init_producer_id("decided", 60_000)
    txn.add_partitions("decided", decided.producer_id, decided.producer_epoch, [(TOPIC, 1)])
    produce_txn(logs, 1, decided.producer_id, decided.producer_epoch)
    # A crash right after PrepareCommit was written: no marker yet.
    metadata = txn.state.get("decided")
    assert metadata is not None
    transit = metadata.prepare_abort_or_commit(TransactionState.PREPARE_COMMIT, clock.now_ms())
    partition_log = logs.get_log(TRANSACTION_STATE_TOPIC, txn.state.partition_for("decided"))
    partition_log.append(
        build_batch([SimpleRecord(encode_key("decided"), encode_value(_to_value(transit)), 0)])
    )
    logs.close()

    logs = open_logs(data_dir, clock)
    try:
        txn = coordinator_for(logs, clock)
        assert txn.describe("decided").state == "CompleteCommit"
        assert batches(logs, TOPIC, 1) == [(0, "txn"), (1, "COMMIT")]
        d = txn.describe("ongoing")
        assert (d.state, d.partitions) == ("Ongoing", ((TOPIC, 0),))
        assert logs.get_log(TOPIC, 0).last_stable_offset == 0
        assert (
            txn.end_transaction("ongoing", ongoing.producer_id, ongoing.producer_epoch, commit=True) is E.none
        )
        assert logs.get_log(TOPIC, 0).last_stable_offset == 2
    finally:
        logs.close()


def test_transactional_offsets_are_visible_only_after_commit_and_after_reload(
    data_dir: Path, clock: FakeClock
) -> None:
    logs = open_logs(data_dir, clock)
    offsets = groups_for(logs, clock)
    txn = coordinator_for(logs, clock, offsets)
    group_tp = (OFFSETS_TOPIC, partition_for("g", 3))
    for tid, offset, commit in (("t1", 10, True), ("t2", 20, False)):
        r = txn.init_producer_id(tid, 60_000)
        txn.add_partitions(tid, r.producer_id, r.producer_epoch, [group_tp])
        offsets.commit_transactional_offsets(
            "g", r.producer_id, r.producer_epoch, [OffsetCommitEntry(TOPIC, 0, offset, -1, None)]
        )
        assert fetch(offsets) == {} or fetch(offsets)[(TOPIC, 0)] == 10
        assert offsets.has_pending_transactional("g", TOPIC, 0)
        txn.end_transaction(tid, r.producer_id, r.producer_epoch, commit=commit)
        assert not offsets.has_pending_transactional("g", TOPIC, 0)
    assert fetch(offsets)[(TOPIC, 0)] == 10  # the aborted 20 was dropped
    r = txn.init_producer_id("t3", 60_000)
    txn.add_partitions("t3", r.producer_id, r.producer_epoch, [group_tp])
    offsets.commit_transactional_offsets(
        "g", r.producer_id, r.producer_epoch, [OffsetCommitEntry(TOPIC, 1, 5, -1, "m")]
    )
    logs.close()

    logs = open_logs(data_dir, clock)
    try:
        offsets = groups_for(logs, clock)
        assert fetch(offsets) == {(TOPIC, 0): 10}
        assert offsets.has_pending_transactional("g", TOPIC, 1)  # t3 is still open
        txn = coordinator_for(logs, clock, offsets)
        assert txn.end_transaction("t3", r.producer_id, r.producer_epoch, commit=True) is E.none
        assert fetch(offsets) == {(TOPIC, 0): 10, (TOPIC, 1): 5}
    finally:
        logs.close()


def test_list_and_describe(txn: TransactionCoordinator, clock: FakeClock) -> None:
    a = txn.init_producer_id("alpha", 60_000)
    txn.init_producer_id("beta", 60_000)
    txn.add_partitions("alpha", a.producer_id, a.producer_epoch, [(TOPIC, 1), (TOPIC, 0)])
    clock.advance(5000)
    listed, unknown = txn.list_transactions(state_names=["Ongoing", "Bogus"])
    assert [(t.transactional_id, t.state.state_name) for t in listed] == [("alpha", "Ongoing")]
    assert unknown == ["Bogus"]
    assert {t.transactional_id for t in txn.list_transactions()[0]} == {"alpha", "beta"}
    assert [t.transactional_id for t in txn.list_transactions(pattern="b.*")[0]] == ["beta"]
    assert [t.transactional_id for t in txn.list_transactions(producer_ids=[a.producer_id])[0]] == ["alpha"]
    # Kafka's duration filter compares with the start time, which is -1 for an Empty id: listed.
    assert sorted(t.transactional_id for t in txn.list_transactions(duration_ms=4000)[0]) == ["alpha", "beta"]
    assert [t.transactional_id for t in txn.list_transactions(duration_ms=6000)[0]] == ["beta"]
    d = txn.describe("alpha")
    assert (d.error, d.state, d.partitions, d.timeout_ms) == (
        E.none,
        "Ongoing",
        ((TOPIC, 0), (TOPIC, 1)),
        60_000,
    )
    assert txn.describe("beta").start_time_ms == -1
    assert txn.describe("").error is E.invalid_request
