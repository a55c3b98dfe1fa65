"""Transaction awareness for one cleaning pass (Kafka's ``CleanedTransactionMetadata``).

Theory of operation. The cleaner only ever sees decided data (it never passes the LSO), so for
every transactional batch it can know whether its transaction committed or aborted:

* Known aborted transactions come from the ``.txnindex`` files of the range being cleaned, as
  ``(producer_id, first_offset, last_offset)``, kept in a heap ordered by first offset.
* Before a batch whose last offset is ``x`` is handled, every aborted transaction with
  ``first_offset <= x`` becomes "ongoing aborted" for its producer (an existing entry wins).
* A transactional data batch of a producer with an ongoing aborted transaction is discardable and
  is remembered as observed; otherwise its producer has an ongoing committed transaction.
* A control batch ends the producer's transaction. An ABORT marker is kept (and its transaction is
  re-indexed in the new segment) only while data of that transaction was observed in this pass;
  a COMMIT marker is discardable iff no batch of the transaction was observed in this pass. An
  empty control batch (already cleaned) is discardable. Discardable markers still go through the
  tombstone lifecycle: stamped with a delete horizon first, removed once it has passed.

One tracker is shared by all groups of one pass, because a transaction may span segments.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from kompakt.log.txn_index import AbortedTxn
from kompakt.records.control import ControlType


@dataclass(slots=True)
class _OngoingAborted:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


@dataclass(slots=True)
class TransactionTracker:
    """Decides which transactional batches and markers a pass may discard."""

    _pending: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)
    _ongoing_committed: set[int] = field(default_factory=set)
    _ongoing_aborted: dict[int, _OngoingAborted] = field(default_factory=dict)

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        """Queue aborted transactions found in the transaction indexes of the next segment."""
        for txn in txns:
            heapq.heappush(self._pending, (txn.first_offset, len(self._pending), txn))

    def _advance(self, last_offset: int) -> None:
        while self._pending and self._pending[0][0] <= last_offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _OngoingAborted(txn))

    def on_batch_read(self, producer_id: int, is_transactional: bool, last_offset: int) -> bool:
        """Handle a data batch; True iff it belongs to an aborted transaction (discardable)."""
        self._advance(last_offset)
        if not is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(producer_id)
        if ongoing is not None:
            ongoing.last_observed_batch_offset = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control_batch_read(
        self, producer_id: int, control_type: ControlType | int | None, last_offset: int
    ) -> tuple[bool, AbortedTxn | None]:
        """Handle a control batch.

        Returns ``(can_discard, txn_to_reindex)``: the second is the aborted transaction to append
        to the new segment's ``.txnindex`` when the marker must stay because its data was seen.
        """
        self._advance(last_offset)
        if control_type is None:
            return True, None
        if control_type == ControlType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing.last_observed_batch_offset is not None:
                return False, ongoing.txn
            return True, None
        if control_type == ControlType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False, None
            return True, None
        return False, None

    def is_aborted_producer(self, producer_id: int) -> bool:
        """True while ``producer_id`` has an ongoing aborted transaction (used by map building)."""
        return producer_id in self._ongoing_aborted
