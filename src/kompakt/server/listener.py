"""A listening address bound before the server behind it exists.

:class:`~kompakt.server.app.BrokerApp` binds its Kafka and admin addresses before it opens the
data directory: a taken port then fails start-up with one :class:`BindError` and nothing created
on disk, instead of a traceback from ``create_server`` after the data directory, its lock
and the cleaner threads exist. The sockets are bound but not yet listening
(``start_serving=False``), so a client that connects while the logs are being opened is refused
and retries, as with a broker that is not up yet; :meth:`Listener.serve` starts accepting.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
from collections.abc import Awaitable, Callable

from kompakt.errors import OperatorError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
ProtocolFactory = Callable[[], asyncio.BaseProtocol]


class BindError(OperatorError):
    """An address this process cannot listen on; ``in_use`` when another socket holds it.

    ``listener`` names which one (a Kafka listener's name such as ``"PLAINTEXT"``, ``"kafka"``
    for the one ``--port`` defines, or ``"admin"``), so the command line can name the option or
    the listener that moves it.
    """

    def __init__(self, host: str, port: int, listener: str, error: OSError) -> None:
        self.host = host
        self.port = port
        self.listener = listener
        self.in_use = error.errno == errno.EADDRINUSE
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.address = address
        reason = "is in use" if self.in_use else f"cannot be listened on: {error.strerror or error}"
        super().__init__(f"{address} {reason}")


class Listener:
    """One bound address; connections wait until :meth:`serve` gives it a handler."""

    def __init__(self, host: str, listener: str, tls: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.listener = listener
        #: The TLS context of an SSL/SASL_SSL listener (asyncio runs the handshake before the
        #: protocol sees the connection); None for plaintext.
        self.tls = tls
        self._server: asyncio.Server | None = None
        self._factory: ProtocolFactory | None = None

    @classmethod
    async def bind(
        cls,
        host: str,
        port: int,
        listener: str,
        tls: ssl.SSLContext | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> Listener:
        """Bind ``host:port`` (0 picks a free port; :attr:`port` names it) without accepting yet;
        with ``tls`` (or ``ssl_context``, the admin endpoint's spelling) every connection is a TLS
        server connection. An empty host binds every interface, as Kafka's ``listeners``
        entry ``PLAINTEXT://:9092``."""
        context = tls if tls is not None else ssl_context
        bound = cls(host, listener, context)
        loop = asyncio.get_running_loop()
        try:
            bound._server = await loop.create_server(
                bound._protocol, host or None, port, start_serving=False, ssl=context
            )
        except OSError as exc:
            raise BindError(host, port, listener, exc) from exc
        return bound

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def serve(self, handler: Handler) -> None:
        """Start listening and hand every connection to ``handler`` as an asyncio stream pair."""

        def streams() -> asyncio.BaseProtocol:
            return asyncio.StreamReaderProtocol(asyncio.StreamReader(), handler)

        await self.serve_protocol(streams)

    async def serve_protocol(self, factory: ProtocolFactory) -> None:
        """Start listening with a protocol from ``factory`` for every connection.

        Without streams a connection costs only what its protocol holds (see
        :mod:`kompakt.server.connection`); the Kafka listener serves this way.
        """
        assert self._server is not None
        self._factory = factory
        try:
            await self._server.start_serving()
        except OSError as exc:  # another socket started listening on the port since bind()
            raise BindError(self.host, self.port, self.listener, exc) from exc

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    def close(self) -> None:
        """Stop accepting (the sockets close; connections already accepted are the handler's)."""
        if self._server is not None:
            self._server.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def _protocol(self) -> asyncio.BaseProtocol:
        assert self._factory is not None  # the socket only accepts once serve() has set it
        return self._factory()
