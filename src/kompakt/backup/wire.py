"""The backup's data path on the wire: Fetch into a backup, Produce out of one, raw batches both ways.

A consumer and a producer decode and re-encode every record (a Python object each, through
confluent-kafka): that was most of a backup's and a restore's time. Here the batches go between
the cluster and the backup's files as bytes, over kompakt's own bounds-checked connection
(:mod:`kompakt.protocol.client`):

* :class:`Cluster` finds each partition's leader (Metadata) and opens connections to it; answers
  that say the leader moved (NOT_LEADER_OR_FOLLOWER and the like) make it look again;
* :func:`fetch` sends one ``read_committed`` Fetch for several partitions of one leader, as a
  ``read_committed`` consumer does: the answer stops at the last stable offset and lists the
  aborted transactions (:mod:`kompakt.backup.batches` leaves their batches out);
* :class:`PartitionProducer` writes one partition's batches in order with up to five requests in
  flight, as one idempotent producer (InitProducerId, then each batch under that producer id with
  the partition's next sequence), so a batch sent again after a leader change or a timeout is
  written once. With ``produce_acks`` 0 or 1 there is no idempotence and one request in flight.

Plaintext only, like the rest of kompakt's own client: a cluster that needs TLS or SASL is read and
written through confluent-kafka (the record-by-record path).
"""

from __future__ import annotations

import mmap
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kompakt.backup.errors import BackupError
from kompakt.errors import KompaktError
from kompakt.protocol import client, codec

PRODUCE, FETCH, METADATA, INIT_PRODUCER_ID = 0, 1, 3, 22
READ_COMMITTED: Final = 1
#: Answers after which a client looks up the leader again and retries (Kafka's retriable errors of
#: a partition).
RETRIABLE: Final = frozenset(
    {
        "not_leader_or_follower",
        "leader_not_available",
        "fenced_leader_epoch",
        "unknown_leader_epoch",
        "replica_not_available",
        "kafka_storage_error",
        "request_timed_out",
        "not_enough_replicas",
        "not_enough_replicas_after_append",
        "unknown_topic_or_partition",
        "network_exception",
        "coordinator_load_in_progress",
        "coordinator_not_available",
        "not_coordinator",
        "throttling_quota_exceeded",
    }
)
BACKOFF_S: Final = 0.1
_CLIENT_ID: Final = "kompakt-backup"


def plaintext(client_config: Mapping[str, str]) -> bool:
    """Whether kompakt's own (plaintext) connection can reach a cluster with these client settings."""
    protocol = str(client_config.get("security.protocol", "plaintext")).strip().lower()
    return protocol == "plaintext" and not any(k.startswith(("sasl.", "ssl.")) for k in client_config)


Address = tuple[str, int]


class Cluster:
    """Where each partition's leader is, and connections to it."""

    def __init__(self, bootstrap: str, timeout_s: float, *, max_response_bytes: int) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._leaders: dict[tuple[str, int], Address] = {}

    def connect(self, address: Address) -> client.Connection:
        try:
            return client.Connection(
                *address,
                self.timeout_s,
                client_id=_CLIENT_ID,
                max_response_bytes=self.max_response_bytes,
            )
        except client.WireError as exc:
            raise BackupError(str(exc)) from None

    def _any(self) -> client.Connection:
        errors = []
        for address in client.bootstrap_hosts(self.bootstrap, BackupError):
            try:
                return self.connect(address)
            except BackupError as exc:
                errors.append(str(exc))
        raise BackupError("; ".join(errors) or f"no bootstrap server in {self.bootstrap!r}")

    def refresh(self, topics: Iterable[str]) -> None:
        """Read the leaders of every partition of ``topics`` (one Metadata request)."""
        names = sorted(set(topics))
        with self._any() as conn:
            version = _version(conn, METADATA, range(1, 13))
            answer = _call(
                conn,
                METADATA,
                version,
                {
                    "topics": [{"name": n} for n in names],
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                },
            )
        brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in answer.brokers}
        for topic in answer.topics:
            if topic.error_code != codec.ErrorCode.none:
                continue
            for p in topic.partitions:
                leader = brokers.get(int(p.leader_id))
                if leader is not None and p.error_code == codec.ErrorCode.none:
                    self._leaders[(str(topic.name), int(p.partition_index))] = leader
                else:
                    self._leaders.pop((str(topic.name), int(p.partition_index)), None)

    def leader(self, topic: str, partition: int) -> Address | None:
        return self._leaders.get((topic, partition))

    def forget(self, topic: str, partition: int) -> None:
        """The leader answered that it is not (or no longer) the leader: look it up again."""
        self._leaders.pop((topic, partition), None)

    def init_producer_id(self, deadline: float) -> tuple[int, int]:
        """A producer id and epoch for an idempotent producer (InitProducerId without a
        transactional id, which any broker answers)."""
        while True:
            with self._any() as conn:
                version = _version(conn, INIT_PRODUCER_ID, range(0, 6))
                answer = _call(
                    conn,
                    INIT_PRODUCER_ID,
                    version,
                    {
                        "transactional_id": None,
                        "transaction_timeout": 60_000,
                        "producer_id": -1,
                        "producer_epoch": -1,
                    },
                )
            name = answer.error_code.name
            if answer.error_code == codec.ErrorCode.none:
                return int(answer.producer_id), int(answer.producer_epoch)
            if name not in RETRIABLE or time.monotonic() >= deadline:
                raise BackupError(f"InitProducerId at {self.bootstrap}: {name.upper()}")
            time.sleep(BACKOFF_S)


def _version(conn: client.Connection, api_key: int, ours: range) -> int:
    try:
        return conn.version(api_key, ours)
    except client.WireError as exc:
        raise BackupError(str(exc)) from None


def _call(conn: client.Connection, api_key: int, version: int, values: Mapping[str, object]) -> Any:
    try:
        return conn.call(api_key, version, values, zero_fill=True)
    except client.WireError as exc:
        raise BackupError(str(exc)) from None


@dataclass
class FetchPartition:
    """One partition's part of a Fetch answer."""

    topic: str
    partition: int
    error: str
    """Kafka's error name, ``none`` when the records are there."""
    records: memoryview
    """A view of the answer's frame (valid while it is held; the buffer is not reused before)."""
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]
    """``(producer id, first offset)`` of the aborted transactions the records overlap."""


@dataclass
class _Answer:
    """A Fetch answer being read by a thread of its own (:func:`receive_ahead`)."""

    correlation: int
    done: threading.Event = field(default_factory=threading.Event)
    parts: list[FetchPartition] | None = None
    error: BaseException | None = None


@dataclass
class Fetcher:
    """One connection to one leader and the Fetch version agreed on it."""

    conn: client.Connection
    version: int
    frames: _Frames = field(default_factory=lambda: _Frames())
    """The buffers its answers are read into."""
    inflight: tuple[int, dict[tuple[str, int], int]] | None = None
    """A Fetch sent and not yet read: its correlation id and the positions it asked for."""
    reading: _Answer | None = None
    """The answer a thread is reading ahead, if one is."""


def open_fetcher(cluster: Cluster, address: Address) -> Fetcher:
    conn = cluster.connect(address)
    try:
        return Fetcher(conn, _version(conn, FETCH, range(4, 13)))
    except BaseException:
        conn.close()
        raise


def close_fetcher(fetcher: Fetcher) -> None:
    """Close the connection; a thread reading ahead on it gets an error at once (a shutdown
    wakes a blocked ``recv``, a close alone does not) and is not waited for."""
    fetcher.conn.abort()
    fetcher.reading = None


def receive_ahead(fetcher: Fetcher, correlation: int, max_wait_ms: int) -> None:
    """Read the answer to ``correlation`` on a thread of its own while the caller stores the
    previous answer; :func:`receive_fetch` hands it over.

    Sending the next Fetch before storing an answer is not enough on its own: the broker can
    only send as much of the next answer as the socket buffers hold (a few hundred KiB) until
    someone reads, so a partition alternated between waiting for the network and storing (each
    about half of its time). A reader per connection keeps both going; the connection is only
    ever used by one thread at a time (the next Fetch is sent after this answer is taken)."""
    answer = _Answer(correlation)

    def read() -> None:
        try:
            answer.parts = _receive(fetcher, correlation, max_wait_ms)
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that takes the answer
            answer.error = exc
        finally:
            answer.done.set()

    fetcher.reading = answer
    threading.Thread(target=read, name="kompakt-backup-read", daemon=True).start()


def send_fetch(
    fetcher: Fetcher,
    positions: Mapping[tuple[str, int], int],
    *,
    max_wait_ms: int,
    max_bytes: int,
    partition_max_bytes: Mapping[tuple[str, int], int],
) -> int:
    """Send a ``read_committed`` Fetch of ``positions`` (topic, partition -> offset); returns the
    correlation id for :func:`receive_fetch`."""
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), offset in positions.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition": partition,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes[(topic, partition)],
            }
        )
    values = {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": READ_COMMITTED,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    try:
        return fetcher.conn.send(FETCH, fetcher.version, values, zero_fill=True)
    except client.WireError as exc:
        raise BackupError(str(exc)) from None


def receive_fetch(fetcher: Fetcher, correlation: int, max_wait_ms: int) -> list[FetchPartition]:
    """The answer to ``correlation``: the one read ahead when it is that one, else read now."""
    reading, fetcher.reading = fetcher.reading, None
    if reading is not None:
        reading.done.wait()
        if reading.error is not None:
            raise reading.error
        if reading.correlation == correlation and reading.parts is not None:
            return reading.parts
    return _receive(fetcher, correlation, max_wait_ms)


def _receive(fetcher: Fetcher, correlation: int, max_wait_ms: int) -> list[FetchPartition]:
    try:
        frame = fetcher.conn.receive_frame("Fetch", wait_s=max_wait_ms / 1000, buffer=fetcher.frames.take)
    except client.WireError as exc:
        raise BackupError(str(exc)) from None
    address = fetcher.conn.address
    try:
        codec.response_checker(FETCH, fetcher.version).check(frame)
        answered, error, parts = _read_fetch(frame, fetcher.version)
    except (KompaktError, struct.error, IndexError, ValueError) as exc:
        raise BackupError(f"{address}: cannot decode Fetch v{fetcher.version} response: {exc}") from None
    if answered != correlation:
        raise BackupError(f"{address} answered correlation id {answered}, not {correlation}")
    if error != "none":
        raise BackupError(f"Fetch at {address}: {error.upper()}")
    return parts


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error code, high watermark, last stable offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # and the log start offset
_ABORTED = struct.Struct(">qq")


def _error_name(code: int) -> str:
    try:
        return codec.ErrorCode(code).name
    except ValueError:
        return f"unknown_error_code_{code}"


def _read_fetch(frame: memoryview, version: int) -> tuple[int, str, list[FetchPartition]]:
    """``(correlation id, error name, partitions)`` of a Fetch response frame (v4 to v12) whose
    lengths :func:`kompakt.protocol.codec.response_checker` has checked.

    kio decodes each partition's records into a ``bytes`` of their own: a copy of every byte
    the backup reads, into memory that is new each time (page faults cost more than the copy).
    Here the records are views of the frame, which the backup writes from directly; the frame's
    buffer is used again once no view of it is left (:class:`_Frames`). Only the fields Fetch v4
    to v12 have are read; tagged fields are skipped.
    """
    flexible = version >= 12
    pos = 0
    (correlation,) = _I32.unpack_from(frame, pos)
    pos += 4
    if flexible:
        pos = _skip_tags(frame, pos)
    pos += 4  # throttle time
    error = 0
    if version >= 7:
        (error,) = _I16.unpack_from(frame, pos)
        pos += 6  # error code, session id
    parts: list[FetchPartition] = []
    topics, pos = _count(frame, pos, flexible)
    for _ in range(max(topics, 0)):
        if flexible:
            size, pos = _uvarint(frame, pos)
            size -= 1
        else:
            (size,) = _I16.unpack_from(frame, pos)
            pos += 2
        topic = bytes(frame[pos : pos + size]).decode()
        pos += size
        partitions, pos = _count(frame, pos, flexible)
        for _ in range(max(partitions, 0)):
            if version >= 5:
                index, code, high, stable, start = _PARTITION_V5.unpack_from(frame, pos)
                pos += _PARTITION_V5.size
            else:
                index, code, high, stable = _PARTITION_V4.unpack_from(frame, pos)
                start = -1
                pos += _PARTITION_V4.size
            aborted: list[tuple[int, int]] = []
            count, pos = _count(frame, pos, flexible)
            for _ in range(max(count, 0)):
                producer, first = _ABORTED.unpack_from(frame, pos)
                aborted.append((producer, first))
                pos += 16
                if flexible:
                    pos = _skip_tags(frame, pos)
            if version >= 11:
                pos += 4  # preferred read replica
            if flexible:
                size, pos = _uvarint(frame, pos)
                size -= 1
            else:
                (size,) = _I32.unpack_from(frame, pos)
                pos += 4
            records = frame[pos : pos + max(size, 0)]
            pos += max(size, 0)
            if flexible:
                pos = _skip_tags(frame, pos)
            parts.append(
                FetchPartition(topic, index, _error_name(code), records, high, stable, start, aborted)
            )
        if flexible:
            pos = _skip_tags(frame, pos)
    return correlation, _error_name(error), parts


def _uvarint(frame: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError(f"varint longer than five bytes at position {pos}")


def _count(frame: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1 for null)."""
    if flexible:
        count, pos = _uvarint(frame, pos)
        return count - 1, pos
    (count,) = _I32.unpack_from(frame, pos)
    return count, pos + 4


def _skip_tags(frame: memoryview, pos: int) -> int:
    count, pos = _uvarint(frame, pos)
    for _ in range(count):
        _, pos = _uvarint(frame, pos)
        size, pos = _uvarint(frame, pos)
        pos += size
    return pos


class _Frames:
    """A connection's receive buffers, each used again once nothing holds a view of it.

    A backup reads many Fetch answers of up to ``partition_max_bytes`` each, and new memory costs
    more than the copy into it: a ``bytearray`` of that size is zeroed by ``memset`` with the GIL
    held, page fault by page fault (about 0.6 ms per MB on the development machine, against
    0.15 ms for a copy into memory already mapped), which stalled every other thread of the
    backup, and a large NumPy array asks for huge pages, whose first touch can wait for the kernel
    to compact memory. So a buffer is a private anonymous ``mmap`` (its pages are mapped as
    ``recv_into`` first writes them, without the GIL), taken again only when no view of it is
    alive (:func:`_unshared`). An answer still being stored, or one whose views a storage keeps
    until it puts the object (S3), is never overwritten: a new buffer is made instead."""

    KEEP: Final = 3

    def __init__(self) -> None:
        self._buffers: list[mmap.mmap] = []

    def take(self, size: int) -> mmap.mmap:
        for buffer in self._buffers:
            if len(buffer) >= size and _unshared(buffer):
                return buffer
        buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
        self._buffers.append(buffer)
        if len(self._buffers) > self.KEEP:
            # Forget the smallest other one (a buffer still viewed lives on until its views go).
            del self._buffers[min(range(len(self._buffers) - 1), key=lambda i: len(self._buffers[i]))]
        return buffer


def _unshared(buffer: mmap.mmap) -> bool:
    """Whether no view of ``buffer`` is alive: an mmap counts the buffers it has exported and
    refuses to resize while any is (``BufferError``, checked before anything else), so a resize to
    its own size tells exactly. (A reference count would not: Python 3.14 borrows some.) Any
    other refusal (a platform without ``mremap``) counts as shared: a new buffer is made."""
    try:
        buffer.resize(len(buffer))
    except (BufferError, OSError, SystemError, TypeError, ValueError):
        return False
    return True


@dataclass
class _InFlight:
    correlation: int
    batch: bytearray
    records: int
    on_done: Callable[[int], None] | None


@dataclass
class ProducerSession:
    """What every partition of one restore shares: the cluster, the producer id and the settings."""

    cluster: Cluster
    acks: int
    timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    connections: dict[Address, tuple[client.Connection, int]] = field(default_factory=dict)

    @property
    def idempotent(self) -> bool:
        return self.producer_id >= 0

    def connection(self, address: Address) -> tuple[client.Connection, int]:
        found = self.connections.get(address)
        if found is None:
            conn = self.cluster.connect(address)
            try:
                found = (conn, _version(conn, PRODUCE, range(3, 10)))
            except BaseException:
                conn.close()
                raise
            self.connections[address] = found
        return found

    def drop(self, address: Address) -> None:
        found = self.connections.pop(address, None)
        if found is not None:
            found[0].close()

    def close(self) -> None:
        for conn, _ in self.connections.values():
            conn.close()
        self.connections.clear()


def open_session(bootstrap: str, timeout_s: float, *, acks: int, timeout_ms: int | None) -> ProducerSession:
    """Connect, and get a producer id when the restore is idempotent (``acks`` = -1)."""
    cluster = Cluster(bootstrap, timeout_s, max_response_bytes=client.MAX_RESPONSE_BYTES)
    session = ProducerSession(cluster, acks, timeout_ms if timeout_ms is not None else 30_000)
    if acks == -1:
        session.producer_id, session.producer_epoch = cluster.init_producer_id(
            time.monotonic() + timeout_s * 3
        )
    return session


class PartitionProducer:
    """One partition's batches, produced in order (see the module docstring).

    :meth:`send` returns once the batch is on its way; ``on_done`` gets the batch's new base offset
    when its answer arrives (-1 with acks 0, which has no answer). :meth:`close` waits for every
    answer. A batch the broker refuses for good (a record too large, a policy) is an error that
    names the partition; one it refuses for now is sent again, with everything after it, until
    ``timeout_s`` has passed.
    """

    MAX_IN_FLIGHT: Final = 5

    def __init__(self, session: ProducerSession, topic: str, partition: int, timeout_s: float) -> None:
        self.session = session
        self.topic = topic
        self.partition = partition
        self.timeout_s = timeout_s
        self.sequence = 0
        self._queue: deque[_InFlight] = deque()
        """Sent and not yet answered, oldest first."""
        self._address: Address | None = None
        self._window = self.MAX_IN_FLIGHT if session.idempotent else 1

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _leader(self) -> Address:
        if self._address is None:
            cluster = self.session.cluster
            address = cluster.leader(self.topic, self.partition)
            if address is None:
                cluster.refresh([self.topic])
                address = cluster.leader(self.topic, self.partition)
            if address is None:
                raise _Retry("leader_not_available")
            self._address = address
        return self._address

    def next_sequence(self, records: int) -> int:
        """The base sequence of the next batch of ``records`` records (Kafka's wraps at 2^31);
        -1 without a producer id, as a producer that is not idempotent writes it."""
        if not self.session.idempotent:
            return -1
        sequence = self.sequence
        self.sequence = (self.sequence + records) & 0x7FFFFFFF
        return sequence

    def send(self, batch: bytearray, records: int, on_done: Callable[[int], None] | None) -> None:
        """Send one batch (its producer id and sequence already in it: :meth:`next_sequence`)."""
        while len(self._queue) >= self._window:
            self._answer_oldest()
        item = _InFlight(-1, batch, records, on_done)
        self._queue.append(item)
        self._transmit([item])

    def close(self) -> None:
        while self._queue:
            self._answer_oldest()

    def _values(self, batch: bytearray) -> dict[str, object]:
        return {
            "transactional_id": None,
            "acks": self.session.acks,
            "timeout": self.session.timeout_ms,
            "topic_data": [
                {"name": self.topic, "partition_data": [{"index": self.partition, "records": batch}]}
            ],
        }

    def _transmit(self, items: list[_InFlight]) -> None:
        """Send ``items`` (already queued) in order; a connection that fails is retried."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                conn, version = self.session.connection(self._leader())
                for item in items:
                    item.correlation = conn.send(PRODUCE, version, self._values(item.batch), zero_fill=True)
                    if self.session.acks == 0:
                        self._queue.remove(item)
                        if item.on_done is not None:
                            item.on_done(-1)
                return
            except (client.WireError, BackupError, _Retry) as exc:
                self._forget_leader()
                if time.monotonic() >= deadline:
                    raise BackupError(f"cannot produce to {self.name}: {exc}") from None
                time.sleep(BACKOFF_S)

    def _forget_leader(self) -> None:
        if self._address is not None:
            self.session.drop(self._address)
        self._address = None
        self.session.cluster.forget(self.topic, self.partition)

    def _answer_oldest(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while self._queue:
            item = self._queue[0]
            try:
                base_offset = self._receive(item)
            except _Retry as retry:
                if time.monotonic() >= deadline:
                    raise BackupError(f"cannot produce to {self.name}: {retry.error.upper()}") from None
                self._resend_all()
                continue
            self._queue.popleft()
            if item.on_done is not None:
                item.on_done(base_offset)
            return

    def _receive(self, item: _InFlight) -> int:
        if self._address is None:
            raise _Retry("not_leader_or_follower")
        conn, version = self.session.connection(self._address)
        timeout = self.session.timeout_ms / 1000
        try:
            answer = conn.receive(PRODUCE, version, item.correlation, wait_s=timeout)
        except client.WireError as exc:
            raise _Retry(f"network_exception ({exc})") from None
        (topic,) = answer.responses
        (part,) = topic.partition_responses
        error = part.error_code.name
        if part.error_code == codec.ErrorCode.none:
            return int(part.base_offset)
        if error == "duplicate_sequence_number":
            return -1  # written by an earlier try whose answer was lost: its offset is unknown
        if error in RETRIABLE or (
            self.session.idempotent and error in ("out_of_order_sequence_number", "unknown_producer_id")
        ):
            raise _Retry(error)
        detail = f": {part.error_message}" if getattr(part, "error_message", None) else ""
        raise BackupError(f"produce to {self.name} failed: {error.upper()}{detail}")

    def _resend_all(self) -> None:
        """After a retriable answer: drop the connection (its other answers are for batches that
        are sent again) and send every unanswered batch again, in order, with the same sequences
        (an idempotent producer's broker writes each once)."""
        self._forget_leader()
        time.sleep(BACKOFF_S)
        self._transmit(list(self._queue))


class _Retry(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error
