"""The admin HTTP endpoint: JSON over HTTP/1.1 on the broker's event loop.

HTTP parsing is ``h11`` (sans-IO) over asyncio streams, so the endpoint needs no framework and
shares the broker's loop; every operation runs in a worker thread (``asyncio.to_thread``) because
all of them read segment metadata under partition locks and some rewrite segments. It listens on
loopback by default (``kompakt serve --admin-host``). It can compact, roll and move the clock, so
:mod:`kompakt.server.admin_access` decides first who may send what: no cross-site page, no
rebound host name, and beyond loopback only a bearer token's holder; optionally over TLS.

Routes (query parameters; ``POST`` bodies may instead be a JSON object with the same names):

=========================================  =====================================================
``GET  /v1/partitions[?topic=T]``          offsets, sizes, segments, dirty ratio, cleaning state
``GET  /v1/explain?topic=T[&partition=P]`` the explain report, live
``GET  /v1/readers[?topic=T]``             reader hold and unread tombstones per group (compacted)
``POST /v1/roll?topic=T[&partition=P]``    roll the active segment
``POST /v1/compact?topic=T[&partition=P][&wait=true]``  compact now (202 without ``wait``)
``POST /v1/retry?topic=T&partition=P``     clear an uncleanable mark
``GET  /v1/listeners``                     the Kafka listeners: name, protocol, bound, advertised
``GET  /v1/clock``                         the manual clock (409 on the system clock)
``POST /v1/clock/advance?by=25h`` or ``?ms=N``  move the manual clock forward
``GET  /metrics``                          Prometheus text exposition
``GET  /healthz``                          ``{"status": "ok"}``: no token, any Host
``GET  /``                                 the log map page (HTML; polls the two routes below)
``GET  /v1/map[?topic=T]``                 every partition as the map draws it, cleaning order
``GET  /v1/map/partition?topic=T&partition=P``  one partition's detail, with record samples
``GET  /v1/topics/T/keys/K``               the latest record of key K (404 when absent); see below
``GET  /v1/topics/T/table``                a page of the latest record per key (``next`` cursor)
``GET  /v1/topics/T/table/counts``         live keys and tombstones per partition, index memory
=========================================  =====================================================

The table routes take the topic and key percent-encoded in the path (any bytes: ``%00``…); with
``key_encoding=base64`` or ``hex`` the key is given in that encoding instead. Lookups take
``partition=P`` or ``partitioner=murmur2|crc32|any`` (murmur2, the Java client's default, when
neither is given), ``as_of=`` (epoch ms or ISO-8601) and ``missing_ok=true`` (an absent key
answers 200, not 404: the log map asks so); scans take ``prefix`` (in the same
encodings, ``prefix_encoding``), ``include_tombstones``, ``partition``, ``limit``, the cursor
``from_partition``/``from_offset`` and ``as_of``.

A ``POST`` needs ``Content-Type: application/json``; its body, when not empty, is one JSON object
of strings, numbers and booleans, at most :data:`MAX_BODY_BYTES` (a larger, nested or malformed
one is a 400). Errors are ``{"error": "..."}`` with a 4xx/5xx status.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, unquote_to_bytes, urlsplit

from kompakt.lazy_import import LazyModule
from kompakt.server.admin_access import AccessRefused, AdminAccess
from kompakt.server.admin_api import AdminApi, AdminApiError
from kompakt.server.listener import Listener
from kompakt.server.manual_clock import parse_duration_ms
from kompakt.server.ports import DEFAULT_ADMIN_PORT

if TYPE_CHECKING:
    import h11

    from kompakt.log.partition_log import PartitionLog
    from kompakt.server.web.live import LiveMap
else:  # loaded by the first admin request: ~13 ms of broker start-up otherwise
    h11 = LazyModule("h11", globals(), "h11")

log = logging.getLogger(__name__)

#: The largest request body: a POST's parameters are a few names and values.
MAX_BODY_BYTES = 64 * 1024
_READ_SIZE = 64 * 1024
#: After refusing a request whose body it did not read, how much more of it the endpoint reads and
#: discards (and for how long) so that the client, still sending, gets the answer and not a reset.
_DISCARD_BYTES = 4 * 1024 * 1024
_DISCARD_S = 2.0
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTML_CONTENT_TYPE = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_response(status: int, data: Any) -> HttpResponse:
    return HttpResponse(status, (json.dumps(data, default=str) + "\n").encode())


def error_response(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> HttpResponse:
    return HttpResponse(status, (json.dumps({"error": message}) + "\n").encode(), headers=headers)


class Params:
    """Query parameters merged with a JSON body object, with typed accessors raising 400s."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values

    def get_str(self, name: str, required: bool = False) -> str | None:
        value = self._values.get(name)
        if value is None and required:
            raise AdminApiError(400, f"missing parameter {name!r}")
        return value

    def get_int(self, name: str, required: bool = False) -> int | None:
        value = self.get_str(name, required)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            raise AdminApiError(400, f"parameter {name!r} must be an integer, got {value!r}") from None

    def get_bool(self, name: str, default: bool = False) -> bool:
        value = self.get_str(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in ("1", "true", "yes", "on", ""):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise AdminApiError(400, f"parameter {name!r} must be true or false, got {value!r}")


def parse_params(query: str, body: bytes) -> Params:
    """Query string, then the JSON body's members on top (values turned into strings).

    Only a flat object is a parameter set: a nested value is refused by name, and nesting too deep
    for the parser (``[[[[…``, which makes ``json`` raise RecursionError) is a 400 like any other
    malformed body, not a failed request.
    """
    values = dict(parse_qsl(query, keep_blank_values=True))
    if body.strip():
        if len(body) > MAX_BODY_BYTES:
            raise AdminApiError(
                400, f"the request body is {len(body)} bytes; at most {MAX_BODY_BYTES} are accepted"
            )
        try:
            data = json.loads(body)
        except RecursionError:
            raise AdminApiError(400, "the request body is not JSON: it is nested too deeply") from None
        except ValueError as exc:
            raise AdminApiError(400, f"the request body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise AdminApiError(400, "the request body must be a JSON object")
        for key, value in data.items():
            if isinstance(value, dict | list):
                raise AdminApiError(
                    400,
                    f"parameter {key!r} must be a string, number or boolean, not a JSON "
                    + ("object" if isinstance(value, dict) else "array"),
                )
            if value is not None:
                values[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return Params(values)


Route = Callable[[AdminApi, Params], HttpResponse]


def _partitions(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, api.partitions(p.get_str("topic")))


def _explain(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, api.explain(_topic(p), p.get_int("partition")))


def _readers(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, api.readers(p.get_str("topic")))


def _roll(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, api.roll(_topic(p), p.get_int("partition")))


def _compact(api: AdminApi, p: Params) -> HttpResponse:
    topic, partition = _topic(p), p.get_int("partition")
    if p.get_bool("wait"):
        return json_response(200, api.compact(topic, partition))
    return json_response(202, api.compact_in_background(topic, partition))


def _retry(api: AdminApi, p: Params) -> HttpResponse:
    partition = p.get_int("partition", required=True)
    assert partition is not None
    return json_response(200, api.retry(_topic(p), partition))


def _clock(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, api.clock_show())


def _clock_advance(api: AdminApi, p: Params) -> HttpResponse:
    api.clock_show()  # 409 on the system clock before complaining about the arguments
    given = [(name, value) for name in ("by", "ms") if (value := p.get_str(name)) is not None]
    if len(given) != 1:
        raise AdminApiError(400, "give exactly one of 'ms' (milliseconds) or 'by' (a duration such as 25h)")
    try:
        ms = parse_duration_ms(given[0][1])
    except ValueError as exc:
        raise AdminApiError(400, str(exc)) from None
    return json_response(200, api.clock_advance(ms))


def _listeners(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, api.listeners())


def _healthz(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, {"status": "ok"})


def _metrics(api: AdminApi, p: Params) -> HttpResponse:
    return HttpResponse(200, api.metrics_text(), PROMETHEUS_CONTENT_TYPE)


def _index(api: AdminApi, p: Params) -> HttpResponse:
    from kompakt.server.web import page_html

    return HttpResponse(200, page_html().encode(), HTML_CONTENT_TYPE)


def _map(api: AdminApi, p: Params) -> HttpResponse:
    return json_response(200, _live_map(api).overview(p.get_str("topic")))


def _map_partition(api: AdminApi, p: Params) -> HttpResponse:
    partition = p.get_int("partition", required=True)
    assert partition is not None
    return json_response(200, _live_map(api).partition(_topic(p), partition))


def _as_of(p: Params) -> int | None:
    from kompakt.table.views import ArgumentError, parse_time_ms

    text = p.get_str("as_of")
    if text is None or text == "":
        return None
    try:
        return parse_time_ms(text)
    except ArgumentError as exc:
        raise AdminApiError(400, f"parameter 'as_of': {exc}") from None


def _bytes_param(p: Params, raw: bytes, encoding_name: str) -> bytes:
    """A key or prefix: the percent-decoded bytes, or their text in the given encoding."""
    from kompakt.table.views import ArgumentError, decode_key

    encoding = p.get_str(encoding_name) or "utf8"
    if encoding == "utf8":
        return raw
    try:
        return decode_key(raw.decode("ascii", errors="replace"), encoding)
    except ArgumentError as exc:
        raise AdminApiError(400, str(exc)) from None


def _table_key(api: AdminApi, p: Params, topic: str, key: bytes) -> HttpResponse:
    data = api.table_lookup(
        topic,
        _bytes_param(p, key, "key_encoding"),
        partition=p.get_int("partition"),
        partitioner=p.get_str("partitioner") or "murmur2",
        as_of_ms=_as_of(p),
    )
    return json_response(200 if data["found"] or p.get_bool("missing_ok") else 404, data)


def _table_scan(api: AdminApi, p: Params, topic: str) -> HttpResponse:
    prefix = p.get_str("prefix") or ""
    return json_response(
        200,
        api.table_scan(
            topic,
            partition=p.get_int("partition"),
            prefix=_bytes_param(p, prefix.encode("utf-8", errors="surrogateescape"), "prefix_encoding"),
            include_tombstones=p.get_bool("include_tombstones"),
            from_partition=_int_or(p, "from_partition", 0),
            from_offset=_int_or(p, "from_offset", 0),
            limit=_int_or(p, "limit", 1000),
            as_of_ms=_as_of(p),
        ),
    )


def _int_or(p: Params, name: str, default: int) -> int:
    value = p.get_int(name)
    return default if value is None else value


def _table_counts(api: AdminApi, p: Params, topic: str) -> HttpResponse:
    return json_response(200, api.table_counts(topic, p.get_int("partition")))


def _topic_route(api: AdminApi, method: str, raw_path: str, params: Params) -> HttpResponse | None:
    """``/v1/topics/{topic}/keys/{key}`` and ``/v1/topics/{topic}/table[/counts]``; None if not one."""
    rest = raw_path[len("/v1/topics/") :]
    topic_raw, sep, tail = rest.partition("/")
    if not sep or not topic_raw:
        return None
    topic = unquote(topic_raw)
    if tail.startswith("keys/"):
        route: Callable[[], HttpResponse] = functools.partial(
            _table_key, api, params, topic, unquote_to_bytes(tail[len("keys/") :])
        )
    elif tail.rstrip("/") == "table":
        route = functools.partial(_table_scan, api, params, topic)
    elif tail.rstrip("/") == "table/counts":
        route = functools.partial(_table_counts, api, params, topic)
    else:
        return None
    if method != "GET":
        return error_response(405, f"{raw_path} accepts GET, not {method}")
    return route()


def _topic(p: Params) -> str:
    topic = p.get_str("topic", required=True)
    assert topic is not None
    if not topic:
        raise AdminApiError(400, "parameter 'topic' must not be empty")
    return topic


ROUTES: dict[str, dict[str, Route]] = {
    "/v1/partitions": {"GET": _partitions},
    "/v1/explain": {"GET": _explain},
    "/v1/readers": {"GET": _readers},
    "/v1/roll": {"POST": _roll},
    "/v1/compact": {"POST": _compact},
    "/v1/retry": {"POST": _retry},
    "/v1/listeners": {"GET": _listeners},
    "/v1/clock": {"GET": _clock},
    "/v1/clock/advance": {"POST": _clock_advance},
    "/metrics": {"GET": _metrics},
    "/healthz": {"GET": _healthz},
    "/": {"GET": _index},
    "/v1/map": {"GET": _map},
    "/v1/map/partition": {"GET": _map_partition},
}


def handle_request(api: AdminApi, method: str, target: str, body: bytes) -> HttpResponse:
    """Route one request and turn failures into JSON errors. Blocking: call it in a worker thread."""
    url = urlsplit(target)
    if url.path.startswith("/v1/topics/"):
        try:
            response = _topic_route(api, method, url.path, parse_params(url.query, body))
        except AdminApiError as exc:
            return error_response(exc.status, exc.message)
        except Exception as exc:
            log.exception("admin request %s %s failed", method, target)
            return error_response(500, f"{type(exc).__name__}: {exc}")
        if response is not None:
            return response
    path = url.path.rstrip("/") or "/"
    methods = ROUTES.get(path)
    if methods is None:
        return error_response(404, f"no such endpoint: {path}")
    route = methods.get(method)
    if route is None:
        return error_response(405, f"{path} accepts {', '.join(sorted(methods))}, not {method}")
    try:
        return route(api, parse_params(url.query, body))
    except AdminApiError as exc:
        return error_response(exc.status, exc.message)
    except Exception as exc:
        log.exception("admin request %s %s failed", method, target)
        return error_response(500, f"{type(exc).__name__}: {exc}")


def _live_map(api: AdminApi) -> LiveMap:
    """The log map's live state (loaded on first use: it brings the explain engine)."""
    from kompakt.server.web.live import live_map_for

    return live_map_for(api)


def _hook_live_map(api: AdminApi) -> None:
    """Create the live map at the first compact-now, so that its samples cover that clean too."""

    def first_compact(partition_log: PartitionLog, phase: str) -> None:
        with contextlib.suppress(ValueError):
            api.compact_hooks.remove(first_compact)
        live = _live_map(api)  # registers the map's own hook for the phases to come
        live.on_compact(partition_log, phase)

    api.compact_hooks.append(first_compact)


class _Refused(Exception):
    """A request answered with an error before it is dispatched (its body possibly unread)."""

    def __init__(self, response: HttpResponse, *, body_unread: bool = False) -> None:
        super().__init__(response.status)
        self.response = response
        self.body_unread = body_unread


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


class AdminHttpServer:
    """Serves :func:`handle_request` over HTTP/1.1 keep-alive connections on the running loop,
    after :class:`~kompakt.server.admin_access.AdminAccess` has let each request through."""

    def __init__(
        self,
        api: AdminApi,
        host: str = "127.0.0.1",
        port: int = DEFAULT_ADMIN_PORT,
        *,
        dispatch: Callable[[Callable[[], HttpResponse]], Awaitable[HttpResponse]] | None = None,
        access: AdminAccess | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.api = api
        _hook_live_map(api)  # so the first compact-now already keeps record samples for the map
        self.host = host
        self.port = port
        self.access = access or AdminAccess.for_endpoint(host, tls=ssl_context is not None)
        self.ssl_context = ssl_context
        self._dispatch = dispatch or asyncio.to_thread
        self._server: Listener | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.access.scheme}://{host}:{self.port}"

    async def start(self, listener: Listener | None = None) -> None:
        """Bind (port 0 picks a free port, then :attr:`port` names it; unless ``listener`` is
        already bound, with this server's TLS context) and start accepting. Raises
        :class:`~kompakt.server.listener.BindError` for an address it cannot listen on."""
        if listener is None:
            listener = await Listener.bind(self.host, self.port, "admin", ssl_context=self.ssl_context)
        self._server = listener
        self.port = listener.port
        await listener.serve(self._accept)
        log.info("admin endpoint on %s", self.url)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._serve(reader, writer), name="kompakt-admin-http")
        self._connections.add(task)
        try:
            await asyncio.wait([task])
        finally:
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_READ_SIZE)
        try:
            while True:
                try:
                    request = await self._read_request(conn, reader)
                except _Refused as refused:
                    await self._send(conn, writer, refused.response)
                    if refused.body_unread:
                        await self._discard(reader, writer)
                        return
                    if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                        return
                    conn.start_next_cycle()
                    continue
                if request is None:
                    return
                response = await self._dispatch(
                    functools.partial(handle_request, self.api, request.method, request.target, request.body)
                )
                await self._send(conn, writer, response)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
                    await self._send(conn, writer, error_response(exc.error_status_hint, str(exc)))
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> _Request | None:
        """The next request; None when the peer closed. Raises :class:`_Refused` for one the access
        rules refuse (decided on its headers; its body, within :data:`MAX_BODY_BYTES`, is read so
        that the connection can go on) or whose body is too large (not read)."""
        method = target = ""
        headers: tuple[tuple[str, str], ...] = ()
        refusal: HttpResponse | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(_READ_SIZE)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                method, target = event.method.decode(), event.target.decode("ascii", errors="replace")
                headers = tuple(
                    (name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers
                )
                refusal = self._refusal(method, target, headers)
                if _declared_length(headers) > MAX_BODY_BYTES:
                    raise _Refused(refusal or _too_large(), body_unread=True)
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    raise _Refused(refusal or _too_large(), body_unread=True)
            elif isinstance(event, h11.EndOfMessage):
                if refusal is not None:
                    raise _Refused(refusal)
                return _Request(method, target, headers, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None
            else:  # PAUSED cannot happen before a response; anything else is a protocol bug
                return None

    def _refusal(self, method: str, target: str, headers: tuple[tuple[str, str], ...]) -> HttpResponse | None:
        """The answer to a request the access rules refuse; None for one they let through."""
        try:
            self.access.check(method, target, headers)
        except AccessRefused as refused:
            log.info("admin request %s %s refused: %s", method, target, refused.message)
            return error_response(refused.status, refused.message, refused.headers)
        return None

    async def _discard(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Close our side and read what the client still sends, within bounds: closing a socket
        with unread data resets the connection, and the client would lose the answer."""
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
        deadline = asyncio.get_running_loop().time() + _DISCARD_S
        discarded = 0
        with contextlib.suppress(OSError, TimeoutError):
            while discarded < _DISCARD_BYTES:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    return
                data = await asyncio.wait_for(reader.read(_READ_SIZE), remaining)
                if not data:
                    return
                discarded += len(data)

    async def _send(self, conn: h11.Connection, writer: asyncio.StreamWriter, response: HttpResponse) -> None:
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            ("Server", "kompakt"),
            # The answers are data, not pages or scripts: a browser must not guess otherwise.
            ("X-Content-Type-Options", "nosniff"),
            *response.headers,
        ]
        writer.write(conn.send(h11.Response(status_code=response.status, headers=headers)) or b"")
        writer.write(conn.send(h11.Data(data=response.body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()


def _declared_length(headers: tuple[tuple[str, str], ...]) -> int:
    """The Content-Length a request declares (0 when none; h11 has checked that it is a number)."""
    for name, value in headers:
        if name.lower() == "content-length" and value.strip().isdigit():
            return int(value)
    return 0


def _too_large() -> HttpResponse:
    return error_response(400, f"the request body is larger than {MAX_BODY_BYTES} bytes")
