"""``kompakt produce TOPIC``: one record per stdin line, Kafka console-producer style.

Keys, tombstones and headers are what compaction is about, so they are first-class here:

* ``--key-separator SEP`` splits each line into ``key<SEP>value`` (at the first SEP); without it
  keys are null, as with Kafka's console producer.
* ``--null-marker M``: a key, value or header value equal to ``M`` is sent as null. A null value
  is a tombstone; an empty value is an ordinary, empty value.
* Kafka's own spelling is accepted too (``--property parse.key=true --property key.separator=:
  --property null.marker=TOMBS``, plus ``parse.headers`` and its separators), so commands from
  Kafka's compaction guides work as typed.

Each record's delivery report is counted; any failure (for example INVALID_RECORD for a null key
on a compacted topic) makes the command exit 1 with the error, after everything was attempted.

Producer settings (``--producer-property batch.size=16384``, ``linger.ms``, ``compression.type``,
``acks``, ...) take Kafka's Java producer names; the few that librdkafka spells differently are
translated (``max.request.size``, ``buffer.memory``, ``send.buffer.bytes``). Batches are bounded by
the topic: the broker refuses a batch larger than the topic's ``segment.bytes``
(RECORD_LIST_TOO_LARGE) or ``max.message.bytes`` (MESSAGE_TOO_LARGE), so ``batch.size`` and the
largest request are capped at the smaller of the two, which the topic's DescribeConfigs gives.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Annotated, Any

import typer
from confluent_kafka import KafkaError, KafkaException

from kompakt.cli.cluster import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_TIMEOUT_S,
    BootstrapOption,
    Cluster,
    OutputOption,
    TimeoutOption,
    describe_exception,
    kafka_error_text,
    parse_pairs,
    progress,
)
from kompakt.cli.output import CliError, CliUsageError, OutputFormat, emit, emit_json, err_console

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")
_ACKS = ("all", "-1", "0", "1")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


@dataclass
class LineFormat:
    """How a stdin line becomes a record; defaults are those of Kafka's console producer."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False
    static_headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list[Any]]:
        """``(key, value, headers)`` of one line (without its line terminator).

        Raises :class:`ValueError` when a separator is missing, as Kafka does (unless
        ``ignore.error``, where the rest becomes the value and the key null); the caller adds the
        line number.
        """
        headers: list[Any] = list(self.static_headers)
        rest = line
        if self.parse_headers:
            head, sep, tail = rest.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise ValueError(f"no headers delimiter {_show(self.headers_delimiter)} found")
            else:
                rest = tail
                headers += self._headers(head)
        key: bytes | None = None
        if self.parse_key:
            raw_key, sep, value_part = rest.partition(self.key_separator)
            if not sep:
                if not self.ignore_error:
                    raise ValueError(f"no key separator {_show(self.key_separator)} found")
                value_part = rest
            else:
                key = self._nullable(raw_key)
            rest = value_part
        return key, self._nullable(rest), headers

    def _headers(self, text: bytes) -> list[tuple[str, bytes | None]]:
        result: list[tuple[str, bytes | None]] = []
        if not text:
            return result
        for item in text.split(self.headers_separator):
            name, sep, value = item.partition(self.headers_key_separator)
            if self.null_marker is not None and name == self.null_marker:
                raise ValueError("a header key cannot be the null marker")
            result.append((name.decode("utf-8", "replace"), self._nullable(value) if sep else None))
        return result


def _show(separator: bytes) -> str:
    return repr(separator.decode("utf-8", "replace"))


def _flag(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise CliUsageError(f"--property {name} expects true or false, got {value!r}")


def _unescape(text: str) -> bytes:
    r"""Separators may be typed as ``\t``, ``\n``, ``\r`` or ``\\`` (a literal tab is awkward in a shell)."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        nxt = next(chars, "")
        out.append(_ESCAPES.get(nxt, "\\" + nxt))
    return "".join(out).encode("utf-8")


def build_format(
    key_separator: str | None,
    null_marker: str | None,
    headers: list[str],
    properties: list[str],
) -> LineFormat:
    """The line format from the native options and Kafka's ``--property`` spelling (which wins)."""
    fmt = LineFormat()
    if key_separator is not None:
        if key_separator == "":
            raise CliUsageError("--key-separator cannot be empty")
        fmt.parse_key = True
        fmt.key_separator = _unescape(key_separator)
    if null_marker is not None:
        fmt.null_marker = null_marker.encode("utf-8")
    for name, value in parse_pairs(properties, "--property"):
        _apply_property(fmt, name, value)
    _check_separators(fmt)
    fmt.static_headers = [(k, fmt._nullable(v.encode("utf-8"))) for k, v in parse_pairs(headers, "--header")]
    return fmt


def _apply_property(fmt: LineFormat, name: str, value: str) -> None:
    """One ``--property name=value`` of Kafka's console producer (``LineMessageReader``)."""
    if name == "parse.key":
        fmt.parse_key = _flag(name, value)
    elif name == "key.separator":
        fmt.key_separator = _unescape(value)
    elif name == "null.marker":
        fmt.null_marker = value.encode("utf-8")
    elif name == "parse.headers":
        fmt.parse_headers = _flag(name, value)
    elif name == "headers.delimiter":
        fmt.headers_delimiter = _unescape(value)
    elif name == "headers.separator":
        fmt.headers_separator = _unescape(value)
    elif name == "headers.key.separator":
        fmt.headers_key_separator = _unescape(value)
    elif name == "ignore.error":
        fmt.ignore_error = _flag(name, value)
    else:
        raise CliUsageError(
            f"unknown --property {name!r} (known: parse.key, key.separator, null.marker, "
            "parse.headers, headers.delimiter, headers.separator, headers.key.separator, ignore.error)"
        )


def _check_separators(fmt: LineFormat) -> None:
    """Refuse empty separators and an empty null marker: each would make lines ambiguous."""
    for separator, what in (
        (fmt.key_separator, "key.separator"),
        (fmt.headers_delimiter, "headers.delimiter"),
        (fmt.headers_separator, "headers.separator"),
        (fmt.headers_key_separator, "headers.key.separator"),
    ):
        if not separator:
            raise CliUsageError(f"{what} cannot be empty")
    if fmt.null_marker == b"":
        raise CliUsageError("the null marker cannot be empty (an empty value is not a null value)")


def read_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """Lines without their terminator (``\\n`` or ``\\r\\n``), as Java's ``readLine`` gives them."""
    for raw in stream:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        yield line[:-1] if line.endswith(b"\r") else line


@dataclass
class Tally:
    """Delivery outcomes, with the first line of each distinct error for the report."""

    sent: int = 0
    failed: int = 0
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    null_key_failures: int = 0

    def fail(self, line: int, reason: str, null_key: bool = False) -> None:
        self.failed += 1
        if null_key:
            self.null_key_failures += 1
        entry = self.errors.setdefault(reason, {"error": reason, "first_line": line, "count": 0})
        entry["count"] += 1


DEFAULT_BATCH_BYTES = 1_000_000
"""librdkafka's ``batch.size`` default (Java's is 16384)."""
MIN_REQUEST_BYTES = 1000
"""librdkafka refuses a ``message.max.bytes`` below 1000."""
_JAVA_ONLY_PRODUCER_NAMES = {
    "max.request.size": "message.max.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
_IGNORED_PRODUCER_NAMES = frozenset(
    {"key.serializer", "value.serializer", "max.block.ms", "max.in.flight.requests.per.connection.ms"}
)
_MANAGED_PRODUCER_NAMES = frozenset({"bootstrap.servers", "on_delivery", "error_cb", "logger"})


def producer_settings(properties: list[str], option: str = "--producer-property") -> dict[str, str]:
    """Kafka producer properties as librdkafka settings (names translated where they differ)."""
    settings: dict[str, str] = {}
    for name, value in parse_pairs(properties, option):
        if name in _IGNORED_PRODUCER_NAMES:
            continue
        if name in _MANAGED_PRODUCER_NAMES:
            raise CliUsageError(f"{option} {name} is set by kompakt (use --bootstrap for the cluster)")
        if name == "buffer.memory":
            try:
                settings["queue.buffering.max.kbytes"] = str(max(1, int(value) // 1024))
            except ValueError:
                raise CliUsageError(f"{option} buffer.memory expects bytes, got {value!r}") from None
            continue
        settings[_JAVA_ONLY_PRODUCER_NAMES.get(name, name)] = value
    return settings


def _partitions_creating_if_allowed(cluster: Cluster, topic: str) -> list[int]:
    """The topic's partitions. A topic that does not exist is created by the broker when its
    ``auto.create.topics.enable`` is on (Kafka's default), as Kafka's console producer has it
    created by its first metadata request; the note says so, since a typo makes a topic too.

    Kafka answers that first request before the topic has a leader (LEADER_NOT_AVAILABLE, or
    UNKNOWN_TOPIC_OR_PARTITION while the controller creates it), so the metadata is asked again
    until the partitions are there, within ``--timeout``. The broker's setting is read first, so
    a broker that does not auto-create is an error at once rather than after the timeout.
    """
    try:
        return cluster.topic_partitions(cluster.producer({"allow.auto.create.topics": False}), topic)
    except CliError as missing:
        if not str(missing).endswith("does not exist"):
            raise
    from kompakt.cli.topic_cmd import broker_layers

    try:
        layer = broker_layers(cluster, cluster.admin()).get("auto.create.topics.enable")
    except CliError:
        layer = None  # a cluster that does not describe its broker: ask it to create, and see
    if layer is not None and str(layer[1]).lower() == "false":
        raise CliError(
            f"topic {topic!r} does not exist and the broker does not create topics on first use "
            "(auto.create.topics.enable=false); create it with `kompakt topic create`"
        )
    creator = cluster.producer({"allow.auto.create.topics": True})
    deadline = time.monotonic() + cluster.timeout_s
    while True:
        try:
            partitions = cluster.topic_partitions(creator, topic)
            break
        except CliError as pending:
            if time.monotonic() >= deadline:
                raise CliError(
                    f"topic {topic!r} does not exist and the broker did not create it within "
                    f"{cluster.timeout_s:g} s ({pending})"
                ) from None
            time.sleep(0.1)
    err_console.print(
        f"note: topic {topic!r} did not exist; the broker created it with {len(partitions)} "
        "partition(s) and its default configs (auto.create.topics.enable)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return partitions


def topic_batch_limit(cluster: Cluster, topic: str) -> tuple[int, str] | None:
    """The largest batch the topic accepts and the config that sets it (``segment.bytes``, a
    test topic's ``internal.segment.bytes`` or ``max.message.bytes``), from DescribeConfigs; None
    when the cluster does not say."""
    from kompakt.cli.cluster import KAFKA_ADMIN

    admin = cluster.admin()
    resource = KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.TOPIC, topic)
    futures = admin.describe_configs([resource], request_timeout=cluster.timeout_s)
    try:
        entries = cluster.wait(next(iter(futures.values())), f"cannot describe configs of {topic!r}")
    except CliError:
        return None
    limits = []
    for name in ("segment.bytes", "internal.segment.bytes", "max.message.bytes"):
        entry = entries.get(name)
        if entry is not None and entry.value is not None and str(entry.value).isdigit():
            limits.append((int(entry.value), name))
    return min(limits) if limits else None


def _bounded_batches(settings: dict[str, str], limit: tuple[int, str] | None) -> list[str]:
    """Cap ``batch.size`` (and the request size) at the topic's limit; notes for what was capped."""
    notes: list[str] = []
    if limit is None:
        return notes
    bytes_limit, name = limit
    try:
        asked = int(settings.get("batch.size", DEFAULT_BATCH_BYTES))
    except ValueError:
        raise CliUsageError(f"batch.size expects bytes, got {settings['batch.size']!r}") from None
    if asked > bytes_limit:
        settings["batch.size"] = str(bytes_limit)
        if "batch.size" in settings and asked != DEFAULT_BATCH_BYTES:
            notes.append(
                f"batch.size {asked} is more than the topic's {name}={bytes_limit}: using {bytes_limit}"
            )
    request = int(settings.get("message.max.bytes", DEFAULT_BATCH_BYTES))
    if request > bytes_limit:
        settings["message.max.bytes"] = str(max(MIN_REQUEST_BYTES, bytes_limit))
    return notes


def produce_command(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", "-K", help="Split each line into key<SEP>value (first SEP)."),
    ] = None,
    null_marker: Annotated[
        str | None,
        typer.Option("--null-marker", help="A key, value or header value equal to this is sent as null."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="A header k=v added to every record; repeatable."),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Write every record to this partition.")
    ] = None,
    acks: Annotated[str, typer.Option("--acks", help="all (-1), 1 or 0.")] = "all",
    prop: Annotated[
        list[str] | None,
        typer.Option(
            "--property",
            help="Kafka console-producer property, e.g. parse.key=true, key.separator=:, "
            "null.marker=TOMBS, parse.headers=true; repeatable.",
        ),
    ] = None,
    producer_property: Annotated[
        list[str] | None,
        typer.Option(
            "--producer-property",
            help="A producer setting k=v by Kafka's name, e.g. batch.size=16384, linger.ms=100, "
            "compression.type=lz4, acks=1; repeatable.",
        ),
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Send each stdin line as a record; report how many were sent and how many failed."""
    send_stdin_lines(
        topic,
        key_separator=key_separator,
        null_marker=null_marker,
        header=header,
        partition=partition,
        acks=acks,
        prop=prop,
        producer_property=producer_property,
        bootstrap=bootstrap,
        timeout=timeout,
        output=output,
        report_counts=True,
    )


def send_stdin_lines(
    topic: str,
    *,
    key_separator: str | None,
    null_marker: str | None,
    header: list[str] | None,
    partition: int | None,
    acks: str,
    prop: list[str] | None,
    producer_property: list[str] | None,
    bootstrap: str,
    timeout: float,
    output: OutputFormat,
    report_counts: bool,
) -> None:
    """``produce``'s work; without ``report_counts`` nothing goes to stdout on success (Kafka's
    console producer prints nothing), and a failure is still an error."""
    if acks not in _ACKS:
        raise CliUsageError(f"--acks expects one of {', '.join(_ACKS)}, got {acks!r}")
    fmt = build_format(key_separator, null_marker, header or [], prop or [])
    settings = producer_settings(producer_property or [])
    cluster = Cluster(bootstrap, timeout)
    partitions = _partitions_creating_if_allowed(cluster, topic)
    for note in _bounded_batches(settings, topic_batch_limit(cluster, topic)):
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    try:
        producer = cluster.producer(
            {
                "acks": acks,
                "linger.ms": 5,
                "message.timeout.ms": cluster.timeout_ms,
                "allow.auto.create.topics": False,
                **settings,
            }
        )
    except KafkaException as exc:
        raise CliUsageError(f"--producer-property: {describe_exception(exc)}") from None
    if partition is not None and partition not in partitions:
        raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(partitions)})")
    tally = _send_all(producer, topic, partition, fmt, sys.stdin.buffer, cluster)
    report = {
        "topic": topic,
        "sent": tally.sent,
        "failed": tally.failed,
        "errors": list(tally.errors.values()),
    }
    if not report_counts:
        pass
    elif output is OutputFormat.JSON:
        emit_json(report)
    else:
        emit([report], output, columns=["topic", "sent", "failed"])
    if tally.failed:
        first = next(iter(tally.errors.values()))
        hint = ""
        if tally.null_key_failures and "INVALID_RECORD" in first["error"]:
            hint = "; records with a null key are refused by a compacted topic"
        raise CliError(
            f"{tally.failed} of {tally.sent + tally.failed} records failed: {first['error']}"
            f" (first at line {first['first_line']}){hint}"
        )


def _send_all(
    producer: Any, topic: str, partition: int | None, fmt: LineFormat, stream: IO[bytes], cluster: Cluster
) -> Tally:
    """Produce every line, serving delivery reports as we go so the queue never fills up."""
    tally = Tally()

    def report(line: int, null_key: bool) -> Any:
        def on_delivery(error: KafkaError | None, _msg: Any) -> None:
            if error is None:
                tally.sent += 1
            else:
                tally.fail(line, kafka_error_text(error), null_key)

        return on_delivery

    extra: dict[str, Any] = {} if partition is None else {"partition": partition}
    with progress() as bar:
        task = bar.add_task(f"producing to {topic}", total=None)
        number = 0
        for number, line in enumerate(read_lines(stream), start=1):
            try:
                key, value, headers = fmt.parse(line, number)
            except ValueError as exc:
                tally.fail(number, str(exc))
                continue
            while True:
                try:
                    producer.produce(
                        topic,
                        key=key,
                        value=value,
                        headers=headers or None,
                        on_delivery=report(number, key is None),
                        **extra,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            bar.update(task, completed=number)
        remaining = producer.flush(cluster.timeout_s + 5.0)
        if remaining:
            raise cluster.unreachable()
        bar.update(task, completed=number)
    return tally


def register(app: typer.Typer) -> None:
    """Attach ``kompakt produce``."""
    app.command("produce")(produce_command)
