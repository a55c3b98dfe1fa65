"""``GroupLog``: the group coordinator's records in ``__consumer_offsets``, written and read back.

Layout (Kafka's, so the directory is readable by Kafka's tools and the other way round): a group's
records go to partition ``Utils.abs(group.hashCode()) % partitions`` of the compacted topic
``__consumer_offsets``, with Java's ``String.hashCode`` over UTF-16 code units (``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0). The topic is created on the first write (a broker that never sees a
group has no 50 empty partitions) with ``offsets.topic.num.partitions``; once it exists its own
partition count is used, which keeps every group where it was.

The log only moves records: :meth:`GroupLog.append` writes what the coordinator's operation
produced as one batch per partition (a transactional batch for TxnOffsetCommit), and
:meth:`GroupLog.load` yields every record and transaction marker from each partition's log start,
in log order, for the coordinator to replay through the same methods that apply its writes.
Deciding what to write is the managers' business, applying it the replay's; this module knows
neither. Appends are small (a batch of a few hundred bytes per request) and do not fsync
(``flush.messages`` governs that, as for any topic): the durability of an ``acks=-1`` produce on
a single broker.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kompakt.broker.groups.records.placement import partition_for
from kompakt.broker.groups.records.schemas import (
    CommittedOffset,
    GroupRecord,
    GroupRecordFormatError,
    GroupRecordKey,
    GroupRecordValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kompakt.broker.groups.result import Producer
from kompakt.clock import Clock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import KompaktError, TopicExistsError
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.log.producer_state import AppendOrigin
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.control import ControlType, control_type_of
from kompakt.records.record import decode_records

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's ``offsets.topic.segment.bytes`` default (100 MiB).
OFFSETS_TOPIC_SEGMENT_BYTES = 104_857_600
OFFSETS_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES),
    "compression.type": "producer",
}
_READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    """One record read back at load; ``producer_id`` is set when it is in a transactional batch."""

    partition: int
    key: GroupRecordKey
    value: GroupRecordValue | None
    producer_id: int | None = None


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT marker of ``producer_id`` in one partition."""

    partition: int
    producer_id: int
    committed: bool


def _group_of(key: GroupRecordKey) -> str:
    return key.group


class GroupLog:
    """The ``__consumer_offsets`` topic of one data directory, as the coordinator writes it.

    Thread-safe: the coordinator appends from the event loop and from TxnOffsetCommit's worker
    thread; partition logs lock their own appends, and topic creation is serialised here.
    """

    def __init__(self, log_manager: LogManager, clock: Clock, *, num_partitions: int | None = None) -> None:
        self._logs = log_manager
        self._clock = clock
        self._requested_partitions = num_partitions
        self._lock = threading.Lock()
        self._partitions: int | None = None

    @classmethod
    def scratch(cls, clock: Clock) -> GroupLog:
        """A group log in a directory of its own that is deleted with the object: what a broker
        without a data directory (the protocol layer's unit tests) keeps its groups in, so that
        every broker runs its groups on the production format. One partition keeps it cheap."""
        data_dir = Path(tempfile.mkdtemp(prefix="kompakt-groups-"))
        manager = LogManager(data_dir, BrokerConfig(), clock)
        manager.open()
        group_log = cls(manager, clock, num_partitions=1)
        weakref.finalize(group_log, _discard, manager, data_dir)
        return group_log

    # ---- placement ---------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        """The partition count that places groups (the topic's, once it exists)."""
        meta = self._logs.topics().get(OFFSETS_TOPIC)
        if meta is not None:
            return meta.partitions
        if self._requested_partitions is not None:
            return self._requested_partitions
        return self._logs.broker_config.offsets_topic_num_partitions

    def partition_of(self, group: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group``'s records."""
        return partition_for(group, self._partitions or self.num_partitions)

    def _partition_log(self, group: str) -> PartitionLog:
        with self._lock:
            if self._partitions is None:
                meta = self._logs.topics().get(OFFSETS_TOPIC)
                if meta is None:
                    try:
                        meta = self._logs.create_topic(
                            OFFSETS_TOPIC, self.num_partitions, OFFSETS_TOPIC_CONFIGS
                        )
                    except TopicExistsError:  # a concurrent CreateTopics won the race; use its topic
                        meta = self._logs.topics()[OFFSETS_TOPIC]
                self._partitions = meta.partitions
            partitions = self._partitions
        return self._logs.get_log(OFFSETS_TOPIC, partition_for(group, partitions))

    # ---- writing -----------------------------------------------------------------------------

    def append(self, records: Sequence[GroupRecord], producer: Producer | None = None) -> None:
        """Write ``records`` as one batch per partition, in order (one operation is one batch, so
        a restart never sees half of it). With ``producer`` the batch is transactional: its offset
        commits stay pending until the producer's marker reaches the partition."""
        if not records:
            return
        by_partition: dict[int, tuple[PartitionLog, list[SimpleRecord]]] = {}
        now_ms = self._clock.now_ms()
        for key, value in records:
            partition_log = self._partition_log(_group_of(key))
            timestamp = value.commit_timestamp_ms if isinstance(value, CommittedOffset) else now_ms
            simple = SimpleRecord(encode_key(key), None if value is None else encode_value(value), timestamp)
            by_partition.setdefault(partition_log.partition, (partition_log, []))[1].append(simple)
        for partition_log, batch in by_partition.values():
            if producer is None:
                partition_log.append(build_batch(batch))
            else:
                partition_log.append(
                    build_batch(
                        batch,
                        producer_id=producer.producer_id,
                        producer_epoch=producer.producer_epoch,
                        # Kafka's CoordinatorRuntime builds every batch at base sequence 0
                        base_sequence=0,
                        is_transactional=True,
                    ),
                    origin=AppendOrigin.COORDINATOR,
                )

    # ---- reading back ------------------------------------------------------------------------

    def load(self) -> Iterator[LoadedRecord | TxnMarker]:
        """Every record and marker of the topic (if it exists yet), partition by partition, in log
        order. An unreadable record is skipped with a warning: it cannot be applied, and the rest
        of the partition still can."""
        meta = self._logs.topics().get(OFFSETS_TOPIC)
        if meta is None:
            return
        self._partitions = meta.partitions
        for partition in range(meta.partitions):
            try:
                partition_log = self._logs.get_log(OFFSETS_TOPIC, partition)
            except KompaktError as exc:
                log.error("Cannot load %s-%d: %s", OFFSETS_TOPIC, partition, exc)
                continue
            yield from self._read(partition_log)

    @staticmethod
    def _read(partition_log: PartitionLog) -> Iterator[LoadedRecord | TxnMarker]:
        partition = partition_log.partition
        for batch in partition_log.replay_batches(_READ_CHUNK):
            if batch.is_control:
                if batch.producer_id >= 0 and batch.records_count:
                    committed = control_type_of(batch) == ControlType.COMMIT
                    yield TxnMarker(partition, batch.producer_id, committed)
                continue
            producer_id = batch.producer_id if batch.is_transactional else None
            for record in decode_records(batch):
                if record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if key is None:
                        continue  # share and streams groups' records: not kept by kompakt
                    value = None if record.value is None else decode_value(key, record.value)
                except GroupRecordFormatError as exc:
                    log.warning(
                        "Skipping unreadable record at %s offset %d: %s",
                        partition_log.name,
                        record.offset,
                        exc,
                    )
                    continue
                yield LoadedRecord(partition, key, value, producer_id)


def _discard(manager: LogManager, data_dir: Path) -> None:
    manager.close_without_flush()
    shutil.rmtree(data_dir, ignore_errors=True)
