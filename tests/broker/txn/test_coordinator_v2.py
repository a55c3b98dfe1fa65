"""Transactions version 2 (KIP-890 part 2) in the coordinator, as Kafka 4.1's ``endTransaction``.

Every commit and abort bumps the epoch (EndTxn answers with it), the markers carry the bumped
epoch, a retry is recognised by the bump, an abort needs no partition, and an exhausted epoch
completes the transaction under a new producer id.
"""

from __future__ import annotations

from kompakt.broker.txn.coordinator import EndTxnResult, TransactionCoordinator
from kompakt.broker.txn.log_format import decode_key, decode_value
from kompakt.broker.txn.metadata import MAX_EPOCH, TV_2, TransactionState
from kompakt.broker.txn.state_manager import TRANSACTION_STATE_TOPIC
from kompakt.clock import FakeClock
from kompakt.log.manager import LogManager
from kompakt.protocol.codec import ErrorCode
from kompakt.records.batch import iter_batches
from kompakt.records.control import control_type_of
from kompakt.records.record import decode_records

from .test_coordinator import TOPIC, coordinator_for, produce_txn

E = ErrorCode


def markers(logs: LogManager, partition: int = 0) -> list[tuple[int, int, str]]:
    """``(producer id, epoch, type)`` of every marker in ``TOPIC``-``partition``."""
    out = []
    for segment in logs.get_log(TOPIC, partition).segments.values():
        for _, batch in segment.iter_batches():
            if batch.is_control:
                marker = control_type_of(batch)
                out.append((batch.producer_id, batch.producer_epoch, getattr(marker, "name", str(marker))))
    return out


def values(
    logs: LogManager, txn: TransactionCoordinator, transactional_id: str
) -> list[tuple[str, int, int, int]]:
    """``(state, producer id, epoch, client transaction version)`` of each state record."""
    partition_log = logs.get_log(TRANSACTION_STATE_TOPIC, txn.state.partition_for(transactional_id))
    data = partition_log.read(0, 1 << 20, max_offset=partition_log.log_end_offset).records
    out = []
    for batch in iter_batches(data):
        for record in decode_records(batch):
            assert record.key is not None and record.value is not None
            if decode_key(record.key) == transactional_id:
                v = decode_value(record.value)
                out.append(
                    (
                        TransactionState.from_id(v.state_id).state_name,
                        v.producer_id,
                        v.producer_epoch,
                        v.client_transaction_version,
                    )
                )
    return out


def add(txn: TransactionCoordinator, pid: int, epoch: int, partition: int = 0) -> ErrorCode:
    """What a Produce v12 does before its append: add the partition (transactions v2)."""
    with txn.verified("app", pid, epoch, [(TOPIC, partition)], add=True) as errors:
        return errors[(TOPIC, partition)]


def end(txn: TransactionCoordinator, pid: int, epoch: int, commit: bool) -> EndTxnResult:
    return txn.end_transaction_result("app", pid, epoch, commit, TV_2)


def test_every_commit_and_abort_bumps_the_epoch_and_the_markers_carry_it(
    logs: LogManager, clock: FakeClock
) -> None:
    txn = coordinator_for(logs, clock)
    init = txn.init_producer_id("app", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    for round_, commit in enumerate((True, False, True)):
        assert add(txn, pid, epoch) is E.none
        produce_txn(logs, 0, pid, epoch)
        assert end(txn, pid, epoch, commit) == EndTxnResult(E.none, pid, epoch + 1)
        epoch += 1
        assert round_ + 1 == epoch
    assert markers(logs) == [(pid, 1, "COMMIT"), (pid, 2, "ABORT"), (pid, 3, "COMMIT")]
    assert values(logs, txn, "app") == [
        ("Empty", pid, 0, 0),
        ("Ongoing", pid, 0, 2),
        ("PrepareCommit", pid, 1, 2),
        ("CompleteCommit", pid, 1, 2),
        ("Ongoing", pid, 1, 2),
        ("PrepareAbort", pid, 2, 2),
        ("CompleteAbort", pid, 2, 2),
        ("Ongoing", pid, 2, 2),
        ("PrepareCommit", pid, 3, 2),
        ("CompleteCommit", pid, 3, 2),
    ]
    # The client version survives a reload with the state.
    reloaded = coordinator_for(logs, clock).state.get("app")
    assert reloaded is not None
    assert (reloaded.producer_epoch, reloaded.client_transaction_version) == (3, TV_2)


def test_retries_are_told_apart_from_the_next_transaction(logs: LogManager, clock: FakeClock) -> None:
    txn = coordinator_for(logs, clock)
    init = txn.init_producer_id("app", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert add(txn, pid, epoch) is E.none
    assert end(txn, pid, epoch, commit=True) == EndTxnResult(E.none, pid, epoch + 1)
    # The same EndTxn again (its answer was lost): the bumped epoch says it is a retry.
    assert end(txn, pid, epoch, commit=True) == EndTxnResult(E.none, pid, epoch + 1)
    assert end(txn, pid, epoch, commit=False).error is E.invalid_txn_state
    # An epoch older than the retry's is a zombie.
    assert end(txn, pid, epoch - 1, commit=True).error is E.producer_fenced
    # The new epoch with nothing added: a commit is invalid, an abort is allowed (no markers).
    assert end(txn, pid, epoch + 1, commit=True).error is E.invalid_txn_state
    assert end(txn, pid, epoch + 1, commit=False) == EndTxnResult(E.none, pid, epoch + 2)
    assert markers(logs) == [(pid, epoch + 1, "COMMIT")]
    assert values(logs, txn, "app")[-2:] == [
        ("PrepareAbort", pid, epoch + 2, 2),
        ("CompleteAbort", pid, epoch + 2, 2),
    ]
    # The old epoch cannot add partitions any more.
    assert add(txn, pid, epoch) is E.producer_fenced


def test_an_exhausted_epoch_rolls_over_to_a_new_producer_id(logs: LogManager, clock: FakeClock) -> None:
    txn = coordinator_for(logs, clock)
    init = txn.init_producer_id("app", 60_000)
    pid = init.producer_id
    metadata = txn.state.get("app")
    assert metadata is not None
    last = MAX_EPOCH - 1  # the last epoch a client may use
    metadata.producer_epoch = last
    assert add(txn, pid, last) is E.none
    produce_txn(logs, 0, pid, last)
    result = end(txn, pid, last, commit=True)
    assert result.error is E.none and result.producer_id != pid and result.producer_epoch == 0
    new_pid = result.producer_id
    # The markers went out at Short.MAX_VALUE under the old id; the transaction completed under the new one.
    assert markers(logs) == [(pid, MAX_EPOCH, "COMMIT")]
    assert values(logs, txn, "app")[-2:] == [
        ("PrepareCommit", pid, MAX_EPOCH, 2),
        ("CompleteCommit", new_pid, 0, 2),
    ]
    assert (metadata.prev_producer_id, metadata.last_producer_epoch) == (pid, last)
    # A retry with the old id and epoch is answered with the new ones.
    assert end(txn, pid, last, commit=True) == EndTxnResult(E.none, new_pid, 0)
    # The next transaction runs under the new id from sequence 0.
    assert add(txn, new_pid, 0) is E.none
    produce_txn(logs, 0, new_pid, 0)
    assert end(txn, new_pid, 0, commit=True) == EndTxnResult(E.none, new_pid, 1)
    assert add(txn, pid, last) is E.invalid_producer_id_mapping


def test_fencing_an_ongoing_transaction_under_version_2(logs: LogManager, clock: FakeClock) -> None:
    txn = coordinator_for(logs, clock)
    init = txn.init_producer_id("app", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert add(txn, pid, epoch) is E.none
    produce_txn(logs, 0, pid, epoch)
    # A second instance: the ongoing transaction is aborted at epoch + 1, the new one gets + 2.
    assert txn.init_producer_id("app", 60_000).error is E.concurrent_transactions
    again = txn.init_producer_id("app", 60_000)
    assert (again.error, again.producer_id, again.producer_epoch) == (E.none, pid, epoch + 2)
    assert markers(logs) == [(pid, epoch + 1, "ABORT")]
    assert end(txn, pid, epoch, commit=True).error is E.producer_fenced


def test_a_timed_out_transaction_is_aborted_with_one_bump(logs: LogManager, clock: FakeClock) -> None:
    txn = coordinator_for(logs, clock)
    init = txn.init_producer_id("app", 1_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert add(txn, pid, epoch) is E.none
    clock.advance(5_000)
    assert txn.abort_timed_out_transactions() == 1
    assert markers(logs) == [(pid, epoch + 1, "ABORT")]
    assert values(logs, txn, "app")[-1] == ("CompleteAbort", pid, epoch + 1, 2)
    # The producer's commit looks like a retry of the abort's bump: INVALID_TXN_STATE, as Kafka
    # answers; its writes are fenced.
    assert end(txn, pid, epoch, commit=True).error is E.invalid_txn_state
    assert add(txn, pid, epoch) is E.producer_fenced
