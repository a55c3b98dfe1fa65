"""Idempotent and transactional producer state of one partition (Kafka's ProducerStateManager).

Per producer id the state holds: the current epoch, the metadata of its last five data batches
(first/last sequence, first/last offset), the last data offset, the last timestamp, and the first
offset of its ongoing transaction. It serves three masters:

* the produce path: :meth:`ProducerStateManager.check` rejects a retried batch that duplicates
  one of the last five (answered with the original offsets), an out-of-order sequence, and a
  fenced (older) epoch; a new epoch must start at sequence 0;
* the last stable offset: the smallest first offset of an ongoing transaction pins it;
* the cleaner: :meth:`ProducerStateManager.active_producers` tells which producers' last batch
  must survive compaction.

Snapshots (Kafka's ``ProducerStateManager.takeSnapshot`` / ``readSnapshot``): ``<20-digit
offset>.snapshot`` in the partition directory holds the state of every producer as of that
offset (all batches below it applied), in Kafka's ProducerSnapshot v1 layout, so Kafka and
kompakt read each other's files::

    int16 version (1) | uint32 CRC-32C of everything after it | int32 count | count × entry
    entry: producer_id int64, epoch int16, last_sequence int32, last_offset int64,
           offset_delta int32, timestamp int64, coordinator_epoch int32,
           current_txn_first_offset int64 (-1: none)

Only the last batch of each producer is kept (as in Kafka), so after a restart duplicate
detection covers that batch. A log takes one at each roll (at the new segment's base offset)
and at close (at the log end offset); loading starts from the newest snapshot at or below the log
end offset and replays batch *headers* only from there, which works on compacted logs because the
cleaner keeps each batch's ``last_offset_delta``, producer id, epoch and base sequence even when
it empties the batch. With no usable snapshot the whole log's headers are replayed.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from kompakt.errors import DuplicateSequenceError, KompaktError, OutOfOrderSequenceError, ProducerFencedError
from kompakt.lazy_import import LazyModule
from kompakt.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, RecordBatchView
from kompakt.records.control import ControlType, control_type_of, coordinator_epoch_of

if TYPE_CHECKING:
    import crc32c
else:
    crc32c = LazyModule("kompakt.records.checksum", globals(), "crc32c")

NUM_BATCHES_TO_RETAIN: Final = 5
INT32_MAX: Final = 0x7FFFFFFF
SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
#: Where the CRC'd part starts: after the version and the CRC (Kafka's ``PRODUCER_ENTRIES_OFFSET``).
_SNAPSHOT_CRC_FROM: Final = 6


class CorruptSnapshotError(KompaktError):
    """A ``.snapshot`` file that is not a whole, CRC-valid ProducerSnapshot v1."""


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's ``AppendOrigin``): sequence numbers are checked for clients only.

    A coordinator writes transactional offset commits and markers with no sequence number
    (``RecordBatch.NO_SEQUENCE``); their epoch is still checked, so a fenced producer's
    coordinator-written batch is refused like its own.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    """What the partition remembers about one producer id."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    last_data_offset: int = -1
    current_txn_first_offset: int | None = None
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the old one's batches, its last data offset with them (Kafka's
        ``maybeUpdateProducerEpoch``; ``lastDataOffset`` is the last batch's). A transactions-v2
        marker carries the bumped epoch, so after it the producer has no last data batch: the
        snapshot says -1 and the cleaner keeps the marker instead of the last data batch."""
        if epoch != self.epoch:
            self.batches.clear()
            self.last_data_offset = -1
            self.epoch = epoch


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """``ProducerStateManager.writeSnapshot``: the bytes of a ``.snapshot`` file."""
    body = bytearray()
    count = 0
    for entry in entries:
        last = entry.batches[-1] if entry.batches else None
        body += _SNAPSHOT_ENTRY.pack(
            entry.producer_id,
            entry.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else entry.last_data_offset,
            (last.last_seq - last.first_seq) if last else 0,
            entry.last_timestamp,
            entry.coordinator_epoch,
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        )
        count += 1
    tail = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(tail)) + tail


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """``ProducerStateManager.readSnapshot``; raises :class:`CorruptSnapshotError`."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes cannot hold {count} producer entries")
    computed = crc32c.crc32c(memoryview(data)[_SNAPSHOT_CRC_FROM:])
    if computed != crc:
        raise CorruptSnapshotError(f"snapshot is corrupt (stored CRC {crc}, computed {computed})")
    entries = []
    for (
        pid,
        epoch,
        last_seq,
        last_offset,
        delta,
        timestamp,
        coordinator_epoch,
        txn_first,
    ) in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size :]):
        entry = ProducerEntry(
            pid,
            epoch,
            last_timestamp=timestamp,
            last_data_offset=last_offset,
            current_txn_first_offset=txn_first if txn_first >= 0 else None,
            coordinator_epoch=coordinator_epoch,
        )
        if last_offset >= 0 and last_seq != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset, timestamp)
            )
        entries.append(entry)
    return entries


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer entries of one partition. Not thread-safe: used under the log's lock."""

    def __init__(self, topic_partition: str) -> None:
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerEntry] = {}

    # ------------------------------------------------------------------ produce-side checks

    def check(
        self,
        batch: RecordBatchView,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        *,
        transaction_version_2: bool = False,
    ) -> None:
        """Raise if a batch must not be appended (duplicate, out of order, fenced).

        ``transaction_version_2``: the batch is a transactions-v2 producer's (Produce v12+), verified
        by adding its partition to the transaction. Kafka 4.1 then refuses a non-zero first sequence
        from a producer this partition has no batches of (``ProducerAppendInfo.checkSequence``):
        without the rule such a producer is accepted at any sequence, and a batch whose
        predecessors were lost in flight would be written after a gap the producer never sees.
        """
        pid = batch.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        epoch = batch.producer_epoch
        if entry is None:
            if transaction_version_2 and origin is AppendOrigin.CLIENT and not batch.is_control:
                self._check_first_sequence_v2(batch)
            return
        if not batch.is_control and origin is AppendOrigin.CLIENT:
            dup = entry.find_duplicate(epoch, batch.base_sequence, batch.last_sequence)
            if dup is not None:
                raise DuplicateSequenceError(
                    f"Duplicate sequence {batch.base_sequence}..{batch.last_sequence} of producer {pid} "
                    f"in {self.topic_partition}; originally written at offsets "
                    f"{dup.first_offset}..{dup.last_offset}",
                    dup.first_offset,
                    dup.last_offset,
                )
        if entry.epoch != NO_PRODUCER_EPOCH and epoch < entry.epoch:
            raise ProducerFencedError(
                f"Epoch of producer {pid} at offset {batch.base_offset} in {self.topic_partition} "
                f"is {epoch}, "
                f"which is smaller than the last seen epoch {entry.epoch}"
            )
        if batch.is_control or origin is AppendOrigin.COORDINATOR:
            return
        if transaction_version_2 and not entry.batches:
            self._check_first_sequence_v2(batch)
        seq = batch.base_sequence
        if entry.epoch == NO_PRODUCER_EPOCH:
            return
        if epoch != entry.epoch:
            if seq != 0:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {pid} "
                    f"at offset {batch.base_offset} in "
                    f"partition {self.topic_partition}: {epoch} (request epoch), {seq} (seq. number), "
                    f"{entry.epoch} (current producer epoch)"
                )
        elif not in_sequence(entry.last_seq, seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {pid} at offset {batch.base_offset} in partition "
                f"{self.topic_partition}: {seq} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)"
            )

    def _check_first_sequence_v2(self, batch: RecordBatchView) -> None:
        if batch.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for producer {batch.producer_id} at offset {batch.base_offset} "
                f"in partition {self.topic_partition}: {batch.base_sequence} (incoming seq. number). "
                "Expected sequence 0 for transactions v2 idempotent producer with no existing state."
            )

    # ------------------------------------------------------------------ applying appended batches

    def update(self, batch: RecordBatchView) -> CompletedTxn | None:
        """Record a batch that is in the log (offsets assigned); return the txn a marker ends."""
        pid = batch.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if batch.is_control:
            if batch.records_count == 0:
                return None  # an emptied marker: the whole transaction was cleaned away
            marker = control_type_of(batch)
            if marker not in (ControlType.ABORT, ControlType.COMMIT):
                return None
            entry.update_epoch(batch.producer_epoch)
            entry.last_timestamp = batch.max_timestamp
            entry.coordinator_epoch = coordinator_epoch_of(batch)
            first = entry.current_txn_first_offset
            entry.current_txn_first_offset = None
            return CompletedTxn(
                pid,
                batch.base_offset if first is None else first,
                batch.base_offset,
                marker == ControlType.ABORT,
            )
        entry.update_epoch(batch.producer_epoch)
        last_offset = batch.last_offset
        if batch.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    batch.base_sequence,
                    batch.last_sequence,
                    last_offset - batch.last_offset_delta,
                    last_offset,
                    batch.max_timestamp,
                )
            )
        entry.last_data_offset = last_offset
        entry.last_timestamp = batch.max_timestamp
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = batch.base_offset
        return None

    def check_and_update(self, batch: RecordBatchView) -> CompletedTxn | None:
        self.check(batch)
        return self.update(batch)

    def rebuild(self, batches: Iterable[RecordBatchView], snapshot: Iterable[ProducerEntry] = ()) -> None:
        """Forget everything, load ``snapshot`` entries, then replay batch headers in log order."""
        self.producers.clear()
        for entry in snapshot:
            self.producers[entry.producer_id] = entry
        for batch in batches:
            self.update(batch)

    # ------------------------------------------------------------------ queries

    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of an ongoing transaction, if any."""
        firsts = [
            e.current_txn_first_offset
            for e in self.producers.values()
            if e.current_txn_first_offset is not None
        ]
        return min(firsts) if firsts else None

    def last_stable_offset_after(self, completed: CompletedTxn, high_watermark: int) -> int:
        """The LSO right after ``completed`` ends: other open transactions still pin it."""
        firsts = [
            e.current_txn_first_offset
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is not None and pid != completed.producer_id
        ]
        return min([*firsts, high_watermark])

    def active_producers(self, now_ms: int, expiration_ms: int) -> dict[int, tuple[int | None, int]]:
        """Unexpired producers: ``pid -> (last data offset or None, epoch)``, for the cleaner."""
        result: dict[int, tuple[int | None, int]] = {}
        for pid, entry in self.producers.items():
            if entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms:
                continue
            result[pid] = (entry.last_data_offset if entry.last_data_offset >= 0 else None, entry.epoch)
        return result

    def last_sequence(self, producer_id: int) -> int:
        entry = self.producers.get(producer_id)
        return NO_SEQUENCE if entry is None else entry.last_seq
