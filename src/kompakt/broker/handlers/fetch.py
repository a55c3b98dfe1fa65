"""Fetch (1), v4–12: whole batches, Kafka's byte limits, and long polls.

Reading (Kafka's ``UnifiedLog.read`` and ``LogSegment.read``; the response as ``FetchResponse`` carries it):

* whole batches only, starting at the batch that contains ``fetch_offset``; the first batch of
  the response is returned whole even beyond the limits (KIP-74), after that a batch is included
  only when it fits both the partition's ``partition_max_bytes`` and what is left of the
  response's ``max_bytes``. Batches are never split: librdkafka stalls on a partial batch;
* the response's limit is the smaller of the request's ``max_bytes`` and the broker's
  ``fetch.max.bytes`` (55 MiB by default, as Kafka);
* every partition carries ``log_start_offset``, ``high_watermark`` and ``last_stable_offset``
  (also on OFFSET_OUT_OF_RANGE, because librdkafka resets to the cached log start offset);
* ``records`` is empty bytes, never null, on error partitions (librdkafka loops on null);
* read_committed stops at the LSO and lists aborted transactions; read_uncommitted at the HW.

Long poll: when the response would hold fewer than ``min_bytes`` and ``max_wait_ms`` > 0 (and no
partition has an error), the handler parks a waiter in ``broker.fetch_waiters`` and returns a
:class:`Deferred`. An append to any requested partition, or the broker timer at ``max_wait_ms``,
re-reads; it answers when ``min_bytes`` are readable (up to the high watermark, or the LSO for
read_committed: Kafka's ``DelayedFetch``), or at the deadline, and otherwise parks again. So an
append above the LSO of an open transaction does not answer a read_committed fetch empty (a
faust app's consumer fetched ~100 times a second that way). A fetch that raced with an append
(high watermark moved between the read and the registration) is re-read at once, so no append
is missed.

Zero copy: partitions are read with :meth:`PartitionLog.read_slice`, so large record ranges stay in
the segment files as :class:`~kompakt.log.segment.FileSlice` objects inside the response and the
server sends them from the file (``sendfile``, or a page-cache read and a write to a peer on the
same host, which is cheaper over loopback); the connection closes them once the response is written.

On the event loop: the server first runs this handler in :func:`~kompakt.log.nowait.cached_only`
mode, where every read takes page-cache data only; a read that would wait raises
:class:`~kompakt.log.nowait.WouldBlock` before anything is registered, and the server runs the
request again in a worker thread. Nothing else here depends on the thread it runs on.

Fetch sessions are declined: the answer always has session_id 0 and error NONE, which the
protocol allows and every client handles by sending full fetches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import Broker, HandlerSpec, RequestContext, TimerHandle
from kompakt.broker.deferred import Deferred
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.fetch_waiters import FetchWaiter
from kompakt.errors import KompaktError, OffsetOutOfRangeError
from kompakt.log import nowait
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import fetch as m

READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One requested partition."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    #: False when the caller may not READ the topic: answered TOPIC_AUTHORIZATION_FAILED, as
    #: Kafka answers it, without ending a long poll on the other partitions.
    authorized: bool = True


@dataclass(slots=True)
class ReadResult:
    """One pass over the requested partitions."""

    entries: list[m.PartitionData] = field(default_factory=list)
    total_bytes: int = 0
    has_error: bool = False
    #: High watermark seen per readable partition, to detect appends racing a parked fetch.
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)

    def close(self) -> None:
        """Release the file ranges of a read that will not be answered."""
        for entry in self.entries:
            records = entry.records
            if records is not None and not isinstance(records, bytes | bytearray | memoryview):
                records.close()


def _entry(
    index: int,
    code: codec.ErrorCode,
    records: bytes | memoryview | codec.FileRange = b"",
    high_watermark: int = -1,
    last_stable_offset: int = -1,
    log_start_offset: int = -1,
    aborted: list[m.AbortedTransaction] | None = None,
) -> m.PartitionData:
    return m.PartitionData(
        partition_index=index,
        error_code=code,
        high_watermark=high_watermark,
        last_stable_offset=last_stable_offset,
        log_start_offset=log_start_offset,
        aborted_transactions=aborted,
        preferred_read_replica=-1,
        records=records,
    )


def read_partitions(
    broker: Broker, wanted: Sequence[PartitionFetch], max_bytes: int, read_committed: bool
) -> ReadResult:
    """Read every requested partition once, honouring the partition and response byte limits.

    A read that cannot finish (:class:`~kompakt.log.nowait.WouldBlock` on the event loop, or any
    error) releases the file ranges it already holds before the exception leaves.
    """
    result = ReadResult()
    try:
        _read_into(result, broker, wanted, max_bytes, read_committed)
    except BaseException:
        result.close()
        raise
    return result


def _read_into(
    result: ReadResult, broker: Broker, wanted: Sequence[PartitionFetch], max_bytes: int, read_committed: bool
) -> None:
    logs = broker.logs
    remaining = max(max_bytes, 0)
    for want in wanted:
        if not want.authorized:
            result.entries.append(_entry(want.partition, codec.ErrorCode.topic_authorization_failed))
            continue
        try:
            partition_log = logs.get_log(want.topic, want.partition)
        except KompaktError as exc:
            result.entries.append(_entry(want.partition, error_code_for(exc)))
            result.has_error = True
            continue
        try:
            fetched = partition_log.read_slice(
                want.fetch_offset,
                min(max(want.max_bytes, 0), remaining),
                min_one_message=result.total_bytes == 0,
                read_committed=read_committed,
            )
        except OffsetOutOfRangeError:
            result.entries.append(
                _entry(
                    want.partition,
                    codec.ErrorCode.offset_out_of_range,
                    high_watermark=partition_log.high_watermark,
                    last_stable_offset=partition_log.last_stable_offset,
                    log_start_offset=partition_log.log_start_offset,
                )
            )
            result.has_error = True
            continue
        except KompaktError as exc:
            result.entries.append(_entry(want.partition, error_code_for(exc)))
            result.has_error = True
            continue
        size = len(fetched.records)
        result.total_bytes += size
        remaining = max(remaining - size, 0)
        result.high_watermarks[(want.topic, want.partition)] = fetched.high_watermark
        aborted = (
            [
                m.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                for t in fetched.aborted_transactions or ()
            ]
            if read_committed
            else None
        )
        result.entries.append(
            _entry(
                want.partition,
                codec.ErrorCode.none,
                fetched.records,
                fetched.high_watermark,
                fetched.last_stable_offset,
                fetched.log_start_offset,
                aborted,
            )
        )


def _requested(ctx: RequestContext, request: m.FetchRequest) -> list[PartitionFetch]:
    """The partitions asked for, each marked with whether the caller may READ its topic."""
    readable = {
        t.topic: ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.topic) for t in request.topics
    }
    return [
        PartitionFetch(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes, readable[t.topic])
        for t in request.topics
        for p in t.partitions
    ]


def _response(wanted: Sequence[PartitionFetch], read: ReadResult) -> m.FetchResponse:
    responses: list[m.FetchableTopicResponse] = []
    partitions: list[m.PartitionData] = []
    for want, entry in zip(wanted, read.entries, strict=True):
        if not responses or responses[-1].topic != want.topic:
            partitions = []
            responses.append(m.FetchableTopicResponse(topic=want.topic, partitions=partitions))
        partitions.append(entry)
    return m.FetchResponse(error_code=codec.ErrorCode.none, session_id=0, responses=responses)


def handle(ctx: RequestContext, request: m.FetchRequest) -> m.FetchResponse | Deferred[m.FetchResponse]:
    broker = ctx.broker
    wanted = _requested(ctx, request)
    max_bytes = min(request.max_bytes, broker.broker_config.fetch_max_bytes)  # Kafka's rule
    read_committed = request.isolation_level == READ_COMMITTED
    min_bytes = request.min_bytes
    max_wait_ms = codec.duration_ms(request.max_wait)

    first = read_partitions(broker, wanted, max_bytes, read_committed)
    if (
        first.total_bytes >= min_bytes
        or max_wait_ms <= 0
        or first.has_error
        or not any(w.authorized for w in wanted)
    ):
        return _response(wanted, first)
    first.close()

    return _LongPoll(broker, wanted, max_bytes, read_committed, min_bytes).start(first, max_wait_ms)


class _LongPoll:
    """A parked fetch: answered exactly once, by the deadline or by an append that makes
    ``min_bytes`` readable.

    Kafka's DelayedFetch completes early only once ``min_bytes`` are readable: up to the high
    watermark, or up to the LSO for read_committed. An append above the LSO (a transaction still
    open) leaves the fetch parked until its max_wait, as on Kafka, instead of answering it empty
    and having the client fetch again at once.
    """

    def __init__(
        self,
        broker: Broker,
        wanted: list[PartitionFetch],
        max_bytes: int,
        read_committed: bool,
        min_bytes: int,
    ) -> None:
        self.broker = broker
        self.wanted = wanted
        self.max_bytes = max_bytes
        self.read_committed = read_committed
        self.min_bytes = min_bytes
        self.deferred: Deferred[m.FetchResponse] = Deferred()
        self.timers: list[TimerHandle] = []
        self.parked: list[FetchWaiter] = []  # the waiter registered now (a woken fetch parks again)
        self.answered = False
        self._guard = threading.Lock()

    def start(self, first: ReadResult, max_wait_ms: int) -> Deferred[m.FetchResponse]:
        self.timers.append(self.broker.timer_service.call_later(max_wait_ms, lambda: self.answer(None)))
        self.park(first)
        return self.deferred

    def read(self) -> ReadResult:
        return read_partitions(self.broker, self.wanted, self.max_bytes, self.read_committed)

    def answer(self, read: ReadResult | None) -> None:
        """Resolve the fetch exactly once, with ``read`` or a fresh read."""
        with self._guard:
            if self.answered:
                if read is not None:
                    read.close()
                return
            self.answered = True
        for waiter in self.parked:
            self.broker.fetch_waiters.unregister(waiter)
        for handle_ in self.timers:
            handle_.cancel()
        try:
            self.deferred.resolve(_response(self.wanted, read if read is not None else self.read()))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting connection
            self.deferred.fail(exc)

    def on_append(self) -> None:
        if self.answered:
            return
        if self.broker.fetch_waiters.closing:
            self.answer(None)
            return
        try:
            again = self.read()
        except Exception:  # noqa: BLE001 - answer() reads again and hands the failure on
            self.answer(None)
            return
        if again.total_bytes >= self.min_bytes or again.has_error:
            self.answer(again)
            return
        again.close()
        self.park(again)

    @staticmethod
    def _wake(waiter: FetchWaiter) -> Callable[[], None]:
        def wake() -> None:
            waiter.fire()

        return wake

    def park(self, read: ReadResult) -> None:
        waiters = self.broker.fetch_waiters
        waiter = FetchWaiter({(w.topic, w.partition) for w in self.wanted if w.authorized}, self.on_append)
        with self._guard:
            if self.answered:
                return
            self.parked[:] = [waiter]
        waiters.register(waiter)
        if waiters.closing:
            waiters.unregister(waiter)
            if nowait.active():
                self.broker.timer_service.call_later(0, lambda: self.answer(None))
            else:
                self.answer(None)
        elif self.answered:  # the deadline passed while registering
            waiters.unregister(waiter)
        elif _moved(self.broker, read):  # an append between the read and the registration
            waiters.unregister(waiter)
            if nowait.active():
                # Tried on the event loop: the re-read may need the disk, so it runs where the
                # timers run theirs (a worker thread), at once.
                self.broker.timer_service.call_later(0, self._wake(waiter))
            else:
                waiter.fire()


def _moved(broker: Broker, read: ReadResult) -> bool:
    """Whether any partition's high watermark moved since ``read`` (an append we might have missed)."""
    logs = broker.logs
    for (topic, partition), hw in read.high_watermarks.items():
        try:
            if logs.get_log(topic, partition).high_watermark != hw:
                return True
        except KompaktError:
            return True
    return False


SPEC = HandlerSpec(ApiKey.FETCH, 4, 12, handle, blocking=True, try_cached=True)
