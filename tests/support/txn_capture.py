"""What a transactional run leaves on disk, normalised so Kafka's and kompakt's can be compared.

Reads a stopped broker's data directory (Kafka's ``log.dirs`` or kompakt's ``--data-dir``, the
same on-disk format) and returns plain data: every batch of the data partition (producer, epoch,
sequence, transactional and control flags, marker type and coordinator epoch, keys and values),
the batches of the group's ``__consumer_offsets`` partition, every ``__transaction_state`` record
decoded (state, epoch, partitions, client transaction version, previous and next producer id) and
the data partition's producer-state snapshots decoded.

Producer ids are numbered in order of first appearance (Kafka and kompakt allocate different
ones); timestamps are left out except whether a start time is set, since two runs never share a
clock. What remains must be equal, entry for entry, for the two brokers to have behaved the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kompakt.broker.groups.records.placement import partition_for
from kompakt.broker.txn.log_format import decode_key, decode_value
from kompakt.broker.txn.metadata import TransactionState
from kompakt.log.producer_state import decode_snapshot
from kompakt.records.batch import iter_batches
from kompakt.records.control import control_type_of, coordinator_epoch_of
from kompakt.records.record import decode_records


class _Ids:
    """Producer ids in order of first appearance: 0, 1, 2…; -1 stays -1."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}

    def __call__(self, producer_id: int) -> int:
        if producer_id < 0:
            return producer_id
        return self._seen.setdefault(producer_id, len(self._seen))


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.hex()


def _batches(partition_dir: Path) -> list[Any]:
    out = []
    for segment in sorted(partition_dir.glob("*.log")):
        out.extend(iter_batches(segment.read_bytes()))
    return out


def _data_batches(partition_dir: Path, ids: _Ids, with_records: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for batch in _batches(partition_dir):
        row: dict[str, Any] = {
            "offsets": [batch.base_offset, batch.last_offset],
            "producer": ids(batch.producer_id),
            "epoch": batch.producer_epoch,
            "sequence": batch.base_sequence,
            "transactional": batch.is_transactional,
        }
        if batch.is_control:
            control = control_type_of(batch)
            row["control"] = getattr(control, "name", control)
            row["coordinator_epoch"] = coordinator_epoch_of(batch)
        elif with_records:
            row["records"] = [[_text(r.key), _text(r.value)] for r in decode_records(batch)]
        rows.append(row)
    return rows


def _transaction_state(data_dir: Path, ids: _Ids, transactional_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for partition_dir in sorted(data_dir.glob("__transaction_state-*")):
        for batch in _batches(partition_dir):
            if batch.is_control:
                continue
            for record in decode_records(batch):
                assert record.key is not None
                txn_id = decode_key(record.key)
                if txn_id != transactional_id:
                    continue
                if record.value is None:
                    rows.append({"id": txn_id, "tombstone": True})
                    continue
                value = decode_value(record.value)
                rows.append(
                    {
                        "id": txn_id,
                        "value_version": int.from_bytes(record.value[:2], "big"),
                        "state": TransactionState.from_id(value.state_id).state_name,
                        "producer": ids(value.producer_id),
                        "epoch": value.producer_epoch,
                        "timeout_ms": value.transaction_timeout_ms,
                        "partitions": sorted([t, p] for t, p in value.partitions),
                        "started": value.start_timestamp_ms >= 0,
                        "previous_producer": ids(value.previous_producer_id),
                        "next_producer": ids(value.next_producer_id),
                        "next_epoch": value.next_producer_epoch,
                        "client_transaction_version": value.client_transaction_version,
                    }
                )
    return rows


def _snapshots(partition_dir: Path, ids: _Ids) -> list[dict[str, Any]]:
    out = []
    for path in sorted(partition_dir.glob("*.snapshot")):
        entries = [
            {
                "producer": ids(e.producer_id),
                "epoch": e.epoch,
                "last_sequence": e.last_seq,
                "last_data_offset": e.last_data_offset,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_first_offset": e.current_txn_first_offset,
            }
            for e in decode_snapshot(path.read_bytes())
        ]
        out.append({"offset": int(path.stem), "entries": entries})
    return out


def capture(
    data_dir: Path, topic: str, transactional_id: str, group: str | None, offsets_partitions: int = 50
) -> dict[str, Any]:
    """The normalised footprint of ``transactional_id`` in ``data_dir``: ``topic``-0, its
    ``__transaction_state`` records and ``group``'s offsets partition."""
    ids = _Ids()
    partition_dir = data_dir / f"{topic}-0"
    result: dict[str, Any] = {"data": _data_batches(partition_dir, ids, with_records=True)}
    if group is not None:
        offsets_dir = data_dir / f"__consumer_offsets-{partition_for(group, offsets_partitions)}"
        result["group_offsets"] = [
            b for b in _data_batches(offsets_dir, ids, with_records=False) if b["producer"] >= 0
        ]
    result["transaction_state"] = _transaction_state(data_dir, ids, transactional_id)
    result["snapshots"] = _snapshots(partition_dir, ids)
    return result
