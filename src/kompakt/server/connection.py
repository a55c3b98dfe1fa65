"""One client connection: read frames, dispatch, write responses in request order.

Requests of one connection are served strictly one after another, which is what Kafka does (it
mutes a channel until the response to its current request is sent). That keeps pipelined requests
from librdkafka answered in order even when one of them is deferred (JoinGroup waiting for a
rebalance), and keeps the side effects of consecutive Produce requests in order. Other connections
are unaffected: each is served by a task of its own.

A frame that cannot be decoded, or a handler that raises, closes this connection after one log
line; the server and the other connections keep going.

Memory: a broker may hold thousands of connections that rarely send anything, so an idle
connection is only its transport, its socket and this protocol object. It has no task (one is
started when frames arrive and ends when they are answered), no coroutine, no futures and no
receive buffer: bytes are received into one scratch buffer per thread (:func:`_scratch`) and whole
frames are copied out of it at once. Python keeps the memory of a burst of connections after they
close (pymalloc does not give back an arena while one object in it lives), so what each connection
allocates is also what a broker keeps after a burst of them: with asyncio's streams, a task and a
256 KiB receive buffer each, that was 265 kB per connection, kept after close.

Reading: :class:`FrameProtocol` is an asyncio buffered protocol that receives a large frame (a
Produce request) straight into a buffer of its own size with ``recv_into``, instead of the chain of
copies of ``StreamReader`` (socket → bytes → reader buffer → bytes → frame assembly → frame). Such
a frame is handed on writable: it belongs to its request alone, and the log sets a produced
batch's offsets in it instead of copying the batch. It
reads ahead up to :data:`_READ_AHEAD` bytes of whole frames while the current request is served,
then pauses the socket. Writing goes through the transport, whose buffer limit is 0, so
:meth:`Connection._drain` returns only once everything written is on the socket.

TLS: on an SSL or SASL_SSL listener asyncio's TLS transport sits between this protocol and the
socket (it hands decrypted bytes to the same buffered-protocol callbacks). The socket then carries
ciphertext, so Fetch records cannot go from the page cache to it with ``sendfile``: a TLS
connection reads each file range and writes it through the transport (:meth:`Connection._send`).
The zero-copy path stays for plaintext listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import mmap
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar, cast

from kompakt.broker.context import HandlerResult, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.sasl.state import refusal as sasl_refusal
from kompakt.broker.session import KafkaPrincipal, Session
from kompakt.log import nowait
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.framing import FrameTooLarge
from kompakt.server.memory import MemoryReturn
from kompakt.server.request_metrics import RequestMetrics, kafka_request_name

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Builds the principal of a TLS connection from its transport once the handshake is done (the
#: client certificate's mapped subject, see :mod:`kompakt.server.tls`); raising refuses the client.
PrincipalBuilder = Callable[[asyncio.BaseTransport], KafkaPrincipal]

#: Bytes received per read into the thread's scratch buffer (whole frames are copied out of it).
_READ_SIZE = 256 * 1024
#: Frames at least this large are received straight into a buffer of their own.
_OWN_BUFFER_BYTES = 64 * 1024
#: Frames at least this large get an anonymous mapping as their buffer, smaller ones a bytearray.
#: A mapping costs memory only as the frame's bytes arrive and goes back to the kernel when the
#: frame is dropped, but each of its pages faults in on first write: for the 1 MB Produce frames
#: of a producer's defaults that was half as much broker CPU again as malloc's reused memory
#: (bench_broker, 256 MB produced, three runs each: 0.80-1.10 against 0.59-0.66 CPU-s). So a
#: frame announced but not sent holds at most this much of the broker (100 MiB before).
_MAPPED_FRAME_BYTES = 8 * 1024 * 1024
#: Bytes of whole frames read ahead of the request being served before the socket is paused.
_READ_AHEAD = 8 * 1024 * 1024
#: Bytes a TLS transport buffers before :meth:`Connection._drain` waits (file ranges are written
#: through it one at a time, each then drained).
_TLS_WRITE_HIGH = 4 * 1024 * 1024
#: Responses (and chunks) up to this size are joined before they are written.
_JOIN_LIMIT = codec.JOIN_BYTES


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


_SCRATCH = threading.local()

#: Frame buffers up to this size are kept for reuse once their request is answered.
_POOLED_FRAME_BYTES = 2 * 1024 * 1024
#: How many idle frame buffers are kept (per event-loop thread).
_POOLED_FRAMES = 2
#: Frame buffers from this size on are rounded up to a multiple of it (so that one fits the next
#: frame of a similar size) and may be kept; smaller frames get exact, unpooled buffers.
_FRAME_ROUNDING = 256 * 1024


class _FrameBuffers:
    """Receive buffers of large frames, reused once the request that used them is answered.

    ``bytearray(size)`` zero-fills the whole buffer before a byte arrives: for a producer's 1 MB
    Produce frames that memset was 4.5 % of the broker's samples in a produce profile. A buffer is
    taken back only when nothing still holds a view of it (resizing a ``bytearray`` with live
    views fails, which is the test), so a request that kept a slice of its frame is never
    overwritten; such a buffer is simply left to the garbage collector.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def _idle(self) -> list[bytearray]:
        idle: list[bytearray] | None = getattr(self._local, "idle", None)
        if idle is None:
            idle = self._local.idle = []
        return idle

    def take(self, size: int) -> bytearray:
        idle = self._idle()
        for at, buffer in enumerate(idle):
            if len(buffer) >= size:
                return idle.pop(at)
        if _FRAME_ROUNDING <= size <= _POOLED_FRAME_BYTES:  # a buffer that may be kept: round it up
            size = -(-size // _FRAME_ROUNDING) * _FRAME_ROUNDING
        return bytearray(size)

    def give(self, frame: memoryview) -> None:
        """Keep the buffer under ``frame`` (released here) for a later frame, if no view of it lives."""
        buffer = frame.obj
        if not isinstance(buffer, bytearray) or not _FRAME_ROUNDING <= len(buffer) <= _POOLED_FRAME_BYTES:
            return  # not a frame buffer of its own (a small frame's), or too large to keep
        idle = self._idle()
        if len(idle) >= _POOLED_FRAMES:
            return
        try:
            frame.release()
            buffer.append(0)  # BufferError while any other view of the buffer is alive
        except BufferError:
            return
        del buffer[-1]
        idle.append(buffer)


_FRAMES = _FrameBuffers()


def _scratch() -> memoryview:
    """This thread's receive buffer, shared by every connection of its event loop.

    asyncio calls ``buffer_updated`` right after receiving into the buffer ``get_buffer`` gave it,
    on the loop's thread, so the bytes are always taken before another connection reads.
    """
    buffer: memoryview | None = getattr(_SCRATCH, "buffer", None)
    if buffer is None:
        buffer = _SCRATCH.buffer = memoryview(bytearray(_READ_SIZE))
    return buffer


class FrameProtocol(asyncio.BufferedProtocol):
    """Splits the byte stream into request frames (without their size prefix) as it arrives.

    Frames are queued for :meth:`take_frames` in order, and :meth:`frames_ready` is called when
    there is something to take: frames, the end of the stream, or an error. A size prefix outside
    ``0..max_frame_bytes`` is such an error (:class:`FrameTooLarge`, in :attr:`error` once the
    frames before it are taken); reading stops there.

    Memory follows the bytes that arrived more than what a size prefix claims: a small frame
    split across receives keeps only its received part; a large frame is received in place into
    a buffer of its size, for the largest ones an anonymous mapping whose pages the kernel
    provides as they are written and takes back as soon as the frame is dropped.
    """

    def __init__(self, max_frame_bytes: int) -> None:
        self._max_frame_bytes = max_frame_bytes
        self.transport: asyncio.Transport | None = None
        #: The received part of a small frame, size prefix included (or of a split size prefix).
        self._partial: bytearray | None = None
        self._frame: bytearray | mmap.mmap | None = None  # a large frame received in place
        self._frame_size = 0
        self._frame_filled = 0
        self._frames: list[bytes | memoryview] = []
        self._queued_bytes = 0
        self._paused = False
        #: The peer ended the stream (or the connection is gone): no frame follows the queued ones.
        self.at_eof = False
        #: Why no frame follows the queued ones, if not a clean end of the stream.
        self.error: Exception | None = None
        self._tls_transport = False

    def take_frames(self) -> list[bytes | memoryview]:
        """Every frame received so far (possibly none); reading resumes if the read-ahead was full."""
        frames = self._frames
        if not frames:
            return frames
        self._frames = []
        self._queued_bytes = 0
        if self._paused and self.error is None and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return frames

    def frames_ready(self) -> None:
        """Called when frames, the end of the stream or an error arrived (for subclasses)."""

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._tls_transport = transport.get_extra_info("ssl_object") is not None

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled : self._frame_size]
        if self._partial is None:
            # Between frames: read a little at first, so that most of a large frame lands in its
            # own buffer rather than being copied there from the scratch buffer.
            return _scratch()[:_OWN_BUFFER_BYTES]
        return _scratch()

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is None:
            if self.error is None:
                self._split(_scratch()[:nbytes])
            return
        self._frame_filled += nbytes
        if self._frame_filled == self._frame_size:
            self._frame, self._frame_filled = None, 0
            self._push(memoryview(frame)[: self._frame_size])

    def eof_received(self) -> bool:
        self.at_eof = True
        self.frames_ready()
        # Keep the write side open to answer what was received before the EOF; TLS cannot
        # half-close (asyncio warns and closes anyway), so there the answer is False.
        return not self.tls_transport

    @property
    def tls_transport(self) -> bool:
        """Whether the transport is asyncio's TLS transport (set once the connection is made)."""
        return self._tls_transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.at_eof = True
        if exc is not None and self.error is None:
            self.error = exc if isinstance(exc, ConnectionError) else ConnectionError(str(exc))
        self._partial = self._frame = None
        self.frames_ready()

    # ------------------------------------------------------------------ splitting

    def _split(self, view: memoryview) -> None:
        """Cut the frames out of ``view`` (just received), after the partial frame before them."""
        start, end = 0, len(view)
        if self._partial is not None:
            start = self._continue_partial(view)
            if self._partial is not None or self._frame is not None:
                return
        while end - start >= 4:
            size = self._frame_size_of(view, start)
            if self.error is not None:
                return
            if end - start - 4 >= size:
                self._push(bytes(view[start + 4 : start + 4 + size]))
                start += 4 + size
            elif size >= _OWN_BUFFER_BYTES:
                self._own_buffer(size, view[start + 4 :])
                return
            else:
                break
        if start < end:
            self._partial = bytearray(view[start:])

    def _continue_partial(self, view: memoryview) -> int:
        """Add the front of ``view`` to the partial frame; where the rest of ``view`` starts."""
        partial = self._partial
        assert partial is not None
        taken = 0
        if len(partial) < 4:  # the size prefix itself was split
            taken = min(4 - len(partial), len(view))
            partial += view[:taken]
            if len(partial) < 4:
                return taken
            size = self._frame_size_of(partial, 0)
            if self.error is not None:
                self._partial = None
                return taken
            if size >= _OWN_BUFFER_BYTES:
                self._partial = None
                return taken + self._own_buffer(size, view[taken:])
        wanted = 4 + int.from_bytes(partial[:4], "big")
        more = min(wanted - len(partial), len(view) - taken)
        partial += view[taken : taken + more]
        if len(partial) == wanted:
            self._partial = None
            self._push(memoryview(partial)[4:].toreadonly())
        return taken + more

    def frame_limit(self) -> int:
        """The largest frame accepted now (a subclass may lower it for some connections)."""
        return self._max_frame_bytes

    def _frame_size_of(self, buffer: bytearray | memoryview, at: int) -> int:
        """The size prefix at ``at``; one out of bounds fails the stream (see :attr:`error`)."""
        size = int.from_bytes(buffer[at : at + 4], "big", signed=True)
        limit = self.frame_limit()
        if size < 0 or size > limit:
            self.error = FrameTooLarge(size, limit)
            self._pause()
            self.frames_ready()
        return size

    def _own_buffer(self, size: int, received: memoryview) -> int:
        """Start receiving a frame of ``size`` bytes in place, with its first bytes ``received``;
        returns how many of them it took.

        From :data:`_MAPPED_FRAME_BYTES` on, an anonymous mapping rather than a ``bytearray``: it
        is not zero-filled up front (a size prefix alone costs no resident memory) and it is
        unmapped, not kept by malloc, when it is freed. Below that, a buffer that served an earlier
        frame when one is free (:class:`_FrameBuffers`), else a new one, at least ``size`` long.
        """
        taken = min(size, len(received))
        frame: bytearray | mmap.mmap = (
            mmap.mmap(-1, size) if size >= _MAPPED_FRAME_BYTES else _FRAMES.take(size)
        )
        frame[:taken] = received[:taken]
        if taken == size:
            self._push(memoryview(frame)[:size])
        else:
            self._frame, self._frame_size, self._frame_filled = frame, size, taken
        return taken

    def _push(self, frame: bytes | memoryview) -> None:
        self._frames.append(frame)
        self._queued_bytes += len(frame)
        if self._queued_bytes >= _READ_AHEAD:
            self._pause()
        self.frames_ready()

    def _pause(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()


class Connection(FrameProtocol):
    """Serves one accepted socket until the peer closes, a protocol error, or :meth:`stop`.

    ``connections`` is the server's set of open connections: this one is in it from
    ``connection_made`` to ``connection_lost``.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        max_frame_bytes: int,
        connections: set[Connection],
        request_metrics: RequestMetrics | None = None,
        memory: MemoryReturn | None = None,
        session: Session | None = None,
        principal_of: PrincipalBuilder | None = None,
    ) -> None:
        super().__init__(max_frame_bytes)
        self._principal_of = principal_of
        #: True on a TLS transport: file ranges are read and written through it, not sendfile'd.
        self._tls = False
        #: This connection's listener and principal; every request's context shares it.
        self.session = session if session is not None else Session()
        self._dispatcher = dispatcher
        self._metrics = request_metrics
        self._memory = memory
        self._connections = connections
        #: Serves the queued frames; None while the connection is idle.
        self.task: asyncio.Task[None] | None = None
        self._stopping = False
        self._lost = False
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] | None = None
        self._direct: _DirectSender | None = None

    def frame_limit(self) -> int:
        """Before a SASL connection has authenticated, ``sasl.server.max.receive.size`` (512 KiB):
        an unauthenticated client cannot make the broker buffer a 100 MB request, as in Kafka."""
        session = self.session
        if session.requires_sasl and not session.authenticated:
            config = self._dispatcher.broker.broker_config
            return min(self._max_frame_bytes, config.get_int("sasl.server.max.receive.size"))
        return self._max_frame_bytes

    @property
    def peer(self) -> str:
        """``host:port`` of the client, for log lines."""
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    @property
    def client_host(self) -> str:
        """The client's address, as request contexts (and quotas) see it."""
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return str(peer[0]) if isinstance(peer, tuple) else str(peer or "")

    def stop(self) -> None:
        """Close the connection after its current request (right away when it is idle)."""
        self._stopping = True
        if self.task is None:
            self._close()

    async def wait_closed(self) -> None:
        """Until the socket is closed (``connection_lost``)."""
        if self._lost:
            return
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._closed)

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # _drain() returns only once the transport's buffer is empty, so a response written past
        # the transport (:class:`_DirectSender`) can never overtake bytes still queued in it.
        self._tls = self.tls_transport
        if not self._tls:
            cast(asyncio.WriteTransport, transport).set_write_buffer_limits(high=0)
        else:
            # A TLS transport pauses its protocol at a buffered size >= high (not >): 0 would
            # pause it for good. Nothing writes past it, so the usual limits keep memory bounded.
            cast(asyncio.WriteTransport, transport).set_write_buffer_limits(high=_TLS_WRITE_HIGH)
        self._connections.add(self)
        if self._principal_of is not None:
            try:
                self.session.principal = self._principal_of(transport)
            except Exception as exc:  # noqa: BLE001 - any failure refuses this client only
                log.warning("closing connection %s: no principal for its certificate: %s", self.peer, exc)
                self._stopping = True
                transport.close()
                return
            log.debug("connection %s authenticated as %s", self.peer, self.session.principal)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._connections.discard(self)
        self._wake_drain()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        super().connection_lost(exc)
        if self.task is None and self._direct is not None:
            self._direct.close()
            self._direct = None

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain()

    def frames_ready(self) -> None:
        if self.task is None and not self._lost and not self._stopping:
            self.task = asyncio.get_running_loop().create_task(self._serve_queued())

    # ------------------------------------------------------------------ serving

    async def _serve_queued(self) -> None:
        """Answer the queued frames, and those that arrive meanwhile; end when there are none."""
        close = True
        try:
            close = await self._serve_frames()
        except ConnectionError as exc:
            log.debug("connection %s: %s", self.peer, exc)
        except Exception:
            log.exception("closing connection %s", self.peer)
        finally:
            self.task = None
            if close or self._stopping:
                self._close()
            if self._lost and self._direct is not None:
                self._direct.close()
                self._direct = None

    async def _serve_frames(self) -> bool:
        """Serve until no frame is queued; True means close the connection."""
        while not self._stopping:
            frames = self.take_frames()
            if not frames:
                break
            for frame in frames:
                if not await self._serve(frame):
                    return True
                if isinstance(frame, memoryview):
                    _FRAMES.give(frame)
            await self._drain()
        error = self.error
        if isinstance(error, FrameTooLarge):
            log.warning("closing connection %s: %s", self.peer, error)
        elif error is not None:
            log.debug("connection %s: %s", self.peer, error)
        return self.at_eof or error is not None

    def _close(self) -> None:
        if self.transport is not None and not self._lost:
            self.transport.close()

    async def _drain(self) -> None:
        """Until everything written is on the socket (the transport's buffer limit is 0)."""
        while self._write_paused and not self._lost:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._drain_waiter
            finally:
                self._drain_waiter = None
        if self._lost:
            raise ConnectionError("connection lost")

    def _wake_drain(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

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
            await self._send(refusal)
            return True
        except codec.MalformedRequest as exc:
            log.warning("closing connection %s: %s", self.peer, exc)
            return False
        session = self.session
        if session.requires_sasl:
            # Before authentication, and after an expired session, a SASL listener serves only
            # the SASL APIs: anything else closes the connection, as Kafka's authenticator does.
            reason = sasl_refusal(session, request.api_key, dispatcher.broker.clock.now_ms())
            if reason is not None:
                log.warning("closing connection %s: %s", self.peer, reason)
                return False
        ctx = dispatcher.context(request, self.client_host, session)
        started = time.perf_counter()
        try:
            spec = dispatcher.spec(request.api_key)
            if not spec.blocking:
                result = dispatcher.call(ctx, request.body)
            elif spec.try_cached and nowait.available():
                result = await self._call_cached_or_in_thread(ctx, request.body)
            else:
                result = await asyncio.to_thread(dispatcher.call, ctx, request.body)
            response = await wait_deferred(result) if isinstance(result, Deferred) else result
            if response is None:
                self._record(request.api_key, started)
                return True
            chunks = codec.encode_response(request.correlation_id, response)
            built = sum(len(chunk) for chunk in chunks if isinstance(chunk, bytes | bytearray))
        except Exception:
            self._record(request.api_key, started, failed=True)
            log.exception(
                "closing connection %s: %s v%d failed",
                self.peer,
                codec.api_name(request.api_key),
                request.api_version,
            )
            return False
        await self._send(chunks)
        self._record(request.api_key, started)
        if session.close_after_response:  # a failed SASL authentication: Kafka closes after it
            return False
        if self._memory is not None:
            # A Produce frame is its records, received into a buffer of their own and written to
            # the log as they are: it leaves no garbage behind, however large.
            framed = 0 if request.api_key == ApiKey.PRODUCE else len(frame)
            self._memory.after_request(max(framed, built))
        return True

    async def _call_cached_or_in_thread(
        self, ctx: RequestContext, body: codec.RequestPayload
    ) -> HandlerResult:
        """A storage handler on the event loop when everything it reads is in the page cache,
        else in a worker thread (:mod:`kompakt.log.nowait`): the thread hop was a quarter of a
        cached Fetch's broker time, and a read from disk on the loop would stall every connection.
        """
        try:
            with nowait.cached_only():
                return self._dispatcher.call(ctx, body)
        except nowait.WouldBlock:
            return await asyncio.to_thread(self._dispatcher.call, ctx, body)

    async def _send(self, chunks: codec.Chunks) -> None:
        """Write one response in order, then release its file ranges.

        A response of bytes only goes through the transport (see :meth:`_write_bytes`). One that
        holds a :class:`~kompakt.protocol.codec.FileRange` (Fetch records left in a segment file)
        is written by :class:`_DirectSender` once the transport has flushed everything before it:
        the bytes with ``writev``, the records from the page cache (``sendfile``, or a read into a
        reused buffer and a write for a peer on this host).
        """
        try:
            if all(isinstance(chunk, bytes | bytearray | memoryview) for chunk in chunks):
                self._write_bytes(cast(list[bytes | bytearray | memoryview], chunks))
                return
            if self._tls:
                await self._send_through_transport(chunks)
                return
            await self._drain()  # the write limits are 0: this waits for an empty buffer
            if self._direct is None:
                assert self.transport is not None
                self._direct = _DirectSender(self.transport)
            await self._direct.send(chunks)
        finally:
            codec.close_chunks(chunks)

    async def _send_through_transport(self, chunks: codec.Chunks) -> None:
        """A response with file ranges on a TLS transport: each range is read (from the page cache
        when it holds the bytes, else in a worker thread) and written through the transport, which
        encrypts it; only one range is held in memory at a time."""
        loop = asyncio.get_running_loop()
        pending: list[bytes | bytearray | memoryview] = []
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                pending.append(chunk)
                continue
            if pending:
                self._write_bytes(pending)
                pending = []
            data = await read_file_range(loop, chunk)
            self._write_bytes([data])
            await self._drain()
        if pending:
            self._write_bytes(pending)

    def _write_bytes(self, chunks: list[bytes | bytearray | memoryview]) -> None:
        """Queue byte chunks without copying record data more than once.

        ``writelines`` (Python 3.11) joins every chunk into one new bytes object, then slices and
        re-buffers what the socket did not take: three copies of a Fetch response's records. Small
        responses still go out joined (one syscall); large ones are written chunk by chunk, so the
        socket takes the first chunks straight from the segment buffers and only the rest is
        copied, once, into the transport's buffer.
        """
        transport = self.transport
        assert transport is not None
        for view in _coalesce(chunks):
            transport.write(view)

    def _record(self, api_key: int, started: float, *, failed: bool = False) -> None:
        if self._metrics is not None:
            self._metrics.record(
                kafka_request_name(codec.api_name(api_key)), time.perf_counter() - started, failed=failed
            )


def connection_factory(
    dispatcher: Dispatcher,
    max_frame_bytes: int,
    connections: set[Connection],
    request_metrics: RequestMetrics | None = None,
    memory: MemoryReturn | None = None,
    *,
    listener_name: str = "PLAINTEXT",
    security_protocol: str = "PLAINTEXT",
    principal_of: PrincipalBuilder | None = None,
) -> Callable[[], Connection]:
    """The protocol factory of a Kafka listener: one :class:`Connection` per accepted socket,
    each with a fresh :class:`Session` of the listener's name and security protocol
    (``principal_of`` names the client of an SSL listener from its certificate)."""

    def factory() -> Connection:
        session = Session(
            listener_name=listener_name,
            security_protocol=security_protocol,
            authenticated=not security_protocol.startswith("SASL_"),
        )
        return Connection(
            dispatcher, max_frame_bytes, connections, request_metrics, memory, session, principal_of
        )

    return factory


_IOV_MAX = 1024


def _coalesce(chunks: list[bytes | bytearray | memoryview]) -> list[memoryview]:
    """Byte views to write: runs of small chunks (kio writes field by field) joined, large ones
    (record data) as they are, so a small response is one write and records are not copied."""
    views: list[memoryview] = []
    small: list[bytes | bytearray | memoryview] = []
    for chunk in chunks:
        if len(chunk) >= _JOIN_LIMIT:
            if small:
                views.append(memoryview(b"".join(small)))
                small.clear()
            views.append(memoryview(chunk).cast("B"))
        elif len(chunk):
            small.append(chunk)
    if small:
        views.append(memoryview(b"".join(small)))
    return views


#: Bytes of a file range read per ``pread`` when a range is copied rather than ``sendfile``d.
#: Measured over loopback and in the consume benchmark: 1 MiB did best; at 64-256 KiB the loop per
#: piece costs more sender CPU per byte, and 2 or 4 MiB pieces were no better.
_COPY_PIECE = 1 << 20
#: Copy buffers kept for reuse between responses (one is in use per response being written).
_IDLE_BUFFERS = 4
_NOWAIT = getattr(os, "RWF_NOWAIT", 0)


class _CopyBuffers:
    """Reusable read buffers for copied file ranges: a fresh ``bytearray`` is zero-filled and, at
    this size, mapped and unmapped by malloc every time."""

    def __init__(self) -> None:
        self._idle: list[memoryview] = []

    def take(self) -> memoryview:
        return self._idle.pop() if self._idle else memoryview(bytearray(_COPY_PIECE))

    def give(self, buffer: memoryview) -> None:
        if len(self._idle) < _IDLE_BUFFERS:
            self._idle.append(buffer)


_BUFFERS = _CopyBuffers()


async def read_file_range(loop: asyncio.AbstractEventLoop, chunk: codec.FileRange) -> bytearray:
    """The bytes of a file range, for a transport that cannot take them from the file (TLS):
    what the page cache holds is read right away (``RWF_NOWAIT``), the rest in a worker thread."""
    data = bytearray(chunk.size)
    view = memoryview(data)
    source, position, filled = chunk.fileno(), chunk.position, 0
    while filled < chunk.size:
        target = view[filled:]
        read = -1
        if _NOWAIT:
            try:
                read = os.preadv(source, [target], position + filled, _NOWAIT)
            except BlockingIOError:
                read = -1
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
        if read < 0:
            read = await loop.run_in_executor(None, os.preadv, source, [target], position + filled)
        if read == 0:  # the file shrank under us: the frame cannot be completed
            raise ConnectionError(f"read stopped with {chunk.size - filled} of {chunk.size} bytes unsent")
        filled += read
    return data


def copies_file_ranges(sock: socket.socket) -> bool:
    """Whether file ranges to this peer are read and written (True) or ``sendfile``d (False).

    A peer on this host (a loopback address, or our own address: the kernel routes that over the
    loopback device too) copies every byte out of the socket either way, and the page-cache
    fragments ``sendfile`` queues cost both ends more than one copy into ordinary socket buffers:
    measured on a 2-vCPU VM, 512 MB from the page cache to a reader on 127.0.0.1 took 0.57-0.75
    CPU-s/GB of sender time with ``sendfile`` against 0.35-0.47 with ``pread`` + ``send`` (and the
    reader 0.24-0.29 against 0.12). Towards a network card ``sendfile`` is the copy-free path.
    """
    if sock.family == socket.AF_UNIX:
        return True
    try:
        peer = str(sock.getpeername()[0])
        local = str(sock.getsockname()[0])
    except (OSError, IndexError, TypeError):
        return False
    if peer.startswith("::ffff:"):  # an IPv4 peer on a dual-stack socket
        peer = peer[len("::ffff:") :]
    return peer == local or peer == "::1" or peer.startswith("127.")


class _DirectSender:
    """Writes responses with file ranges on the socket itself, past the transport.

    A response is one ``writev`` for each run of encoded bytes and, for each file range, either
    ``sendfile`` or (to a local peer, see :func:`copies_file_ranges`) ``pread`` into a reused
    1 MiB buffer and ``write``, while the socket has room; when it has not, a single writer
    registration, kept until the response is out. ``loop.sendfile`` instead costs several
    selector changes per call (it pauses and resumes reading, registers and unregisters a
    writer): with librdkafka's default 1 MiB partition limit that was over a millisecond of
    server CPU per Fetch. The writer is registered on a duplicate of the socket's descriptor,
    because asyncio refuses a second owner for the transport's own. The response is corked
    (``TCP_CORK``) so the small header and trailer writes do not each go out as a segment of
    their own: 12 % less server CPU per Fetch at 1 MiB.

    Copied reads must not stall the event loop on a disk: they ask for page-cache data only
    (``RWF_NOWAIT``) and go to a worker thread for whatever is not cached. ``sendfile`` of an
    uncached range blocks like any read, as in Kafka's network threads.
    """

    def __init__(self, transport: asyncio.BaseTransport, *, copy: bool | None = None) -> None:
        self._sock = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
        self._fd = self._sock.fileno()
        self._copy = copies_file_ranges(self._sock) if copy is None else copy
        self._nowait = _NOWAIT
        self._waiter: asyncio.Future[None] | None = None

    def close(self) -> None:
        self._sock.close()

    def _cork(self, on: bool) -> None:
        """TCP_CORK around a response: its header, records and trailer leave in full segments."""
        if hasattr(socket, "TCP_CORK"):
            with contextlib.suppress(OSError):  # not TCP (a Unix socket in tests): nothing to do
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, int(on))

    async def send(self, chunks: codec.Chunks) -> None:
        loop = asyncio.get_running_loop()
        registered = False
        self._cork(True)
        try:
            pending: list[bytes | bytearray | memoryview] = []
            for chunk in chunks:
                if isinstance(chunk, bytes | bytearray | memoryview):
                    pending.append(chunk)
                    continue
                if pending:
                    registered = await self._write_all(loop, pending, registered)
                    pending = []
                if self._copy:
                    registered = await self._copy_range(loop, chunk, registered)
                else:
                    registered = await self._sendfile_range(loop, chunk, registered)
            if pending:
                registered = await self._write_all(loop, pending, registered)
        except OSError as exc:  # peer gone
            raise ConnectionError(f"send failed: {exc}") from exc
        finally:
            self._cork(False)
            if registered:
                loop.remove_writer(self._fd)

    async def _write_all(
        self, loop: asyncio.AbstractEventLoop, chunks: list[bytes | bytearray | memoryview], registered: bool
    ) -> bool:
        views = _coalesce(chunks)
        while views:
            try:
                sent = os.writev(self._fd, views[:_IOV_MAX])
            except BlockingIOError:
                sent = 0
            except InterruptedError:
                continue
            while sent and views:
                if sent >= len(views[0]):
                    sent -= len(views.pop(0))
                else:
                    views[0] = views[0][sent:]
                    sent = 0
            if views:
                registered = await self._writable(loop, registered)
        return registered

    async def _sendfile_range(
        self, loop: asyncio.AbstractEventLoop, chunk: codec.FileRange, registered: bool
    ) -> bool:
        position, remaining = chunk.position, chunk.size
        source = chunk.fileno()
        while remaining:
            try:
                sent = os.sendfile(self._fd, source, position, remaining)
            except BlockingIOError:
                registered = await self._writable(loop, registered)
                continue
            except InterruptedError:
                continue
            if sent == 0:  # the file shrank under us: the frame cannot be completed
                raise ConnectionError(f"sendfile stopped with {remaining} of {chunk.size} bytes unsent")
            position += sent
            remaining -= sent
        return registered

    async def _copy_range(
        self, loop: asyncio.AbstractEventLoop, chunk: codec.FileRange, registered: bool
    ) -> bool:
        position, remaining = chunk.position, chunk.size
        source = chunk.fileno()
        buffer = _BUFFERS.take()
        reusable = True
        try:
            while remaining:
                target = buffer[: min(remaining, len(buffer))]
                try:
                    read = await self._read(loop, source, target, position)
                except asyncio.CancelledError:
                    reusable = False  # a worker thread may still be reading into it
                    raise
                if read == 0:  # the file shrank under us: the frame cannot be completed
                    raise ConnectionError(f"read stopped with {remaining} of {chunk.size} bytes unsent")
                registered = await self._write_all(loop, [target[:read]], registered)
                position += read
                remaining -= read
        finally:
            if reusable:
                _BUFFERS.give(buffer)
        return registered

    async def _read(
        self, loop: asyncio.AbstractEventLoop, source: int, target: memoryview, position: int
    ) -> int:
        """Read what the page cache holds right away; anything else in a worker thread."""
        if self._nowait:
            try:
                return os.preadv(source, [target], position, self._nowait)
            except BlockingIOError:  # not cached: a disk read, not for the event loop
                pass
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                self._nowait = 0  # this file system cannot tell: every read goes to a thread
        return await loop.run_in_executor(None, os.preadv, source, [target], position)

    async def _writable(self, loop: asyncio.AbstractEventLoop, registered: bool) -> bool:
        """Wait until the socket takes more; the writer stays registered until the response is out."""
        self._waiter = loop.create_future()
        if not registered:
            loop.add_writer(self._fd, self._on_writable)
        try:
            await self._waiter
        finally:
            self._waiter = None
        return True

    def _on_writable(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
