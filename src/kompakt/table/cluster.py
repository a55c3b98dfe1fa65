"""A topic on any Kafka cluster as a table: ``kompakt table get|scan|counts|export kafka://HOST:PORT/TOPIC``.

A user who moves to an Apache Kafka cluster has no admin endpoint and often no shell on the brokers,
so the table is read the way any application would read it: a ``read_committed`` consumer
(confluent-kafka) replays each partition from its start to the end it finds (the last stable
offset), partition by partition. The answer is the one the broker's own table and ``--log-dir`` give
(:mod:`kompakt.table.service` answers all three): the latest record per key, tombstoned keys
absent, aborted transactions and control records never seen.

Memory stays that of the broker's table, not that of the data: a scan or a count first fills the
same digest index (:class:`~kompakt.table.index.KeyIndex`, about 30 bytes a key) from the keys it
reads, and a scan then reads the partition a second time, up to where the first pass ended, yielding
the records the index names, in offset order. Keeping every latest record instead would cost the
partition's live data. A lookup reads only the key's partition, once, and keeps one record.

As on a live broker, a record the cluster's cleaner removes between the two passes (because a newer
record of its key was written meanwhile, after the first pass ended) is not shown; reading again
shows the newer one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from kompakt.cleaner.kernels.hashing import hash_keys
from kompakt.clock import Clock, SystemClock
from kompakt.errors import OperatorError
from kompakt.table.index import KeyIndex
from kompakt.table.partition import AsOfInfo, CleanFacts, Counts, Lookup, completeness, iso_ms
from kompakt.table.records import TableRecord

SCHEME: Final = "kafka://"
#: Messages taken from the consumer's queue at a time (one numpy pass each).
BATCH: Final = 10_000
#: How long one poll waits for the first message of a batch.
_POLL_S: Final = 0.5
_FETCH_WAIT_MS: Final = 50

Progress = Callable[[int], None]
"""Told how many offsets of a partition were read since the last call (records, markers, gaps)."""


class ClusterSourceError(OperatorError):
    """A cluster that cannot be read: unreachable, unknown topic, a consumer error, no progress."""


def parse_source(spec: str) -> tuple[str, str | None]:
    """``kafka://HOST:PORT[,HOST:PORT...][/TOPIC]`` as ``(bootstrap, topic or None)``."""
    if not spec.startswith(SCHEME):
        raise ValueError(f"{spec!r} does not start with {SCHEME}")
    rest = spec[len(SCHEME) :]
    bootstrap, _, topic = rest.partition("/")
    topic = topic.strip("/")
    if not bootstrap:
        raise ValueError(f"{spec!r} names no HOST:PORT")
    if "/" in topic:
        raise ValueError(f"{spec!r}: a topic name has no '/'")
    return bootstrap, topic or None


@dataclass(slots=True)
class _Batch:
    """The data messages of one poll as columns: what the index and the masks take."""

    messages: list[Any]
    keys: list[bytes | None]
    offsets: np.ndarray[Any, np.dtype[np.int64]]
    key_len: np.ndarray[Any, np.dtype[np.int64]]
    value_len: np.ndarray[Any, np.dtype[np.int64]]
    hi: np.ndarray[Any, np.dtype[np.uint64]]
    lo: np.ndarray[Any, np.dtype[np.uint64]]

    @classmethod
    def of(cls, messages: list[Any]) -> _Batch:
        keys: list[bytes | None] = [m.key() for m in messages]
        key_len = np.fromiter((-1 if k is None else len(k) for k in keys), dtype=np.int64, count=len(keys))
        value_len = np.fromiter(
            (-1 if m.value() is None else len(m) for m in messages), dtype=np.int64, count=len(messages)
        )
        offsets = np.fromiter((m.offset() for m in messages), dtype=np.int64, count=len(messages))
        starts = np.zeros(len(keys), dtype=np.int64)
        if len(keys) > 1:
            np.cumsum(np.maximum(key_len[:-1], 0), out=starts[1:])
        buf = np.frombuffer(b"".join(k for k in keys if k is not None) or b"\0", dtype=np.uint8)
        hi, lo = hash_keys(buf, starts, key_len)
        return cls(messages, keys, offsets, key_len, value_len, hi, lo)

    def cut(self, as_of_ms: int) -> int | None:
        """The position of the first message stamped after ``as_of_ms`` (None when there is none)."""
        for i, message in enumerate(self.messages):
            if message.timestamp()[1] > as_of_ms:
                return i
        return None

    def head(self, n: int) -> _Batch:
        return _Batch(
            self.messages[:n],
            self.keys[:n],
            self.offsets[:n],
            self.key_len[:n],
            self.value_len[:n],
            self.hi[:n],
            self.lo[:n],
        )


def _record(partition: int, message: Any) -> TableRecord:
    headers = message.headers() or ()
    return TableRecord(
        partition,
        int(message.offset()),
        int(message.timestamp()[1]),
        message.key(),
        message.value(),
        tuple((str(name), value) for name, value in headers),
    )


class ClusterTopic:
    """One topic of a cluster, read through one consumer (no group is joined, nothing committed).

    ``config`` adds librdkafka settings (security, logging); ``on_progress`` hears every offset read.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        timeout_s: float = 30.0,
        config: Mapping[str, Any] | None = None,
        on_progress: Progress | None = None,
        clock: Clock | None = None,
    ) -> None:
        from confluent_kafka import Consumer

        self.bootstrap = bootstrap
        self.topic = topic
        self.timeout_s = timeout_s
        self.on_progress = on_progress
        self.clock: Clock = clock or SystemClock()
        self._config = dict(config or {})
        self.consumer: Any = Consumer(
            {
                **self._config,
                "bootstrap.servers": bootstrap,
                "group.id": "kompakt-table",  # required by librdkafka; assign() never joins it
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "socket.connection.setup.timeout.ms": max(1000, int(timeout_s * 1000)),
                # The end of a partition is known only from a fetch that finds nothing new, which
                # the broker holds for this long: every partition read pays it once.
                "fetch.wait.max.ms": _FETCH_WAIT_MS,
            }
        )
        self._closed = False
        self._partitions: list[int] | None = None
        self._compacted: bool | None = None

    def close(self) -> None:
        """Leave the cluster (idempotent: error paths close early)."""
        if not self._closed:
            self._closed = True
            self.consumer.close()

    def __enter__(self) -> ClusterTopic:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def where(self) -> str:
        return f"{self.topic!r} at {self.bootstrap}"

    @property
    def partitions(self) -> list[int]:
        """The topic's partition ids, from the cluster's metadata."""
        if self._partitions is None:
            from confluent_kafka import KafkaError, KafkaException

            try:
                meta = self.consumer.list_topics(self.topic, timeout=self.timeout_s)
            except KafkaException as exc:
                raise ClusterSourceError(
                    f"cannot read the metadata of {self.where}: {_error_text(exc.args[0])}"
                ) from None
            tmeta = meta.topics.get(self.topic)
            error = None if tmeta is None else tmeta.error
            if tmeta is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                raise ClusterSourceError(f"topic {self.topic!r} does not exist at {self.bootstrap}")
            if error is not None or not tmeta.partitions:
                raise ClusterSourceError(f"topic {self.where}: {_error_text(error)}")
            self._partitions = sorted(tmeta.partitions)
        return self._partitions

    def tables(self) -> list[ClusterPartition]:
        return [ClusterPartition(self, p) for p in self.partitions]

    def span(self, partitions: Sequence[int]) -> int:
        """Offsets from log start to high watermark over ``partitions``: what reading them once
        goes through (the total of a progress bar)."""
        total = 0
        for partition in partitions:
            low, high = self.watermarks(partition)
            total += max(0, high - low)
        return total

    def watermarks(self, partition: int) -> tuple[int, int]:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=self.timeout_s, cached=False
            )
        except KafkaException as exc:
            raise ClusterSourceError(
                f"cannot read the offsets of {self.topic}-{partition} at {self.bootstrap}: "
                f"{_error_text(exc.args[0])}"
            ) from None
        return int(low), int(high)

    def read(self, partition: int, stop: int | None = None) -> _Read:
        """The data messages of one partition from its start, in batches, up to the end the consumer
        reaches (the last stable offset: ``read_committed``) or ``stop``; the iterator's ``end`` is
        then the offset it stopped at."""
        return _Read(self, partition, stop)

    def as_of_info(self, partition: int, as_of_ms: int, end: int) -> AsOfInfo:
        """How complete an answer as of ``as_of_ms`` cut at ``end`` is. A cluster does not say how
        far its cleaner has run, so the answer is complete only when nothing was deleted below it
        (log start 0) and the topic is not compacted."""
        low, _high = self.watermarks(partition)
        complete, reason = completeness(as_of_ms, CleanFacts(low, None, None))
        if complete and self.compacted():
            complete = False
            reason = (
                f"{self.bootstrap} does not say how far its cleaner has run; a clean keeps only the "
                f"latest record of each key, so a value current at {iso_ms(as_of_ms)} may have been removed"
            )
        return AsOfInfo(as_of_ms, end, end, complete, reason)

    def compacted(self) -> bool:
        """Whether the topic's cleanup.policy has compact (True when the cluster does not say)."""
        if self._compacted is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import (  # type: ignore[attr-defined]
                AdminClient,
                ConfigResource,
                ResourceType,
            )

            admin = AdminClient({**self._config, "bootstrap.servers": self.bootstrap})
            resource = ConfigResource(ResourceType.TOPIC, self.topic)
            try:
                entries = admin.describe_configs([resource], request_timeout=self.timeout_s)[resource].result(
                    timeout=self.timeout_s + 5
                )
                policy = entries.get("cleanup.policy")
                value = "compact" if policy is None or policy.value is None else str(policy.value)
                self._compacted = "compact" in value
            except (KafkaException, TimeoutError):
                self._compacted = True
        return self._compacted


def _error_text(error: Any) -> str:
    if error is None:
        return "unknown error"
    try:
        message, name = error.str(), error.name()
    except AttributeError:
        return str(error)
    return f"{name}: {message}" if message and message != name else str(name)


class _Read:
    """One pass over one partition (see :meth:`ClusterTopic.read`); ``end`` is set when it ends."""

    def __init__(self, source: ClusterTopic, partition: int, stop: int | None) -> None:
        self.source = source
        self.partition = partition
        self.stop = stop
        self.end: int | None = None
        self._position: int | None = None

    def _advance(self, offset: int) -> None:
        """Report the offsets read since the last report (from the log start on the first)."""
        report = self.source.on_progress
        if report is None:
            return
        if self._position is None:
            self._position = self.source.watermarks(self.partition)[0]
        if offset > self._position:
            report(offset - self._position)
            self._position = offset

    def __iter__(self) -> Iterator[_Batch]:
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

        source, partition, stop = self.source, self.partition, self.stop
        where = f"{source.topic}-{partition} at {source.bootstrap}"
        consumer = source.consumer
        clock = source.clock
        consumer.assign([TopicPartition(source.topic, partition, OFFSET_BEGINNING)])
        silent_ms = source.timeout_s * 1000
        deadline = clock.monotonic_ms() + silent_ms
        try:
            while True:
                # poll() returns with the first message; consume(.., 0) drains what is fetched
                # (consume() with a timeout would wait it out on every batch).
                first = consumer.poll(_POLL_S)
                polled = [] if first is None else [first, *consumer.consume(BATCH, 0)]
                if not polled:
                    if clock.monotonic_ms() > deadline:
                        raise ClusterSourceError(
                            f"reading {where} made no progress for {source.timeout_s:g} s"
                        )
                    continue
                deadline = clock.monotonic_ms() + silent_ms
                data: list[Any] = []
                end: int | None = None
                for msg in polled:
                    if msg.topic() != source.topic or msg.partition() != partition:
                        continue
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            end = int(msg.offset())
                            break
                        raise ClusterSourceError(f"reading {where}: {_error_text(error)}")
                    if stop is not None and int(msg.offset()) >= stop:
                        end = stop
                        break
                    data.append(msg)
                if data:
                    after = int(data[-1].offset()) + 1
                    self._advance(after)
                    yield _Batch.of(data)
                    if stop is not None and after >= stop:
                        end = stop
                if end is not None:
                    self._advance(end)
                    self.end = end
                    return
        finally:
            consumer.unassign()


class ClusterPartition:
    """One partition of a :class:`ClusterTopic`, answering as
    :class:`~kompakt.table.partition.PartitionTable` does (it is a
    :class:`~kompakt.table.service.TableSource`); every answer reads the partition again, so it is
    as fresh as the cluster."""

    def __init__(self, source: ClusterTopic, partition: int) -> None:
        self.source = source
        self.topic = source.topic
        self.partition = partition

    def _build(self, as_of_ms: int | None) -> tuple[KeyIndex, int]:
        """The index of the partition, up to the first record stamped after ``as_of_ms``:
        ``(index, the offset it ends at)``."""
        index = KeyIndex()
        reading = self.source.read(self.partition)
        cut: int | None = None
        for batch in reading:
            at = None if as_of_ms is None else batch.cut(as_of_ms)
            if at is not None:
                cut = int(batch.offsets[at])
                batch = batch.head(at)
            index.apply(batch.hi, batch.lo, batch.offsets, batch.key_len, batch.value_len, growth=4.0)
            if cut is not None:
                break
        index.fit()
        end = cut if cut is not None else reading.end
        assert end is not None
        return index, end

    def counts(self) -> Counts:
        index, end = self._build(None)
        stats = index.stats
        return Counts(
            self.partition, stats.live_keys, stats.tombstones, stats.memory_bytes, stats.bytes_per_key, end
        )

    def as_of(self, as_of_ms: int) -> tuple[KeyIndex, AsOfInfo]:
        index, end = self._build(as_of_ms)
        return index, self.source.as_of_info(self.partition, as_of_ms, end)

    def lookup(self, key: bytes) -> Lookup:
        return self._lookup(key, None)[0]

    def lookup_as_of(self, key: bytes, as_of_ms: int) -> tuple[Lookup, AsOfInfo]:
        found, end = self._lookup(key, as_of_ms)
        return found, self.source.as_of_info(self.partition, as_of_ms, end)

    def _lookup(self, key: bytes, as_of_ms: int | None) -> tuple[Lookup, int]:
        """One pass keeping the key's latest record (a cluster has no segment or byte position to
        show): ``(the answer, the offset the pass ended at)``."""
        latest: Any = None
        reading = self.source.read(self.partition)
        end: int | None = None
        for batch in reading:
            at = None if as_of_ms is None else batch.cut(as_of_ms)
            keys = batch.keys if at is None else batch.keys[:at]
            for i in range(len(keys) - 1, -1, -1):
                if keys[i] == key:
                    latest = batch.messages[i]
                    break
            if at is not None:
                end = int(batch.offsets[at])
                break
        end = end if end is not None else reading.end
        assert end is not None
        return Lookup(None if latest is None else _record(self.partition, latest), None), end

    def scan(
        self,
        *,
        prefix: bytes = b"",
        include_tombstones: bool = False,
        from_offset: int = 0,
        index: KeyIndex | None = None,
        end_offset: int | None = None,
    ) -> Iterator[TableRecord]:
        """The latest record of every key (with ``prefix``) in offset order: the index first (unless
        given, as ``--as-of`` does), then a second read up to where the index ends."""
        if index is None:
            index, end_offset = self._build(None)
        for batch in self.source.read(self.partition, stop=end_offset):
            mask = index.latest_mask(batch.hi, batch.lo, batch.offsets, batch.key_len, include_tombstones)
            mask &= batch.offsets >= from_offset
            for i in np.flatnonzero(mask).tolist():
                key = batch.keys[i]
                if key is not None and key.startswith(prefix):
                    yield _record(self.partition, batch.messages[i])
