"""``Result``: what a manager's operation returns to the coordinator (Kafka's ``CoordinatorResult``).

A manager decides; it does not write and it does not change the state the log describes. It hands
the coordinator the records its decision produced and the answer for the caller, and the
coordinator appends the records as one batch, replays them (the only place that state changes),
and then calls ``then`` with the outcome of the append. ``then`` is Kafka's ``appendFuture``: the
soft state that is not in the log (a classic member's parked JoinGroup, session timers) follows
the write there, answered with the write's error when it failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.records.schemas import GroupRecord
from kompakt.protocol.codec import ErrorCode

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Producer:
    """The transactional producer a TxnOffsetCommit batch is written for."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class Downgrade:
    """A consumer group that the records turn into a classic group (KIP-848's online downgrade):
    once they are written, the classic side gives each member the JoinGroup protocols it joined
    with (the record keeps only the chosen one), starts every member's heartbeat timer, and a
    rebalance, which tells the members to rejoin."""

    group_id: str
    protocols: Mapping[str, tuple[tuple[str, bytes], ...]]


#: Called once the records are written and replayed (None) or when the append failed (its error).
Then = Callable[[BaseException | None], None]


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    value: T
    records: Sequence[GroupRecord] = ()
    then: Then | None = None
    #: Whether ``then`` answers a failed write itself (a parked request resolved with the error,
    #: as Kafka's appendFuture does); otherwise the coordinator raises the error to the caller.
    answers_failure: bool = False
    #: Set for TxnOffsetCommit: the records go in a transactional batch of this producer.
    producer: Producer | None = None
    #: Consumer groups the records turn into classic groups.
    converted: tuple[Downgrade, ...] = ()


def append_error_code(exc: BaseException) -> ErrorCode:
    """``appendGroupMetadataErrorToResponseError``: what a failed write of group records answers."""
    code = error_code_for(exc)
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.unknown_server_error
    return code


def chain(*thens: Then | None) -> Then | None:
    """One ``then`` that runs each given one in order (None when there is none)."""
    present = [t for t in thens if t is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def run(error: BaseException | None) -> None:
        for then in present:
            then(error)

    return run
