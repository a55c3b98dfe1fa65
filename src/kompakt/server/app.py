"""The asyncio server shell: listener, connection tasks, the coordinator tick, graceful close.

Everything protocol- or state-related lives below (``protocol``, ``broker``); this module only owns
sockets and tasks. Blocking storage handlers run in worker threads (see ``connection.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from kompakt.server.connection import Connection

log = logging.getLogger(__name__)


class KafkaServer:
    """A Kafka wire-protocol listener for one :class:`Broker`.

    When the broker's ``advertised_port`` is 0 (or its host empty) it is filled in from the bound
    socket, so tests can listen on port 0 and still hand out a reachable coordinator address.
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
    ) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.dispatcher = dispatcher or Dispatcher(broker)
        self._max_frame_bytes = max_frame_bytes
        self._tick_interval_s = tick_interval_ms / 1000
        self._server: asyncio.Server | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}

    async def start(self) -> None:
        """Bind and start accepting; returns once the socket listens."""
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        bound = self._server.sockets[0].getsockname()
        self.port = int(bound[1])
        if not self.broker.advertised_port:
            self.broker.advertised_port = self.port
        if not self.broker.advertised_host:
            self.broker.advertised_host = self.host
        self._tick_task = asyncio.create_task(self._tick_loop(), name="kompakt-group-tick")
        log.info("listening on %s:%d", self.host, self.port)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace_s``), then close everything."""
        if self._server is not None:
            self._server.close()
        for task, connection in list(self._connections.items()):
            if connection.stop():
                task.cancel()
        if self._connections:
            _, pending = await asyncio.wait(list(self._connections), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._tick_task is not None:
            self._tick_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tick_task
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> KafkaServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self.dispatcher, reader, writer, self._max_frame_bytes)
        # A task of our own, so that close() can cancel it without asyncio's stream callback
        # reporting the cancellation of the accept task as an error.
        task = asyncio.create_task(connection.run(), name=f"kompakt-conn-{connection.peer}")
        self._connections[task] = connection
        try:
            await asyncio.wait([task])
        finally:
            self._connections.pop(task, None)

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
