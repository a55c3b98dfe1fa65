"""``kafka-dump-log --offsets-decoder`` and ``--transaction-log-decoder``: Kafka's look inside the
coordinators' topics.

With either flag, Kafka 4.1's ``DumpLogSegments`` prints every batch and record of the segment
(``baseOffset: … position: … crc: … isvalid: true`` and ``| offset: … keySize: … headerKeys: []``)
and each record's key and value as JSON: ``key: {"type":"1","data":{"group":…,"topic":…,
"partition":0}} payload: {"version":"4","data":{"offset":4,…}}``, ``<DELETE>`` for a tombstone.
This module prints the same lines, byte for byte, for a ``__consumer_offsets`` or
``__transaction_state`` segment written by kompakt or by Kafka.

The records are read with kompakt's own decoders of those topics (the group coordinator's
:mod:`kompakt.broker.groups.records.schemas` and consumer protocol, the transaction coordinator's
:mod:`kompakt.broker.txn.log_format`); only the JSON layout is here, in the field order and with
the version gates of Kafka's generated JSON converters. Covered: offset commits (values v0-v4),
classic group metadata (v0-v3, with the consumer protocol's subscription and assignment decoded),
KIP-848 consumer-group records (group metadata, members, target and current assignments; their
topics in the coordinator's hash order, partitions ascending), and transaction log values
(v0-v1). The two KIP-848 types kompakt's decoder does not keep (partition metadata, regular
expressions) print their key and a note instead of the value.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kompakt.broker.groups.records import consumer_protocol, schemas
from kompakt.broker.txn import log_format
from kompakt.cli.kafka_java import hash_order, out, uuid_hash
from kompakt.errors import KompaktError
from kompakt.inspect.log_files import BatchInfo, RecordInfo, SegmentTail, iter_segment

Parsed = tuple[str | None, str | None]
"""The key text and the payload text of one record (None: not printed)."""

#: KIP-848 record types: Kafka's key schema's field names after ``groupId``.
_CONSUMER_KEYS: dict[int, tuple[str, ...]] = {
    3: (), 4: (), 5: ("memberId",), 6: (), 7: ("memberId",), 8: ("memberId",), 16: ("regularExpression",),
}  # fmt: skip
_NO_HORIZON = "OptionalLong.empty"
#: ``TimestampType.toString`` of kompakt's names.
_TIMESTAMP_TYPES = {"CREATE_TIME": "CreateTime", "LOG_APPEND_TIME": "LogAppendTime"}


def _timestamp_type(batch: BatchInfo) -> str:
    name = batch.timestamp_type or "NO_TIMESTAMP_TYPE"
    return _TIMESTAMP_TYPES.get(name, "NoTimestampType")


def _json(value: Any) -> str:
    """Jackson's ``ObjectNode.toString``: compact, non-ASCII as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _version(data: bytes) -> int:
    return int.from_bytes(data[:2], "big", signed=True) if len(data) >= 2 else -1


def _grouped(pairs: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """``(topic, partition)`` pairs back into the per-topic arrays they were written as."""
    groups: list[tuple[str, list[int]]] = []
    for topic, partition in pairs:
        if groups and groups[-1][0] == topic:
            groups[-1][1].append(partition)
        else:
            groups.append((topic, [partition]))
    return groups


# --------------------------------------------------------------------------------------------
# __consumer_offsets


def _subscription_json(data: bytes) -> dict[str, Any]:
    version = consumer_protocol.version_of(data)
    sub = consumer_protocol.decode_subscription(data)
    result: dict[str, Any] = {"topics": list(sub.topics), "userData": _b64(sub.user_data)}
    if version >= 1:
        result["ownedPartitions"] = [{"topic": t, "partitions": list(ps)} for t, ps in sub.owned_partitions]
    if version >= 2:
        result["generationId"] = sub.generation_id
    if version >= 3:
        result["rackId"] = sub.rack_id
    return result


def _assignment_json(data: bytes) -> dict[str, Any]:
    partitions, user_data = consumer_protocol.decode_assignment(data)
    return {
        "assignedPartitions": [{"topic": t, "partitions": list(ps)} for t, ps in partitions],
        "userData": _b64(user_data),
    }


def _member_field(data: bytes, decode: Callable[[bytes], dict[str, Any]], consumer: bool) -> Any:
    """The subscription or assignment decoded when the group speaks the consumer protocol; its
    bytes (base64, as Jackson writes a binary node) otherwise or when they do not decode."""
    if consumer:
        try:
            return decode(data)
        except (KompaktError, ValueError):
            pass
    return _b64(data)


def _group_metadata_json(value: schemas.GroupMetadataValue, version: int) -> dict[str, Any]:
    consumer = value.protocol_type == "consumer"
    data: dict[str, Any] = {
        "protocolType": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
    }
    if version >= 2:
        data["currentStateTimestamp"] = value.current_state_timestamp_ms
    members = []
    for m in value.members:
        member: dict[str, Any] = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member["clientId"] = m.client_id
        member["clientHost"] = m.client_host
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout_ms
        member["sessionTimeout"] = m.session_timeout_ms
        member["subscription"] = _member_field(m.subscription, _subscription_json, consumer)
        member["assignment"] = _member_field(m.assignment, _assignment_json, consumer)
        members.append(member)
    data["members"] = members
    return data


def _offset_commit_json(value: schemas.CommittedOffset, version: int) -> dict[str, Any]:
    data: dict[str, Any] = {"offset": value.offset}
    if version >= 3:
        data["leaderEpoch"] = value.leader_epoch
    data["metadata"] = value.metadata
    data["commitTimestamp"] = value.commit_timestamp_ms
    if version == 1:
        data["expireTimestamp"] = -1 if value.expire_timestamp_ms is None else value.expire_timestamp_ms
    return data


def _topic_id(value: uuid.UUID) -> str:
    """``Uuid.toString``: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _assignment(assignment: schemas.Assignment) -> list[dict[str, Any]]:
    """Topics in the order of the coordinator's HashMap keyed by topic id, partitions ascending
    (a HashSet of small integers); the decoder keeps them as a map of sets."""
    return [
        {"topicId": _topic_id(topic_id), "partitions": sorted(assignment[topic_id])}
        for topic_id in hash_order(assignment, uuid_hash)
    ]


def _consumer_value_json(record_type: int, data: bytes) -> dict[str, Any] | None:
    """A KIP-848 value (version 0) as Kafka's JSON; None for the types kompakt's decoder does
    not keep (partition metadata, regular expressions)."""
    value = schemas.decode_consumer_value(record_type, data)
    if isinstance(value, schemas.ConsumerGroupMetadataValue):
        result: dict[str, Any] = {"epoch": value.epoch}
        if value.metadata_hash != 0:
            result["metadataHash"] = value.metadata_hash
        return result
    if isinstance(value, schemas.ConsumerGroupMemberMetadataValue):
        classic = value.classic_member_metadata
        return {
            "instanceId": value.instance_id,
            "rackId": value.rack_id,
            "clientId": value.client_id,
            "clientHost": value.client_host,
            "subscribedTopicNames": list(value.subscribed_topic_names),
            "subscribedTopicRegex": value.subscribed_topic_regex,
            "rebalanceTimeoutMs": value.rebalance_timeout_ms,
            "serverAssignor": value.server_assignor,
            "classicMemberMetadata": None
            if classic is None
            else {
                "sessionTimeoutMs": classic.session_timeout_ms,
                "supportedProtocols": [
                    {"name": name, "metadata": _b64(meta)} for name, meta in classic.supported_protocols
                ],
            },
        }
    if isinstance(value, schemas.ConsumerGroupTargetAssignmentMetadataValue):
        return {"assignmentEpoch": value.assignment_epoch}
    if isinstance(value, schemas.ConsumerGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _assignment(value.partitions)}
    if isinstance(value, schemas.ConsumerGroupCurrentMemberAssignmentValue):
        return {
            "memberEpoch": value.member_epoch,
            "previousMemberEpoch": value.previous_member_epoch,
            "state": value.state,
            "assignedPartitions": _assignment(value.assigned_partitions),
            "partitionsPendingRevocation": _assignment(value.partitions_pending_revocation),
        }
    return None


def _offsets_key_json(key: schemas.GroupRecordKey) -> tuple[int, dict[str, Any]]:
    if isinstance(key, schemas.OffsetCommitKey):
        return 1, {"group": key.group, "topic": key.topic, "partition": key.partition}
    if isinstance(key, schemas.GroupMetadataKey):
        return 2, {"group": key.group}
    data: dict[str, Any] = {"groupId": key.group}
    for name in _CONSUMER_KEYS.get(key.record_type, ()):
        data[name] = key.member_id
    return key.record_type, data


def parse_offsets_record(record: RecordInfo) -> Parsed:
    """Kafka's ``OffsetsMessageParser``: a ``__consumer_offsets`` record's key and payload."""
    if record.key is None:
        raise KompaktError(
            f"Failed to decode message at offset {record.offset} using the specified decoder "
            "(message had a missing key)"
        )
    try:
        key = schemas.decode_key(record.key)
        if key is None:
            return f"Unknown record type {_version(record.key)} at offset {record.offset}, skipping.", None
        record_type, key_data = _offsets_key_json(key)
        key_text = _json({"type": str(record_type), "data": key_data})
        if record.value is None:
            return key_text, "<DELETE>"
        version = _version(record.value)
        if isinstance(key, schemas.OffsetCommitKey):
            value_data = _offset_commit_json(schemas.decode_value(key, record.value), version)  # type: ignore[arg-type]
        elif isinstance(key, schemas.GroupMetadataKey):
            value_data = _group_metadata_json(schemas.decode_value(key, record.value), version)  # type: ignore[arg-type]
        else:
            consumer_data = _consumer_value_json(record_type, record.value)
            if consumer_data is None:
                return key_text, f"(record type {record_type}: kompakt's decoder does not keep this value)"
            value_data = consumer_data
        return key_text, _json({"version": str(version), "data": value_data})
    except (KompaktError, ValueError) as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None


# --------------------------------------------------------------------------------------------
# __transaction_state


def _transaction_value_json(value: log_format.TransactionLogValue, version: int) -> dict[str, Any]:
    flexible = version >= 1
    data: dict[str, Any] = {"producerId": value.producer_id}
    if flexible and value.previous_producer_id != -1:
        data["previousProducerId"] = value.previous_producer_id
    if flexible and value.next_producer_id != -1:
        data["nextProducerId"] = value.next_producer_id
    data["producerEpoch"] = value.producer_epoch
    if flexible and value.next_producer_epoch != -1:
        data["nextProducerEpoch"] = value.next_producer_epoch
    data["transactionTimeoutMs"] = value.transaction_timeout_ms
    data["transactionStatus"] = value.state_id
    # Written as null for an Empty transaction (state 0), as an array otherwise.
    data["transactionPartitions"] = (
        None
        if value.state_id == 0
        else [{"topic": t, "partitionIds": ps} for t, ps in _grouped(value.partitions)]
    )
    data["transactionLastUpdateTimestampMs"] = value.last_update_timestamp_ms
    data["transactionStartTimestampMs"] = value.start_timestamp_ms
    if flexible and value.client_transaction_version != 0:
        data["clientTransactionVersion"] = value.client_transaction_version
    return data


def parse_transaction_record(record: RecordInfo) -> Parsed:
    """Kafka's ``TransactionLogMessageParser``: a ``__transaction_state`` record's key and payload."""
    if record.key is None:
        raise KompaktError(
            f"Failed to decode message at offset {record.offset} using the specified decoder "
            "(message had a missing key)"
        )
    try:
        transactional_id = log_format.decode_key(record.key)
        if transactional_id is None:
            return f"Unknown record type {_version(record.key)} at offset {record.offset}, skipping.", None
        key_text = _json({"type": "0", "data": {"transactionalId": transactional_id}})
        if record.value is None:
            return key_text, "<DELETE>"
        version = _version(record.value)
        value = log_format.decode_value(record.value)
        return key_text, _json({"version": str(version), "data": _transaction_value_json(value, version)})
    except (KompaktError, ValueError) as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None


# --------------------------------------------------------------------------------------------
# DumpLogSegments' lines


def _batch_line(batch: BatchInfo) -> str:
    if batch.magic >= 2:
        last_sequence = (
            -1
            if batch.base_sequence < 0
            else _sequence(batch.base_sequence, batch.last_offset - batch.base_offset)
        )
        horizon = (
            _NO_HORIZON if batch.delete_horizon_ms is None else f"OptionalLong[{batch.delete_horizon_ms}]"
        )
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {last_sequence} "
            f"producerId: {batch.producer_id} "
            f"producerEpoch: {batch.producer_epoch} partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_bool(batch.is_transactional)} isControl: {_bool(batch.is_control)} "
            f"deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {_timestamp_type(batch)}: {batch.max_timestamp} "
        f"size: {batch.size} magic: {batch.magic} compresscodec: {batch.codec} crc: {batch.crc & 0xFFFFFFFF} "
        f"isvalid: {_bool(batch.crc_valid)}"
    )


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _sequence(base: int, delta: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: wraps at Integer.MAX_VALUE."""
    return base + delta if base <= 2**31 - 1 - delta else delta - (2**31 - 1 - base) - 1


def _control_text(record: RecordInfo) -> str:
    key, value = record.key or b"", record.value or b""
    control_type = int.from_bytes(key[2:4], "big", signed=True) if len(key) >= 4 else -1
    if control_type in (0, 1) and len(value) >= 6:
        epoch = int.from_bytes(value[2:6], "big", signed=True)
        return f" endTxnMarker: {'ABORT' if control_type == 0 else 'COMMIT'} coordinatorEpoch: {epoch}"
    return f" controlType: UNKNOWN({control_type})"


def dump_decoded(files: Iterable[str], parse: Callable[[RecordInfo], Parsed]) -> None:
    """``DumpLogSegments`` of ``.log`` files (``--files`` as given: Kafka prints each path as
    written) with a message parser; the decoders imply ``--print-data-log`` and
    ``--deep-iteration``. Kafka's default parser (keys and values as UTF-8 text) would make this
    the ``--print-data-log`` dump too."""
    non_consecutive: dict[str, list[tuple[int, int]]] = {}
    for name in files:
        path = Path(name)
        out(f"Dumping {name}")
        if path.suffix != ".log":
            sys.stderr.write(f"Ignoring unknown file {name}\n")
            continue
        try:
            out(f"Log starting offset: {int(path.name.split('.')[0])}")
        except ValueError:
            out(f"Log starting offset: {path.name.split('.')[0]}")
        last = -1
        pairs: list[tuple[int, int]] = []
        for item in iter_segment(path, with_records=True):
            if isinstance(item, SegmentTail):
                out(f"Found {item.length} invalid bytes at the end of {path.name}")
                continue
            out(_batch_line(item))
            for record in item.records or ():
                if last != -1 and record.offset != last + 1:
                    pairs.insert(0, (last, record.offset))
                last = record.offset
                line = f"| offset: {record.offset} {_timestamp_type(item)}: {record.timestamp} "
                line += f"keySize: {-1 if record.key is None else len(record.key)} "
                line += f"valueSize: {-1 if record.value is None else len(record.value)}"
                if item.magic >= 2:
                    sequence = (
                        -1
                        if item.base_sequence < 0
                        else _sequence(item.base_sequence, record.offset - item.base_offset)
                    )
                    line += f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
                if item.is_control:
                    line += _control_text(record)
                else:
                    key, payload = parse(record)
                    if key is not None:
                        line += f" key: {key}"
                    if payload is not None:
                        line += f" payload: {payload}"
                out(line)
        if pairs:
            non_consecutive[str(path.absolute())] = pairs
    for name, pairs in non_consecutive.items():
        sys.stderr.write(f"Non-consecutive offsets in {name}\n")
        for first, second in pairs:
            sys.stderr.write(f"  {first} is followed by {second}\n")
