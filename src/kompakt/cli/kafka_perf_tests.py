"""``kompakt kafka-producer-perf-test`` and ``kafka-consumer-perf-test``: Kafka's load generators.

The flags and the summary lines of Kafka 4.1's ``ProducerPerformance`` and ``ConsumerPerformance``,
so a benchmark script written for Kafka runs unchanged and its parser reads the same numbers::

    2000 records sent, 1394.7 records/sec (0.13 MB/sec), 432.45 ms avg latency, 882.00 ms max
    latency, 475 ms 50th, 485 ms 95th, 486 ms 99th, 486 ms 99.9th.

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    2026-12-05 07:23:15:203, 2026-12-05 07:23:15:759, 0.1907, 0.3430, 2000, 3597.1223, 441, ...

Underneath is confluent-kafka (librdkafka), not Kafka's Java client, so the numbers are
librdkafka's: the same measurement (latency from ``send`` to the delivery callback; bytes of keys
and values consumed; join time from subscribe to assignment) on a different client. Producer
properties (``--producer-props``, ``--producer.config``) and consumer properties
(``--consumer.config``) go to librdkafka, which shares most names with the Java client
(``acks``, ``linger.ms``, ``batch.size``, ``compression.type``, ``client.id``...); the Java-only
ones (serializers, ``buffer.memory``, ``max.block.ms``...) are accepted and have no effect.
``--print-metrics`` (the Java client's metric registry) is refused: librdkafka has other metrics.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import KafkaError, KafkaException

from kompakt.cli.cluster import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, Cluster, describe_exception
from kompakt.cli.kafka_java import out
from kompakt.cli.kafka_tools import ToolParser, properties_file, tool
from kompakt.cli.output import CliError, CliUsageError, bootstrap_value

REPORTING_INTERVAL_MS = 5000
MAX_SAMPLES = 500_000
#: Java client settings librdkafka does not have; they tune the JVM client only.
JAVA_ONLY = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "buffer.memory",
        "max.block.ms",
        "send.buffer.bytes",
        "receive.buffer.bytes",
        "check.crcs",
        "max.poll.records",
        "partition.assignment.strategy",
        "default.api.timeout.ms",
        "delivery.timeout.ms.config",
        "interceptor.classes",
        "metric.reporters",
    }
)
_PAYLOAD_POOL = 1 << 20


def _now_ms() -> int:
    return int(time.time() * 1000)


def _client_settings(props: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k not in JAVA_ONLY}


# --------------------------------------------------------------------------------------------
# kafka-producer-perf-test


@dataclass
class ProducerStats:
    """``ProducerPerformance.Stats``: totals, a 5-second window, and sampled latencies."""

    num_records: int
    reporting_interval_ms: int = REPORTING_INTERVAL_MS
    start: int = field(default_factory=_now_ms)
    window_start: int = field(default_factory=_now_ms)
    count: int = 0
    bytes: int = 0
    total_latency: int = 0
    max_latency: int = 0
    window_count: int = 0
    window_bytes: int = 0
    window_total_latency: int = 0
    window_max_latency: int = 0
    iteration: int = 0
    index: int = 0
    samples: Any = None

    def __post_init__(self) -> None:
        self.sampling = max(1, self.num_records // max(1, min(self.num_records, MAX_SAMPLES)))
        self.samples = np.zeros(self.num_records // self.sampling + 1, dtype=np.int32)

    def record(self, latency: int, size: int, now: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency
        self.window_max_latency = max(self.window_max_latency, latency)
        if self.iteration % self.sampling == 0 and self.index < len(self.samples):
            self.samples[self.index] = latency
            self.index += 1
        self.iteration += 1
        if now - self.window_start >= self.reporting_interval_ms:
            self.print_window()
            self.window_start = _now_ms()
            self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0

    def print_window(self) -> None:
        elapsed = max(1, _now_ms() - self.window_start)
        out(
            f"{self.window_count} records sent, {1000.0 * self.window_count / elapsed:.1f} records/sec "
            f"({1000.0 * self.window_bytes / elapsed / (1024.0 * 1024.0):.2f} MB/sec), "
            f"{self.window_total_latency / max(1, self.window_count):.1f} ms avg latency, "
            f"{float(self.window_max_latency):.1f} ms max latency."
        )

    def print_total(self) -> None:
        elapsed = max(1, _now_ms() - self.start)
        size = min(self.index, len(self.samples))
        ordered = np.sort(self.samples[:size]) if size else np.zeros(1, dtype=np.int32)
        percentiles = [int(ordered[min(int(p * size), len(ordered) - 1)]) for p in (0.5, 0.95, 0.99, 0.999)]
        avg = self.total_latency / self.count if self.count else float("nan")
        out(
            f"{self.count} records sent, {1000.0 * self.count / elapsed:.1f} records/sec "
            f"({1000.0 * self.bytes / elapsed / (1024.0 * 1024.0):.2f} MB/sec), "
            f"{_java_double(avg, 2)} ms avg latency, {float(self.max_latency):.2f} ms max latency, "
            f"{percentiles[0]} ms 50th, {percentiles[1]} ms 95th, {percentiles[2]} ms 99th, "
            f"{percentiles[3]} ms 99.9th."
        )


def _java_double(value: float, digits: int) -> str:
    """``%.Nf`` as Java prints it, ``NaN`` included."""
    return "NaN" if value != value else f"{value:.{digits}f}"


def _producer_parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-producer-perf-test",
        description="This tool is used to verify the producer performance (Kafka's ProducerPerformance, "
        "on confluent-kafka).",
    )
    parser.add_argument("--topic", required=True, metavar="TOPIC")
    parser.add_argument("--num-records", dest="num_records", type=int, required=True, metavar="NUM-RECORDS")
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", dest="record_size", type=int, metavar="RECORD-SIZE")
    payload.add_argument("--payload-file", dest="payload_file", metavar="PAYLOAD-FILE")
    payload.add_argument("--payload-monotonic", dest="payload_monotonic", action="store_true")
    parser.add_argument("--payload-delimiter", dest="payload_delimiter", default="\\n")
    parser.add_argument("--throughput", type=float, required=True, metavar="THROUGHPUT")
    parser.add_argument(
        "--producer-props", dest="producer_props", nargs="+", default=[], metavar="PROP-NAME=PROP-VALUE"
    )
    parser.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE")
    parser.add_argument("--print-metrics", dest="print_metrics", action="store_true")
    parser.add_argument("--transactional-id", dest="transactional_id")
    parser.add_argument("--transaction-duration-ms", dest="transaction_duration_ms", type=int)
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="kompakt: bootstrap.servers when --producer-props does not give it.",
    )
    return parser


def _producer_props(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {}
    if args.producer_config:
        props.update(properties_file(args.producer_config, "--producer.config"))
    for prop in args.producer_props:
        pieces = prop.split("=")
        if len(pieces) != 2:
            raise CliUsageError(f"Invalid property: {prop}")
        props[pieces[0]] = pieces[1]
    if "bootstrap.servers" not in props and args.bootstrap_server:
        props["bootstrap.servers"] = str(bootstrap_value(args.bootstrap_server))
    if "bootstrap.servers" not in props:
        raise CliUsageError("give bootstrap.servers in --producer-props or --producer.config")
    props.setdefault("client.id", "perf-producer-client")
    if args.transactional_id is not None:
        props["transactional.id"] = args.transactional_id
    return props


def _payloads(args: argparse.Namespace) -> Callable[[int], bytes]:
    """The payload of record ``i``: ``--record-size`` random capital letters (as Kafka's tool
    writes), a random line of ``--payload-file``, or ``str(i)`` with ``--payload-monotonic``."""
    if args.payload_monotonic:
        return lambda i: str(i).encode()
    if args.payload_file is not None:
        path = Path(args.payload_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror or exc}") from None
        delimiter = args.payload_delimiter.encode().decode("unicode_escape")
        items = [p.encode() for p in text.split(delimiter) if p]
        if not items:
            raise CliError(f"File does not contain any payloads: {path}")
        out(f"Reading payloads from: {path.absolute()}")
        out(f"Number of messages read: {len(items)}")
        chooser = random.Random(0)
        return lambda _i: items[chooser.randrange(len(items))]
    size = args.record_size
    if size < 0:
        raise CliUsageError("--record-size must not be negative")
    # One pool of random letters, a window of it per record: no per-byte work per record.
    pool = (np.random.default_rng(0).integers(65, 91, size=_PAYLOAD_POOL + size, dtype=np.uint8)).tobytes()
    return lambda i: pool[(i * 7919) % _PAYLOAD_POOL : (i * 7919) % _PAYLOAD_POOL + size]


@dataclass
class _Transactions:
    """``--transactional-id`` / ``--transaction-duration-ms``: commit every ``duration_ms``."""

    enabled: bool
    duration_ms: int
    open_records: int = 0
    started_ms: int = 0

    def before_send(self, producer: Any) -> None:
        if self.enabled and self.open_records == 0:
            producer.begin_transaction()
            self.started_ms = _now_ms()

    def after_send(self, producer: Any, sent_ms: int, timeout_s: float) -> None:
        self.open_records += 1
        if self.enabled and self.duration_ms <= sent_ms - self.started_ms:
            producer.commit_transaction(timeout_s)
            self.open_records = 0

    def finish(self, producer: Any, timeout_s: float) -> None:
        if self.enabled and self.open_records:
            producer.commit_transaction(timeout_s)


def _transactions(args: argparse.Namespace, props: dict[str, str]) -> _Transactions:
    enabled = "transactional.id" in props or args.transaction_duration_ms is not None
    if enabled:
        props.setdefault("transactional.id", f"performance-producer-{random.getrandbits(64):016x}")
    duration_ms = args.transaction_duration_ms if args.transaction_duration_ms is not None else 3000
    if enabled and duration_ms <= 0:
        raise CliUsageError("--transaction-duration-ms should be greater than zero")
    return _Transactions(enabled, duration_ms)


def _send(producer: Any, topic: str, payload: bytes, callback: Callable[[Any, Any], None]) -> None:
    """One send; a full local queue is drained (delivery callbacks served) until it takes it."""
    while True:
        try:
            producer.produce(topic, value=payload, on_delivery=callback)
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)


@tool("kafka-producer-perf-test", "Kafka's kafka-producer-perf-test.sh: produce load, print its summary")
def kafka_producer_perf_test(argv: list[str]) -> None:
    args = _producer_parser().parse_args(argv)
    if args.print_metrics:
        raise CliUsageError(
            "--print-metrics: kompakt's perf test runs on librdkafka, which has other metrics"
        )
    if args.num_records <= 0:
        raise CliUsageError("--num-records must be positive")
    props = _producer_props(args)
    txn = _transactions(args, props)
    payload_of = _payloads(args)
    cluster = Cluster(props["bootstrap.servers"])
    try:
        producer = cluster.producer(_client_settings(props))
    except KafkaException as exc:
        raise CliUsageError(f"producer properties: {describe_exception(exc)}") from None
    if txn.enabled:
        producer.init_transactions(cluster.timeout_s)
    stats = ProducerStats(args.num_records)
    failures: list[KafkaError] = []

    def on_delivery(sent_ms: int, size: int) -> Callable[[Any, Any], None]:
        def callback(error: Any, _message: Any) -> None:
            now = _now_ms()
            if error is not None:
                failures.append(error)
                return
            stats.record(now - sent_ms, size, now)

        return callback

    start = _now_ms()
    for i in range(args.num_records):
        payload = payload_of(i)
        txn.before_send(producer)
        sent = _now_ms()
        _send(producer, args.topic, payload, on_delivery(sent, len(payload)))
        txn.after_send(producer, sent, cluster.timeout_s)
        if args.throughput > 0:
            # ThroughputThrottler: sleep while ahead of the asked rate.
            time.sleep(max(0.0, (i + 1) / args.throughput - (_now_ms() - start) / 1000.0))
    txn.finish(producer, cluster.timeout_s)
    producer.flush()
    stats.print_total()
    if failures:
        raise CliError(f"{len(failures)} records failed: {failures[0].str()}")


# --------------------------------------------------------------------------------------------
# kafka-consumer-perf-test

_JAVA_DATE_TOKENS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def java_date_format(pattern: str) -> Callable[[int], str]:
    """A ``SimpleDateFormat`` pattern of the common letters (``yyyy-MM-dd HH:mm:ss:SSS``, the
    default) as a formatter of epoch milliseconds in local time, as Java formats them."""
    pieces: list[tuple[str, str]] = []  # (kind, text): literal, millis (text = width) or strftime
    for token in re.finditer(r"'[^']*'|([A-Za-z])\1*|[^A-Za-z']+", pattern):
        text = token.group(0)
        if text.startswith("'"):
            pieces.append(("literal", text[1:-1] or "'"))
        elif text[0] == "S":
            pieces.append(("millis", text))
        elif text in _JAVA_DATE_TOKENS:
            pieces.append(("strftime", _JAVA_DATE_TOKENS[text]))
        elif text[0].isalpha():
            raise CliUsageError(f"--date-format: kompakt does not format the letters {text!r}")
        else:
            pieces.append(("literal", text))

    def render(ms: int) -> str:
        moment = datetime.fromtimestamp(ms / 1000)
        return "".join(
            text
            if kind == "literal"
            else str(moment.microsecond // 1000).zfill(len(text))
            if kind == "millis"
            else moment.strftime(text)
            for kind, text in pieces
        )

    return render


def _consumer_parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-consumer-perf-test",
        description="This tool is used to verify the consumer performance (Kafka's ConsumerPerformance, "
        "on confluent-kafka).",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="HOST:PORT[,...] (default $KOMPAKT_BOOTSTRAP or 127.0.0.1:9092)",
    )
    parser.add_argument("--topic", help="REQUIRED: The topic to consume from.")
    parser.add_argument("--group", default=f"perf-consumer-{random.randrange(100_000)}")
    parser.add_argument("--fetch-size", type=int, default=1024 * 1024)
    parser.add_argument("--from-latest", action="store_true")
    parser.add_argument("--socket-buffer-size", type=int, default=2 * 1024 * 1024)
    parser.add_argument("--consumer.config", dest="consumer_config")
    parser.add_argument("--print-metrics", action="store_true")
    parser.add_argument("--show-detailed-stats", action="store_true")
    parser.add_argument("--timeout", type=int, nargs="?", const=10_000, default=10_000)
    parser.add_argument("--messages", type=int, help="REQUIRED: The number of messages to consume.")
    parser.add_argument("--reporting-interval", type=int, default=5000)
    parser.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS")
    parser.add_argument("--hide-header", action="store_true")
    return parser


@dataclass
class _Progress:
    messages: int = 0
    bytes: int = 0
    last_messages: int = 0
    last_bytes: int = 0
    join_ms: int = 0
    join_round_ms: int = 0


def _print_progress(progress: _Progress, start_ms: int, end_ms: int, date: Callable[[int], str]) -> None:
    elapsed = max(1, end_ms - start_ms)
    mb = progress.bytes / (1024 * 1024)
    interval_mb = (progress.bytes - progress.last_bytes) / (1024 * 1024)
    interval_messages = progress.messages - progress.last_messages
    fetch_ms = end_ms - start_ms - progress.join_round_ms
    fetch_mb_s = 0.0 if fetch_ms <= 0 else 1000.0 * interval_mb / fetch_ms
    fetch_msg_s = 0.0 if fetch_ms <= 0 else 1000.0 * interval_messages / fetch_ms
    out(
        f"{date(end_ms)}, 0, {mb:.4f}, {1000.0 * interval_mb / elapsed:.4f}, {progress.messages}, "
        f"{interval_messages / elapsed * 1000.0:.4f}, {progress.join_round_ms}, {fetch_ms}, "
        f"{fetch_mb_s:.4f}, {fetch_msg_s:.4f}"
    )


def _check_consumer_args(args: argparse.Namespace) -> None:
    missing = [f"--{n}" for n in ("topic", "messages") if getattr(args, n) is None]
    if missing:
        raise CliUsageError("Missing required argument(s): " + ", ".join(missing))
    if not args.bootstrap_server:
        raise CliUsageError("Missing required argument: --bootstrap-server")
    if args.print_metrics:
        raise CliUsageError(
            "--print-metrics: kompakt's perf test runs on librdkafka, which has other metrics"
        )
    if args.reporting_interval <= 0:
        raise CliUsageError("Reporting interval must be greater than 0.")


def _consumer_props(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {}
    if args.consumer_config:
        props.update(properties_file(args.consumer_config, "--consumer.config"))
    props.update(
        {
            "group.id": args.group,
            "socket.receive.buffer.bytes": str(args.socket_buffer_size),
            "max.partition.fetch.bytes": str(args.fetch_size),
            "auto.offset.reset": "latest" if args.from_latest else "earliest",
        }
    )
    props.setdefault("client.id", "perf-consumer-client")
    return props


def _consume(
    consumer: Any, args: argparse.Namespace, progress: _Progress, date: Callable[[int], str]
) -> None:
    """ConsumerPerformance's loop: until ``--messages`` or ``--timeout`` ms without a record."""
    now = last_report = last_consumed = _now_ms()
    while progress.messages < args.messages and now - last_consumed <= args.timeout:
        records = consumer.consume(num_messages=500, timeout=0.1)
        now = _now_ms()
        if records:
            last_consumed = now
        for record in records:
            error = record.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                continue
            if error is not None:
                raise CliError(f"consume failed: {error.str()}")
            progress.messages += 1
            progress.bytes += len(record.key() or b"") + len(record.value() or b"")
            if now - last_report >= args.reporting_interval:
                if args.show_detailed_stats:
                    _print_progress(progress, last_report, now, date)
                progress.join_round_ms = 0
                last_report = now
                progress.last_messages, progress.last_bytes = progress.messages, progress.bytes


@tool("kafka-consumer-perf-test", "Kafka's kafka-consumer-perf-test.sh: consume load, print its summary")
def kafka_consumer_perf_test(argv: list[str]) -> None:
    args = _consumer_parser().parse_args(argv)
    _check_consumer_args(args)
    date = java_date_format(args.date_format)
    cluster = Cluster(str(bootstrap_value(args.bootstrap_server)))
    try:
        consumer = cluster.consumer(_client_settings(_consumer_props(args)))
    except KafkaException as exc:
        raise CliUsageError(f"consumer properties: {describe_exception(exc)}") from None
    if not args.hide_header:
        extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        first = "time, threadId" if args.show_detailed_stats else "start.time, end.time"
        out(f"{first}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}")
    progress = _Progress()
    start_ms = _now_ms()
    join_start = [start_ms]

    def on_assign(_consumer: Any, _partitions: Any) -> None:
        elapsed = _now_ms() - join_start[0]
        progress.join_ms += elapsed
        progress.join_round_ms += elapsed

    def on_revoke(_consumer: Any, _partitions: Any) -> None:
        join_start[0] = _now_ms()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        _consume(consumer, args, progress, date)
    finally:
        end_ms = _now_ms()
        consumer.close()
    if progress.messages < args.messages:
        out(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
            "exceeded. You can use the --timeout option to increase the timeout."
        )
    if not args.show_detailed_stats:
        elapsed_s = max(1, end_ms - start_ms) / 1000.0
        fetch_ms = (end_ms - start_ms) - progress.join_ms
        mb = progress.bytes / (1024 * 1024)
        fetch_s = fetch_ms / 1000.0
        out(
            f"{date(start_ms)}, {date(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, {progress.messages}, "
            f"{progress.messages / elapsed_s:.4f}, {progress.join_ms}, {fetch_ms}, "
            f"{_ratio(mb, fetch_s)}, {_ratio(progress.messages, fetch_s)}"
        )


def _ratio(amount: float, seconds: float) -> str:
    """``%.4f`` of a rate as Java prints it: a zero fetch time gives Infinity or NaN."""
    if seconds == 0:
        return "NaN" if amount == 0 else "Infinity"
    return f"{amount / seconds:.4f}"
