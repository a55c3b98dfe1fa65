"""The handler table and the dispatch step between the codec and the handlers.

``HANDLERS`` is collected from the ``SPEC`` of every module in :mod:`kompakt.broker.handlers`, and the
ranges ApiVersions advertises are derived from it, so an API is never advertised unless a handler
for exactly those versions exists. Each handler's versions must be exactly those its typed messages
(``kompakt.protocol.messages.<api>``) were generated for, so a version cannot be served without
a view of its fields.

The dispatcher is the typed seam: it hands the handler the request as its API's view
(:func:`codec.request_view`) and turns the handler's typed message into kio's response class for the
version asked (:func:`codec.from_message`), now or when a deferred answer settles.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from kompakt.broker import handlers as _handlers_package
from kompakt.broker.context import Broker, HandlerResult, HandlerSpec, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.session import Session
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey, VersionRange
from kompakt.protocol.messages import Message


def discover_handlers() -> dict[int, HandlerSpec]:
    """Import every handler module and collect its ``SPEC``, keyed by api key."""
    table: dict[int, HandlerSpec] = {}
    for info in sorted(pkgutil.iter_modules(_handlers_package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{_handlers_package.__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, HandlerSpec):
            continue
        if spec.api_key in table:
            raise RuntimeError(f"two handler modules register api key {spec.api_key}")
        covered = codec.messages_for(spec.api_key).VERSIONS
        if spec.versions != covered:
            raise RuntimeError(
                f"{module.__name__} serves v{spec.min_version}-{spec.max_version} but its messages cover "
                f"v{covered.min_version}-{covered.max_version}: run python -m kompakt.protocol.messages_gen "
                f"{codec.api_name(spec.api_key)} {spec.min_version} {spec.max_version}"
            )
        table[spec.api_key] = spec
    return table


HANDLERS: Mapping[int, HandlerSpec] = MappingProxyType(discover_handlers())


class Dispatcher:
    """Decodes frames against the handler table and routes them to handlers.

    Sans-IO: the server decides how to run a handler (inline, in a thread when ``spec.blocking``) and
    how to wait for a deferred answer.
    """

    def __init__(self, broker: Broker, handlers: Mapping[int, HandlerSpec] = HANDLERS) -> None:
        self.broker = broker
        self.handlers = handlers
        self.supported: Mapping[int, VersionRange] = MappingProxyType(
            {key: spec.versions for key, spec in sorted(handlers.items())}
        )
        self._views: dict[int, type] = {}
        for key, spec in handlers.items():
            messages = codec.messages_for(key)
            if not (spec.min_version in messages.VERSIONS and spec.max_version in messages.VERSIONS):
                raise ValueError(f"api key {key}: v{spec.min_version}-{spec.max_version} has no typed view")
            self._views[key] = messages.REQUEST

    def decode(self, frame: bytes | memoryview) -> codec.DecodedRequest:
        """Decode a frame; raises ``codec.UnsupportedVersion`` or ``codec.MalformedRequest``."""
        return codec.decode_request(frame, self.supported)

    def spec(self, api_key: int) -> HandlerSpec:
        return self.handlers[api_key]

    def context(
        self, request: codec.DecodedRequest, client_host: str, session: Session | None = None
    ) -> RequestContext:
        return RequestContext(
            broker=self.broker,
            api_key=request.api_key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            client_host=client_host,
            api_versions=self.supported,
            session=session if session is not None else Session(),
        )

    def call(self, ctx: RequestContext, body: codec.RequestPayload) -> HandlerResult:
        """Run the handler for ``ctx.api_key`` on the current thread, typed views in and out."""
        result = self.handlers[ctx.api_key].handler(ctx, codec.request_view(body, self._views[ctx.api_key]))
        if result is None:
            return None
        response_class = codec.response_class(ctx.api_key, ctx.api_version)
        if isinstance(result, Deferred):
            return result.map(lambda answer: _payload(answer, response_class))
        return _payload(result, response_class)

    def refuse(self, error: codec.UnsupportedVersion) -> codec.Chunks | None:
        """The answer to an unsupported key/version, or ``None`` when the connection must close.

        ApiVersions gets the v0-format fallback listing our ranges; another API gets a generic
        UNSUPPORTED_VERSION response when kio knows that version and its response has a top-level
        error code. Anything else cannot be answered in a format the client will parse.
        """
        if error.api_key == ApiKey.API_VERSIONS:
            return codec.encode_api_versions_fallback(error.correlation_id, self.supported)
        return codec.encode_error_response(
            error.correlation_id, error.api_key, error.version, codec.ErrorCode.unsupported_version
        )


def _payload(answer: object, response_class: type[codec.ResponsePayload]) -> codec.ResponsePayload:
    """kio's response for the version asked, from the handler's typed message."""
    if not isinstance(answer, Message):
        raise TypeError(f"a handler answered {type(answer).__name__}, not its API's response message")
    return codec.from_message(answer, response_class)
