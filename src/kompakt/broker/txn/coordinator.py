"""The transaction coordinator (Kafka's TransactionCoordinator, KIP-98, KIP-447, KIP-890 part 1).

Each handler method runs one transactional id's operation under that id's metadata lock,
including the ``__transaction_state`` append and, for EndTxn, the markers: operations on one id
are serial, different ids run in parallel. Results are Kafka error codes; what a handler does
with them (per-partition answers, version-dependent translations) is the handler's business.

Behaviour follows Kafka 4.1, both transaction versions: a client speaking EndTxn v5 runs
transactions version 2 (KIP-890 part 2: every commit and abort bumps the epoch, which EndTxn
answers with, and rolls over to a new producer id when the epoch is exhausted; a Produce v12 or
TxnOffsetCommit v5 adds its partition to the transaction itself); older requests run version 1.
Fencing and timeout aborts, which no client asks for, follow the broker's finalized
``transaction.version`` (``TxnConfig.transaction_version``), as Kafka's do:

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
from dataclasses import dataclass, replace

from kompakt.broker.client_regex import compile_regex
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.txn.features import TRANSACTION_VERSION, load_levels, save_levels
from kompakt.broker.txn.markers import TransactionMarkerChannelManager
from kompakt.broker.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
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
class EndTxnResult:
    """EndTxn's answer; v5 carries the producer id and epoch the client continues with."""

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
        self._logs = log_manager
        self.config = config or TxnConfig()
        #: ApiVersions' finalized-features epoch. Kafka's is the metadata offset of the last
        #: change; a client ignores a feature list whose epoch is not above one it has seen, so
        #: it must grow with every change, across restarts too: the wall clock at start-up and at
        #: each change does that without a file of its own.
        self.features_epoch = clock.now_ms()
        self.producer_ids = producer_ids
        self.state = TransactionStateManager(log_manager, clock, self.config)
        self.markers = TransactionMarkerChannelManager(log_manager, clock, self.state)

    # ---- start-up --------------------------------------------------------------------------------

    # ---- the transaction.version feature ------------------------------------------------------

    @property
    def transaction_version(self) -> int:
        """The finalized ``transaction.version`` (ApiVersions advertises it)."""
        return self.config.transaction_version

    def finalize_transaction_version(self, level: int, persist: bool = True) -> None:
        """Install a new finalized level (an UpdateFeatures), persisted first so a restart keeps it.

        Transactions in flight are not touched: a client's version is the one its requests
        speak; the level decides what new clients choose and how fences and timeouts abort.
        """
        if persist:
            levels = load_levels(self._logs.data_dir)
            levels[TRANSACTION_VERSION] = level
            save_levels(self._logs.data_dir, levels)
        self.config = replace(self.config, transaction_version=level)
        self.state.config = self.config
        self.features_epoch = max(self.features_epoch + 1, self.clock.now_ms())
        log.info("Finalized %s %d", TRANSACTION_VERSION, level)

    def load(self) -> None:
        """Load ``__transaction_state`` and finish the transactions that were decided.

        A ``transaction.version`` changed by UpdateFeatures (persisted in the data directory)
        replaces the configured one first.
        """
        persisted = load_levels(self._logs.data_dir).get(TRANSACTION_VERSION)
        if persisted is not None and persisted != self.config.transaction_version:
            log.info(
                "%s is %d (set by UpdateFeatures), not the configured %d",
                TRANSACTION_VERSION,
                persisted,
                self.config.transaction_version,
            )
            self.finalize_transaction_version(persisted, persist=False)
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
                error = self._end_locked(
                    metadata,
                    result.producer_id,
                    result.producer_epoch,
                    commit=False,
                    from_client=False,
                    client_transaction_version=self.config.transaction_version,
                ).error
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
        client_transaction_version: int = TV_0,
    ) -> ErrorCode:
        """``handleAddPartitionsToTransaction`` (version 0 for a client's request, 2 for a TV2
        producer's partition added by its Produce or TxnOffsetCommit)."""
        if not transactional_id:
            return ErrorCode.invalid_request
        metadata = self.state.get(transactional_id)
        if metadata is None:
            return ErrorCode.invalid_producer_id_mapping
        with metadata.lock:
            return self._add_partitions_locked(
                metadata, producer_id, producer_epoch, frozenset(partitions), client_transaction_version
            )

    def _add_partitions_locked(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        wanted: frozenset[TopicPartition],
        client_transaction_version: int,
    ) -> ErrorCode:
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
        return self._append(
            metadata, metadata.prepare_add_partitions(wanted, self.clock.now_ms(), client_transaction_version)
        )

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
        add: bool = False,
    ) -> Iterator[dict[TopicPartition, ErrorCode]]:
        """Verify that ``partitions`` are in the Ongoing transaction, holding its lock meanwhile.

        KIP-890 part 1: a transactional produce appends inside this block, so no data can land
        in a partition after its transaction left Ongoing (a late or retried batch of an aborted
        transaction would otherwise leave a transaction hanging there, pinning the LSO).
        With ``add`` (a TV2 client's Produce v12+ or TxnOffsetCommit v5+, KIP-890 part 2) the
        partitions are added to the transaction instead, as Kafka's AddPartitionsToTxnManager
        does for them with a non-verify-only AddPartitionsToTxn.
        """
        if not transactional_id:
            yield dict.fromkeys(partitions, ErrorCode.invalid_request)
            return
        metadata = self.state.get(transactional_id)
        if metadata is None:
            yield dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
            return
        with metadata.lock:
            if add:
                added = self._add_partitions_locked(
                    metadata, producer_id, producer_epoch, frozenset(partitions), TV_2
                )
                yield dict.fromkeys(partitions, added)
                return
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
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int = TV_0,
    ) -> ErrorCode:
        """``handleEndTransaction`` from a client; the error only (see :meth:`end_transaction_result`)."""
        return self.end_transaction_result(
            transactional_id, producer_id, producer_epoch, commit, client_transaction_version
        ).error

    def end_transaction_result(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int = TV_0,
    ) -> EndTxnResult:
        """``handleEndTransaction`` from a client: EndTxn v5 is version 2, older ones version 0."""
        if not transactional_id:
            return EndTxnResult(ErrorCode.invalid_request)
        metadata = self.state.get(transactional_id)
        if metadata is None:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        with metadata.lock:
            return self._end_locked(
                metadata, producer_id, producer_epoch, commit, True, client_transaction_version
            )

    def _end_locked(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        client_transaction_version: int,
    ) -> EndTxnResult:
        """``endTransaction``: version 2 bumps the epoch, older versions go the TV1 way."""
        if supports_epoch_bump(client_transaction_version):
            return self._end_transaction_v2_locked(metadata, producer_id, producer_epoch, commit, from_client)
        error = self._end_transaction_locked(metadata, producer_id, producer_epoch, commit, from_client)
        return EndTxnResult(error)

    def _end_transaction_v2_locked(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
    ) -> EndTxnResult:
        """Kafka 4.1's ``endTransaction`` for transactions version 2.

        The epoch in the request is the one the transaction ran at; PrepareCommit/PrepareAbort
        carries epoch + 1, the markers go out at that epoch, and EndTxn answers with it (or with a
        new producer id at epoch 0 once the epoch is exhausted). A retry is recognised by the
        bumped epoch (or the rollover), since the same epoch now means "the next transaction".
        """
        state = metadata.state
        fence = metadata.pending_state is TransactionState.PREPARE_EPOCH_FENCE
        retry_on_overflow = (
            not fence
            and metadata.prev_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and metadata.producer_epoch == 0
        )
        retry_on_bump = not fence and metadata.producer_epoch == producer_epoch + 1
        if fence:
            valid_epoch = (
                not from_client or producer_epoch == metadata.producer_epoch
            ) and producer_epoch >= metadata.producer_epoch
        elif state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if metadata.pending_state not in (None, TransactionState.PREPARE_EPOCH_FENCE):
            return EndTxnResult(ErrorCode.concurrent_transactions)
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        if not valid_epoch:
            return EndTxnResult(ErrorCode.producer_fenced)
        current = EndTxnResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
        if state is TransactionState.ONGOING:
            target = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
            return self._complete_v2(metadata, target, fence, no_partition_added=False)
        if state is TransactionState.COMPLETE_COMMIT:
            if commit:
                return current if is_retry else self._invalid_v2(metadata, commit)
            return (
                self._invalid_v2(metadata, commit)
                if is_retry
                else self._complete_v2(metadata, TransactionState.PREPARE_ABORT, fence, True)
            )
        if state is TransactionState.COMPLETE_ABORT:
            if not commit:
                return (
                    current
                    if is_retry
                    else self._complete_v2(metadata, TransactionState.PREPARE_ABORT, fence, True)
                )
            return self._invalid_v2(metadata, commit)
        if state is TransactionState.PREPARE_COMMIT:
            return (
                EndTxnResult(ErrorCode.concurrent_transactions)
                if commit
                else self._invalid_v2(metadata, commit)
            )
        if state is TransactionState.PREPARE_ABORT:
            return (
                EndTxnResult(ErrorCode.concurrent_transactions)
                if not commit
                else self._invalid_v2(metadata, commit)
            )
        if state is TransactionState.EMPTY:
            return (
                self._invalid_v2(metadata, commit)
                if commit
                else self._complete_v2(metadata, TransactionState.PREPARE_ABORT, fence, True)
            )
        raise IllegalTransitionError(f"{metadata.transactional_id} is {state.state_name} in the cache")

    def _invalid_v2(self, metadata: TransactionMetadata, commit: bool) -> EndTxnResult:
        return EndTxnResult(self._invalid_transition(metadata, commit))

    def _complete_v2(
        self, metadata: TransactionMetadata, target: TransactionState, fence: bool, no_partition_added: bool
    ) -> EndTxnResult:
        """PrepareCommit/PrepareAbort with the bumped epoch, the markers, then Complete*."""
        next_producer_id = NO_PRODUCER_ID
        if not fence and metadata.is_producer_epoch_exhausted:
            try:
                next_producer_id = self.producer_ids.next_id()
            except OSError as exc:
                log.error("Cannot allocate a producer id for %r: %s", metadata.transactional_id, exc)
                return EndTxnResult(ErrorCode.coordinator_not_available)
        if fence:
            # The fence's own bump is dropped: with version 2 PrepareAbort bumps the epoch itself.
            metadata.pending_state = None
        transit = metadata.prepare_abort_or_commit(
            target, self.clock.now_ms(), TV_2, next_producer_id, no_partition_added
        )
        error = self._append(metadata, transit)
        if error is not ErrorCode.none:
            return EndTxnResult(error)
        if next_producer_id != NO_PRODUCER_ID:
            answer = EndTxnResult(ErrorCode.none, next_producer_id, 0)
        else:
            answer = EndTxnResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
        self.markers.complete(metadata)
        return answer

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
                error = self._end_locked(
                    metadata,
                    transit.producer_id,
                    transit.producer_epoch,
                    commit=False,
                    from_client=False,
                    client_transaction_version=self.config.transaction_version,
                ).error
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
