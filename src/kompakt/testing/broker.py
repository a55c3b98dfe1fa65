"""An in-process kompakt broker for tests: real listener, real cleaner, manual clock.

:class:`InProcessBroker` runs a :class:`~kompakt.server.app.BrokerApp` on a background thread
with its own event loop, on free ports and a data directory the caller owns. Clients connect to
:attr:`InProcessBroker.bootstrap_servers` exactly as to any Kafka broker; the test drives
compaction directly through the same admin operations the HTTP endpoint serves (roll, compact
now, move the manual clock, explain, read what is on disk), without sleeping: every operation
returns when it is done.

Running in-process (rather than a ``kompakt serve`` subprocess) is what makes a whole
produce / roll / compact / advance-time / compact cycle take milliseconds: no interpreter start,
no numba import per test, no polling for a ready line.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kompakt.broker import topic_admin
from kompakt.config.broker import BrokerConfig
from kompakt.server.admin_api import AdminApi, AdminApiError, StoredRecord
from kompakt.server.app import AppSettings, BrokerApp
from kompakt.server.manual_clock import ManualClock, parse_duration_ms

#: Broker configs that make a test broker quick: a 50 ms cleaner backoff, no rebalance delay,
#: a one-partition offsets topic. The caller's overrides win.
TEST_BROKER_DEFAULTS: dict[str, str] = {
    "log.cleaner.backoff.ms": "50",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}


class BrokerOperationError(Exception):
    """A fixture operation was refused (unknown topic, topic exists, bad config, ...)."""


def config_name(name: str) -> str:
    """``segment_ms`` -> ``segment.ms``: keyword arguments cannot contain dots."""
    return name.replace("_", ".")


def config_value(value: object) -> str:
    """Config values as Kafka strings (``True`` -> ``"true"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class InProcessBroker:
    """A broker on a background thread. Use as a context manager or call :meth:`start`/:meth:`stop`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        overrides: Mapping[str, str] | None = None,
        manual_clock: bool = True,
        admin_http: bool = True,
        host: str = "127.0.0.1",
        start_timeout_s: float = 60.0,
        compaction_chaos: int | None = None,
    ) -> None:
        """``compaction_chaos``: a seed for :mod:`kompakt.server.compaction_chaos` (random legal
        rolls and cleans of compacted topics as records arrive); the cleaner threads are then off
        unless ``overrides`` sets ``log.cleaner.enable``."""
        props = {**TEST_BROKER_DEFAULTS, **{k: config_value(v) for k, v in (overrides or {}).items()}}
        if compaction_chaos is not None:
            props.setdefault("log.cleaner.enable", "false")
        self.data_dir = Path(data_dir).resolve()
        self.clock: ManualClock | None = ManualClock() if manual_clock else None
        self.settings = AppSettings(
            data_dir=self.data_dir,
            broker_config=BrokerConfig.from_properties(props),
            host=host,
            port=0,
            advertised_host=host,
            admin_host=host,
            admin_port=0 if admin_http else None,
            compaction_chaos_seed=compaction_chaos,
        )
        self.app = BrokerApp(self.settings, self.clock)
        self._start_timeout_s = start_timeout_s
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> InProcessBroker:
        """Start the broker thread and return once the listener accepts (or raise its error)."""
        self._thread = threading.Thread(target=self._run, name="kompakt-test-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._start_timeout_s):
            raise BrokerOperationError(f"the broker did not start within {self._start_timeout_s} s")
        if self._error is not None:
            self._thread.join()
            raise BrokerOperationError(f"the broker failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        await self.app.start()
        try:
            self._ready.set()
            await self._stop_event.wait()
        finally:
            await self.app.stop()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop accepting, stop the cleaner, flush and close the logs; idempotent."""
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop_event.set)
        thread.join(timeout_s)
        self._thread = None
        if thread.is_alive():
            raise BrokerOperationError(f"the broker did not stop within {timeout_s} s")

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the Kafka listener, for any Kafka client's ``bootstrap.servers``."""
        server = self.app.server
        if server is None:
            raise BrokerOperationError("the broker is not running")
        return f"{server.host}:{server.port}"

    @property
    def admin_url(self) -> str:
        """Base URL of the admin HTTP endpoint (for ``kompakt admin --admin-url`` or HTTP tests)."""
        if self.app.admin_server is None:
            raise BrokerOperationError("the broker runs no admin HTTP endpoint")
        return self.app.admin_server.url

    @property
    def admin(self) -> AdminApi:
        """The admin operations behind the HTTP endpoint, called in-process."""
        if self.app.admin is None:
            raise BrokerOperationError("the broker is not running")
        return self.app.admin

    # ------------------------------------------------------------------ operations

    def create_topic(self, name: str, partitions: int = 1, **configs: object) -> None:
        """Create a topic with Kafka topic configs, as a CreateTopics request would.

        Config names may be given with dots (``**{"cleanup.policy": "compact"}``) or underscores
        (``cleanup_policy="compact"``, ``segment_ms=100``).
        """
        broker = self.admin.broker
        entries = [(config_name(key), config_value(value)) for key, value in configs.items()]
        try:
            topic_admin.create_topic(
                broker.logs,
                broker.broker_config,
                broker.node_id,
                name,
                partitions,
                -1,
                [],
                entries,
                validate_only=False,
            )
        except topic_admin.AdminError as exc:
            raise BrokerOperationError(f"cannot create topic {name!r}: {exc}") from None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AdminApiError as exc:
            raise BrokerOperationError(exc.message) from None

    def partitions(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Offsets, sizes, segments, dirty ratio and cleaning state of every partition."""
        result: list[dict[str, Any]] = self._call(self.admin.partitions, topic)["partitions"]
        return result

    def roll(self, topic: str, partition: int | None = None) -> list[dict[str, Any]]:
        """Roll the active segment of every partition of ``topic`` (or of one partition)."""
        result: list[dict[str, Any]] = self._call(self.admin.roll, topic, partition)["partitions"]
        return result

    def compact_now(
        self, topic: str, partition: int | None = None, *, wait: bool = True
    ) -> list[dict[str, Any]]:
        """Compact every partition of ``topic`` now, from its log start, whatever its dirty ratio.

        Only records outside the active segment are cleaned: :meth:`roll` first to include the
        latest ones. With ``wait`` (the default) returns each partition's clean statistics
        (``passes``, ``bytes_read``, ``records_written``, ``tombstones_removed``, ...).
        """
        if wait:
            result: list[dict[str, Any]] = self._call(self.admin.compact, topic, partition)["partitions"]
            return result
        self._call(self.admin.compact_in_background, topic, partition)
        return []

    def advance_clock(self, ms: int | str) -> int:
        """Move the manual clock forward by ``ms`` milliseconds (or a duration such as ``"25h"``);
        returns the new time in ms and wakes the cleaner."""
        amount = parse_duration_ms(ms) if isinstance(ms, str) else ms
        now_ms: int = self._call(self.admin.clock_advance, amount)["now_ms"]
        return now_ms

    def now_ms(self) -> int:
        """The broker's current time for log and cleaner rules."""
        return self.admin.clock.now_ms()

    def explain(self, topic: str, partition: int | None = None) -> list[dict[str, Any]]:
        """Why each partition of ``topic`` is or is not being compacted (the explain report)."""
        result: list[dict[str, Any]] = self._call(self.admin.explain, topic, partition)["partitions"]
        return result

    def records(self, topic: str, partition: int = 0, *, include_control: bool = False) -> list[StoredRecord]:
        """Every record stored in the partition, tombstones included, in offset order."""
        result: list[StoredRecord] = self._call(
            self.admin.records, topic, partition, include_control=include_control
        )
        return result

    def compaction_source(self, topic: str, partition: int = 0) -> Any:
        """The partition as it is now, as the source of a compaction check
        (:func:`kompakt.testing.replay_check.assert_compaction_safe`)."""
        from kompakt.testing.compaction_log import SourceLog

        return SourceLog.from_partition_log(self.admin.broker.logs.get_log(topic, partition))

    def chaos_counts(self) -> dict[tuple[str, int], tuple[int, int]]:
        """``(rolls, cleans)`` compaction chaos made per partition (empty without chaos)."""
        from kompakt.server.compaction_chaos import ChaosFetchWaiters

        waiters = self.admin.broker.fetch_waiters
        return waiters.chaos.counts() if isinstance(waiters, ChaosFetchWaiters) else {}

    def metrics(self) -> str:
        """The Prometheus exposition the ``/metrics`` endpoint serves."""
        return self.admin.metrics_text().decode()
