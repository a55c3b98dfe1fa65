"""A value that is not known yet, without an event loop.

JoinGroup and SyncGroup answers wait until a rebalance completes, which happens when *another*
member's request arrives or when ``tick`` notices a timeout. The broker layer is sans-IO, so a handler
returns a :class:`Deferred` and the coordinator resolves it later; the server adapts it to an asyncio
future (``server/connection.py``). The same type will carry Fetch long polls.

Callbacks run synchronously on whichever thread settles the deferred (the event loop thread for the
coordinator); the server's adapter hops back to its loop thread-safely. A callback that raises is
logged and does not stop the others: the coordinator settles many deferreds in the middle of a state
transition and must not be interrupted half-way. An exception raised by a :meth:`Deferred.map`
transform fails the mapped deferred instead, so the waiting connection sees it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
U = TypeVar("U")


class Deferred(Generic[T]):
    """A one-shot result (a value or an exception) with callbacks. Thread-safe; settling twice raises."""

    __slots__ = ("_callbacks", "_done", "_error", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Deferred[T]], None]] = []

    @classmethod
    def resolved(cls, value: T) -> Deferred[T]:
        """A deferred that already holds ``value`` (for answers that turn out to be immediate)."""
        deferred: Deferred[T] = cls()
        deferred.resolve(value)
        return deferred

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> T:
        """The value, or the stored exception raised; ``RuntimeError`` when not settled yet."""
        with self._lock:
            if not self._done:
                raise RuntimeError("deferred is not resolved yet")
            if self._error is not None:
                raise self._error
            return self._value  # type: ignore[return-value]

    def resolve(self, value: T) -> None:
        self._settle(value, None)

    def fail(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                raise RuntimeError("deferred settled twice")
            self._done = True
            self._value = value
            self._error = error
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._run(callback)

    def add_done_callback(self, callback: Callable[[Deferred[T]], None]) -> None:
        """Call ``callback(self)`` once settled, or right now when already settled."""
        with self._lock:
            if not self._done:
                self._callbacks.append(callback)
                return
        self._run(callback)

    def _run(self, callback: Callable[[Deferred[T]], None]) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("deferred callback %r failed", callback)

    def map(self, transform: Callable[[T], U]) -> Deferred[U]:
        """A deferred settled with ``transform(value)`` (or its exception) when this one settles."""
        mapped: Deferred[U] = Deferred()

        def forward(source: Deferred[T]) -> None:
            try:
                mapped.resolve(transform(source.result()))
            except Exception as exc:  # noqa: BLE001 - handed to whoever waits on ``mapped``
                mapped.fail(exc)

        self.add_done_callback(forward)
        return mapped
