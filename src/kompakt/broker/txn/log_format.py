"""Records of ``__transaction_state``: Kafka's TransactionLogKey and TransactionLogValue.

Kafka's ``TransactionLog.keyToBytes`` / ``valueToBytes`` / ``readTxnRecordKey`` /
``readTxnRecordValue``, so a kompakt data directory and a Kafka one hold the same bytes:

* key: int16 record type 0 (``CoordinatorRecordType.TRANSACTION_LOG``), then TransactionLogKey
  v0: the transactional id as a classic string (int16 length, UTF-8);
* value: int16 version, then TransactionLogValue. Version 1 (flexible, written once the cluster
  runs ``transaction.version`` >= 1, as Kafka 4.x does by default) and version 0 (classic) are
  both read; version 1 is written:
  ``producer_id int64, producer_epoch int16, transaction_timeout_ms int32, transaction_status
  int8, transaction_partitions [topic string, partition_ids [int32]] (null when Empty),
  last_update_timestamp_ms int64, start_timestamp_ms int64``, then tagged fields (0
  PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion, 3 NextProducerEpoch);
  a tagged field is written only when it differs from its default, as Kafka's generated
  writer does;
* a tombstone (null value) removes an expired transactional id.

Every length and count is checked against the bytes that are there before anything is built:
a value that does not parse raises :class:`TransactionLogFormatError`, which the loader logs
and skips (Kafka's loader logs and stops loading that partition; kompakt keeps what it can).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kompakt.broker.schema_reader import SchemaReader
from kompakt.errors import KompaktError

TRANSACTION_LOG_KEY_TYPE: Final = 0
VALUE_VERSION_CLASSIC: Final = 0
VALUE_VERSION_FLEXIBLE: Final = 1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_TAG_PREVIOUS_PRODUCER_ID: Final = 0
_TAG_NEXT_PRODUCER_ID: Final = 1
_TAG_CLIENT_TRANSACTION_VERSION: Final = 2
_TAG_NEXT_PRODUCER_EPOCH: Final = 3


class TransactionLogFormatError(KompaktError):
    """A ``__transaction_state`` key or value that is not Kafka's TransactionLog schema."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """The decoded value: what the coordinator persists about one transactional id."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state_id: int
    #: ``(topic, partition)`` pairs; empty for an Empty transaction (written as null).
    partitions: tuple[tuple[str, int], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    client_transaction_version: int = 0


# ---------------------------------------------------------------------------------------------
# writing


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _classic_string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def _compact_string(text: str) -> bytes:
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def encode_key(transactional_id: str) -> bytes:
    """``TransactionLog.keyToBytes``."""
    return _I16.pack(TRANSACTION_LOG_KEY_TYPE) + _classic_string(transactional_id)


def _grouped(partitions: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION_FLEXIBLE) -> bytes:
    """``TransactionLog.valueToBytes`` at ``version`` (1 unless told otherwise)."""
    empty = value.state_id == 0
    head = (
        _I16.pack(version)
        + _I64.pack(value.producer_id)
        + _I16.pack(value.producer_epoch)
        + _I32.pack(value.transaction_timeout_ms)
        + _I8.pack(value.state_id)
    )
    tail = _I64.pack(value.last_update_timestamp_ms) + _I64.pack(value.start_timestamp_ms)
    by_topic = _grouped(value.partitions)
    if version == VALUE_VERSION_CLASSIC:
        if empty:
            parts = _I32.pack(-1)
        else:
            parts = _I32.pack(len(by_topic)) + b"".join(
                _classic_string(topic) + _I32.pack(len(ids)) + b"".join(_I32.pack(i) for i in ids)
                for topic, ids in by_topic.items()
            )
        return head + parts + tail
    if empty:
        parts = _uvarint(0)
    else:
        parts = _uvarint(len(by_topic) + 1) + b"".join(
            _compact_string(topic)
            + _uvarint(len(ids) + 1)
            + b"".join(_I32.pack(i) for i in ids)
            + _uvarint(0)  # the element's tagged fields
            for topic, ids in by_topic.items()
        )
    tags: list[tuple[int, bytes]] = []
    if value.previous_producer_id != -1:
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
    if value.next_producer_epoch != -1:
        tags.append((_TAG_NEXT_PRODUCER_EPOCH, _I16.pack(value.next_producer_epoch)))
    tagged = _uvarint(len(tags)) + b"".join(_uvarint(tag) + _uvarint(len(data)) + data for tag, data in tags)
    return head + parts + tail + tagged


# ---------------------------------------------------------------------------------------------
# reading


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a record type this schema does not know."""
    reader = SchemaReader(data, TransactionLogFormatError)
    record_type = reader.i16()
    if record_type != TRANSACTION_LOG_KEY_TYPE:
        return None
    return reader.classic_string()


def decode_value(data: bytes) -> TransactionLogValue:
    """``TransactionLog.readTxnRecordValue`` for versions 0 and 1 (tombstones are the caller's)."""
    reader = SchemaReader(data, TransactionLogFormatError)
    version = reader.i16()
    if version not in (VALUE_VERSION_CLASSIC, VALUE_VERSION_FLEXIBLE):
        raise TransactionLogFormatError(f"unknown TransactionLogValue version {version}")
    producer_id = reader.i64()
    producer_epoch = reader.i16()
    timeout_ms = reader.i32()
    state_id = reader.i8()
    partitions: list[tuple[str, int]] = []
    if version == VALUE_VERSION_CLASSIC:
        topics = reader.i32()
        for _ in range(reader.bounded_count(topics, 6) if topics >= 0 else 0):
            topic = reader.classic_string()
            for _ in range(reader.bounded_count(reader.i32(), 4)):
                partitions.append((topic, reader.i32()))
    else:
        topics = reader.uvarint() - 1
        for _ in range(reader.bounded_count(topics, 3) if topics >= 0 else 0):
            topic = reader.compact_string()
            for _ in range(reader.bounded_count(reader.uvarint() - 1, 4)):
                partitions.append((topic, reader.i32()))
            reader.tagged_fields()
    last_update = reader.i64()
    start = reader.i64()
    tags: dict[int, bytes] = reader.tagged_fields() if version == VALUE_VERSION_FLEXIBLE else {}

    def tagged(tag: int, fmt: struct.Struct, default: int) -> int:
        raw = tags.get(tag)
        if raw is None:
            return default
        if len(raw) != fmt.size:
            raise TransactionLogFormatError(f"tagged field {tag} has {len(raw)} bytes, not {fmt.size}")
        return int(fmt.unpack(raw)[0])

    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        state_id=state_id,
        partitions=tuple(partitions) if state_id != 0 else (),
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        previous_producer_id=tagged(_TAG_PREVIOUS_PRODUCER_ID, _I64, -1),
        next_producer_id=tagged(_TAG_NEXT_PRODUCER_ID, _I64, -1),
        client_transaction_version=tagged(_TAG_CLIENT_TRANSACTION_VERSION, _I16, 0),
        next_producer_epoch=tagged(_TAG_NEXT_PRODUCER_EPOCH, _I16, -1),
    )
