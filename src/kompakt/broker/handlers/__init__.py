"""One module per Kafka API. Each module exposes ``SPEC: HandlerSpec``.

Adding an API is a one-module change: drop a module here with a ``SPEC`` and the dispatcher finds it
(``kompakt.broker.dispatch.discover_handlers``), which also makes ApiVersions advertise it.
Handlers are plain functions ``(ctx, request) -> response | Deferred[response] | None``; a handler
that does blocking storage I/O sets ``blocking=True`` and the server runs it in a worker thread.
"""
