"""One transactional id's coordinator state and its transitions (Kafka's TransactionMetadata).

A transition is two-phase, as in Kafka: ``prepare_*`` checks that the move is legal from the
current state, sets ``pending_state`` and returns a :class:`TxnTransitMetadata` (the would-be new
state); the caller appends it to ``__transaction_state`` and only then calls
:meth:`TransactionMetadata.complete_transition`, which installs it. A failed append clears
``pending_state`` and leaves the old state in force, so the cache never gets ahead of the log.

Both of Kafka 4.1's transaction versions are here, chosen per transition by the version the
client spoke (``client_transaction_version``, which is also persisted): with version 0/1 ("TV1",
KIP-98/KIP-447 with KIP-890 part 1) an epoch changes only on InitProducerId, on fencing and on a
timeout abort; with version 2 (KIP-890 part 2) every commit and abort bumps the epoch, and when
the bump would exhaust it the transaction completes under a new producer id
(``next_producer_id``), so a zombie's late write can never join the next transaction.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field, replace
from typing import Final

#: Kafka rotates to a new producer id once the epoch reaches Short.MAX_VALUE - 1.
MAX_EPOCH: Final = 32767
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
#: Kafka's ``TransactionVersion`` levels: 2 bumps the epoch on every commit and abort.
TV_0: Final = 0
TV_1: Final = 1
TV_2: Final = 2


def supports_epoch_bump(transaction_version: int) -> bool:
    """``TransactionVersion.supportsEpochBump``."""
    return transaction_version >= TV_2


class TransactionState(enum.Enum):
    """Kafka's ``TransactionState``: (id in the log, name in DescribeTransactions, may expire)."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    @property
    def id(self) -> int:
        return int(self.value[0])

    @property
    def state_name(self) -> str:
        return str(self.value[1])

    @property
    def expiration_allowed(self) -> bool:
        return bool(self.value[2])

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state in cls:
            if state.state_name == name:
                return state
        return None


_S = TransactionState
#: ``TransactionState.VALID_PREVIOUS_STATES``.
VALID_PREVIOUS_STATES: Final[dict[TransactionState, frozenset[TransactionState]]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client's doing."""


def is_epoch_exhausted(epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a transition would install (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    client_transaction_version: int = TV_0


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    """What the coordinator knows about one transactional id. Guard with :attr:`lock`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: The transaction version of the client's last transition (Kafka persists it too).
    client_transaction_version: int = TV_0
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False
    #: Held for a whole coordinator operation on this id, including its log appends, and by a
    #: transactional produce from its verification through its append (KIP-890 part 1's
    #: guarantee: no data lands in a partition after the transaction left Ongoing).
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # ---- transitions (``prepare*``) -------------------------------------------------------

    def _transit(self, state: TransactionState, **changes: object) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing a transition to {state.state_name} while "
                f"{self.pending_state.state_name} is pending"
            )
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.state_name} cannot move to {state.state_name}"
            )
        base = TxnTransitMetadata(
            producer_id=self.producer_id,
            prev_producer_id=self.producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms,
            state=state,
            partitions=frozenset(self.partitions),
            txn_start_timestamp_ms=self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=self.txn_last_update_timestamp_ms,
            client_transaction_version=self.client_transaction_version,
        )
        transit = replace(base, **changes)  # type: ignore[arg-type]
        if transit.producer_id < 0:
            raise IllegalTransitionError(
                f"{self.transactional_id}: illegal producer id {transit.producer_id}"
            )
        if state is not TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal epoch {transit.producer_epoch}")
        self.pending_state = state
        return transit

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the current producer before aborting its transaction."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence an epoch of Short.MAX_VALUE")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._transit(
            TransactionState.PREPARE_EPOCH_FENCE, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | None:
        """InitProducerId: a new epoch (None when ``expected_epoch`` says the caller is fenced)."""
        if is_epoch_exhausted(self.producer_epoch):
            raise IllegalTransitionError(f"{self.transactional_id}: no producer epochs left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a bump we made
        else:
            return None
        return self._transit(
            TransactionState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp_ms=-1,
            txn_last_update_timestamp_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId once the epoch is exhausted: a new producer id at epoch 0."""
        return self._transit(
            TransactionState.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp_ms=-1,
            txn_last_update_timestamp_ms=now_ms,
        )

    def prepare_add_partitions(
        self, added: frozenset[tuple[str, int]], now_ms: int, client_transaction_version: int = TV_0
    ) -> TxnTransitMetadata:
        """Ongoing with ``added``; the version is the request's (a client's AddPartitionsToTxn or
        AddOffsetsToTxn: 0; a TV2 Produce or TxnOffsetCommit adding its partition: 2)."""
        starts = self.state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
        )
        return self._transit(
            TransactionState.ONGOING,
            partitions=frozenset(self.partitions) | added,
            txn_start_timestamp_ms=now_ms if starts else self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        state: TransactionState,
        now_ms: int,
        client_transaction_version: int = TV_0,
        next_producer_id: int = NO_PRODUCER_ID,
        no_partition_added: bool = False,
    ) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort; with TV2 the epoch is bumped here (``prepareAbortOrCommit``).

        A TV2 abort may come from Empty or Complete* (no partition was added): the transaction's
        start time is then the update time, as Kafka sets it.
        """
        if supports_epoch_bump(client_transaction_version):
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(
            state,
            next_producer_id=next_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_start_timestamp_ms=now_ms if no_partition_added else self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        state = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        self.has_failed_epoch_fence = False
        # TV2 epoch overflow: the markers went out at epoch Short.MAX_VALUE; the transaction
        # completes under the producer id allocated at PrepareCommit/PrepareAbort, at epoch 0
        # (last_producer_epoch stays MAX - 1, the last epoch the client saw).
        rotate = (
            supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID
        )
        return self._transit(
            state,
            producer_id=self.next_producer_id if rotate else self.producer_id,
            producer_epoch=0 if rotate else self.producer_epoch,
            next_producer_id=NO_PRODUCER_ID,
            partitions=frozenset(),
            txn_last_update_timestamp_ms=now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._transit(TransactionState.DEAD, partitions=frozenset())

    # ---- installing a transition -------------------------------------------------------------

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Install ``transit`` after it was appended (``completeTransitionTo``)."""
        if self.pending_state is None or self.pending_state is not transit.state:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing {transit.state.state_name} but pending is "
                f"{self.pending_state.state_name if self.pending_state else None}"
            )
        if transit.state is TransactionState.DEAD:
            raise IllegalTransitionError(
                f"{self.transactional_id}: a Dead transition is completed by removal"
            )
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = transit.state

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)
