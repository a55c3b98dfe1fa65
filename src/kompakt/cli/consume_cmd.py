"""``kompakt consume TOPIC``: print records, with null and empty told apart.

On a compacted topic the difference between a null value (a tombstone: the key is being deleted)
and an empty value (an ordinary value that happens to be empty) is the whole point, and most
console consumers print both as an empty line. Here the format string (kcat's tokens) has
``%S``/``%K`` sizes that are ``-1`` for null, null prints as ``--null-repr`` (``(null)`` by
default) while empty prints as nothing, and ``--output json`` gives ``null`` versus ``""``.

Where to start: ``--from-beginning``, ``--offset N`` (negative: N from the end),
``--timestamp MS|ISO`` (the first offset at or after it), or, with ``--group`` alone, the group's
committed offsets via a normal subscription. ``-e`` stops once every assigned partition reached
its end (librdkafka's partition-EOF events), which makes the command usable in scripts and tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import IO, Annotated, Any, Protocol

import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from kompakt.cli.cluster import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_TIMEOUT_S,
    BootstrapOption,
    Cluster,
    OutputOption,
    TimeoutOption,
    decode_text,
    kafka_error_text,
    parse_timestamp_ms,
    progress,
)
from kompakt.cli.output import CliError, CliUsageError, OutputFormat, err_console

DEFAULT_FORMAT = "%s\\n"
DEFAULT_NULL_REPR = "(null)"
_POLL_S = 0.2
_BATCH = 500
_FATAL_CODES = (
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}
#: kcat's format tokens (``kcat -h``), plus ``%v``: kompakt's earlier spelling of ``%s``, kept.
_FIELDS = "tpoksvThSKR"


def _hex_escape(text: str, index: int) -> tuple[str, int]:
    r"""kcat's ``\xXX`` (two hex digits) or ``\xNNN`` (three decimal digits): one character, and
    the index after it; anything else is a usage error rather than a silent literal."""
    digits = text[index + 2 : index + 5]
    if len(digits) == 3 and digits.isdigit() and int(digits) < 256:
        return chr(int(digits)), index + 5
    pair = digits[:2]
    if len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair):
        return chr(int(pair, 16)), index + 4
    raise CliUsageError(
        f"--format: \\x needs two hex digits or three decimal digits, got {text[index : index + 5]!r}"
    )


class Renderer(Protocol):
    """Turns one consumed message into the bytes printed for it."""

    def render(self, msg: Any) -> bytes: ...


@dataclass(frozen=True)
class RecordFormat:
    """A compiled format string: literal bytes and ``%x`` fields in order."""

    parts: tuple[bytes | str, ...]
    null_repr: bytes

    @classmethod
    def compile(cls, text: str, null_repr: str) -> RecordFormat:
        r"""Parse ``%x`` fields and ``\n``-style escapes; an unknown field is a usage error."""
        parts: list[bytes | str] = []
        literal: list[str] = []
        index = 0
        while index < len(text):
            char = text[index]
            nxt = text[index + 1] if index + 1 < len(text) else ""
            if char == "%":
                if nxt == "%":
                    literal.append("%")
                elif nxt in _FIELDS and nxt:
                    if literal:
                        parts.append("".join(literal).encode("utf-8"))
                        literal = []
                    parts.append(nxt)
                else:
                    raise CliUsageError(
                        f"--format: unknown field %{nxt} (kcat's: %s %S %R %k %K %T %h %t %p %o, and %%)"
                    )
                index += 2
            elif char == "\\" and nxt in _ESCAPES:
                literal.append(_ESCAPES[nxt])
                index += 2
            elif char == "\\" and nxt == "x":
                code, index = _hex_escape(text, index)
                literal.append(code)
            else:
                literal.append(char)
                index += 1
        if literal:
            parts.append("".join(literal).encode("utf-8"))
        return cls(tuple(parts), null_repr.encode("utf-8"))

    def _nullable(self, data: bytes | None) -> bytes:
        return self.null_repr if data is None else data

    def _headers(self, msg: Any) -> bytes:
        headers = msg.headers() or []
        return b",".join(k.encode("utf-8") + b"=" + self._nullable(v) for k, v in headers)

    def render(self, msg: Any) -> bytes:
        out: list[bytes] = []
        for part in self.parts:
            if isinstance(part, bytes):
                out.append(part)
            elif part in ("s", "v"):
                out.append(self._nullable(msg.value()))
            elif part == "R":
                out.append(_size(msg.value()).to_bytes(4, "big", signed=True))
            elif part == "k":
                out.append(self._nullable(msg.key()))
            elif part == "t":
                out.append(msg.topic().encode("utf-8"))
            elif part == "p":
                out.append(str(msg.partition()).encode())
            elif part == "o":
                out.append(str(msg.offset()).encode())
            elif part == "T":
                out.append(str(_timestamp(msg)).encode())
            elif part == "h":
                out.append(self._headers(msg))
            elif part == "S":
                out.append(str(_size(msg.value())).encode())
            else:  # "K"
                out.append(str(_size(msg.key())).encode())
        return b"".join(out)


_KAFKA_FLAGS = (
    "print.timestamp",
    "print.key",
    "print.value",
    "print.partition",
    "print.offset",
    "print.delivery",
    "print.epoch",
    "print.headers",
)
_KAFKA_SEPARATORS = ("key.separator", "line.separator", "headers.separator", "null.literal")


@dataclass(frozen=True)
class KafkaMessageFormatter:
    """Kafka's ``DefaultMessageFormatter``: the lines ``kafka-console-consumer`` prints.

    Fields in Kafka's order (``CreateTime:ts``, ``Partition:p``, ``Offset:o``, headers ``k:v`` or
    ``NO_HEADERS``, key, value), joined by ``key.separator`` (a tab), each record ended by
    ``line.separator``; a null key, value or header value prints as ``null.literal`` (``null``).
    kompakt reads records as bytes, so keys and values print as their bytes (Kafka's default
    ByteArrayDeserializer does the same).
    """

    flags: frozenset[str] = frozenset({"print.value"})
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def configure(cls, props: dict[str, str]) -> KafkaMessageFormatter:
        """From ``--property`` values; an unknown property is a usage error (Kafka ignores it,
        which hides typos such as ``print.keys``)."""
        flags = set(cls.flags)
        values = {
            "key.separator": cls.key_separator,
            "line.separator": cls.line_separator,
            "headers.separator": cls.headers_separator,
            "null.literal": cls.null_literal,
        }
        for name, value in props.items():
            if name in _KAFKA_FLAGS:
                lowered = value.strip().lower()
                if lowered not in ("true", "false"):
                    raise CliUsageError(f"--property {name} expects true or false, got {value!r}")
                if lowered == "true":
                    flags.add(name)
                else:
                    flags.discard(name)
            elif name in _KAFKA_SEPARATORS:
                values[name] = _unescape(value).encode("utf-8")
            elif name.startswith(("key.deserializer.", "value.deserializer.", "headers.deserializer.")):
                continue
            else:
                known = ", ".join(_KAFKA_FLAGS + _KAFKA_SEPARATORS)
                raise CliUsageError(f"unknown --property {name!r} (known: {known})")
        return cls(
            frozenset(flags),
            values["key.separator"],
            values["line.separator"],
            values["headers.separator"],
            values["null.literal"],
        )

    def _nullable(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data

    def render(self, msg: Any) -> bytes:
        fields: list[bytes] = []
        if "print.timestamp" in self.flags:
            kind, value = msg.timestamp()
            name = {1: "CreateTime", 2: "LogAppendTime"}.get(kind)
            fields.append(b"NO_TIMESTAMP" if name is None else f"{name}:{value}".encode())
        if "print.partition" in self.flags:
            fields.append(f"Partition:{msg.partition()}".encode())
        if "print.offset" in self.flags:
            fields.append(f"Offset:{msg.offset()}".encode())
        if "print.delivery" in self.flags:
            fields.append(b"Delivery:NOT_PRESENT")
        if "print.epoch" in self.flags:
            epoch = msg.leader_epoch() if hasattr(msg, "leader_epoch") else None
            fields.append(b"Epoch:" + (b"NOT_PRESENT" if epoch is None else str(epoch).encode()))
        if "print.headers" in self.flags:
            headers = msg.headers() or []
            fields.append(
                self.headers_separator.join(k.encode("utf-8") + b":" + self._nullable(v) for k, v in headers)
                if headers
                else b"NO_HEADERS"
            )
        if "print.key" in self.flags:
            fields.append(self._nullable(msg.key()))
        if "print.value" in self.flags:
            fields.append(self._nullable(msg.value()))
            return self.key_separator.join(fields) + self.line_separator
        # Without the value, Kafka ends the last field with the line separator as well.
        return self.key_separator.join(fields) + (self.line_separator if fields else b"")


def _unescape(text: str) -> str:
    r"""``\t``, ``\n``, ``\r`` and ``\\`` in a separator typed in a shell."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        nxt = next(chars, "")
        out.append(_ESCAPES.get(nxt, "\\" + nxt))
    return "".join(out)


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _timestamp(msg: Any) -> int:
    kind, value = msg.timestamp()
    return -1 if kind == 0 else int(value)


def record_json(msg: Any) -> str:
    """One record as a JSON line; null stays ``null`` and empty stays ``""``."""
    kind, _ = msg.timestamp()
    return json.dumps(
        {
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp": _timestamp(msg),
            "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(kind),
            "key": decode_text(msg.key()),
            "value": decode_text(msg.value()),
            "key_size": _size(msg.key()),
            "value_size": _size(msg.value()),
            "headers": [{"key": k, "value": decode_text(v)} for k, v in msg.headers() or []],
        },
        ensure_ascii=False,
    )


@dataclass
class EndTracker:
    """Which assigned partitions sit at their end, for ``-e``."""

    assigned: set[int]
    at_end: set[int]

    def done(self) -> bool:
        return bool(self.assigned) and self.assigned <= self.at_end


def consume_command(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the earliest offset.")
    ] = False,
    offset: Annotated[
        int | None,
        typer.Option("--offset", help="Start offset in each partition; negative counts from the end."),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Read only this partition.")
    ] = None,
    timestamp: Annotated[
        str | None,
        typer.Option("--timestamp", help="Start at the first record at or after MS or an ISO date-time."),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", help="Consumer group: join it (alone) or commit to it."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="Per-record format, kcat's tokens: %s payload, %S payload size (-1 null), %R payload "
            "size as 4 big-endian bytes, %k key, %K key size, %T timestamp, %h headers, %t topic, "
            "%p partition, %o offset; %% and \\n \\r \\t \\xXX escapes (%v = %s).",
        ),
    ] = DEFAULT_FORMAT,
    null_repr: Annotated[
        str, typer.Option("--null-repr", help="How a null key, value or header value prints.")
    ] = DEFAULT_NULL_REPR,
    exit_at_end: Annotated[
        bool, typer.Option("--exit-at-end", "-e", help="Exit once every assigned partition is at its end.")
    ] = False,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-c", min=1, help="Exit after this many records.")
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Print the records of TOPIC, one per line (or per --format)."""
    starts = [s for s in (from_beginning, offset is not None, timestamp is not None) if s]
    if len(starts) > 1:
        raise CliUsageError("give at most one of --from-beginning, --offset and --timestamp")
    record_format = RecordFormat.compile(fmt, null_repr)
    start_ms = None if timestamp is None else parse_timestamp_ms(timestamp, "--timestamp")
    consumed = consume(
        topic,
        from_beginning=from_beginning,
        offset=offset,
        partition=partition,
        start_ms=start_ms,
        group=group,
        renderer=record_format,
        output=output,
        exit_at_end=exit_at_end,
        max_messages=max_messages,
        bootstrap=bootstrap,
        timeout_s=timeout,
    )
    if err_console.is_terminal:
        err_console.print(f"consumed {consumed} records", highlight=False)


def consume(
    topic: str,
    *,
    renderer: Renderer,
    output: OutputFormat,
    bootstrap: str,
    timeout_s: float,
    pattern: bool = False,
    from_beginning: bool = False,
    offset: int | None = None,
    partition: int | None = None,
    start_ms: int | None = None,
    group: str | None = None,
    exit_at_end: bool = False,
    max_messages: int | None = None,
    idle_timeout_s: float | None = None,
    consumer_config: dict[str, str] | None = None,
) -> int:
    """Print records until the end (``exit_at_end``), ``max_messages`` or ``idle_timeout_s``
    without a record (Kafka's ``--timeout-ms``); returns how many were printed.

    ``pattern``: ``topic`` is a regular expression, subscribed to (Kafka's ``--include``).
    ``consumer_config``: extra consumer settings (Kafka's ``--consumer-property``).
    """
    cluster = Cluster(bootstrap, timeout_s)
    subscribe = pattern or (group is not None and partition is None and offset is None and start_ms is None)
    consumer = cluster.consumer(
        {
            "group.id": group if group is not None else f"kompakt-consume-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "enable.partition.eof": exit_at_end,
            # A fetch at the end waits this long on the broker before its empty answer, the one
            # that raises the partition-EOF event; short, so ``-e`` exits promptly.
            **({"fetch.wait.max.ms": 50} if exit_at_end else {}),
            **(consumer_config or {}),
        }
    )
    tracker = EndTracker(set(), set())
    consumed = 0
    try:
        total: int | None = None
        if subscribe:
            if not pattern:
                cluster.topic_partitions(consumer, topic)
            _subscribe(consumer, f"^{topic}" if pattern else topic, tracker)
        else:
            partitions = cluster.topic_partitions(consumer, topic)
            if partition is not None:
                if partition not in partitions:
                    raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(partitions)})")
                partitions = [partition]
            assignment = _start_positions(
                cluster, consumer, topic, partitions, offset, start_ms, from_beginning, group
            )
            consumer.assign(assignment)
            tracker.assigned = set(partitions)
            if exit_at_end and err_console.is_terminal:
                total = _remaining(cluster, consumer, assignment)
        consumed = _loop(
            consumer,
            renderer,
            output,
            tracker,
            exit_at_end,
            max_messages,
            total,
            sys.stdout.buffer,
            idle_timeout_s,
        )
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except KeyboardInterrupt:
        pass
    finally:
        _close(consumer, group is not None)
    return consumed


def _subscribe(consumer: Any, topic: str, tracker: EndTracker) -> None:
    def on_assign(_consumer: Any, assigned: list[Any]) -> None:
        tracker.assigned |= {tp.partition for tp in assigned}

    def on_revoke(_consumer: Any, revoked: list[Any]) -> None:
        gone = {tp.partition for tp in revoked}
        tracker.assigned -= gone
        tracker.at_end -= gone

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)


def _start_positions(
    cluster: Cluster,
    consumer: Any,
    topic: str,
    partitions: list[int],
    offset: int | None,
    start_ms: int | None,
    from_beginning: bool,
    group: str | None,
) -> list[Any]:
    """The starting TopicPartition of each partition for a manual assignment."""
    if start_ms is not None:
        query = [TopicPartition(topic, p, start_ms) for p in partitions]
        found = consumer.offsets_for_times(query, timeout=cluster.timeout_s)
        # No record at or after the time: start at the end, as Kafka's tools do.
        return [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found
        ]
    if offset is not None and offset >= 0:
        return [TopicPartition(topic, p, offset) for p in partitions]
    if offset is not None:
        result = []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=cluster.timeout_s)
            result.append(TopicPartition(topic, p, max(low, high + offset)))
        return result
    if group is not None:
        return [TopicPartition(topic, p, OFFSET_STORED) for p in partitions]
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    return [TopicPartition(topic, p, start) for p in partitions]


def _remaining(cluster: Cluster, consumer: Any, assignment: list[Any]) -> int | None:
    """Records between the start positions and the current ends, for the progress bar's total."""
    total = 0
    for tp in assignment:
        low, high = consumer.get_watermark_offsets(tp, timeout=cluster.timeout_s)
        if tp.offset == OFFSET_BEGINNING:
            total += high - low
        elif tp.offset >= 0:
            total += max(0, high - tp.offset)
        elif tp.offset != OFFSET_END:
            return None
    return total


def _loop(
    consumer: Any,
    record_format: Renderer,
    output: OutputFormat,
    tracker: EndTracker,
    exit_at_end: bool,
    max_messages: int | None,
    total: int | None,
    out: IO[bytes],
    idle_timeout_s: float | None = None,
) -> int:
    consumed = 0
    last_record = time.monotonic()
    with progress(total) as bar:
        task = bar.add_task("consuming", total=total)
        while True:
            if exit_at_end and tracker.done():
                return consumed
            if idle_timeout_s is not None and time.monotonic() - last_record >= idle_timeout_s:
                return consumed
            # poll() returns as soon as one event is there; consume(.., 0) then drains what is
            # already fetched. consume() with a timeout would wait out the timeout on every batch.
            wait_s = _POLL_S if idle_timeout_s is None else max(0.0, min(_POLL_S, idle_timeout_s))
            first = consumer.poll(wait_s)
            batch = [] if first is None else [first, *consumer.consume(_BATCH, 0)]
            chunks: list[bytes] = []
            for msg in batch:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        tracker.at_end.add(msg.partition())
                        continue
                    if error.fatal() or error.code() in _FATAL_CODES:
                        raise CliError(f"cannot consume {msg.topic()}: {kafka_error_text(error)}")
                    continue
                tracker.at_end.discard(msg.partition())
                last_record = time.monotonic()
                if output is OutputFormat.JSON:
                    chunks.append(record_json(msg).encode("utf-8") + b"\n")
                else:
                    chunks.append(record_format.render(msg))
                consumed += 1
                if max_messages is not None and consumed >= max_messages:
                    break
            if chunks:
                out.write(b"".join(chunks))
                out.flush()
                bar.update(task, completed=consumed)
            if max_messages is not None and consumed >= max_messages:
                return consumed


def _close(consumer: Any, commit: bool) -> None:
    """Commit what was printed (with a group) and leave the group promptly."""
    if commit:
        # Nothing consumed means no offset stored (_NO_OFFSET): nothing to save.
        with contextlib.suppress(KafkaException):
            consumer.commit(asynchronous=False)
    consumer.close()


def register(app: typer.Typer) -> None:
    """Attach ``kompakt consume``."""
    app.command("consume")(consume_command)
