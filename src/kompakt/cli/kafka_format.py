"""The text Kafka 4.1's tools print, as pure functions of the data (no broker, no I/O).

``kompakt kafka-*`` prints through these so that scripts written against Kafka's tools parse
kompakt's output unchanged: ``ConsumerGroupCommand``'s column layouts (``%-Ns`` widths that grow
with the longest value, a header line led by an empty line), ``TopicCommand``'s describe lines,
``ConfigCommand``'s confirmations and ``DumpLogSegments``' batch and record lines. Each function
names the Kafka method whose output it reproduces; ``tests/cli/test_kafka_tools_fixtures.py``
compares them with captured output of Kafka 4.1.2's tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kompakt.inspect.log_files import BatchInfo, RecordInfo, iter_segment

MISSING = "-"
"""``ConsumerGroupCommand.MISSING_COLUMN_VALUE``."""

GROUP_STATES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "PREPARING_REBALANCE": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "COMPLETING_REBALANCE": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
    "ASSIGNING": "Assigning",
    "RECONCILING": "Reconciling",
}
"""librdkafka's group state names -> ``GroupState.toString()``."""

JAVA_ERRORS: dict[str, tuple[str, str]] = {
    "NON_EMPTY_GROUP": ("GroupNotEmptyException", "The group is not empty."),
    "GROUP_ID_NOT_FOUND": ("GroupIdNotFoundException", "The group id does not exist."),
    "INVALID_GROUP_ID": ("InvalidGroupIdException", "The configured groupId is invalid."),
    "GROUP_AUTHORIZATION_FAILED": ("GroupAuthorizationException", "Group authorization failed."),
    "COORDINATOR_NOT_AVAILABLE": (
        "CoordinatorNotAvailableException",
        "The coordinator is not available.",
    ),
    "NOT_COORDINATOR": ("NotCoordinatorException", "This is not the correct coordinator."),
    "UNKNOWN_TOPIC_OR_PART": (
        "UnknownTopicOrPartitionException",
        "This server does not host this topic-partition.",
    ),
    "UNKNOWN_TOPIC_OR_PARTITION": (
        "UnknownTopicOrPartitionException",
        "This server does not host this topic-partition.",
    ),
    "GROUP_SUBSCRIBED_TO_TOPIC": (
        "GroupSubscribedToTopicException",
        "The consumer group is actively subscribed to the topic",
    ),
}
"""Kafka error name -> (the Java client's exception class, ``Errors``' default message): what
Kafka's tools print for a failed request, ``org.apache.kafka.common.errors.<class>: <message>``."""


def java_error(name: str, message: str | None = None) -> str:
    """``toString()`` of the Java exception for Kafka error ``name``."""
    cls, default = JAVA_ERRORS.get(name, ("ApiException", name))
    return f"org.apache.kafka.common.errors.{cls}: {message or default}"


def error_line(message: str) -> str:
    """``ConsumerGroupCommand.printError``: an empty line, then ``Error: ...``."""
    return f"\nError: {message}\n"


def _row(widths: Sequence[int], values: Sequence[object], last: bool = True) -> str:
    """Java ``%-Ns`` columns joined by one space; the last column unpadded unless ``last`` is
    false (Kafka's formats end some rows with ``%s``, others with ``%-15s ``)."""
    cells = [f"{v!s:<{w}}" for w, v in zip(widths, values, strict=False)]
    if last:
        cells.append(str(values[len(widths)]))
    return " ".join(cells)


# ------------------------------------------------------------------------------------ groups


@dataclass
class OffsetRow:
    """``PartitionAssignmentState``: one partition's line of ``--describe --offsets``."""

    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str
    leader_epoch: int | None = None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset == -1 or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


@dataclass
class Member:
    """``MemberAssignmentState``: one member of ``--describe --members``."""

    group: str
    consumer_id: str
    host: str
    client_id: str
    group_instance_id: str = ""
    assignment: list[tuple[str, int]] = field(default_factory=list)
    target_assignment: list[tuple[str, int]] = field(default_factory=list)
    current_epoch: int | None = None
    target_epoch: int | None = None


def _opt(value: object | None) -> str:
    return MISSING if value is None else str(value)


def no_members_note(group: str, state: str) -> tuple[str, str]:
    """``shouldPrintMemberState``'s notes: ``(stdout, stderr)`` for a group in ``state``."""
    if state == "Dead":
        return error_line(f"Consumer group '{group}' does not exist."), ""
    if state == "Empty":
        return "", f"\nConsumer group '{group}' has no active members.\n"
    if state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        return "", f"\nWarning: Consumer group '{group}' is rebalancing.\n"
    return "", ""


def offsets_table(rows: Sequence[OffsetRow], verbose: bool) -> str:
    """``printOffsets`` of one group (each line led by a newline, as Kafka's ``printf``s)."""
    group_w = max([15] + [len(r.group) for r in rows])
    topic_w = max([15] + [len(r.topic or MISSING) for r in rows])
    consumer_w = max([15] + [len(r.consumer_id) for r in rows])
    host_w = max([15] + [len(r.host) for r in rows])
    if verbose:
        widths = [group_w, topic_w, 10, 15, 15, 15, 15, consumer_w, host_w]
        header: list[object] = [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "LEADER-EPOCH",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    else:
        widths = [group_w, topic_w, 10, 15, 15, 15, consumer_w, host_w]
        header = [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    out = ["\n" + _row(widths, header)]
    for r in rows:
        values: list[object] = [r.group, r.topic or MISSING, _opt(r.partition)]
        if verbose:
            values.append(_opt(r.leader_epoch))
        values += [_opt(r.offset), _opt(r.log_end_offset), _opt(r.lag), r.consumer_id, r.host, r.client_id]
        out.append("\n" + _row(widths, values))
    return "".join(out) + "\n"


def assignment_text(assignment: Iterable[tuple[str, int]]) -> str:
    """``getAssignmentString``: ``topic:0,1;other:2``, topics sorted, partitions ascending."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    parts = [f"{t}:" + ",".join(str(p) for p in sorted(ps)) for t, ps in by_topic.items()]
    return ";".join(sorted(parts)) or MISSING


def members_table(group: str, members: Sequence[Member], verbose: bool) -> str:
    """``printMembers`` of one group: the header even when there are no members."""
    group_w = max([15, len(group)] + [len(m.group) for m in members])
    consumer_w = max([15] + [len(m.consumer_id) for m in members])
    instance_w = max([17] + [len(m.group_instance_id) for m in members])
    host_w = max([15] + [len(m.host) for m in members])
    client_w = max([15] + [len(m.client_id) for m in members])
    current_w = max([20] + [len(assignment_text(m.assignment)) for m in members])
    target_w = max([20] + [len(assignment_text(m.target_assignment)) for m in members])
    with_instance = any(m.group_instance_id for m in members)
    if with_instance:
        widths = [group_w, consumer_w, instance_w, host_w, client_w, 15]
        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    else:
        widths = [group_w, consumer_w, host_w, client_w, 15]
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    epoch_widths = [15, current_w, 15, target_w]

    def line(values: Sequence[object], epochs: Sequence[object]) -> str:
        text = _row(widths, values, last=False) + " "
        if verbose:
            text += _row(epoch_widths, epochs, last=False)
        return text + "\n"

    out = ["\n" + line(header, ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"])]
    for m in members:
        values: list[object] = [m.group, m.consumer_id]
        if with_instance:
            values.append(m.group_instance_id)
        values += [m.host, m.client_id, len(m.assignment)]
        epochs: list[object] = [
            _opt(m.current_epoch),
            assignment_text(m.assignment),
            _opt(m.target_epoch),
            assignment_text(m.target_assignment),
        ]
        out.append(line(values, epochs))
    return "".join(out)


def state_table(
    group: str,
    coordinator: str,
    strategy: str,
    state: str,
    members: int,
    verbose: bool,
    group_epoch: int | None = None,
    target_epoch: int | None = None,
) -> str:
    """``printStates`` of one group; ``coordinator`` is ``host:port  (id)``."""
    widths = [max(15, len(group)), max(25, len(coordinator)), 20, 20]
    if verbose:
        widths += [15, 25]
        header: list[object] = [
            "GROUP",
            "COORDINATOR (ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "GROUP-EPOCH",
            "TARGET-ASSIGNMENT-EPOCH",
            "#MEMBERS",
        ]
        row: list[object] = [
            group,
            coordinator,
            strategy or MISSING,
            state,
            _opt(group_epoch),
            _opt(target_epoch),
            members,
        ]
    else:
        header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        row = [group, coordinator, strategy or MISSING, state, members]
    return "\n" + _row(widths, header) + "\n" + _row(widths, row) + "\n"


def groups_listing(groups: Sequence[tuple[str, str, str]], with_type: bool, with_state: bool) -> str:
    """``listGroups``: one group id a line, or ``printGroupInfo``'s table with ``--type`` /
    ``--state``; ``groups`` holds ``(group id, type, state)``."""
    if not (with_type or with_state):
        return "".join(f"{g}\n" for g, _, _ in groups)
    width = max([15] + [len(g) for g, _, _ in groups]) + 10
    widths = [width] + [20] * (int(with_type) + int(with_state))

    def line(values: list[str]) -> str:
        return " ".join(f"{v:<{w}}" for w, v in zip(widths, values, strict=True)) + "\n"

    header = ["GROUP"] + (["TYPE"] if with_type else []) + (["STATE"] if with_state else [])
    rows = [[g] + ([t] if with_type else []) + ([s] if with_state else []) for g, t, s in groups]
    return line(header) + "".join(line(r) for r in rows)


def reset_table(plan: Sequence[tuple[str, str, int, int]]) -> str:
    """``printOffsetsToReset``: ``(group, topic, partition, new offset)`` rows."""
    if not plan:
        return "\n"
    widths = [30, 30, 10, 15]
    out = ["\n" + _row(widths, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], last=False)]
    out += ["\n" + _row(widths, list(row), last=False) for row in plan]
    return "".join(out) + "\n"


RESET_DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, "
    "the default behavior of this command will be to prompt the user before executing the reset rather "
    "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
    "command and want to keep the current default behavior without prompting.\n"
)


def delete_offsets_table(rows: Sequence[tuple[str, int, str | None]]) -> str:
    """``deleteOffsets``' table: ``(topic, partition, error or None)`` rows, sorted as Kafka
    sorts them (by topic name and partition, as one string)."""
    width = max([15] + [len(t) for t, _, _ in rows])
    widths = [width, 10, 15]
    out = ["\n" + _row(widths, ["TOPIC", "PARTITION", "STATUS"], last=False)]
    for topic, partition, error in sorted(rows, key=lambda r: r[0] + str(r[1])):
        status = "Successful" if error is None else f"Error: {error}"
        out.append("\n" + _row(widths, [topic, partition if partition >= 0 else MISSING, status], last=False))
    return "".join(out) + "\n"


def delete_groups_result(deleted: Sequence[str], failed: Sequence[tuple[str, str]]) -> str:
    """``deleteGroups``: the success line, or the failures (``(group, exception text)``)."""
    quoted = ", ".join(f"'{g}'" for g in deleted)
    if not failed:
        return f"Deletion of requested consumer groups ({quoted}) was successful.\n"
    out = error_line("Deletion of some consumer groups failed:")
    out += "".join(f"* Group '{g}' could not be deleted due to: {e}\n" for g, e in failed)
    if deleted:
        out += f"\nThese consumer groups were deleted successfully: {quoted}\n"
    return out


# ------------------------------------------------------------------------------------ dump-log

_CONTROL_PREFIX = {
    2: " LeaderChange: ",
    3: " SnapshotHeader ",
    4: " SnapshotFooter ",
    5: " KRaftVersion ",
    6: " KRaftVoters ",
}
"""``DumpLogSegments.printControlRecord``'s prefix per control type (sic: only LeaderChange has
a colon)."""
_INT32_MAX = 2**31 - 1


def _increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap at Int.MaxValue to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _timestamp_type(name: str | None, magic: int) -> str:
    if magic == 0 or name is None:
        return "NoTimestampType"
    return "LogAppendTime" if "APPEND" in name.upper() else "CreateTime"


def _json(data: object) -> str:
    """Jackson's compact JSON (``ObjectNode.toString``): no spaces, non-ASCII kept."""
    import json

    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _control_text(key: bytes | None, value: bytes | None) -> str:
    """``printControlRecord``: the marker or the KRaft control record as JSON."""
    from kompakt.log.cluster_metadata_records import (
        CONTROL_RECORDS,
        decode_control_record,
        without_default_tags,
    )

    if key is None or len(key) < 4:
        return " controlType: UNKNOWN(-1)"
    type_id = int.from_bytes(key[2:4], "big", signed=True)
    if type_id in (0, 1):
        epoch = -1 if value is None or len(value) < 6 else int.from_bytes(value[2:6], "big", signed=True)
        return f" endTxnMarker: {'ABORT' if type_id == 0 else 'COMMIT'} coordinatorEpoch: {epoch}"
    prefix = _CONTROL_PREFIX.get(type_id)
    decoded = None if prefix is None else decode_control_record(type_id, value)
    if prefix is None or decoded is None:
        return f" controlType: UNKNOWN({type_id})"
    return prefix + _json(without_default_tags(CONTROL_RECORDS[decoded["type"]], decoded["data"]))


def _metadata_payload(value: bytes | None, offset: int) -> str:
    """``ClusterMetadataLogMessageParser``: ``{"type":...,"version":...,"data":{...}}``."""
    from kompakt.log.cluster_metadata_records import (
        METADATA_RECORDS,
        decode_metadata_record,
        without_default_tags,
    )

    try:
        record = decode_metadata_record(value or b"")
    except Exception as exc:  # noqa: BLE001 - Kafka prints any failure in the record's place
        return f"Error at {offset}, skipping. {exc}"
    if record.data is None:
        return f"Error at {offset}, skipping. Unknown metadata id {record.api_key}"
    data = without_default_tags(METADATA_RECORDS[record.api_key].fields, record.data)
    return _json({"type": record.type_name, "version": record.version, "data": data})


def _batch_line(b: BatchInfo, position: int) -> str:
    """``printBatchLevel``."""
    ts_type = _timestamp_type(b.timestamp_type, b.magic)
    if b.magic >= 2:
        last_seq = (
            -1
            if b.base_sequence == -1
            else _increment_sequence(b.base_sequence, b.last_offset - b.base_offset)
        )
        horizon = (
            "OptionalLong.empty" if b.delete_horizon_ms is None else f"OptionalLong[{b.delete_horizon_ms}]"
        )
        head = (
            f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.count} "
            f"baseSequence: {b.base_sequence} lastSequence: {last_seq} producerId: {b.producer_id} "
            f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
            f"isTransactional: {str(b.is_transactional).lower()} isControl: {str(b.is_control).lower()} "
            f"deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {b.last_offset}"
    return (
        f"{head} position: {position} {ts_type}: {b.max_timestamp} size: {b.size} magic: {b.magic} "
        f"compresscodec: {b.codec} crc: {b.crc & 0xFFFFFFFF} isvalid: {str(b.crc_valid).lower()}\n"
    )


def _record_line(b: BatchInfo, r: RecordInfo, print_data: bool, metadata: bool, skip_metadata: bool) -> str:
    """One ``| offset: ...`` line of ``dumpLog``'s deep iteration."""
    line = "|"
    prefix = " "
    if not skip_metadata:
        ts_type = _timestamp_type(b.timestamp_type, b.magic)
        line += (
            f" offset: {r.offset} {ts_type}: {r.timestamp} "
            f"keySize: {-1 if r.key is None else len(r.key)} "
            f"valueSize: {-1 if r.value is None else len(r.value)}"
        )
        if b.magic >= 2:
            seq = (
                -1
                if b.base_sequence == -1
                else _increment_sequence(b.base_sequence, r.offset - b.base_offset)
            )
            line += f" sequence: {seq} headerKeys: [{','.join(k for k, _ in r.headers)}]"
        if b.is_control:
            line += _control_text(r.key, r.value)
    if print_data and not b.is_control:
        if metadata:
            line += " payload: " + _metadata_payload(r.value, r.offset)
        else:
            if r.key is not None:
                line += f"{prefix}key: {r.key.decode('utf-8', 'replace')}"
            if r.value is not None:
                line += f" payload: {r.value.decode('utf-8', 'replace')}"
    return line + "\n"


def dump_log_lines(
    shown_path: str,
    data: bytes,
    *,
    deep: bool,
    print_data: bool,
    metadata: bool,
    skip_record_metadata: bool = False,
) -> tuple[str, str]:
    """``DumpLogSegments.dumpLog`` of one ``.log`` file: ``(stdout, stderr)``. ``shown_path`` is
    the path as given (Kafka prints ``Dumping <file>`` with it); keys and values print as UTF-8
    text (Kafka's default ``StringDecoder``), ``--cluster-metadata-decoder`` as JSON."""
    name = Path(shown_path).name
    out = [f"Dumping {shown_path}\n"]
    stem = name.split(".")[0]
    if name.endswith(".log") and stem.isdigit():
        out.append(f"Log starting offset: {int(stem)}\n")
    valid = 0
    last = -1
    gaps: list[tuple[int, int]] = []
    for item in iter_segment(Path(shown_path), with_records=deep, buf=data):
        if not isinstance(item, BatchInfo):
            break
        out.append(_batch_line(item, valid))
        for r in item.records or () if deep else ():
            if last != -1 and r.offset != last + 1:
                gaps.append((last, r.offset))
            last = r.offset
            out.append(_record_line(item, r, print_data, metadata, skip_record_metadata))
        valid += item.size
    trailing = len(data) - valid
    if trailing > 0:
        out.append(f"Found {trailing} invalid bytes at the end of {name}\n")
    err = ""
    if gaps:
        err = f"Non-consecutive offsets in {Path(shown_path).absolute()}\n" + "".join(
            f"  {first} is followed by {second}\n" for first, second in reversed(gaps)
        )
    return "".join(out), err
