"""Control records: the transaction markers a coordinator writes (COMMIT / ABORT).

A control batch has attribute bits 4 (transactional) and 5 (control) set and holds one record:

* key: int16 version (0) + int16 type (0 ABORT, 1 COMMIT; 2-4 are KRaft metadata types);
* value: int16 version (0) + int32 coordinator epoch.

Control records always have a key and a value, so the cleaner never treats them as tombstones and
never puts them in its offset map.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from kompakt.errors import CorruptRecordError
from kompakt.records.batch import RecordBatchView
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def control_key(control_type: ControlType) -> bytes:
    return _KEY.pack(0, int(control_type))


def build_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int = -1,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch for ``producer_id``."""
    record = SimpleRecord(
        key=control_key(control_type), value=_VALUE.pack(0, coordinator_epoch), timestamp=timestamp
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_key(key: bytes) -> ControlType | int:
    """The control type in a control record key (an int for types we do not know)."""
    if len(key) < 4:
        raise CorruptRecordError(f"control record key of {len(key)} bytes is too short")
    _version, ctype = _KEY.unpack_from(key)
    try:
        return ControlType(ctype)
    except ValueError:
        return int(ctype)


def control_type_of(batch: RecordBatchView) -> ControlType | int | None:
    """The type of a control batch's marker, or None for an empty (already cleaned) control batch."""
    if not batch.is_control:
        raise ValueError("not a control batch")
    records = decode_records(batch)
    if not records:
        return None
    key = records[0].key
    if key is None:
        raise CorruptRecordError("control record without a key")
    return parse_control_key(key)


def coordinator_epoch_of(batch: RecordBatchView) -> int:
    """The coordinator epoch in a marker's value (-1 for an empty or malformed marker)."""
    records = decode_records(batch)
    if not records or records[0].value is None or len(records[0].value) < _VALUE.size:
        return -1
    return int(_VALUE.unpack_from(records[0].value)[1])
