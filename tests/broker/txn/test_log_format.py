"""``__transaction_state`` records: Kafka 4.1.2's bytes decode, and kompakt writes the same bytes."""

from __future__ import annotations

import pytest

from kompakt.broker.txn.log_format import (
    TransactionLogFormatError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

#: Records written by Apache Kafka 4.1.2 (transaction.version 2) for one transactional id:
#: InitProducerId (Empty), AddPartitions (Ongoing), a fencing abort (PrepareAbort at epoch 1,
#: with client transaction version 2 in a tagged field), CompleteAbort, then a committed
#: transaction (PrepareCommit, CompleteCommit) of a v0-client.
KAFKA_KEY = "0000000c74786e2d3731653039363637"
KAFKA_VALUES = {
    "empty": ("0001000000000000000400000000ea600000000001a23bc2b93bffffffffffffffff00"),
    "ongoing": (
        "0001000000000000000400000000ea6001020b742d3539343734333937020000000000000001a23b"
        "c2b93f000001a23bc2b93f00"
    ),
    "prepare_abort_tv2": (
        "0001000000000000000400010000ea6003020b742d3539343734333937020000000000000001a23b"
        "c2b987000001a23bc2b93f0102020002"
    ),
    "complete_abort_tv2": ("0001000000000000000400010000ea600501000001a23bc2b98b000001a23bc2b93f0102020002"),
    "prepare_commit": (
        "0001000000000000000400020000ea6002020b742d3539343734333937020000000000000001a23b"
        "c2bb94000001a23bc2bb8800"
    ),
    "complete_commit": ("0001000000000000000400020000ea600401000001a23bc2bb95000001a23bc2bb8800"),
}


def test_kafka_key_decodes_and_encodes_identically() -> None:
    assert decode_key(bytes.fromhex(KAFKA_KEY)) == "txn-71e09667"
    assert encode_key("txn-71e09667").hex() == KAFKA_KEY


@pytest.mark.parametrize("name", sorted(KAFKA_VALUES))
def test_kafka_values_decode_and_reencode_byte_for_byte(name: str) -> None:
    raw = bytes.fromhex(KAFKA_VALUES[name])
    value = decode_value(raw)
    assert value.producer_id == 4 and value.transaction_timeout_ms == 60_000
    assert encode_value(value) == raw


def test_decoded_fields_of_kafka_records() -> None:
    ongoing = decode_value(bytes.fromhex(KAFKA_VALUES["ongoing"]))
    assert (ongoing.state_id, ongoing.partitions, ongoing.producer_epoch) == (1, (("t-59474397", 0),), 0)
    assert ongoing.start_timestamp_ms == ongoing.last_update_timestamp_ms == 1796298946879
    fenced = decode_value(bytes.fromhex(KAFKA_VALUES["prepare_abort_tv2"]))
    assert (fenced.state_id, fenced.producer_epoch, fenced.client_transaction_version) == (3, 1, 2)
    empty = decode_value(bytes.fromhex(KAFKA_VALUES["empty"]))
    assert (empty.state_id, empty.partitions, empty.start_timestamp_ms) == (0, (), -1)


def test_classic_version_round_trips() -> None:
    value = TransactionLogValue(7, 3, 1000, 1, (("a", 0), ("a", 2), ("b", 1)), 10, 5)
    raw = encode_value(value, version=0)
    assert raw[:2] == b"\x00\x00"
    assert decode_value(raw) == value


def test_tagged_fields_round_trip_and_unknown_tags_are_skipped() -> None:
    value = TransactionLogValue(7, 3, 1000, 2, (("a", 0),), 10, 5, previous_producer_id=6, next_producer_id=8)
    raw = encode_value(value)
    assert decode_value(raw) == value
    # the same value with an extra unknown tag (9, two bytes) appended to its tagged section
    count_at = len(raw) - 1 - (1 + 1 + 8) * 2
    assert raw[count_at] == 2
    extended = raw[:count_at] + b"\x03" + raw[count_at + 1 :] + b"\x09\x02\xab\xcd"
    assert decode_value(extended) == value


@pytest.mark.parametrize("cut", [1, 5, 14, 20, 30])
def test_truncated_values_are_format_errors(cut: int) -> None:
    raw = bytes.fromhex(KAFKA_VALUES["ongoing"])
    with pytest.raises(TransactionLogFormatError):
        decode_value(raw[: len(raw) - cut])


def test_huge_counts_are_refused_before_allocating() -> None:
    head = bytes.fromhex("0001" + "00" * 8 + "0000" + "0000ea60" + "01")
    with pytest.raises(TransactionLogFormatError, match="longer than"):
        decode_value(head + b"\xff\xff\xff\xff\x0f")  # 2^32 - 2 topics in a few bytes
    with pytest.raises(TransactionLogFormatError, match="unknown TransactionLogValue version"):
        decode_value(b"\x00\x07" + head[2:])
    assert decode_key(b"\x00\x01\x00\x01a") is None  # another coordinator record type
