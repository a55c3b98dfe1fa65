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
import time
from typing import TypeVar

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol import codec
from kompakt.protocol.framing import FrameReader, FrameTooLarge
from kompakt.server.request_metrics import RequestMetrics, kafka_request_name

log = logging.getLogger(__name__)

T = TypeVar("T")

_READ_SIZE = 256 * 1024
#: Responses (and chunks) up to this size are joined before they are written.
_JOIN_LIMIT = 64 * 1024


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
        request_metrics: RequestMetrics | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._metrics = request_metrics
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
        started = time.perf_counter()
        try:
            if dispatcher.spec(request.api_key).blocking:
                result = await asyncio.to_thread(dispatcher.call, ctx, request.body)
            else:
                result = dispatcher.call(ctx, request.body)
            response = await wait_deferred(result) if isinstance(result, Deferred) else result
            if response is None:
                self._record(request.api_key, started)
                return True
            chunks = codec.encode_response(request.correlation_id, response)
        except Exception:
            self._record(request.api_key, started, failed=True)
            log.exception(
                "closing connection %s: %s v%d failed",
                self.peer,
                codec.api_name(request.api_key),
                request.api_version,
            )
            return False
        self._write(chunks)
        self._record(request.api_key, started)
        return True

    def _write(self, chunks: codec.Chunks) -> None:
        """Queue a response without copying its record data more than once.

        ``StreamWriter.writelines`` (Python 3.11) joins every chunk into one new bytes object, then
        slices and re-buffers what the socket did not take: three copies of a Fetch response's
        records. Small responses still go out joined (one syscall); large ones are written chunk by
        chunk, so the socket takes the first chunks straight from the segment buffers and only the
        rest is copied, once, into the transport's buffer.
        """
        if sum(len(chunk) for chunk in chunks) <= _JOIN_LIMIT:
            self._writer.writelines(chunks)
            return
        small: list[bytes | bytearray | memoryview] = []
        for chunk in chunks:
            if len(chunk) < _JOIN_LIMIT:
                small.append(chunk)
                continue
            if small:
                self._writer.write(b"".join(small))
                small.clear()
            self._writer.write(chunk)
        if small:
            self._writer.write(b"".join(small))

    def _record(self, api_key: int, started: float, *, failed: bool = False) -> None:
        if self._metrics is not None:
            self._metrics.record(
                kafka_request_name(codec.api_name(api_key)), time.perf_counter() - started, failed=failed
            )
