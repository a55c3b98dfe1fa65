"""Idempotence and transactions: duplicates, out-of-order, fencing, LSO, rebuild after reopen."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kompakt.errors import DuplicateSequenceError, OutOfOrderSequenceError, ProducerFencedError
from kompakt.log.producer_state import (
    BatchMetadata,
    CorruptSnapshotError,
    ProducerEntry,
    decode_snapshot,
    encode_snapshot,
)
from kompakt.log.segment import LogSegment
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
    # After a clean restart the state comes from the close's snapshot, which (as Kafka's) keeps
    # the last batch of each producer: its retry is still a duplicate.
    with pytest.raises(DuplicateSequenceError) as again:
        h.log.append(idem(6, b"g", b"h"))
    assert (again.value.first_offset, again.value.last_offset) == (6, 7)
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


def test_a_transactions_v2_marker_bumps_the_epoch_and_forgets_the_last_data_batch(tmp_path: Path) -> None:
    """KIP-890 part 2: the marker carries epoch + 1. As Kafka's ``maybeUpdateProducerEpoch``, the
    new epoch clears the batch metadata, so the producer has no last data offset (-1 in the
    snapshot) and the cleaner keeps its marker of the current epoch instead; the next
    transaction starts at sequence 0 of the new epoch."""
    h = LogHarness(tmp_path / "t-0")
    h.log.append(idem(0, b"a", b"b", txn=True))
    h.log.append(build_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=1))
    never = 10**15  # no producer expires
    assert h.log.active_producers(h.clock.now_ms(), never) == {1: (None, 1)}
    with pytest.raises(ProducerFencedError):
        h.log.append(idem(2, b"late", txn=True))  # the old epoch is fenced
    assert h.log.append(idem(0, b"c", epoch=1, txn=True)).first_offset == 3
    assert h.log.active_producers(h.clock.now_ms(), never) == {1: (3, 1)}
    h.log.append(build_control_batch(ControlType.ABORT, producer_id=1, producer_epoch=2))
    h.reopen()
    [entry] = h.log.producer_state.producers.values()
    assert (entry.epoch, entry.last_seq, entry.last_data_offset) == (2, -1, -1)
    assert h.log.append(idem(0, b"d", epoch=2, txn=True)).first_offset == 5


# --------------------------------------------------------------------------------------------
# Producer-state snapshots (Kafka's ProducerStateManager.takeSnapshot / readSnapshot)


def test_snapshot_bytes_are_kafkas_producer_snapshot_v1() -> None:
    entry = ProducerEntry(
        producer_id=7, epoch=3, last_timestamp=1234, last_data_offset=41, coordinator_epoch=2
    )
    entry.batches.append(
        BatchMetadata(first_seq=10, last_seq=12, first_offset=39, last_offset=41, timestamp=1234)
    )
    entry.current_txn_first_offset = 39
    data = encode_snapshot([entry])
    # version 1, CRC-32C of the rest, one 46-byte entry: pid, epoch, last seq, last offset,
    # offset delta, timestamp, coordinator epoch, current txn first offset.
    assert data[:2] == b"\x00\x01" and len(data) == 2 + 4 + 4 + 46
    assert data[6:] == struct.pack(">iqhiqiqiq", 1, 7, 3, 12, 41, 2, 1234, 2, 39)
    [back] = decode_snapshot(data)
    assert (back.producer_id, back.epoch, back.last_seq, back.current_txn_first_offset) == (7, 3, 12, 39)
    assert list(back.batches) == [BatchMetadata(10, 12, 39, 41, 1234)]
    for bad in (data[:-1], data[:5], b"\x00\x02" + data[2:], data[:-1] + bytes([data[-1] ^ 1])):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bad)


def test_reopen_loads_the_snapshot_instead_of_rescanning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append(idem(0, b"a", b"b"))
    h.log.roll()  # snapshot at 2
    h.log.append(idem(2, b"c", pid=2, txn=True))  # an open transaction at offset 2
    h.log.roll()  # snapshot at 3
    h.log.append(idem(2, b"d"))
    h.log.close()  # snapshot at 4 (the log end)
    assert sorted(p.name for p in h.directory.glob("*.snapshot")) == [f"{o:020d}.snapshot" for o in (2, 3, 4)]
    scanned: list[int] = []
    original = LogSegment.iter_batches

    def spy(self: LogSegment, *args: object, **kwargs: object) -> object:
        scanned.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "iter_batches", spy)
    log = h.open(had_clean_shutdown=True)
    scanned.clear()  # opening checks the active segment's tail; count the rebuild alone
    state = log.producer_state
    assert scanned == [3]  # only the active segment, from the snapshot at the log end on
    assert state.producers[1].last_seq == 2 and state.producers[2].current_txn_first_offset == 2
    assert log.last_stable_offset == 2
    with pytest.raises(DuplicateSequenceError):
        log.append(idem(2, b"d"))


def test_corrupt_or_too_new_snapshots_fall_back_to_the_log(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0")
    h.log.append(idem(0, b"a"))
    h.log.roll()
    h.log.append(idem(1, b"b", txn=True))
    h.log.close()
    (h.directory / f"{2:020d}.snapshot").write_bytes(b"\x00\x01garbage")  # torn at the log end
    (h.directory / f"{9:020d}.snapshot").write_bytes(encode_snapshot([]))  # past the log end
    log = h.open(had_clean_shutdown=True)
    assert log.producer_state.producers[1].current_txn_first_offset == 1  # from the snapshot at 1 + log
    assert sorted(p.name for p in h.directory.glob("*.snapshot")) == [f"{1:020d}.snapshot"]
    assert log.last_stable_offset == 1


def test_a_snapshot_written_by_kafka_decodes_and_reencodes_byte_for_byte() -> None:
    # t-59474397-0/00000000000000000004.snapshot from an Apache Kafka 4.1.2 broker's clean
    # shutdown: producer 4 at epoch 2, its last batch at offset 2, its transaction committed.
    raw = bytes.fromhex(
        "0001558031a700000001000000000000000400020000000000000000000000020000000000"
        "0001a23bc2bb9800000000ffffffffffffffff"
    )
    [entry] = decode_snapshot(raw)
    assert (entry.producer_id, entry.epoch, entry.last_seq, entry.last_data_offset) == (4, 2, 0, 2)
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (0, None)
    assert encode_snapshot([entry]) == raw
