"""The broker state handlers see, the per-request context, and the handler registration record.

The broker state is deliberately small and explicit: identity and advertised listener, the clock,
the broker config, the log manager, the group coordinator, the producer-id allocator, the fetch
long-poll registry and a timer hook. Handlers get everything through :class:`RequestContext`;
nothing is global.

Timers are a hook rather than an event loop because the broker layer is sans-IO: the server
installs an asyncio-backed :class:`Timers` (``server/app.py``), tests install
:class:`ManualTimers` and fire deadlines by hand.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from kompakt.broker.acl.authorizer import Authorizer
from kompakt.broker.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from kompakt.broker.acl.store import AclStore
from kompakt.broker.deferred import Deferred
from kompakt.broker.fetch_waiters import FetchWaiters
from kompakt.broker.groups import ConsumerGroupConfig, GroupConfig, GroupCoordinator, GroupLog
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.sasl.service import SaslService
from kompakt.broker.sasl.store import ScramCredentialStore
from kompakt.broker.session import KafkaPrincipal, Session
from kompakt.broker.txn.coordinator import TransactionCoordinator
from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.clock import Clock, SystemClock
from kompakt.config.authorizer_defs import parse_super_users
from kompakt.config.broker import BrokerConfig
from kompakt.config.groups import GroupConfigs
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import VersionRange
from kompakt.protocol.codec import ResponsePayload

log = logging.getLogger(__name__)

#: Kafka's internal topic for committed offsets; Metadata marks it ``is_internal``.
OFFSETS_TOPIC = "__consumer_offsets"


class TimerHandle(Protocol):
    """What :meth:`Timers.call_later` returns: cancelling is idempotent and thread-safe."""

    def cancel(self) -> None: ...


class Timers(Protocol):
    """Runs a callback once after a delay, on some thread; callable from any thread.

    Fetch long polls use it for their ``max_wait_ms`` deadline, so no thread or task waits per
    fetch and nothing busy-loops.
    """

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle: ...


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimers:
    """Timers driven by :meth:`advance` (tests, and brokers not attached to a server).

    Deadlines are measured against the broker clock's ``monotonic_ms``; ``advance(now_ms)`` fires
    every due callback on the calling thread.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, _ManualHandle, Callable[[], None]]] = []
        self._seq = itertools.count()

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        handle = _ManualHandle()
        with self._lock:
            due = self._clock.monotonic_ms() + max(delay_ms, 0.0)
            heapq.heappush(self._heap, (due, next(self._seq), handle, callback))
        return handle

    def pending(self) -> int:
        with self._lock:
            return sum(1 for _, _, h, _ in self._heap if not h.cancelled)

    def advance(self, now_ms: float | None = None) -> int:
        """Run every callback due at ``now_ms`` (default: the clock's now); return how many ran."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        ran = 0
        while True:
            with self._lock:
                if not self._heap or self._heap[0][0] > now:
                    return ran
                _, _, handle, callback = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            callback()
            ran += 1


@dataclass(slots=True)
class BrokerMetrics:
    """Counters Kafka exposes as broker meters (by Kafka's names); read by tests and the admin API."""

    no_key_compacted_topic_records: int = 0
    invalid_message_crc_records: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def mark_no_key_compacted(self, count: int) -> None:
        with self._lock:
            self.no_key_compacted_topic_records += count

    def mark_invalid_crc(self) -> None:
        with self._lock:
            self.invalid_message_crc_records += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "NoKeyCompactedTopicRecordsPerSec": self.no_key_compacted_topic_records,
                "InvalidMessageCrcRecordsPerSec": self.invalid_message_crc_records,
            }


ConfigListener: TypeAlias = Callable[[BrokerConfig], None]


@dataclass(slots=True, kw_only=True)
class Broker:
    """Everything the handlers share. One per process.

    ``advertised_host``/``advertised_port`` are what FindCoordinator, Metadata and DescribeCluster
    hand out; the server fills the port in after binding when it was 0. With several listeners,
    ``listener_endpoints`` holds each one's advertised address and a request is answered with the
    one of the listener it arrived on (:meth:`endpoint`), as Kafka does. ``log_manager`` is None
    only in group-protocol unit tests that need no storage; every data-path handler requires it.
    """

    clock: Clock
    groups: GroupCoordinator
    node_id: int = 0
    cluster_id: str = "kompakt"
    advertised_host: str = "localhost"
    advertised_port: int = 9092
    #: Advertised ``(host, port)`` per listener name (filled by the server once bound).
    listener_endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)
    broker_config: BrokerConfig = field(default_factory=BrokerConfig)
    #: Every group's own configs (GROUP config resources); an alter installs a new object, and the
    #: consumer group coordinator reads it through the accessor :meth:`create` wires.
    group_configs: GroupConfigs = field(default_factory=GroupConfigs)
    log_manager: LogManager | None = None
    producer_ids: ProducerIdManager | None = None
    fetch_waiters: FetchWaiters = field(default_factory=FetchWaiters)
    #: Installed by the server; None means :class:`ManualTimers` (see ``__post_init__``).
    timers: Timers | None = None
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    #: Called with the new config after a dynamic broker config change (AlterConfigs); the log
    #: cleaner and the log manager subscribe here. A listener that raises is logged and skipped.
    config_listeners: list[ConfigListener] = field(default_factory=list)
    #: Called as ``hook(topic, partitions)`` by DeleteTopics before a topic's directories go; the
    #: log cleaner (abort and forget the partitions) and the offset store subscribe here.
    on_topic_deleted: list[Callable[[str, Sequence[int]], None]] = field(default_factory=list)
    #: The log cleaner service, when the broker runs one (None in unit tests and with
    #: ``log.cleaner.enable=false`` it still exists but runs no threads).
    cleaner: LogCleaner | None = None
    #: The transaction coordinator (None on a broker without storage: transactional requests
    #: are then answered COORDINATOR_NOT_AVAILABLE).
    txn: TransactionCoordinator | None = None
    #: SASL settings per listener and the SCRAM credentials (in the data directory when the
    #: broker has one); created in ``__post_init__`` unless given.
    sasl: SaslService | None = None
    #: Kafka's StandardAuthorizer when ``authorizer.class.name`` names it; None: every request
    #: is allowed and the ACL APIs answer SECURITY_DISABLED, as Kafka without an authorizer.
    authorizer: Authorizer | None = None

    def __post_init__(self) -> None:
        if self.timers is None:
            self.timers = ManualTimers(self.clock)
        if self.sasl is None:
            data_dir = self.log_manager.data_dir if self.log_manager is not None else None
            self.sasl = SaslService(lambda: self.broker_config, self.clock, ScramCredentialStore(data_dir))

    @property
    def sasl_service(self) -> SaslService:
        """The SASL service (never None after construction)."""
        assert self.sasl is not None
        return self.sasl

    def endpoint(self, listener_name: str) -> tuple[str, int]:
        """The advertised ``(host, port)`` for a client of ``listener_name`` (Kafka answers with the
        broker's endpoint for the request's listener); the broker-wide one for an unknown name."""
        found = self.listener_endpoints.get(listener_name)
        return found if found is not None else (self.advertised_host, self.advertised_port)

    @property
    def timer_service(self) -> Timers:
        """The installed timers (never None after construction)."""
        assert self.timers is not None
        return self.timers

    @classmethod
    def create(
        cls,
        *,
        clock: Clock | None = None,
        group_config: GroupConfig | None = None,
        consumer_group_config: ConsumerGroupConfig | None = None,
        group_configs: GroupConfigs | None = None,
        group_log: GroupLog | None = None,
        log_manager: LogManager | None = None,
        broker_config: BrokerConfig | None = None,
        producer_ids: ProducerIdManager | None = None,
        timers: Timers | None = None,
        node_id: int | None = None,
        cluster_id: str = "kompakt",
        advertised_host: str = "localhost",
        advertised_port: int = 9092,
    ) -> Broker:
        """A broker with defaults for whatever is not given (system clock, groups in the log
        manager's ``__consumer_offsets``), its groups loaded from their log.

        A broker without a log manager (the protocol layer's unit tests) keeps its groups in a
        scratch ``__consumer_offsets`` of its own (:meth:`GroupLog.scratch`), so every broker runs
        its groups on the production format.
        """
        clock = clock or SystemClock()
        config = broker_config or (log_manager.broker_config if log_manager is not None else BrokerConfig())
        if group_log is None:
            group_log = GroupLog(log_manager, clock) if log_manager is not None else GroupLog.scratch(clock)
        topics = None
        if log_manager is not None:
            logs = log_manager

            def topics() -> dict[str, tuple[uuid.UUID, int]]:
                return {name: (meta.topic_id, meta.partitions) for name, meta in logs.topics().items()}

        coordinator = GroupCoordinator(
            group_config or GroupConfig(), clock, group_log, consumer_group_config, topics=topics
        )
        coordinator.load()
        broker = cls(
            clock=clock,
            groups=coordinator,
            node_id=config.node_id if node_id is None else node_id,
            cluster_id=cluster_id,
            advertised_host=advertised_host,
            advertised_port=advertised_port,
            broker_config=config,
            log_manager=log_manager,
            producer_ids=producer_ids,
            group_configs=GroupConfigs() if group_configs is None else group_configs,
        )
        # Read on every heartbeat, so an alter applies from the group's next one (as in Kafka).
        coordinator.consumer.group_config = lambda group_id: broker.group_configs.config_of(group_id)
        if timers is not None:
            broker.timers = timers
        broker.authorizer = authorizer_for(config, log_manager)
        return broker

    @property
    def logs(self) -> LogManager:
        """The log manager; a data-path request on a storage-less broker is a wiring bug."""
        if self.log_manager is None:
            raise RuntimeError("this broker has no log manager")
        return self.log_manager

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether ``topic``-``partition`` exists (always True on a storage-less test broker)."""
        if self.log_manager is None:
            return True
        meta = self.log_manager.topics().get(topic)
        return meta is not None and 0 <= partition < meta.partitions

    def update_broker_config(self, config: BrokerConfig) -> None:
        """Install a new broker config (a dynamic change) and tell every listener."""
        self.broker_config = config
        if self.log_manager is not None:
            self.log_manager.set_broker_config(config)
        for listener in list(self.config_listeners):
            try:
                listener(config)
            except Exception:
                log.exception("broker config listener %r failed", listener)


def authorizer_for(config: BrokerConfig, log_manager: LogManager | None) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for (its ACLs in the data directory; in
    memory for a storage-less test broker), or None when it is unset."""
    if not (config.get_str("authorizer.class.name") or "").strip():
        return None
    return Authorizer(
        AclStore(log_manager.data_dir) if log_manager is not None else None,
        super_users=parse_super_users(config.get_str("super.users")),
        allow_if_no_acl=config.get_bool("allow.everyone.if.no.acl.found"),
    )


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    #: The advertised ranges (from the handler table), for ApiVersions.
    api_versions: Mapping[int, VersionRange] = field(default_factory=dict)
    #: The connection's listener and principal (shared by its requests; SASL changes it).
    session: Session = field(default_factory=Session)

    @property
    def principal(self) -> KafkaPrincipal:
        return self.session.principal

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the caller may do ``operation`` on the named resource (always, without an
        authorizer)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(str(self.principal), self.client_host, operation, resource_type, name)

    def authorized_cluster(self, operation: AclOperation) -> bool:
        return self.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_by_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: allowed on some resource of the type."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(
            str(self.principal), self.client_host, operation, resource_type
        )


#: What the dispatcher hands back: kio's response now, later, or none at all (Produce with acks=0).
HandlerResult: TypeAlias = ResponsePayload | Deferred[ResponsePayload] | None

#: A handler: ``(ctx, request view) -> typed response | Deferred[typed response] | None``. The view
#: and response types are those of the API's module in :mod:`kompakt.protocol.messages`, which the
#: handler's own signature names (and mypy checks there); the table holds every API's handler.
Handler: TypeAlias = Callable[[RequestContext, Any], object]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One API the broker serves. Each handler module exposes one as ``SPEC``.

    The dispatcher hands the handler the request as its API's typed view and converts the typed
    answer (now, or when a :class:`Deferred` settles) to kio's class for the version asked.
    ``blocking`` handlers (storage I/O) are run by the server in a worker thread. A ``try_cached``
    one is first tried on the event loop in :func:`~kompakt.log.nowait.cached_only` mode, and must
    then raise :class:`~kompakt.log.nowait.WouldBlock` before any side effect when a read would
    wait (the server then runs it in the worker thread).
    """

    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    blocking: bool = False
    try_cached: bool = False

    @property
    def versions(self) -> VersionRange:
        return VersionRange(self.min_version, self.max_version)
