"""Idempotence and transactions: duplicates, out-of-order, fencing, LSO, rebuild after reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.errors import DuplicateSequenceError, OutOfOrderSequenceError, ProducerFencedError
from kompakt.records.builder import build_batch
from kompakt.records.control import ControlType, build_control_batch

from .log_helpers import LogHarness, batch, config


def idem(seq: int, *values: bytes, pid: int = 1, epoch: int = 0, txn: bool = False) -> bytes:
    return batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def test_duplicates_return_original_offsets_and_survive_reopen(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append(idem(0, b"a", b"b", b"c"))
    h.log.append(
        idem(3, b"d", b"e", b"f"),
    )
    h.log.append(idem(6, b"g", b"h"))
    with pytest.raises(DuplicateSequenceError) as dup:
        h.log.append(idem(3, b"d", b"e", b"f"))
    assert (dup.value.first_offset, dup.value.last_offset) == (3, 5)
    assert h.log.log_end_offset == 8
    h.reopen()
    with pytest.raises(DuplicateSequenceError) as again:
        h.log.append(idem(0, b"a", b"b", b"c"))
    assert (again.value.first_offset, again.value.last_offset) == (0, 2)
    assert h.log.append(idem(8, b"i")).first_offset == 8


def test_out_of_order_and_new_epoch_rules(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append(idem(0, b"a"))
    with pytest.raises(OutOfOrderSequenceError):
        h.log.append(idem(2, b"b"))
    with pytest.raises(OutOfOrderSequenceError):
        h.log.append(idem(5, b"b", epoch=1))
    h.log.append(idem(0, b"b", epoch=1))
    with pytest.raises(ProducerFencedError):
        h.log.append(idem(1, b"c", epoch=0))
    assert h.log.log_end_offset == 2
    # an unknown producer may start at any sequence (its history was deleted)
    h.log.append(idem(42, b"z", pid=9))


def test_only_last_five_batches_are_remembered(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    for seq in range(6):
        h.log.append(idem(seq, b"x"))
    with pytest.raises(OutOfOrderSequenceError):
        h.log.append(idem(0, b"x"))  # the oldest fell out of the window
    with pytest.raises(DuplicateSequenceError):
        h.log.append(idem(1, b"x"))


def test_rebuild_from_empty_batch_header(tmp_path: Path) -> None:
    """``UnifiedLogTest.testRebuildProducerStateWithEmptyCompactedBatch`` (S19): an emptied batch still
    carries last offset and last sequence."""
    h = LogHarness(tmp_path / "t-0")
    empty = build_batch(
        [],
        base_offset=23,
        last_offset_delta=1,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        max_timestamp=h.clock.now_ms(),
    )
    h.log.append_with_offsets(empty)
    h.log.append_with_offsets(batch(b"u", b"v", keys=[None, None], base_offset=25))
    h.log.truncate_to(25)
    assert h.log.producer_state.last_sequence(1) == 1
    assert h.log.active_producers(h.clock.now_ms(), 86_400_000) == {1: (24, 0)}
    h.reopen()
    assert h.log.producer_state.last_sequence(1) == 1
    assert h.log.append(idem(2, b"next")).first_offset == 25


def test_last_stable_offset_and_aborted_transactions(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config())
    h.log.append(batch(b"plain"))
    h.log.append(idem(0, b"t1", txn=True))
    h.log.append(idem(0, b"t2", pid=2, txn=True))
    assert h.log.last_stable_offset == 1
    assert h.log.read(0, 10_000, read_committed=True).records != b""
    h.log.append(build_control_batch(ControlType.ABORT, producer_id=1, producer_epoch=0))
    assert h.log.last_stable_offset == 2
    h.log.append(build_control_batch(ControlType.COMMIT, producer_id=2, producer_epoch=0))
    assert h.log.last_stable_offset == 5 == h.log.high_watermark
    fetched = h.log.read(0, 10_000, read_committed=True)
    assert fetched.aborted_transactions is not None
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in fetched.aborted_transactions] == [
        (1, 1, 3)
    ]
    h.reopen()
    assert h.log.last_stable_offset == 5
    assert h.log.collect_aborted_transactions(0, 5)[0].last_stable_offset == 2


def test_open_transaction_pins_lso_after_reopen(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append(batch(b"a"))
    h.log.append(idem(0, b"t", txn=True))
    h.log.append(batch(b"b"))
    h.reopen()
    assert h.log.last_stable_offset == 1
    assert h.log.active_producers(h.clock.now_ms() + 10**12, 1) == {1: (1, 0)}
