"""Writing the end-of-transaction markers (Kafka's TransactionMarkerChannelManager together with
the WriteTxnMarkers handling in ``KafkaApis`` and ``ReplicaManager``).

Once PrepareCommit or PrepareAbort is durable in ``__transaction_state`` the outcome is decided.
A COMMIT or ABORT control batch (producer id and epoch of the transaction, the coordinator epoch)
is then appended to every partition of the transaction, ``__consumer_offsets`` partitions
included; each successful marker takes its partition out of the transaction, as Kafka's
completion handler does (``TransactionMetadata.removePartition``). When no partition is left,
CompleteCommit or CompleteAbort is appended and the transaction is over.

Kafka sends the markers to the partition leaders over the network; here every partition is
local, so the markers are plain appends, made in the EndTxn request itself. A marker that cannot
be written (a full disk, an offline partition) leaves its transaction in Prepare* and it is
retried by the coordinator's periodic task, as Kafka's channel manager retries; a partition that
no longer exists (its topic was deleted) is dropped from the transaction, as Kafka does when the
partition has no leader. Markers written again after a restart (the loader finishes Prepare*
transactions) are harmless: a marker for a transaction that already ended changes nothing a
reader sees.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kompakt.broker.txn.metadata import TransactionMetadata, TransactionState
from kompakt.broker.txn.state_manager import (
    COORDINATOR_EPOCH,
    TransactionLogAppendError,
    TransactionStateManager,
)
from kompakt.clock import Clock
from kompakt.errors import KompaktError, UnknownTopicOrPartitionError
from kompakt.log.manager import LogManager
from kompakt.log.producer_state import AppendOrigin
from kompakt.records.control import ControlType, build_control_batch

log = logging.getLogger(__name__)

#: ``(topic, partition, producer_id, committed)`` after a marker is in a partition's log.
MarkerListener = Callable[[str, int, int, bool], None]


class TransactionMarkerChannelManager:
    """Writes markers and completes transactions; remembers the ones that must be retried."""

    def __init__(self, log_manager: LogManager, clock: Clock, state: TransactionStateManager) -> None:
        self._logs = log_manager
        self._clock = clock
        self._state = state
        self.listeners: list[MarkerListener] = []
        self._lock = threading.Lock()
        self._pending: dict[str, TransactionMetadata] = {}

    def complete(self, metadata: TransactionMetadata) -> bool:
        """Write the markers of a Prepare* transaction and complete it; caller holds its lock.

        Returns True when the transaction reached Complete*; False leaves it queued for a retry.
        """
        if metadata.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            self._forget(metadata)
            return True
        commit = metadata.state is TransactionState.PREPARE_COMMIT
        marker = ControlType.COMMIT if commit else ControlType.ABORT
        for topic, partition in sorted(metadata.partitions):
            try:
                partition_log = self._logs.get_log(topic, partition)
            except UnknownTopicOrPartitionError:
                log.info(
                    "Dropping %s-%d from transaction %r: the partition no longer exists",
                    topic,
                    partition,
                    metadata.transactional_id,
                )
                metadata.partitions.discard((topic, partition))
                continue
            except KompaktError as exc:
                return self._retry_later(metadata, f"{topic}-{partition}: {exc}")
            batch = build_control_batch(
                marker,
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                coordinator_epoch=COORDINATOR_EPOCH,
                timestamp=self._clock.now_ms(),
            )
            try:
                partition_log.append(batch, origin=AppendOrigin.COORDINATOR)
            except (KompaktError, OSError) as exc:
                return self._retry_later(metadata, f"{topic}-{partition}: {exc}")
            metadata.partitions.discard((topic, partition))
            for listener in list(self.listeners):
                try:
                    listener(topic, partition, metadata.producer_id, commit)
                except Exception:
                    log.exception("marker listener %r failed for %s-%d", listener, topic, partition)
        try:
            self._state.append(metadata, metadata.prepare_complete(self._clock.now_ms()))
        except TransactionLogAppendError as exc:
            return self._retry_later(metadata, str(exc))
        self._forget(metadata)
        return True

    def _retry_later(self, metadata: TransactionMetadata, reason: str) -> bool:
        log.warning(
            "Transaction %r (producer %d) is decided but not complete, retrying later: %s",
            metadata.transactional_id,
            metadata.producer_id,
            reason,
        )
        with self._lock:
            self._pending[metadata.transactional_id] = metadata
        return False

    def _forget(self, metadata: TransactionMetadata) -> None:
        with self._lock:
            if self._pending.get(metadata.transactional_id) is metadata:
                del self._pending[metadata.transactional_id]

    def pending(self) -> list[TransactionMetadata]:
        with self._lock:
            return list(self._pending.values())

    def retry_pending(self) -> int:
        """Retry every queued completion; return how many completed."""
        done = 0
        for metadata in self.pending():
            with metadata.lock:
                if self.complete(metadata):
                    done += 1
        return done
