"""Producer state and transactions: ports of Kafka's ``LogCleanerTest`` and ``UnifiedLogTest`` (reference
scenarios S17-S19 and S20-S33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.errors import DuplicateSequenceError
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, build_control_batch, control_key

from ._harness import (
    BB,
    LARGE,
    MAX_LONG,
    B,
    K,
    O,
    S,
    abort,
    aborted_index,
    append_kv,
    batches,
    build_map,
    clean,
    commit,
    idem,
    lct_log,
    make_map,
    marker,
    producer_batch,
    reopen,
    rewrite,
    roll,
    two_pass_clean,
    txn,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _duplicate(log: PartitionLog, raw: bytes) -> tuple[int, int]:
    leo = log.log_end_offset
    with pytest.raises(DuplicateSequenceError) as info:
        log.append(raw)
    assert log.log_end_offset == leo
    return info.value.first_offset, info.value.last_offset


# ------------------------------------------------------------------ producer state (idempotence)


def test_duplicate_check_after_cleaning(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testDuplicateCheckAfterCleaning`` (reference scenario S17)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=2048)
    p1 = producer_batch(log, 1, (1, 2, 3), transactional=False)
    p2 = producer_batch(log, 2, (3, 1, 4), transactional=False)
    p3 = producer_batch(log, 3, (1, 4), transactional=False)
    for raw in (p1, p2, p3):
        log.append(raw)
    roll(log)
    clean(log, 0)
    assert B(log) == [2, 5, 7]
    assert S(log) == {1: 2, 2: 2, 3: 1}
    assert K(log) == [2, 3, 1, 4]
    assert O(log) == [1, 3, 6, 7]

    log = reopen(log)
    assert _duplicate(log, p1) == (0, 2)
    assert _duplicate(log, p3) == (6, 7)
    assert _duplicate(log, p2) == (3, 5)

    assert idem(log, 4, 2) == (8, 8)
    roll(log)
    clean(log, 0)
    assert S(log) == {1: 2, 2: 2, 3: 1, 4: 0}
    assert B(log) == [2, 5, 7, 8]
    assert K(log) == [3, 1, 4, 2]
    assert O(log) == [3, 6, 7, 8]

    log = reopen(log)
    assert _duplicate(log, p1) == (0, 2)


def test_cleaner_retains_producer_last_sequence(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testLogCleanerRetainsProducerLastSequence`` (reference scenario S18)."""
    log = lct_log(tmp_path, clock)
    append_kv(log, 0, 0)
    idem(log, 1, 0, values=(1,))
    idem(log, 2, 0, values=(2,))
    idem(log, 3, 0, values=(3,))
    idem(log, 2, 1, values=(1,))
    roll(log)
    clean(log, 0, map_slots=10)
    assert B(log) == [1, 3, 4]
    assert S(log) == {1: 0, 2: 1, 3: 0}
    assert K(log) == [0, 1]
    assert O(log) == [3, 4]


def test_rebuild_producer_state_with_empty_compacted_batch(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``UnifiedLogTest.testRebuildProducerStateWithEmptyCompactedBatch`` (reference scenario S19)."""
    log = lct_log(tmp_path, clock)
    # The RETAIN_EMPTY result of a 2-record batch of pid 1 at base 23 (``MemoryRecords.filterTo``'s empty
    # header).
    empty = build_batch(
        [], base_offset=23, producer_id=1, producer_epoch=0, base_sequence=0, last_offset_delta=1
    )
    log.append_with_offsets(empty)
    log.append_with_offsets(build_batch([SimpleRecord(None, b"a"), SimpleRecord(None, b"b")], base_offset=25))
    log.truncate_to(25)
    assert log.producer_state.last_sequence(1) == 1
    log = reopen(log, clean_shutdown=False)
    assert log.producer_state.last_sequence(1) == 1


def test_rebuild_producer_id_map_with_compacted_data(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``UnifiedLogTest.testRebuildProducerIdMapWithCompactedData`` (reference scenario S19)."""
    log = lct_log(tmp_path, clock)
    # The DELETE_EMPTY result keeping the unkeyed records 0 and 2 of a 4-record batch (last delta 3).
    kept = [SimpleRecord(None, b"a", offset_delta=0), SimpleRecord(None, b"c", offset_delta=2)]
    log.append_with_offsets(
        build_batch(
            kept, base_offset=23, producer_id=1, producer_epoch=0, base_sequence=0, last_offset_delta=3
        )
    )
    log.append_with_offsets(build_batch([SimpleRecord(None, b"x"), SimpleRecord(None, b"y")], base_offset=27))
    log.truncate_to(27)
    assert log.producer_state.last_sequence(1) == 3


# -------------------------------------------------------------------------------- transactions


def test_basic_transaction_aware_cleaning(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testBasicTransactionAwareCleaning`` (reference scenario S20)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=2048)
    assert txn(log, 1, 1, 2) == (0, 1)
    assert txn(log, 2, 2, 3) == (2, 3)
    assert txn(log, 1, 3, 4) == (4, 5)
    assert abort(log, 1) == 6
    assert commit(log, 2) == 7
    assert txn(log, 1, 2) == (8, 8)
    assert commit(log, 1) == 9
    roll(log)
    assert aborted_index(log) == [(1, 0, 6)]
    clean(log, 0)
    assert K(log) == [3, 2]
    assert O(log) == [3, 6, 7, 8, 9]
    assert aborted_index(log) == [(1, 0, 6)]


def test_clean_with_transactions_spanning_segments(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanWithTransactionsSpanningSegments`` (reference scenario S21)."""
    log = lct_log(tmp_path, clock)
    txn(log, 1, 1, 2)
    txn(log, 3, 2, 3)
    txn(log, 2, 3, 4)
    roll(log)
    txn(log, 2, 5, 6)
    txn(log, 3, 6, 7)
    txn(log, 1, 7, 8)
    assert abort(log, 2) == 12
    assert txn(log, 3, 8, 9) == (13, 14)
    assert commit(log, 3) == 15
    txn(log, 1, 9, 10)
    assert abort(log, 1) == 18
    d = clean(log, 0)
    assert d == 6
    assert K(log) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    assert B(log)[:2] == [3, 5]  # P2's batch at 4-5 is an empty header ending at the round's bound
    roll(log)
    assert txn(log, 2, 11) == (19, 19)
    assert txn(log, 1, 12) == (20, 20)
    clean(log, d)
    assert K(log) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_multi_pass_segment_cleaning_with_aborted_transactions(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testMultiPassSegmentCleaningWithAbortedTransactions`` (reference scenario
    S22)."""
    log = lct_log(tmp_path, clock, delete_retention_ms=50_000)
    txn(log, 1, 1, 2)
    txn(log, 2, 2, 3)
    txn(log, 1, 3, 4)
    commit(log, 1)
    commit(log, 2)
    txn(log, 1, 2, 3)
    assert abort(log, 1) == 10
    txn(log, 2, 4, 5)
    txn(log, 1, 5, 6)
    commit(log, 1)
    assert abort(log, 2) == 16
    txn(log, 2, 6, 7)
    assert commit(log, 2) == 19
    roll(log)
    assert log.log_end_offset == 20
    assert aborted_index(log) == [(1, 8, 10), (2, 11, 16)]

    def one_pass(dirty: int) -> int:
        offset_map = make_map(4)
        active = log.segments.active.base_offset
        build_map(log, dirty, active, offset_map)
        inactive = [s for s in log.segments.values() if s.base_offset < active]
        rewrite(log, inactive, offset_map, now=clock.now_ms(), upper_bound=inactive[-1].read_next_offset())
        assert log.producer_state.first_unstable_offset() is None
        return offset_map.latest_offset + 1

    dirty = one_pass(0)
    assert dirty == 4
    assert BB(log) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert O(log) == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert aborted_index(log) == [(1, 8, 10), (2, 11, 16)]

    dirty = one_pass(dirty)
    assert dirty == 14
    assert BB(log) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert O(log) == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert aborted_index(log) == []

    clock.advance(50_000)
    dirty = one_pass(dirty)
    assert dirty == 20
    assert BB(log) == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert O(log) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]


def test_commit_marker_removal(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCommitMarkerRemoval`` (reference scenario S23)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=256)
    txn(log, 1, 1)
    txn(log, 1, 2, 3)
    commit(log, 1)
    txn(log, 1, 2)
    commit(log, 1)
    roll(log)
    clean(log, 0, LARGE)
    assert (K(log), O(log)) == ([1, 3, 2], [0, 2, 3, 4, 5])
    txn(log, 1, 1, 3)
    commit(log, 1)
    roll(log)
    clean(log, 6, LARGE)
    assert (K(log), O(log)) == ([2, 1, 3], [3, 4, 5, 6, 7, 8])
    clean(log, 0, LARGE)
    assert (K(log), O(log)) == ([2, 1, 3], [3, 4, 5, 6, 7, 8])
    marker3 = next(v for v, _r in batches(log) if v.base_offset == 3)
    assert marker3.has_delete_horizon
    clean(log, 0, MAX_LONG)
    assert (K(log), O(log)) == ([2, 1, 3], [4, 5, 6, 7, 8])


def test_deleted_batches_with_no_messages_read(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testDeletedBatchesWithNoMessagesRead`` (reference scenario S24)."""
    log = lct_log(tmp_path, clock, max_message_bytes=100, internal_segment_bytes=1000)
    txn(log, 1, 1)
    abort(log, 1)
    txn(log, 1, 2)
    txn(log, 1, 2)
    commit(log, 1)
    roll(log)
    clean(log, 0, LARGE, io_buffer=100)
    assert (K(log), O(log)) == ([2], [1, 3, 4])
    two_pass_clean(log, 0, LARGE, io_buffer=100)
    assert (K(log), O(log)) == ([2], [3, 4])


def test_commit_marker_retention_with_empty_batch(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCommitMarkerRetentionWithEmptyBatch`` (reference scenario S25)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=256)
    txn(log, 1, 2, 3)
    roll(log)
    txn(log, 2, 2, 3)
    commit(log, 2)
    roll(log)
    append_kv(log, 2, 2)
    append_kv(log, 3, 3)
    commit(log, 1)
    roll(log)
    clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([2, 3], [4, 5, 6, 7], [1, 3, 4, 5, 6, 7])
    clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([2, 3], [4, 5, 6, 7], [1, 3, 4, 5, 6, 7])
    txn(log, 2, 1)
    commit(log, 2)
    roll(log)
    clean(log, 8, LARGE)
    assert (K(log), O(log), B(log)) == ([2, 3, 1], [4, 5, 6, 7, 8, 9], [1, 4, 5, 6, 7, 8, 9])
    two_pass_clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([2, 3, 1], [5, 6, 7, 8, 9], [1, 5, 6, 7, 8, 9])


def test_clean_empty_control_batch(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleanEmptyControlBatch`` (reference scenario S26)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=256)
    commit(log, 1)
    append_kv(log, 2, 2)
    append_kv(log, 3, 3)
    roll(log)
    two_pass_clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([2, 3], [1, 2], [0, 1, 2])
    clean(log, 0, MAX_LONG)
    assert (K(log), O(log), B(log)) == ([2, 3], [1, 2], [0, 1, 2])


def test_committed_transaction_spanning_segments(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCommittedTransactionSpanningSegments`` (reference scenario S27)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=128)
    txn(log, 1, 1)
    roll(log)
    commit(log, 1)
    roll(log)
    two_pass_clean(log, 0, LARGE)
    assert (O(log), B(log)) == ([0, 1], [0, 1])


def test_aborted_transaction_spanning_segments(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testAbortedTransactionSpanningSegments`` (reference scenario S28)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=128)
    txn(log, 1, 1)
    roll(log)
    abort(log, 1)
    roll(log)
    clean(log, 0, LARGE)
    assert (O(log), B(log)) == ([1], [0, 1])
    clean(log, 0, MAX_LONG)
    assert (O(log), B(log)) == ([1], [0, 1])


def test_abort_marker_removal(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testAbortMarkerRemoval`` (reference scenario S29)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=256)
    txn(log, 1, 1)
    txn(log, 1, 2, 3)
    abort(log, 1)
    txn(log, 1, 3)
    commit(log, 1)
    roll(log)
    clean(log, 0, LARGE)
    assert (K(log), O(log)) == ([3], [3, 4, 5])
    two_pass_clean(log, 0, LARGE)
    assert (K(log), O(log)) == ([3], [4, 5])


def test_empty_batch_removal_with_sequence_reuse(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testEmptyBatchRemovalWithSequenceReuse`` (reference scenario S30)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=2048)
    now = clock.now_ms()

    def data(offset: int, key: int, seq: int) -> bytes:
        record = SimpleRecord(str(key).encode(), str(key).encode(), now)
        return build_batch(
            [record],
            base_offset=offset,
            producer_id=1,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )

    def commit_at(offset: int) -> bytes:
        return build_control_batch(
            ControlType.COMMIT, producer_id=1, producer_epoch=0, timestamp=now, base_offset=offset
        )

    for raw in (data(0, 1, 0), commit_at(1), data(2, 2, 0), commit_at(3)):
        log.append_with_offsets(raw)
    append_kv(log, 1, 1)
    append_kv(log, 2, 1)
    roll(log)
    clean(log, 0, LARGE)
    assert (O(log), B(log)) == ([1, 3, 4, 5], [1, 2, 3, 4, 5])
    two_pass_clean(log, 0, LARGE)
    assert (O(log), B(log)) == ([3, 4, 5], [2, 3, 4, 5])


def test_abort_marker_retention_with_empty_batch(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testAbortMarkerRetentionWithEmptyBatch`` (reference scenario S31)."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=256)
    txn(log, 1, 2, 3)
    abort(log, 1)
    roll(log)
    assert aborted_index(log) == [(1, 0, 2)]
    clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([], [2], [1, 2])
    assert aborted_index(log) == [(1, 0, 2)]
    two_pass_clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([], [2], [1, 2])
    assert aborted_index(log) == [(1, 0, 2)]
    txn(log, 1, 1)
    roll(log)
    clean(log, 3, LARGE)
    assert (K(log), O(log), B(log)) == ([1], [2, 3], [2, 3])
    assert aborted_index(log) == [(1, 0, 2)]
    two_pass_clean(log, 0, LARGE)
    assert (K(log), O(log), B(log)) == ([1], [3], [3])
    assert aborted_index(log) == []


def test_retains_last_sequence_even_if_transaction_aborted(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testLogCleanerRetainsLastSequenceEvenIfTransactionAborted`` (reference
    scenario S32)."""
    log = lct_log(tmp_path, clock)
    txn(log, 1, 1)
    txn(log, 1, 2, 3)
    abort(log, 1)
    roll(log)
    clean(log, 0, map_slots=10)
    assert (B(log), S(log), K(log), O(log)) == ([2, 3], {1: 2}, [], [3])
    txn(log, 1, 1, 5)
    roll(log)
    clean(log, 0, map_slots=10)
    assert (B(log), S(log), K(log), O(log)) == ([3, 5], {1: 4}, [1, 5], [3, 4, 5])


def test_keys_conflicting_with_txn_marker_keys(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka's ``LogCleanerTest.testCleaningWithKeysConflictingWithTxnMarkerKeys`` (reference scenario
    S33)."""
    log = lct_log(tmp_path, clock)
    txn(log, 1, 1)
    commit(log, 1)
    txn(log, 2, control_key(ControlType.COMMIT), values=(b"foo",))
    commit(log, 2)
    roll(log)
    assert O(log) == [0, 1, 2, 3]
    clean(log, 0, map_slots=10)
    assert (B(log), O(log)) == ([0, 1, 2, 3], [0, 1, 2, 3])


def test_abort_marker_writes_txn_index_entry(tmp_path: Path, clock: FakeClock) -> None:
    """A leader append of an ABORT marker records the transaction in the active ``.txnindex``."""
    log = lct_log(tmp_path, clock)
    txn(log, 7, 1, 2)
    abort(log, 7)
    assert aborted_index(log) == [(7, 0, 2)]
    log = reopen(log, clean_shutdown=False)
    assert aborted_index(log) == [(7, 0, 2)]


@pytest.mark.parametrize("marker_epoch", [0, 1])
def test_a_bumped_marker_lets_the_cleaner_drop_the_last_data_batch(
    tmp_path: Path, clock: FakeClock, marker_epoch: int
) -> None:
    """Transactions v2 (KIP-890 part 2): the COMMIT carries epoch + 1, which clears the producer's
    batch metadata (Kafka's ``maybeUpdateProducerEpoch``), so ``lastDataOffset`` is empty and
    ``checkBatchRetention`` keeps the producer's control batch of the current epoch instead of
    its last data batch. With a version 1 marker (same epoch) the superseded data batch stays
    as an empty batch, to keep the producer's sequence."""
    log = lct_log(tmp_path, clock, internal_segment_bytes=256)
    txn(log, 1, 1)  # offset 0, epoch 0
    marker(log, 1, ControlType.COMMIT, epoch=marker_epoch)  # offset 1
    append_kv(log, 1, 1)  # offset 2 supersedes key 1
    roll(log)
    if marker_epoch == 1:
        assert log.active_producers(clock.now_ms(), 10**15) == {1: (None, 1)}
    else:
        assert log.active_producers(clock.now_ms(), 10**15) == {1: (0, 0)}
    clean(log, 0, LARGE)
    assert (K(log), O(log)) == ([1], [1, 2])  # the marker's record, key 1's latest value
    assert B(log) == ([1, 2] if marker_epoch == 1 else [0, 1, 2])
    two_pass_clean(log, 0, LARGE)
    # Past the marker's delete horizon: with version 2 the marker is what keeps the producer's
    # epoch (rule (a) of checkBatchRetention), so it stays.
    assert B(log) == ([1, 2] if marker_epoch == 1 else [0, 1, 2])
