"""The transaction coordinator (Kafka's TransactionCoordinator, KIP-98, KIP-447, KIP-890 part 1).

Each handler method runs one transactional id's operation under that id's metadata lock,
including the ``__transaction_state`` append and, for EndTxn, the markers: operations on one id
are serial, different ids run in parallel. Results are Kafka error codes; what a handler does
with them (per-partition answers, version-dependent translations) is the handler's business.

Behaviour follows Kafka 4.1 with ``transaction.version`` 1 semantics (kompakt does not offer the
per-transaction epoch bump of KIP-890 part 2, and so advertises EndTxn only up to v4):

* InitProducerId bumps the epoch, or rotates to a new producer id once it is exhausted; with an
  Ongoing transaction it fences the epoch, aborts the transaction and answers
  CONCURRENT_TRANSACTIONS, so the client retries and gets the next epoch (zombie fencing);
* AddPartitionsToTxn / AddOffsetsToTxn move the transaction to Ongoing (its timeout starts at
  the first add); EndTxn writes PrepareCommit/PrepareAbort, the markers, then
  CompleteCommit/CompleteAbort;
* a transaction Ongoing longer than its timeout is fenced and aborted by
  :meth:`TransactionCoordinator.abort_timed_out_transactions`, and idle ids expire after
  ``transactional.id.expiration.ms`` (:meth:`TransactionCoordinator.expire_transactional_ids`),
  both run periodically by the server.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from kompakt.broker.client_regex import compile_regex
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.txn.markers import TransactionMarkerChannelManager
from kompakt.broker.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kompakt.broker.txn.state_manager import (
    ListedTransaction,
    TransactionLogAppendError,
    TransactionStateManager,
    TxnConfig,
)
from kompakt.clock import Clock
from kompakt.log.manager import LogManager
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' view of one id."""

    error: ErrorCode
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


class TransactionCoordinator:
    """One per broker; thread-safe (see the module docstring)."""

    def __init__(
        self,
        log_manager: LogManager,
        clock: Clock,
        producer_ids: ProducerIdManager,
        config: TxnConfig | None = None,
    ) -> None:
        self.clock = clock
        self.config = config or TxnConfig()
        self.producer_ids = producer_ids
        self.state = TransactionStateManager(log_manager, clock, self.config)
        self.markers = TransactionMarkerChannelManager(log_manager, clock, self.state)

    # ---- start-up --------------------------------------------------------------------------------

    def load(self) -> None:
        """Load ``__transaction_state`` and finish the transactions that were decided."""
        for metadata in self.state.load():
            log.info(
                "Completing transaction %r (%s) left decided at the last shutdown",
                metadata.transactional_id,
                metadata.state.state_name,
            )
            with metadata.lock:
                self.markers.complete(metadata)

    # ---- InitProducerId ------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> InitProducerIdResult:
        """``handleInitProducerId`` for a transactional id (``expected``: v3+ id and epoch)."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.invalid_transaction_timeout)
        if expected is not None and expected[0] < 0:
            expected = None
        metadata = self.state.get(transactional_id)
        if metadata is None:
            try:
                created = TransactionMetadata(
                    transactional_id=transactional_id,
                    producer_id=self.producer_ids.next_id(),
                    producer_epoch=NO_PRODUCER_EPOCH,
                    txn_timeout_ms=timeout_ms,
                    state=TransactionState.EMPTY,
                    txn_last_update_timestamp_ms=self.clock.now_ms(),
                )
            except OSError as exc:
                log.error("Cannot allocate a producer id for %r: %s", transactional_id, exc)
                return InitProducerIdResult(ErrorCode.coordinator_not_available)
            metadata = self.state.put_if_absent(created)
        with metadata.lock:
            result = self._prepare_init(metadata, timeout_ms, expected)
            if isinstance(result, ErrorCode):
                return InitProducerIdResult(result)
            if result.state is TransactionState.PREPARE_EPOCH_FENCE:
                error = self._end_transaction_locked(
                    metadata, result.producer_id, result.producer_epoch, commit=False, from_client=False
                )
                return InitProducerIdResult(
                    ErrorCode.concurrent_transactions if error is ErrorCode.none else error
                )
            error = self._append(metadata, result)
            if error is not ErrorCode.none:
                return InitProducerIdResult(error)
            log.info(
                "Initialized transactional id %r with producer id %d and epoch %d",
                transactional_id,
                metadata.producer_id,
                metadata.producer_epoch,
            )
            return InitProducerIdResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)

    def _prepare_init(
        self, metadata: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None
    ) -> TxnTransitMetadata | ErrorCode:
        """``prepareInitProducerIdTransit``."""
        if metadata.pending_transition_in_progress:
            return ErrorCode.concurrent_transactions
        if expected is not None:
            expected_id, expected_epoch = expected
            valid = (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected_id == metadata.producer_id
                or (expected_id == metadata.prev_producer_id and is_epoch_exhausted(expected_epoch))
            )
            if not valid:
                return ErrorCode.producer_fenced
        state = metadata.state
        if state in (TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT):
            return ErrorCode.concurrent_transactions
        now_ms = self.clock.now_ms()
        if state in (
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.EMPTY,
        ):
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                try:
                    new_id = self.producer_ids.next_id()
                except OSError as exc:
                    log.error("Cannot allocate a producer id for %r: %s", metadata.transactional_id, exc)
                    return ErrorCode.coordinator_not_available
                return metadata.prepare_producer_id_rotation(new_id, timeout_ms, now_ms, expected is not None)
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now_ms
            )
            return ErrorCode.producer_fenced if transit is None else transit
        if state is TransactionState.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise IllegalTransitionError(f"{metadata.transactional_id} is {state.state_name} in the cache")

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> ErrorCode:
        """``handleAddPartitionsToTransaction``."""
        if not transactional_id:
            return ErrorCode.invalid_request
        metadata = self.state.get(transactional_id)
        if metadata is None:
            return ErrorCode.invalid_producer_id_mapping
        wanted = frozenset(partitions)
        with metadata.lock:
            if metadata.pending_transition_in_progress:
                return ErrorCode.concurrent_transactions
            if metadata.producer_id != producer_id:
                return ErrorCode.invalid_producer_id_mapping
            if metadata.producer_epoch != producer_epoch:
                return ErrorCode.producer_fenced
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                return ErrorCode.concurrent_transactions
            if metadata.state is TransactionState.ONGOING and wanted <= metadata.partitions:
                return ErrorCode.none
            return self._append(metadata, metadata.prepare_add_partitions(wanted, self.clock.now_ms()))

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """``handleVerifyPartitionsInTransaction`` (AddPartitionsToTxn v4+ with ``verify_only``)."""
        with self.verified(transactional_id, producer_id, producer_epoch, partitions) as errors:
            return errors

    @contextmanager
    def verified(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> Iterator[dict[TopicPartition, ErrorCode]]:
        """Verify that ``partitions`` are in the Ongoing transaction, holding its lock meanwhile.

        KIP-890 part 1: a transactional produce appends inside this block, so no data can land
        in a partition after its transaction left Ongoing (a late or retried batch of an aborted
        transaction would otherwise leave a transaction hanging there, pinning the LSO).
        """
        if not transactional_id:
            yield dict.fromkeys(partitions, ErrorCode.invalid_request)
            return
        metadata = self.state.get(transactional_id)
        if metadata is None:
            yield dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
            return
        with metadata.lock:
            if metadata.producer_id != producer_id:
                error = ErrorCode.invalid_producer_id_mapping
            elif metadata.producer_epoch != producer_epoch:
                error = ErrorCode.producer_fenced
            elif metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                error = ErrorCode.concurrent_transactions
            else:
                yield {
                    tp: ErrorCode.none
                    if metadata.state is TransactionState.ONGOING and tp in metadata.partitions
                    else ErrorCode.transaction_abortable
                    for tp in partitions
                }
                return
            yield dict.fromkeys(partitions, error)

    # ---- EndTxn -----------------------------------------------------------------------------------

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """``handleEndTransaction`` from a client."""
        if not transactional_id:
            return ErrorCode.invalid_request
        metadata = self.state.get(transactional_id)
        if metadata is None:
            return ErrorCode.invalid_producer_id_mapping
        with metadata.lock:
            return self._end_transaction_locked(
                metadata, producer_id, producer_epoch, commit, from_client=True
            )

    def _end_transaction_locked(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
    ) -> ErrorCode:
        """``endTransactionWithTV1``: decide, write the markers, complete."""
        if metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if (
            from_client and producer_epoch != metadata.producer_epoch
        ) or producer_epoch < metadata.producer_epoch:
            return ErrorCode.producer_fenced
        if metadata.pending_state not in (None, TransactionState.PREPARE_EPOCH_FENCE):
            return ErrorCode.concurrent_transactions
        state = metadata.state
        if state is TransactionState.ONGOING:
            epoch_fence = metadata.pending_state is TransactionState.PREPARE_EPOCH_FENCE
            if not commit and epoch_fence:
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            target = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
            error = self._append(metadata, metadata.prepare_abort_or_commit(target, self.clock.now_ms()))
            if error is not ErrorCode.none:
                if epoch_fence:
                    metadata.has_failed_epoch_fence = True
                return error
            self.markers.complete(metadata)
            return ErrorCode.none
        if state is TransactionState.COMPLETE_COMMIT:
            return ErrorCode.none if commit else self._invalid_transition(metadata, commit)
        if state is TransactionState.COMPLETE_ABORT:
            return ErrorCode.none if not commit else self._invalid_transition(metadata, commit)
        if state is TransactionState.PREPARE_COMMIT:
            return ErrorCode.concurrent_transactions if commit else self._invalid_transition(metadata, commit)
        if state is TransactionState.PREPARE_ABORT:
            return (
                ErrorCode.concurrent_transactions
                if not commit
                else self._invalid_transition(metadata, commit)
            )
        if state is TransactionState.EMPTY:
            return self._invalid_transition(metadata, commit)
        raise IllegalTransitionError(f"{metadata.transactional_id} is {state.state_name} in the cache")

    @staticmethod
    def _invalid_transition(metadata: TransactionMetadata, commit: bool) -> ErrorCode:
        log.warning(
            "Transactional id %r is %s but the client asked to %s",
            metadata.transactional_id,
            metadata.state.state_name,
            "commit" if commit else "abort",
        )
        return ErrorCode.invalid_txn_state

    def _append(self, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> ErrorCode:
        """Append a transition; the coordinator error a failed append becomes (Kafka's mapping)."""
        try:
            self.state.append(metadata, transit)
        except TransactionLogAppendError as exc:
            log.warning("%s", exc)
            return ErrorCode.not_coordinator
        return ErrorCode.none

    # ---- periodic work ----------------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """``abortTimedOutTransactions``: fence and abort every overdue Ongoing transaction.

        Also retries completions that could not write their markers before. Returns the number
        of transactions aborted.
        """
        self.markers.retry_pending()
        aborted = 0
        for metadata in self.state.timed_out(self.clock.now_ms()):
            with metadata.lock:
                if metadata.pending_transition_in_progress or metadata.state is not TransactionState.ONGOING:
                    continue
                transit = metadata.prepare_fence_producer_epoch()
                error = self._end_transaction_locked(
                    metadata, transit.producer_id, transit.producer_epoch, commit=False, from_client=False
                )
            if error is ErrorCode.none:
                aborted += 1
                log.info("Aborted transaction %r: it exceeded its timeout", metadata.transactional_id)
            else:
                log.warning(
                    "Rollback of timed out transaction %r failed: %s", metadata.transactional_id, error.name
                )
        return aborted

    def expire_transactional_ids(self) -> int:
        """``removeExpiredTransactionalIds``: tombstone ids idle past ``transactional.id.expiration.ms``."""
        now_ms = self.clock.now_ms()
        doomed: list[TransactionMetadata] = []
        for metadata in self.state.expirable(now_ms):
            with metadata.lock:
                horizon = now_ms - self.config.transactional_id_expiration_ms
                if (
                    metadata.pending_state is None
                    and metadata.state.expiration_allowed
                    and metadata.txn_last_update_timestamp_ms <= horizon
                ):
                    metadata.prepare_dead()
                    doomed.append(metadata)
        if not doomed:
            return 0
        written = {id(m) for m in self.state.write_tombstones(doomed)}
        for metadata in doomed:
            with metadata.lock:
                if id(metadata) in written:
                    self.state.remove(metadata.transactional_id, metadata)
                    log.info("Expired transactional id %r", metadata.transactional_id)
                else:
                    metadata.pending_state = None
        return len(written)

    # ---- admin ------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        """``handleDescribeTransactions``."""
        if not transactional_id:
            return TransactionDescription(ErrorCode.invalid_request, transactional_id)
        metadata = self.state.get(transactional_id)
        if metadata is None:
            return TransactionDescription(ErrorCode.transactional_id_not_found, transactional_id)
        with metadata.lock:
            if metadata.state is TransactionState.DEAD:
                return TransactionDescription(ErrorCode.transactional_id_not_found, transactional_id)
            return TransactionDescription(
                ErrorCode.none,
                transactional_id,
                metadata.state.state_name,
                metadata.txn_timeout_ms,
                metadata.txn_start_timestamp_ms,
                metadata.producer_id,
                metadata.producer_epoch,
                tuple(sorted(metadata.partitions)),
            )

    def list_transactions(
        self,
        producer_ids: Sequence[int] = (),
        state_names: Sequence[str] = (),
        duration_ms: int = -1,
        pattern: str | None = None,
    ) -> tuple[list[ListedTransaction], list[str]]:
        """``handleListTransactions``: the listing and the state filters that name no state.

        The pattern has RE2 syntax and matches whole ids in linear time, as Kafka's RE2J pattern
        (:mod:`kompakt.broker.client_regex`); raises
        :class:`~kompakt.broker.client_regex.RegexSyntaxError` for one RE2 rejects (the handler
        answers INVALID_REGULAR_EXPRESSION, as Kafka does).
        """
        unknown = [name for name in state_names if TransactionState.from_name(name) is None]
        states = frozenset(s for name in state_names if (s := TransactionState.from_name(name)) is not None)
        compiled = compile_regex(pattern) if pattern else None
        listed = self.state.list_transactions(
            frozenset(producer_ids), states, bool(state_names), duration_ms, compiled
        )
        return listed, unknown
