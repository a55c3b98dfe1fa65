"""The asyncio server shell: listener, connection tasks, timers, background work, graceful close.

Everything protocol- or state-related lives below (``protocol``, ``broker``); this module only owns
sockets, tasks and the process lifecycle. Blocking storage handlers run in worker threads (see
``connection.py``). :class:`KafkaServer` is the listener for one broker; :class:`BrokerApp` is the
whole process (data directory, broker state, listener, periodic storage tasks, services such as
the log cleaner) with an ordered start and a clean stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kompakt.broker.context import Broker, TimerHandle
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.groups import OFFSETS_TOPIC, ConsumerGroupConfig, GroupConfig, GroupLog
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.readers import GroupReaderPositions
from kompakt.broker.session import KafkaPrincipal
from kompakt.broker.txn.coordinator import TransactionCoordinator
from kompakt.broker.txn.state_manager import TxnConfig
from kompakt.cleaner.log_cleaner import CleanerSettings, LogCleaner
from kompakt.cleaner.warmup import BackgroundWarmup
from kompakt.clock import Clock, SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.config.dynamic import load_dynamic_configs
from kompakt.config.listeners import broker_listeners, listener_str
from kompakt.config.tables import int_default
from kompakt.log.manager import LogManager
from kompakt.log.metadata_files import read_meta_properties
from kompakt.log.segments import ManualScheduler
from kompakt.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from kompakt.server.admin_access import AdminAccess, admin_access_from_config, admin_ssl_context
from kompakt.server.admin_api import AdminApi
from kompakt.server.admin_http import AdminHttpServer
from kompakt.server.connection import Connection, PrincipalBuilder, connection_factory
from kompakt.server.listener import Listener
from kompakt.server.memory import MemoryReturn
from kompakt.server.request_metrics import RequestMetrics
from kompakt.server.tls import SslPrincipalMapper, certificate_principal, server_context

log = logging.getLogger(__name__)

#: How often the tables in use (``kompakt.table``) catch up with their logs, in ms.
TABLE_CATCH_UP_MS = 1000


class _LoopTimerHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class AsyncioTimers:
    """The broker's timer hook on an asyncio loop (fetch long-poll deadlines).

    ``call_later`` may be called from any thread (Fetch runs in worker threads). When the deadline
    passes, the callback runs in the loop's default executor, not on the loop thread, because
    completing a fetch reads segment files. Cancelling only marks the handle; a cancelled timer
    costs one no-op wake-up, which is cheaper than a cross-thread cancel.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        handle = _LoopTimerHandle()
        loop = self._loop

        def fire() -> None:
            if not handle.cancelled and not loop.is_closed():
                loop.run_in_executor(None, run)

        def run() -> None:
            if not handle.cancelled:
                callback()

        def arm() -> None:
            loop.call_later(max(delay_ms, 0.0) / 1000, fire)

        if threading.get_ident() == self._loop_thread:
            arm()
        else:
            with contextlib.suppress(RuntimeError):  # loop closed: the server is gone
                loop.call_soon_threadsafe(arm)
        return handle


@dataclass(frozen=True, slots=True)
class KafkaListenerSettings:
    """One Kafka listener of the broker: its name and security protocol (every connection's
    :class:`~kompakt.broker.session.Session` carries them), where it binds, what it advertises
    (empty host or port 0: the bound address), and its TLS context for SSL/SASL_SSL."""

    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str = ""
    advertised_port: int = 0
    tls: ssl.SSLContext | None = None
    #: The principal of an SSL listener's client, from its certificate (None: ANONYMOUS).
    principal_of: PrincipalBuilder | None = None
    #: What a :class:`~kompakt.server.listener.BindError` names: ``"kafka"`` for the listener
    #: ``--port`` moves, else the listener name.
    label: str = "kafka"

    def bind_address(self) -> str:
        host = self.host or "0.0.0.0"  # noqa: S104 - names the wildcard Kafka binds for an empty host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def listener_settings(config: BrokerConfig) -> tuple[KafkaListenerSettings, ...]:
    """Every listener of ``listeners`` with its TLS context and principal builder, checked as
    Kafka checks them; a :class:`~kompakt.errors.ConfigError` names the first problem."""
    result = []
    for listener in broker_listeners(config):
        tls = server_context(config, listener) if listener.uses_tls else None
        principal_of = None
        if listener.security_protocol == "SSL":  # SASL_SSL clients are named by SASL instead
            principal_of = _certificate_principal_builder(
                SslPrincipalMapper(listener_str(config, listener.name, "ssl.principal.mapping.rules"))
            )
        result.append(
            KafkaListenerSettings(
                name=listener.name,
                security_protocol=listener.security_protocol,
                host=listener.host,
                port=listener.port,
                advertised_host=listener.advertised_host,
                advertised_port=listener.advertised_port,
                tls=tls,
                principal_of=principal_of,
                label=listener.name,
            )
        )
    return tuple(result)


def _certificate_principal_builder(mapper: SslPrincipalMapper) -> PrincipalBuilder:
    def principal_of(transport: asyncio.BaseTransport) -> KafkaPrincipal:
        return certificate_principal(transport.get_extra_info("peercert"), mapper)

    return principal_of


def _client_auth(context: ssl.SSLContext | None) -> str | None:
    """``ssl.client.auth`` as the context applies it (None on a plaintext listener)."""
    if context is None:
        return None
    return {ssl.CERT_REQUIRED: "required", ssl.CERT_OPTIONAL: "requested"}.get(context.verify_mode, "none")


def require_authentication(listeners: Sequence[KafkaListenerSettings]) -> bool:
    """Whether every listener authenticates its clients (SASL, or a required client certificate):
    a single PLAINTEXT listener lets anyone in, and then a token on the admin endpoint guards
    nothing more than the Kafka port already gives away."""
    return bool(listeners) and all(
        s.security_protocol.startswith("SASL_")
        or (s.security_protocol == "SSL" and s.tls is not None and s.tls.verify_mode == ssl.CERT_REQUIRED)
        for s in listeners
    )


class KafkaServer:
    """The Kafka wire-protocol listeners of one :class:`Broker`.

    Each listener advertises its own address (Metadata, FindCoordinator and DescribeCluster answer
    a request with the one of the listener it arrived on). An advertised port of 0 (or an empty
    host) is filled in from the bound socket, so tests can listen on port 0 and still hand out a
    reachable coordinator address. :attr:`host`/:attr:`port` are the first listener's.
    """

    def __init__(
        self,
        broker: Broker,
        host: str = "127.0.0.1",
        port: int = 9092,
        *,
        dispatcher: Dispatcher | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        tick_interval_ms: int = 100,
        request_metrics: RequestMetrics | None = None,
        listeners: Sequence[KafkaListenerSettings] = (),
    ) -> None:
        self.broker = broker
        #: Per-API request counts and latencies (the admin endpoint's ``/metrics`` reads them).
        self.request_metrics = request_metrics if request_metrics is not None else RequestMetrics()
        self.host = host
        self.port = port
        # Without listeners: one PLAINTEXT listener advertising what the broker was built with.
        self.listener_settings: tuple[KafkaListenerSettings, ...] = tuple(listeners) or (
            KafkaListenerSettings(
                host=host,
                port=port,
                advertised_host=broker.advertised_host,
                advertised_port=broker.advertised_port,
            ),
        )
        self.dispatcher = dispatcher or Dispatcher(broker)
        self._max_frame_bytes = max_frame_bytes
        self._tick_interval_s = tick_interval_ms / 1000
        self._server: Listener | None = None
        #: Every bound listener with its settings, in configuration order.
        self.listeners: list[tuple[KafkaListenerSettings, Listener]] = []
        self._tick_task: asyncio.Task[None] | None = None
        #: The open connections (each adds itself when accepted and leaves when closed).
        self._connections: set[Connection] = set()
        #: Gives back the memory large requests leave behind.
        self.memory = MemoryReturn()

    async def start(self, listener: Listener | Sequence[Listener] | None = None) -> None:
        """Bind (unless already bound: one listener or one per :attr:`listener_settings`) and
        start accepting; returns once the sockets listen. Raises
        :class:`~kompakt.server.listener.BindError` when an address cannot be listened on."""
        self.broker.timers = AsyncioTimers(asyncio.get_running_loop())
        if listener is None:
            bound = await _bind_all(self.listener_settings)
        else:
            bound = [listener] if isinstance(listener, Listener) else list(listener)
        self.listeners = list(zip(self.listener_settings, bound, strict=True))
        self._server = bound[0]
        self.port = bound[0].port
        for settings, server in self.listeners:
            host = settings.advertised_host or settings.host or self._default_host(settings)
            port = settings.advertised_port or server.port
            self.broker.listener_endpoints[settings.name] = (host, port)
        first_host, first_port = self.broker.listener_endpoints[self.listener_settings[0].name]
        if not self.broker.advertised_port:
            self.broker.advertised_port = first_port
        if not self.broker.advertised_host:
            self.broker.advertised_host = first_host
        for settings, server in self.listeners:
            await server.serve_protocol(
                connection_factory(
                    self.dispatcher,
                    self._max_frame_bytes,
                    self._connections,
                    self.request_metrics,
                    self.memory,
                    listener_name=settings.name,
                    security_protocol=settings.security_protocol,
                    principal_of=settings.principal_of,
                )
            )
        self._tick_task = asyncio.create_task(self._tick_loop(), name="kompakt-group-tick")
        log.info("listening on %s", self.describe_listeners())

    def _default_host(self, settings: KafkaListenerSettings) -> str:
        """The advertised host of a listener bound on every interface with none advertised."""
        return socket.getfqdn() if settings.host in ("", "0.0.0.0", "::") else settings.host  # noqa: S104

    def listener_report(self) -> list[dict[str, object]]:
        """Each bound listener for the admin endpoint (``GET /v1/listeners``)."""
        report: list[dict[str, object]] = []
        for settings, server in self.listeners:
            host, port = self.broker.endpoint(settings.name)
            report.append(
                {
                    "name": settings.name,
                    "security_protocol": settings.security_protocol,
                    "host": settings.host or "0.0.0.0",  # noqa: S104 - the wildcard an empty host binds
                    "port": server.port,
                    "advertised_host": host,
                    "advertised_port": port,
                    "client_auth": _client_auth(settings.tls),
                }
            )
        return report

    def describe_listeners(self) -> str:
        """``127.0.0.1:9092`` for the one ``--port`` listener; ``NAME://host:port`` for each
        configured one (the ready line and the admin endpoint name them)."""
        parts = []
        for settings, server in self.listeners:
            host = settings.host or "0.0.0.0"  # noqa: S104 - the wildcard an empty host binds
            address = f"[{host}]:{server.port}" if ":" in host else f"{host}:{server.port}"
            plain = len(self.listeners) == 1 and settings.name == "PLAINTEXT"
            parts.append(address if plain else f"{settings.name}://{address}")
        return ", ".join(parts)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace_s``), then close everything."""
        for _, server in self.listeners:
            server.close()
        # Parked fetches would hold their connections for up to max_wait_ms: answer them now.
        self.broker.fetch_waiters.wake_all()
        connections = list(self._connections)
        for connection in connections:
            connection.stop()  # idle ones close right away, busy ones after their request
        busy = [connection.task for connection in connections if connection.task is not None]
        if busy:
            _, pending = await asyncio.wait(busy, timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if connections:
            await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in connections], timeout=grace_s)
        if self._tick_task is not None:
            self._tick_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tick_task
        for _, server in self.listeners:
            await server.wait_closed()
        self._server = None

    async def __aenter__(self) -> KafkaServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self._tick_interval_s)
            try:
                self.broker.groups.tick(self.broker.clock.monotonic_ms())
            except Exception:
                log.exception("group coordinator tick failed")


async def serve(
    broker: Broker,
    host: str = "127.0.0.1",
    port: int = 9092,
    *,
    on_ready: Callable[[KafkaServer], None] | None = None,
) -> None:
    """Run a server until cancelled, then close it gracefully."""
    server = KafkaServer(broker, host, port)
    await server.start()
    if on_ready is not None:
        on_ready(server)
    try:
        await server.serve_forever()
    finally:
        await server.close()


async def _bind_all(listeners: Sequence[KafkaListenerSettings]) -> list[Listener]:
    """Bind every Kafka listener, or none: on a failure the ones bound are closed again."""
    bound: list[Listener] = []
    try:
        for settings in listeners:
            bound.append(
                await Listener.bind(settings.host, settings.port, settings.label, ssl_context=settings.tls)
            )
    except BaseException:
        await _close_listeners(*bound)
        raise
    return bound


async def _close_listeners(*listeners: Listener | None) -> None:
    for listener in listeners:
        if listener is not None:
            listener.close()
            await listener.wait_closed()


# ----------------------------------------------------------------------------------------------
# The whole broker process: storage, broker state, listener, background work


class Service(Protocol):
    """A long-running part of the broker (the log cleaner, later an admin endpoint).

    ``start`` runs after the logs are open and before the listener accepts; ``stop`` runs after
    the listener has stopped and before the logs are closed, in reverse order of start. Both may
    block (they run in a worker thread).
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class AppSettings:
    """Everything ``kompakt serve`` decides before the broker starts."""

    data_dir: Path
    broker_config: BrokerConfig
    host: str = "127.0.0.1"
    port: int = 9092
    #: What Metadata/FindCoordinator hand out; empty host or port 0 mean "the bound address".
    advertised_host: str = ""
    advertised_port: int = 0
    #: Period of the log manager's scheduled tasks (delayed file deletes, post-roll flushes).
    scheduler_interval_ms: int = 500
    #: Period of the ``flush.ms`` check (Kafka's ``log.flush.scheduler.interval.ms`` loop).
    flush_check_interval_ms: int = 1000
    #: The admin HTTP endpoint (``admin_http.py``); None runs none, 0 picks a free port.
    admin_host: str = "127.0.0.1"
    admin_port: int | None = None
    #: The Kafka listeners (``listeners`` and friends); empty means one PLAINTEXT listener on
    #: ``host``/``port`` advertising ``advertised_host``/``advertised_port``.
    listeners: tuple[KafkaListenerSettings, ...] = ()

    #: ``--compaction-chaos SEED``: random legal rolls and cleans as records arrive
    #: (:mod:`kompakt.server.compaction_chaos`); None runs none.
    compaction_chaos_seed: int | None = None
    #: Whether the Kafka listeners require authentication: the admin endpoint then requires its
    #: bearer token even on loopback, so that it is no way around them. ``kompakt serve`` sets
    #: it when every listener does (SASL_*, or SSL with ``ssl.client.auth=required``).
    listeners_require_auth: bool = False

    def kafka_listeners(self) -> tuple[KafkaListenerSettings, ...]:
        if self.listeners:
            return self.listeners
        return (
            KafkaListenerSettings(
                host=self.host,
                port=self.port,
                advertised_host=self.advertised_host,
                advertised_port=self.advertised_port,
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The broker configs the server shell runs with: the largest request a connection accepts
    (``socket.request.max.bytes``) and the periods of the storage tasks. Typed from the broker
    config once, by :meth:`from_broker`; the defaults are the config tables'."""

    socket_request_max_bytes: int = int_default("socket.request.max.bytes")
    log_initial_task_delay_ms: int = int_default("log.initial.task.delay.ms")
    recovery_point_checkpoint_interval_ms: int = int_default("log.flush.offset.checkpoint.interval.ms")
    log_start_offset_checkpoint_interval_ms: int = int_default(
        "log.flush.start.offset.checkpoint.interval.ms"
    )
    high_watermark_checkpoint_interval_ms: int = int_default("replica.high.watermark.checkpoint.interval.ms")
    log_retention_check_interval_ms: int = int_default("log.retention.check.interval.ms")

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> ServerSettings:
        return cls(
            socket_request_max_bytes=config.get_int("socket.request.max.bytes"),
            log_initial_task_delay_ms=config.get_int("log.initial.task.delay.ms"),
            recovery_point_checkpoint_interval_ms=config.get_int("log.flush.offset.checkpoint.interval.ms"),
            log_start_offset_checkpoint_interval_ms=config.get_int(
                "log.flush.start.offset.checkpoint.interval.ms"
            ),
            high_watermark_checkpoint_interval_ms=config.get_int(
                "replica.high.watermark.checkpoint.interval.ms"
            ),
            log_retention_check_interval_ms=config.get_int("log.retention.check.interval.ms"),
        )


def admin_security(settings: AppSettings) -> tuple[AdminAccess, ssl.SSLContext | None]:
    """The admin endpoint's access rules and TLS context from the broker config; raises
    :class:`~kompakt.errors.ConfigError` (no token where one is required, an unreadable key)."""
    config = settings.broker_config
    access = admin_access_from_config(
        config, settings.admin_host, listeners_require_auth=settings.listeners_require_auth
    )
    return access, admin_ssl_context(config)


class CleanerService:
    """The log cleaner threads as a broker service, and the background compile of their native
    kernels on a fresh install (which the threads wait for; ``kompakt ready`` does not)."""

    name = "log-cleaner"

    def __init__(self, cleaner: LogCleaner, warmup: BackgroundWarmup | None = None) -> None:
        self.cleaner = cleaner
        self.warmup = warmup

    def start(self) -> None:
        if self.warmup is not None and self.cleaner.settings.enabled:
            self.warmup.start()
        self.cleaner.startup()

    def stop(self) -> None:
        if self.warmup is not None:
            self.warmup.stop()
        self.cleaner.shutdown()


class BrokerApp:
    """Opens the data directory, builds the :class:`Broker`, serves it, and shuts it all down.

    Lifecycle seam for later subsystems: :meth:`add_service` before :meth:`start` (the log
    cleaner threads plug in here). Background tasks: the log manager's scheduler, ``flush.ms``
    checks, the three offset checkpoints, and time/size retention of non-compacted logs every
    ``log.retention.check.interval.ms`` (compacted logs with ``delete`` are retained by the
    cleaner after it cleans them, as in Kafka), and committed-offset expiry every
    ``offsets.retention.check.interval.ms`` on the event loop (where the group coordinator lives).
    """

    def __init__(self, settings: AppSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.services: list[Service] = []
        self._started: list[Service] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.log_manager: LogManager | None = None
        self.broker: Broker | None = None
        self.server: KafkaServer | None = None
        self.request_metrics = RequestMetrics()
        #: The admin operations and their HTTP endpoint, once started (``settings.admin_port``).
        self.admin: AdminApi | None = None
        self.admin_server: AdminHttpServer | None = None

    def add_service(self, service: Service) -> None:
        if self.server is not None:
            raise RuntimeError("services must be added before the app starts")
        self.services.append(service)

    def _open(self) -> Broker:
        """Blocking part of start: config layers, data directory, offsets, broker state.

        Every typed setting is built (and so every rule checked) before the data directory is
        opened; the static config was checked when it was built, the dynamic layers and group
        configs are checked as they are read.
        """
        settings = self.settings
        config, group_configs = load_dynamic_configs(settings.data_dir, settings.broker_config)
        group_config = GroupConfig.from_broker(config)
        consumer_group_config = ConsumerGroupConfig.from_broker(config)
        txn_config = TxnConfig.from_broker(config)
        log_manager = LogManager(settings.data_dir, config, self.clock)
        log_manager.open()
        self.log_manager = log_manager
        meta = read_meta_properties(settings.data_dir)
        producer_ids = ProducerIdManager(settings.data_dir)
        broker = Broker.create(
            clock=self.clock,
            group_config=group_config,
            consumer_group_config=consumer_group_config,
            group_configs=group_configs,
            group_log=GroupLog(log_manager, self.clock),
            log_manager=log_manager,
            broker_config=config,
            producer_ids=producer_ids,
            cluster_id=meta.cluster_id if meta is not None else "kompakt",
            advertised_host=settings.advertised_host,
            advertised_port=settings.advertised_port,
        )
        self._attach_cleaner(broker, log_manager)
        if settings.compaction_chaos_seed is not None and broker.cleaner is not None:
            from kompakt.server.compaction_chaos import ChaosFetchWaiters, CompactionChaos

            chaos = CompactionChaos(
                settings.compaction_chaos_seed, broker.cleaner, log_manager.logs, self.clock
            )
            broker.fetch_waiters = ChaosFetchWaiters(chaos)
        broker.txn = self._open_transactions(broker, log_manager, producer_ids, txn_config)
        return broker

    def _open_transactions(
        self,
        broker: Broker,
        log_manager: LogManager,
        producer_ids: ProducerIdManager,
        config: TxnConfig,
    ) -> TransactionCoordinator:
        """The transaction coordinator, loaded from ``__transaction_state`` after the offsets (a
        decided transaction's markers complete its pending offset commits)."""
        txn = TransactionCoordinator(log_manager, self.clock, producer_ids, config)

        def on_marker(topic: str, partition: int, producer_id: int, committed: bool) -> None:
            if topic == OFFSETS_TOPIC:
                broker.groups.complete_transaction(partition, producer_id, committed)
            broker.fetch_waiters.notify(topic, partition)

        txn.markers.listeners.append(on_marker)
        txn.load()
        return txn

    def _attach_cleaner(self, broker: Broker, log_manager: LogManager) -> None:
        """Create the log cleaner, run it as a service, and subscribe it to config changes and
        topic deletions (so a deleted partition's clean is aborted before its files go)."""
        warmup = BackgroundWarmup()
        cleaner = LogCleaner(
            broker.broker_config,
            log_manager.logs,
            self.settings.data_dir,
            self.clock,
            kernels_ready=warmup.wait,
            kernels_pending=lambda: warmup.running,
            readers=GroupReaderPositions(broker.groups),
        )
        broker.cleaner = cleaner
        self.services.insert(0, CleanerService(cleaner, warmup))

        def on_config(config: BrokerConfig) -> None:
            if CleanerSettings.from_broker(config) != cleaner.settings:
                cleaner.reconfigure(config)

        def on_deleted(topic: str, partitions: Sequence[int]) -> None:
            for partition in partitions:
                cleaner.partition_deleted((topic, partition))

        broker.config_listeners.append(on_config)
        broker.on_topic_deleted.append(on_deleted)
        broker.on_topic_deleted.append(broker.groups.on_topic_deleted)

    async def start(self) -> KafkaServer:
        """Bind every address, open storage, start services, then listen; returns the server.

        The addresses are bound first, so that a taken port
        (:class:`~kompakt.server.listener.BindError`) fails before the data directory is created
        or locked, and start-up is not spent opening logs for a broker that cannot listen.
        """
        settings = self.settings
        server_settings = ServerSettings.from_broker(settings.broker_config)
        kafka_listeners = await _bind_all(settings.kafka_listeners())
        admin_listener: Listener | None = None
        security = None
        try:
            if settings.admin_port is not None:
                security = admin_security(settings)
                admin_listener = await Listener.bind(
                    settings.admin_host, settings.admin_port, "admin", ssl_context=security[1]
                )
            broker = await asyncio.to_thread(self._open)
        except BaseException:
            await _close_listeners(*kafka_listeners, admin_listener)
            raise
        self.broker = broker
        try:
            for service in self.services:
                await asyncio.to_thread(service.start)
                self._started.append(service)
            server = KafkaServer(
                broker,
                settings.host,
                settings.port,
                max_frame_bytes=server_settings.socket_request_max_bytes,
                request_metrics=self.request_metrics,
                listeners=settings.kafka_listeners(),
            )
            await server.start(kafka_listeners)
            self.server = server
            await self._start_admin(broker, admin_listener, security)
        except BaseException:
            if self.server is not None:
                await self.server.close()
                self.server = None
            else:
                await _close_listeners(*kafka_listeners)
            if self.admin_server is None:
                await _close_listeners(admin_listener)
            await self._stop_storage()
            raise
        self._start_background(broker)
        return server

    async def _start_admin(
        self,
        broker: Broker,
        listener: Listener | None,
        security: tuple[AdminAccess, ssl.SSLContext | None] | None,
    ) -> None:
        """The admin operations always exist (the pytest fixture uses them in-process); the HTTP
        endpoint listens only when ``settings.admin_port`` is set (``listener`` is its address)."""
        self.admin = AdminApi(
            broker,
            self.clock,
            request_metrics=self.request_metrics,
            log_dir=str(self.settings.data_dir),
        )
        if self.server is not None:
            self.admin.kafka_listeners = self.server.listener_report()
        if listener is not None:
            assert security is not None
            access, ssl_context = security
            admin_server = AdminHttpServer(
                self.admin, self.settings.admin_host, listener.port, access=access, ssl_context=ssl_context
            )
            await admin_server.start(listener)
            self.admin_server = admin_server

    def _start_background(self, broker: Broker) -> None:
        server_settings = ServerSettings.from_broker(broker.broker_config)
        logs = broker.logs
        initial = server_settings.log_initial_task_delay_ms
        settings = self.settings
        scheduler = logs.scheduler

        def run_scheduler() -> None:
            if isinstance(scheduler, ManualScheduler):
                scheduler.run_due()

        def flush_due() -> None:
            now = self.clock.now_ms()
            for partition_log in logs.logs().values():
                partition_log.flush_if_due(now)

        def retention() -> None:
            now = self.clock.now_ms()
            for partition_log in logs.logs().values():
                if not partition_log.config.compact:
                    partition_log.delete_old_segments(now)

        periodic: list[tuple[str, int, int, Callable[[], object]]] = [
            ("log-scheduler", 0, settings.scheduler_interval_ms, run_scheduler),
            ("flush-check", initial, settings.flush_check_interval_ms, flush_due),
            (
                "recovery-point-checkpoint",
                initial,
                server_settings.recovery_point_checkpoint_interval_ms,
                logs.checkpoint_recovery_points,
            ),
            (
                "log-start-offset-checkpoint",
                initial,
                server_settings.log_start_offset_checkpoint_interval_ms,
                logs.checkpoint_log_start_offsets,
            ),
            (
                "high-watermark-checkpoint",
                initial,
                server_settings.high_watermark_checkpoint_interval_ms,
                logs.checkpoint_high_watermarks,
            ),
            ("log-retention", initial, server_settings.log_retention_check_interval_ms, retention),
            # Tables in use read what was appended meanwhile, so a lookup after a burst stays short.
            ("table-catch-up", TABLE_CATCH_UP_MS, TABLE_CATCH_UP_MS, self._refresh_tables),
        ]
        txn = broker.txn
        if txn is not None:
            periodic += [
                (
                    "transaction-abort",
                    txn.config.abort_timed_out_transactions_interval_ms,
                    txn.config.abort_timed_out_transactions_interval_ms,
                    txn.abort_timed_out_transactions,
                ),
                (
                    "transactional-id-expiration",
                    txn.config.remove_expired_transactional_ids_interval_ms,
                    txn.config.remove_expired_transactional_ids_interval_ms,
                    txn.expire_transactional_ids,
                ),
            ]
        for name, delay_ms, interval_ms, fn in periodic:
            if interval_ms > 0:
                self._tasks.append(
                    asyncio.create_task(self._every(name, delay_ms, interval_ms, fn), name=f"kompakt-{name}")
                )
        # Offset expiry touches the group coordinator, which lives on the event loop: run it there
        # (its tombstones are one small append), first at startup as Kafka does, then every
        # offsets.retention.check.interval.ms.
        groups = broker.groups
        expiry_interval_ms = groups.config.offsets_retention_check_interval_ms
        if expiry_interval_ms > 0:
            groups.expire_on_tick = False
            self._tasks.append(
                asyncio.create_task(
                    self._every_on_loop("offsets-expiry", 0, expiry_interval_ms, groups.expire_offsets),
                    name="kompakt-offsets-expiry",
                )
            )

    def _refresh_tables(self) -> None:
        if self.admin is not None:
            self.admin.refresh_tables()

    async def _every(self, name: str, delay_ms: int, interval_ms: int, fn: Callable[[], object]) -> None:
        """Run ``fn`` in a worker thread after ``delay_ms`` and then every ``interval_ms``."""
        await asyncio.sleep(delay_ms / 1000)
        while True:
            try:
                await asyncio.to_thread(fn)
            except Exception:
                log.exception("background task %s failed", name)
            await asyncio.sleep(interval_ms / 1000)

    async def _every_on_loop(
        self, name: str, delay_ms: int, interval_ms: int, fn: Callable[[], object]
    ) -> None:
        """Run ``fn`` on the event loop itself after ``delay_ms`` and then every ``interval_ms``."""
        await asyncio.sleep(delay_ms / 1000)
        while True:
            try:
                fn()
            except Exception:
                log.exception("background task %s failed", name)
            await asyncio.sleep(interval_ms / 1000)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, finish in-flight requests, stop background work and services, close logs."""
        if self.admin_server is not None:
            await self.admin_server.close()
            self.admin_server = None
        if self.admin is not None:
            await asyncio.to_thread(self.admin.wait_background)
        if self.server is not None:
            await self.server.close(grace_s)
            self.server = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._stop_storage()

    async def _stop_storage(self) -> None:
        while self._started:
            service = self._started.pop()
            try:
                await asyncio.to_thread(service.stop)
            except Exception:
                log.exception("stopping service %s failed", service.name)
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.close)
            self.log_manager = None

    def summary(self) -> tuple[int, int]:
        """``(topics, partitions)`` currently hosted, for the ready line."""
        if self.log_manager is None:
            return 0, 0
        topics = self.log_manager.topics()
        return len(topics), sum(meta.partitions for meta in topics.values())
