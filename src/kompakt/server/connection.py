"""One client connection: read frames, dispatch, write responses in request order.

Requests of one connection are served strictly one after another, which is what Kafka does (it
mutes a channel until the response to its current request is sent). That keeps pipelined requests
from librdkafka answered in order even when one of them is deferred (JoinGroup waiting for a
rebalance), and keeps the side effects of consecutive Produce requests in order. Other connections
are unaffected: each has its own task.

A frame that cannot be decoded, or a handler that raises, closes this connection after one log
line; the server and the other connections keep going.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TypeVar

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol import codec
from kompakt.protocol.framing import FrameReader, FrameTooLarge

log = logging.getLogger(__name__)

T = TypeVar("T")

_READ_SIZE = 256 * 1024


async def wait_deferred(deferred: Deferred[T]) -> T:
    """Await a broker :class:`Deferred` from the event loop (it may be settled on any thread)."""
    if deferred.done:
        return deferred.result()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(source: Deferred[T]) -> None:
        if future.done():  # the waiting connection was cancelled
            return
        try:
            future.set_result(source.result())
        except Exception as exc:  # noqa: BLE001 - re-raised in the awaiting task
            future.set_exception(exc)

    def on_done(source: Deferred[T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is already closed: nobody is waiting
            loop.call_soon_threadsafe(settle, source)

    deferred.add_done_callback(on_done)
    return await future


class Connection:
    """Serves one accepted socket until the peer closes, a protocol error, or :meth:`stop`."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_frame_bytes: int,
    ) -> None:
        self._dispatcher = dispatcher
        self._reader = reader
        self._writer = writer
        self._frames = FrameReader(max_frame_bytes)
        peer = writer.get_extra_info("peername")
        self.client_host: str = peer[0] if isinstance(peer, tuple) else str(peer or "")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._stopping = False
        self._idle = True

    def stop(self) -> bool:
        """Ask the connection to close after its current request; True when it is idle right now."""
        self._stopping = True
        return self._idle

    async def run(self) -> None:
        try:
            await self._loop()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("connection %s: %s", self.peer, exc)
        finally:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()

    async def _loop(self) -> None:
        while not self._stopping:
            data = await self._reader.read(_READ_SIZE)
            if not data:
                return
            try:
                frames = self._frames.feed(data)
            except FrameTooLarge as exc:
                log.warning("closing connection %s: %s", self.peer, exc)
                return
            self._idle = False
            for frame in frames:
                if not await self._serve(frame):
                    return
            await self._writer.drain()
            self._idle = True

    async def _serve(self, frame: bytes | memoryview) -> bool:
        """Answer one frame; False means close the connection."""
        dispatcher = self._dispatcher
        try:
            request = dispatcher.decode(frame)
        except codec.UnsupportedVersion as exc:
            refusal = dispatcher.refuse(exc)
            if refusal is None:
                log.warning("closing connection %s: %s (%s)", self.peer, exc, codec.api_name(exc.api_key))
                return False
            self._writer.writelines(refusal)
            return True
        except codec.MalformedRequest as exc:
            log.warning("closing connection %s: %s", self.peer, exc)
            return False
        ctx = dispatcher.context(request, self.client_host)
        try:
            if dispatcher.spec(request.api_key).blocking:
                result = await asyncio.to_thread(dispatcher.call, ctx, request.body)
            else:
                result = dispatcher.call(ctx, request.body)
            response = await wait_deferred(result) if isinstance(result, Deferred) else result
            if response is None:
                return True
            chunks = codec.encode_response(request.correlation_id, response)
        except Exception:
            log.exception(
                "closing connection %s: %s v%d failed",
                self.peer,
                codec.api_name(request.api_key),
                request.api_version,
            )
            return False
        self._writer.writelines(chunks)
        return True
