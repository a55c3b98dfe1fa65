"""Regular expressions that clients send, evaluated as Kafka evaluates them: RE2 syntax, linear time.

Two requests carry a pattern the broker matches against names it holds: a KIP-848
ConsumerGroupHeartbeat's ``subscribed_topic_regex`` (against every topic) and a ListTransactions v2
``transactional_id_pattern`` (against every transactional id). Kafka compiles both with RE2J, whose
matching time is linear in the name. Python's ``re`` backtracks: ``(a+)+`` against a topic named
``aaaa…b`` takes time exponential in the name's length (seconds at 25 characters, about an hour at
35), so a single request could hold the broker for as long as its sender liked. Here both compile
with RE2 (the ``google-re2`` package: the C++ library RE2J was ported from, with the same syntax, the
same full-match semantics of ``Matcher.matches()`` and the same linear-time guarantee).

A pattern RE2 rejects is a :class:`RegexSyntaxError` (the handlers answer Kafka's
INVALID_REGULAR_EXPRESSION): besides malformed ones, that is the syntax RE2J does not have either
(backreferences, look-around, possessive quantifiers). Patterns longer than
:data:`MAX_PATTERN_CHARS` are refused the same way, before compiling: Kafka accepts any length that
fits a request, but a pattern is compiled into automata whose size grows with it, and no
subscription needs 8,192 characters.

Compiled patterns are kept in a small LRU cache (:func:`compile_regex`), so a heartbeat that
repeats its subscription every few seconds compiles it once. :class:`RegexResolutions` keeps the
topics each subscription resolved to, keyed by the set of topic names, so the matching itself runs
once per pattern and topic set; the consumer heartbeat handler resolves in a worker thread before
the group coordinator's lock is taken (see ``kompakt.broker.handlers.consumer_group_heartbeat``).
``re2`` loads on the first pattern, not at broker start.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import re2

__all__ = [
    "MAX_PATTERN_CHARS",
    "ClientRegex",
    "RegexResolutions",
    "RegexSyntaxError",
    "compile_regex",
]

#: The longest pattern accepted, in characters.
MAX_PATTERN_CHARS = 8192
#: Compiled patterns kept (each RE2 object holds at most its ``max_mem``, 8 MiB by default, and
#: typically a few KiB).
COMPILED_CACHE_SIZE = 256
#: Patterns whose resolution :class:`RegexResolutions` keeps.
RESOLUTIONS_CACHE_SIZE = 1024


class RegexSyntaxError(ValueError):
    """A client's pattern that RE2 (and so RE2J) does not accept; ``description`` is RE2's reason."""

    def __init__(self, pattern: str, description: str) -> None:
        super().__init__(f"{description}")
        self.pattern = pattern
        self.description = description


@dataclass(frozen=True, slots=True, eq=False)
class ClientRegex:
    """One compiled client pattern; matching is always against the whole name."""

    pattern: str
    _compiled: Any

    def fullmatch(self, name: str) -> bool:
        """Whether the whole of ``name`` matches (Java's ``Matcher.matches()``)."""
        return self._compiled.fullmatch(name) is not None

    def matching(self, names: Iterable[str]) -> frozenset[str]:
        """The names that match."""
        fullmatch = self._compiled.fullmatch
        return frozenset(name for name in names if fullmatch(name) is not None)


@functools.cache
def _options() -> re2.Options:
    import re2

    options = re2.Options()
    # RE2 logs every rejected pattern to stderr by itself; the client gets the error instead.
    options.log_errors = False
    return options


def compile_regex(pattern: str) -> ClientRegex:
    """``pattern`` compiled with RE2, from the cache when it was compiled recently.

    Raises :class:`RegexSyntaxError` for a pattern RE2 rejects or one longer than
    :data:`MAX_PATTERN_CHARS`.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexSyntaxError(
            pattern,
            f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are accepted",
        )
    return _compile(pattern)


@functools.lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compile(pattern: str) -> ClientRegex:
    import re2

    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        raise RegexSyntaxError(pattern, _description(exc)) from None
    return ClientRegex(pattern, compiled)


def _description(error: Exception) -> str:
    """RE2's reason (the binding hands it over as bytes), e.g. ``missing ): (abc``."""
    reason = error.args[0] if error.args else error
    if isinstance(reason, bytes):
        return reason.decode("utf-8", errors="replace")
    return str(reason)


@dataclass(frozen=True, slots=True)
class _Resolution:
    names: frozenset[str]
    matches: frozenset[str]


class RegexResolutions:
    """The names each pattern matched among a set of names, kept until that set changes.

    A consumer group evaluates every member's regex at every heartbeat (the group epoch depends on
    the subscribed topics); the topics rarely change, so the matches are kept per pattern with the
    names they were computed from, and recomputed only when those names differ. Thread-safe: the
    matching itself runs outside the lock, so a worker thread can resolve while the event loop
    reads other entries; the least recently used patterns are forgotten beyond ``max_patterns``.
    """

    def __init__(self, max_patterns: int = RESOLUTIONS_CACHE_SIZE) -> None:
        self._max_patterns = max_patterns
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Resolution] = OrderedDict()

    def resolve(self, pattern: str, names: frozenset[str]) -> frozenset[str]:
        """The members of ``names`` that ``pattern`` matches whole; raises :class:`RegexSyntaxError`."""
        with self._lock:
            entry = self._entries.get(pattern)
            if entry is not None and (entry.names is names or entry.names == names):
                self._entries.move_to_end(pattern)
                return entry.matches
        matches = compile_regex(pattern).matching(names)
        with self._lock:
            self._entries[pattern] = _Resolution(names, matches)
            self._entries.move_to_end(pattern)
            while len(self._entries) > self._max_patterns:
                self._entries.popitem(last=False)
        return matches

    def resolve_valid(self, patterns: Iterable[str], names: frozenset[str]) -> None:
        """Resolve each pattern that compiles ahead of its use (invalid ones are left to the request
        that sends them, which is answered with the error)."""
        for pattern in patterns:
            try:
                self.resolve(pattern, names)
            except RegexSyntaxError:
                continue
