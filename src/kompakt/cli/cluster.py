"""Shared plumbing of the commands that talk to a running cluster (``topic``, ``produce``, ...).

These commands work against any Kafka-compatible cluster, so they use a real Kafka client
(confluent-kafka, i.e. librdkafka) rather than kompakt's own protocol code: what they show is what
any application would see. This module builds those clients the same way for every command:

* ``--bootstrap`` (env ``KOMPAKT_BOOTSTRAP``) and a ``--timeout`` that bounds every wait, so an
  unreachable cluster is one error line and exit code 1 after at most that long, never a hang;
* librdkafka's own log lines are routed into Python logging and dropped unless ``--debug``, since
  its retry chatter ("Connect to ... failed") would otherwise break the one-line error rule;
* Kafka errors become :class:`CliError` carrying the error name and the broker's message (for
  example the broker's "did you mean min.cleanable.dirty.ratio?" hint), because that message is
  the most useful thing a user can see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import confluent_kafka.admin as _confluent_admin
import typer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kompakt.cli.output import CliError, CliUsageError, OutputFormat, bootstrap_value, err_console
from kompakt.clock import parse_time_ms

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0
BOOTSTRAP_ENV = "KOMPAKT_BOOTSTRAP"

BootstrapOption = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "--bootstrap",
        "-b",
        envvar=BOOTSTRAP_ENV,
        callback=bootstrap_value,
        help="The cluster's brokers: HOST:PORT[,HOST:PORT...] or kafka://HOST:PORT.",
    ),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=0.1,
        help="Seconds to wait for the cluster before giving up (connect, metadata, each request).",
    ),
]
OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", case_sensitive=False, help="table for people, json for programs."),
]

KAFKA_ADMIN: Any = _confluent_admin
"""``confluent_kafka.admin``, untyped: it re-exports its types (NewTopic, ConfigResource, OffsetSpec...)
without ``__all__``, which strict mypy reads as private, and its classmethods are unannotated."""

_LIBRDKAFKA_LOGGER = "kompakt.cli.librdkafka"
T = TypeVar("T")


def _librdkafka_logger() -> logging.Logger:
    """A logger for librdkafka's lines: silent unless the root logger is at DEBUG (``--debug``)."""
    logger = logging.getLogger(_LIBRDKAFKA_LOGGER)
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        logger.disabled = False
        logger.propagate = True
    else:
        logger.disabled = True
        logger.propagate = False
    return logger


@dataclass
class Cluster:
    """How to reach the cluster, plus the last transport error seen (for a precise error line)."""

    bootstrap: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    errors: list[KafkaError] = field(default_factory=list)
    #: librdkafka settings for a secured listener (security.protocol, SASL credentials, CA file).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.timeout_s * 1000))

    def _on_error(self, error: KafkaError) -> None:
        self.errors.append(error)
        del self.errors[:-5]

    def base_config(self) -> dict[str, Any]:
        """Settings shared by every client: bounded connects and requests, quiet logs."""
        return {
            "bootstrap.servers": self.bootstrap,
            "socket.connection.setup.timeout.ms": max(1000, self.timeout_ms),
            "socket.timeout.ms": max(10, self.timeout_ms),
            "logger": _librdkafka_logger(),
            "error_cb": self._on_error,
            **self.extra,
        }

    def admin(self) -> Any:
        """An AdminClient; callers pass ``request_timeout`` to each call."""
        return AdminClient(self.base_config())

    def producer(self, extra: Mapping[str, Any]) -> Any:
        return Producer({**self.base_config(), **extra})

    def consumer(self, extra: Mapping[str, Any]) -> Any:
        return Consumer({**self.base_config(), **extra})

    def unreachable(self, cause: BaseException | None = None) -> CliError:
        """The one-line error for a cluster that did not answer in time."""
        detail = ""
        transport = [e for e in self.errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
        if transport:
            detail = f": {transport[-1].str()}"
        elif cause is not None:
            detail = f": {describe_exception(cause)}"
        return CliError(f"cannot reach the cluster at {self.bootstrap} within {self.timeout_s:g} s{detail}")

    def metadata(self, client: Any, topic: str | None = None) -> Any:
        """Cluster metadata (optionally of one topic); an unreachable cluster is a :class:`CliError`.

        Every command calls this first, so a wrong ``--bootstrap`` fails within ``--timeout``.
        """
        try:
            if topic is None:
                return client.list_topics(timeout=self.timeout_s)
            return client.list_topics(topic, timeout=self.timeout_s)
        except KafkaException as exc:
            if _code(exc) in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
                # Serve error_cb so the line can say why (refused, DNS...), not only that it failed.
                client.poll(0)
                raise self.unreachable(exc) from None
            raise CliError(f"cannot read cluster metadata: {describe_exception(exc)}") from None

    def topic_partitions(self, client: Any, topic: str) -> list[int]:
        """The partition ids of ``topic``; a missing topic is a :class:`CliError`."""
        meta = self.metadata(client, topic)
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None:
            error = None if tmeta is None else tmeta.error
            if error is None or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise CliError(f"topic {topic!r} does not exist")
            raise CliError(f"topic {topic!r}: {kafka_error_text(error)}")
        return sorted(tmeta.partitions)

    def wait(self, future: Future[T], what: str) -> T:
        """The result of an admin future, with Kafka errors and timeouts as one-line errors."""
        try:
            return future.result(timeout=self.timeout_s + 5.0)
        except FutureTimeoutError:
            raise self.unreachable() from None
        except KafkaException as exc:
            if _code(exc) in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
                raise self.unreachable(exc) from None
            raise CliError(f"{what}: {describe_exception(exc)}") from None


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def kafka_error_text(error: KafkaError) -> str:
    """``NAME: message``, the broker's message when it sent one (librdkafka's text otherwise)."""
    message = error.str()
    name = error.name()
    return f"{name}: {message}" if message and message != name else name


def describe_exception(exc: BaseException) -> str:
    """One line for a client exception, unwrapping a :class:`KafkaError` when there is one."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return kafka_error_text(exc.args[0])
    return str(exc) or type(exc).__name__


def parse_pairs(items: Iterable[str], option: str) -> list[tuple[str, str]]:
    """``k=v`` items in order; a malformed item is a usage error naming the option."""
    pairs: list[tuple[str, str]] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliUsageError(f"{option} expects name=value, got {item!r}")
        pairs.append((name.strip(), value))
    return pairs


def parse_timestamp_ms(text: str, option: str) -> int:
    """``option``'s value as epoch milliseconds (:func:`kompakt.clock.parse_time_ms`); a bad value
    is a usage error naming the option."""
    try:
        return parse_time_ms(text)
    except ValueError as exc:
        raise CliUsageError(f"{option}: {exc}") from None


def decode_text(data: bytes | None) -> str | None:
    """Bytes as text for tables and JSON (invalid UTF-8 replaced); ``None`` stays ``None``."""
    return None if data is None else data.decode("utf-8", errors="replace")


def progress(
    total: float | None = None, console: Console | None = None, *, redirect_stdout: bool = True
) -> Progress:
    """A progress display on stderr, shown only on a terminal so pipes and tests stay clean.

    ``redirect_stdout=False`` for a command that writes its results to ``sys.stdout`` while the
    bar shows: rich would otherwise route those writes through the stderr console.

    With a known total it shows the bar, done/total, the percentage and the time left (rich's
    estimate from the recent rate); without one, the count and the time so far.
    """
    target = console or err_console
    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
        ]
    else:
        columns += [TextColumn("{task.completed:.0f}")]
    columns.append(TimeElapsedColumn())
    return Progress(
        *columns,
        console=target,
        transient=True,
        disable=not target.is_terminal,
        redirect_stdout=redirect_stdout,
    )
