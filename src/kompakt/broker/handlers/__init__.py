"""One module per Kafka API. Each module exposes ``SPEC: HandlerSpec``.

Adding an API is a one-module change: drop a module here with a ``SPEC`` and the dispatcher finds it
(``kompakt.broker.dispatch.discover_handlers``), which also makes ApiVersions advertise it.
Handlers are plain functions ``(ctx, request) -> response | Deferred[response] | None`` over their
API's typed messages (``kompakt.protocol.messages.<api>``: the request view, the response classes),
one body for every version served; the dispatcher converts from and to kio's classes. A handler
that does blocking storage I/O sets ``blocking=True`` and the server runs it in a worker thread.
"""
