"""The transaction coordinator's cache and its durable copy in ``__transaction_state`` (Kafka's
TransactionStateManager).

Every transactional id lives in partition ``abs(id.hashCode()) % partitions`` of the compacted
internal topic ``__transaction_state`` (``transaction.state.log.num.partitions``, 50 by
default; once the topic exists its own count is used). Each state change is one record: the
key :func:`~kompakt.broker.txn.log_format.encode_key`, the value
:func:`~kompakt.broker.txn.log_format.encode_value`; an expired id gets a tombstone. Compaction
(kompakt's own cleaner) keeps the latest record per id, so the topic stays as small as the set of
live ids, and :meth:`TransactionStateManager.load` replays it at start-up: the last record per
id wins, a tombstone removes the id. The topic is created on the first transactional
InitProducerId, as the offsets topic is on the first commit, so a broker that never sees a
transaction has no 50 empty partitions.

This single node is the leader of every partition at coordinator epoch 0, so the loading and
unloading that Kafka does on leader elections (``onElection``, ``onResignation``) is the one
load at start-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from kompakt.broker.client_regex import ClientRegex
from kompakt.broker.groups.records.placement import partition_for
from kompakt.broker.txn.log_format import (
    VALUE_VERSION_CLASSIC,
    VALUE_VERSION_FLEXIBLE,
    TransactionLogFormatError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kompakt.broker.txn.metadata import TransactionMetadata, TransactionState, TxnTransitMetadata
from kompakt.clock import Clock
from kompakt.config.broker import BrokerConfig
from kompakt.config.tables import bool_default, int_default
from kompakt.errors import KompaktError, TopicExistsError
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
#: The single node leads every partition at this coordinator epoch (markers carry it).
COORDINATOR_EPOCH = 0
_READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The broker configs the coordinator reads (Kafka's ``TransactionConfig``), typed; defined,
    with their defaults, in :mod:`kompakt.config.txn_defs`."""

    transactional_id_expiration_ms: int = int_default("transactional.id.expiration.ms")
    transaction_max_timeout_ms: int = int_default("transaction.max.timeout.ms")
    transaction_log_num_partitions: int = int_default("transaction.state.log.num.partitions")
    transaction_log_segment_bytes: int = int_default("transaction.state.log.segment.bytes")
    abort_timed_out_transactions_interval_ms: int = int_default(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    remove_expired_transactional_ids_interval_ms: int = int_default(
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )
    transaction_partition_verification_enable: bool = bool_default(
        "transaction.partition.verification.enable"
    )
    #: The finalized ``transaction.version`` feature level (ApiVersions advertises it).
    transaction_version: int = int_default("transaction.version")

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> TxnConfig:
        return cls(
            transactional_id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            transaction_max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            transaction_log_num_partitions=config.get_int("transaction.state.log.num.partitions"),
            transaction_log_segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
            abort_timed_out_transactions_interval_ms=config.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"
            ),
            remove_expired_transactional_ids_interval_ms=config.get_int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ),
            transaction_partition_verification_enable=config.get_bool(
                "transaction.partition.verification.enable"
            ),
            transaction_version=config.get_int("transaction.version"),
        )


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: TransactionState


class TransactionLogAppendError(KompaktError):
    """Appending a state change to ``__transaction_state`` failed; nothing changed in the cache."""


def _to_value(transit: TxnTransitMetadata) -> TransactionLogValue:
    empty = transit.state is TransactionState.EMPTY
    return TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        state_id=transit.state.id,
        partitions=() if empty else tuple(sorted(transit.partitions)),
        last_update_timestamp_ms=transit.txn_last_update_timestamp_ms,
        start_timestamp_ms=transit.txn_start_timestamp_ms,
        client_transaction_version=transit.client_transaction_version,
    )


def _from_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    state = TransactionState.from_id(value.state_id)
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=state,
        partitions=set(value.partitions) if state is not TransactionState.EMPTY else set(),
        txn_start_timestamp_ms=value.start_timestamp_ms,
        txn_last_update_timestamp_ms=value.last_update_timestamp_ms,
        prev_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        client_transaction_version=value.client_transaction_version,
    )


class TransactionStateManager:
    """The cache of transactional ids and its log. Thread-safe.

    ``_lock`` guards only the dict; a :class:`TransactionMetadata` is guarded by its own lock,
    which callers hold around a transition and its :meth:`append` (lock order: metadata lock,
    then the partition log's lock).
    """

    def __init__(self, log_manager: LogManager, clock: Clock, config: TxnConfig) -> None:
        self._logs = log_manager
        self._clock = clock
        self.config = config
        self._lock = threading.Lock()
        self._topic_lock = threading.Lock()
        self._cache: dict[str, TransactionMetadata] = {}
        self._partitions: int | None = None

    # ---- the topic ------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        meta = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
        return meta.partitions if meta is not None else self.config.transaction_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's ``partitionFor``: ``Utils.abs(transactionalId.hashCode) % partitions``."""
        return partition_for(transactional_id, self._partitions or self.num_partitions)

    def topic_configs(self) -> dict[str, str]:
        """``transactionTopicConfigs``: compacted, uncompressed, Kafka's segment size."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.config.transaction_log_segment_bytes),
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": "1",
        }

    def ensure_topic(self) -> int:
        """Create ``__transaction_state`` if it is missing; its partition count."""
        with self._topic_lock:
            if self._partitions is None:
                meta = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
                if meta is None:
                    try:
                        meta = self._logs.create_topic(
                            TRANSACTION_STATE_TOPIC,
                            self.config.transaction_log_num_partitions,
                            self.topic_configs(),
                        )
                        log.info("Created %s with %d partitions", TRANSACTION_STATE_TOPIC, meta.partitions)
                    except TopicExistsError:
                        meta = self._logs.topics()[TRANSACTION_STATE_TOPIC]
                self._partitions = meta.partitions
            return self._partitions

    # ---- the cache --------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        with self._lock:
            return self._cache.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        with self._lock:
            return self._cache.setdefault(metadata.transactional_id, metadata)

    def remove(self, transactional_id: str, expected: TransactionMetadata) -> None:
        with self._lock:
            if self._cache.get(transactional_id) is expected:
                del self._cache[transactional_id]

    def all(self) -> list[TransactionMetadata]:
        with self._lock:
            return list(self._cache.values())

    # ---- appends ------------------------------------------------------------------------------

    def append(self, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        """``appendTransactionToLog`` then ``completeTransitionTo``; caller holds the metadata lock.

        On failure the pending state is cleared (the old state stays in force) and
        :class:`TransactionLogAppendError` is raised.
        """
        # Kafka's ``transactionLogValueVersion``: the flexible value (1) from transaction.version 1
        value_version = (
            VALUE_VERSION_FLEXIBLE if self.config.transaction_version >= 1 else VALUE_VERSION_CLASSIC
        )
        record = SimpleRecord(
            encode_key(metadata.transactional_id),
            encode_value(_to_value(transit), value_version),
            self._clock.now_ms(),
        )
        try:
            partitions = self.ensure_topic()
            partition_log = self._logs.get_log(
                TRANSACTION_STATE_TOPIC, partition_for(metadata.transactional_id, partitions)
            )
            partition_log.append(build_batch([record]))
        except (KompaktError, OSError) as exc:
            metadata.pending_state = None
            raise TransactionLogAppendError(
                f"appending the state of transactional id {metadata.transactional_id!r} to "
                f"{TRANSACTION_STATE_TOPIC} failed: {exc}"
            ) from exc
        metadata.complete_transition(transit)

    def write_tombstones(self, expired: Iterable[TransactionMetadata]) -> list[TransactionMetadata]:
        """Tombstone each id (one batch per partition); return those whose tombstone was written."""
        now_ms = self._clock.now_ms()
        by_partition: dict[int, list[TransactionMetadata]] = {}
        for metadata in expired:
            by_partition.setdefault(self.partition_for(metadata.transactional_id), []).append(metadata)
        written: list[TransactionMetadata] = []
        for partition, group in sorted(by_partition.items()):
            batch = build_batch([SimpleRecord(encode_key(m.transactional_id), None, now_ms) for m in group])
            try:
                self._logs.get_log(TRANSACTION_STATE_TOPIC, partition).append(batch)
            except (KompaktError, OSError) as exc:
                log.warning(
                    "Could not expire %d transactional ids in partition %d: %s", len(group), partition, exc
                )
                continue
            written.extend(group)
        return written

    # ---- queries --------------------------------------------------------------------------------

    def timed_out(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions open longer than their timeout (``timedOutTransactions``)."""
        return [
            m
            for m in self.all()
            if m.pending_state is None
            and m.state is TransactionState.ONGOING
            and m.txn_start_timestamp_ms + m.txn_timeout_ms < now_ms
        ]

    def expirable(self, now_ms: int) -> list[TransactionMetadata]:
        """Ids idle for ``transactional.id.expiration.ms`` in a state that may expire."""
        horizon = now_ms - self.config.transactional_id_expiration_ms
        return [
            m
            for m in self.all()
            if m.pending_state is None
            and m.state.expiration_allowed
            and m.txn_last_update_timestamp_ms <= horizon
        ]

    def list_transactions(
        self,
        producer_ids: frozenset[int],
        states: frozenset[TransactionState],
        state_filter_given: bool,
        duration_ms: int,
        pattern: ClientRegex | None,
    ) -> list[ListedTransaction]:
        """``listTransactionStates``: Dead ids are never listed."""
        now_ms = self._clock.now_ms()
        out: list[ListedTransaction] = []
        for m in self.all():
            with m.lock:
                if m.state is TransactionState.DEAD:
                    continue
                if producer_ids and m.producer_id not in producer_ids:
                    continue
                if state_filter_given and m.state not in states:
                    continue
                if duration_ms >= 0 and now_ms - m.txn_start_timestamp_ms <= duration_ms:
                    continue
                if pattern is not None and not pattern.fullmatch(m.transactional_id):
                    continue
                out.append(ListedTransaction(m.transactional_id, m.producer_id, m.state))
        return out

    # ---- start-up --------------------------------------------------------------------------------

    def load(self) -> list[TransactionMetadata]:
        """Replay ``__transaction_state``; return the transactions left in PrepareCommit/Abort.

        Those were decided (the client was told) but their markers may not all be written: the
        coordinator finishes them before it serves requests (Kafka's
        ``loadTransactionsForTxnTopicPartition``).
        """
        loaded: dict[str, TransactionMetadata] = {}
        meta = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
        if meta is not None:
            self._partitions = meta.partitions
            for partition in range(meta.partitions):
                try:
                    partition_log = self._logs.get_log(TRANSACTION_STATE_TOPIC, partition)
                except KompaktError as exc:
                    log.error("Cannot load %s-%d: %s", TRANSACTION_STATE_TOPIC, partition, exc)
                    continue
                self._replay(partition_log.name, partition_log, loaded)
        with self._lock:
            self._cache = loaded
        if loaded:
            log.info("Loaded %d transactional ids from %s", len(loaded), TRANSACTION_STATE_TOPIC)
        return [
            m
            for m in loaded.values()
            if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
        ]

    @staticmethod
    def _replay(name: str, partition_log: PartitionLog, loaded: dict[str, TransactionMetadata]) -> None:
        for batch in partition_log.replay_batches(_READ_CHUNK):
            if batch.is_control:
                continue
            for record in decode_records(batch):
                if record.key is None:
                    log.warning("Skipping a keyless record at %s offset %d", name, record.offset)
                    continue
                try:
                    transactional_id = decode_key(record.key)
                    if transactional_id is None:
                        log.warning(
                            "Skipping a record of unknown key type at %s offset %d", name, record.offset
                        )
                        continue
                    if record.value is None:
                        loaded.pop(transactional_id, None)
                    else:
                        loaded[transactional_id] = _from_value(transactional_id, decode_value(record.value))
                except (TransactionLogFormatError, ValueError) as exc:
                    log.warning("Skipping an unreadable record at %s offset %d: %s", name, record.offset, exc)
