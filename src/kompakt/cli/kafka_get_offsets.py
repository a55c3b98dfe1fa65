"""``kompakt kafka-get-offsets``: Kafka's ``kafka-get-offsets.sh`` (``GetOffsetShell``).

Prints one ``topic:partition:offset`` line per partition, as Kafka 4.1's tool does, so the scripts
that read end offsets (lag checks, "is the topic empty") work unchanged: the same filters
(``--topic`` regex with ``--partitions``, or ``--topic-partitions`` patterns such as
``orders:0-2,events``), the same ``--time`` (``-1``/``latest``, ``-2``/``earliest``,
``-3``/``max-timestamp``, ``-4``/``earliest-local``, ``-5``/``latest-tiered`` or a timestamp in
ms), lines in the order of ``"topic-partition"`` strings (Kafka keeps them in a TreeMap keyed by
that text, so ``t-10`` comes before ``t-2``), and a partition without an answer (no record at or
after the timestamp) left out. Internal topics are included unless ``--exclude-internal-topics``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from kompakt.cli.cluster import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    DEFAULT_TIMEOUT_S,
    KAFKA_ADMIN,
    Cluster,
)
from kompakt.cli.kafka_java import out, topic_partition_text
from kompakt.cli.kafka_tools import ToolParser, tool
from kompakt.cli.output import CliError, CliUsageError, bootstrap_value

OffsetSpec: Any = KAFKA_ADMIN.OffsetSpec

#: GetOffsetShell's pattern of one ``--topic-partitions`` item.
TOPIC_PARTITION_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class _Rule:
    topic: re.Pattern[str]
    allows: Callable[[int], bool]


def include_list(raw: str) -> re.Pattern[str]:
    """Kafka's ``IncludeList``: commas mean "or", spaces and surrounding quotes are dropped."""
    text = raw.strip().replace(",", "|").replace(" ", "")
    text = re.sub(r"^[\"']+", "", text)
    text = re.sub(r"[\"']+$", "", text)
    try:
        return re.compile(text)
    except re.error as exc:
        raise CliUsageError(f"invalid topic pattern {raw!r}: {exc}") from None


def parse_time(text: str) -> int:
    """``--time``: a name or a number; the negative numbers are ListOffsets' special timestamps."""
    if text in _NAMED_TIMES:
        return _NAMED_TIMES[text]
    try:
        return int(text)
    except ValueError:
        raise CliError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
            "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long format timestamp"
        ) from None


def _offset_spec(time_ms: int) -> Any:
    if time_ms == -1:
        return OffsetSpec.latest()
    if time_ms == -2:
        return OffsetSpec.earliest()
    if time_ms == -3:
        return OffsetSpec.max_timestamp()
    return OffsetSpec.for_timestamp(time_ms)


def _rule_of(spec: str) -> _Rule:
    match = TOPIC_PARTITION_PATTERN.fullmatch(spec)
    if match is None:
        raise CliError(f"Invalid rule specification: {spec}")
    topic, single, lower, upper = (g or None for g in match.groups())
    pattern = include_list(topic) if topic is not None else re.compile(".*")
    if single is not None:
        wanted = int(single)
        return _Rule(pattern, lambda p: p == wanted)
    low = int(lower) if lower is not None else 0
    high = int(upper) if upper is not None else _INT_MAX
    return _Rule(pattern, lambda p: low <= p < high)


def _rules(args: argparse.Namespace) -> list[_Rule]:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise CliError("--topic-partitions cannot be used with --topic or --partitions")
        return [_rule_of(spec) for spec in args.topic_partitions.split(",")]
    wanted: set[int] = set()
    if args.partitions:
        try:
            wanted = {int(p) for p in args.partitions.split(",")}
        except ValueError:
            raise CliError(
                "--partitions expects a comma separated list of numeric partition ids, but received: "
                + args.partitions
            ) from None
    pattern = include_list(args.topic if args.topic is not None else ".*")
    return [_Rule(pattern, lambda p: not wanted or p in wanted)]


def _parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-get-offsets",
        description="An interactive shell for getting topic-partition offsets (Kafka's GetOffsetShell).",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="HOST:PORT[,...] (default $KOMPAKT_BOOTSTRAP or 127.0.0.1:9092)",
    )
    parser.add_argument("--topic-partitions", help="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3")
    parser.add_argument("--topic", help="The topic to get the offsets for (a regular expression).")
    parser.add_argument("--partitions", help="Comma separated list of partition ids.")
    parser.add_argument(
        "--time",
        default="latest",
        help="<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / "
        "-5 or latest-tiered",
    )
    parser.add_argument("--exclude-internal-topics", action="store_true")
    parser.add_argument("--command-config", help="Not supported: kompakt's tools connect in plaintext.")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="kompakt: seconds to wait.")
    return parser


@tool("kafka-get-offsets", "Kafka's kafka-get-offsets.sh: topic:partition:offset lines")
def kafka_get_offsets(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    if not args.bootstrap_server:
        raise CliUsageError('Missing required argument "[bootstrap-server]"')
    if args.command_config:
        raise CliUsageError("--command-config is not supported: kompakt's tools connect in plaintext")
    rules = _rules(args)
    time_ms = parse_time(args.time)
    cluster = Cluster(str(bootstrap_value(args.bootstrap_server)), args.timeout)
    for topic, partition, offset in fetch_offsets(cluster, rules, time_ms, args.exclude_internal_topics):
        out(f"{topic}:{partition}:{offset}")


def fetch_offsets(
    cluster: Cluster, rules: list[_Rule], time_ms: int, exclude_internal: bool
) -> list[tuple[str, int, int]]:
    """The matched partitions' offsets at ``time_ms``, in Kafka's order."""
    admin = cluster.admin()
    metadata = cluster.metadata(admin)
    partitions = [
        (name, p)
        for name, topic in metadata.topics.items()
        if not (exclude_internal and name in INTERNAL_TOPICS) and topic.error is None
        for p in topic.partitions
        if any(rule.topic.fullmatch(name) and rule.allows(p) for rule in rules)
    ]
    if not partitions:
        raise CliError("Could not match any topic-partitions with the specified filters")
    if time_ms in (-4, -5):
        # Tiered storage's ListOffsets v8/v9: librdkafka does not send them (nor does kompakt's
        # broker serve them), so every partition is skipped as Kafka's tool skips a failed one.
        for topic, partition in sorted(partitions, key=lambda tp: _java_order(topic_partition_text(*tp))):
            _skip(
                topic,
                partition,
                "UnsupportedVersionException: earliest-local (-4) and latest-tiered (-5) need ListOffsets "
                "v8/v9 (tiered storage), which kompakt's tools do not send",
            )
        return []
    spec = _offset_spec(time_ms)
    futures = admin.list_offsets(
        {TopicPartition(t, p): spec for t, p in partitions}, request_timeout=cluster.timeout_s
    )
    found: dict[str, tuple[str, int, int]] = {}
    for tp, future in futures.items():
        try:
            info = cluster.wait(future, f"topic-partition {topic_partition_text(tp.topic, tp.partition)}")
        except CliError as exc:
            _skip(tp.topic, tp.partition, str(exc))
            continue
        if info.offset != -1:
            found[topic_partition_text(tp.topic, tp.partition)] = (tp.topic, tp.partition, info.offset)
    return [found[key] for key in sorted(found, key=_java_order)]


def _skip(topic: str, partition: int, reason: str) -> None:
    sys.stderr.write(f"Skip getting offsets for topic-partition {topic}-{partition} due to error: {reason}\n")


def _java_order(text: str) -> bytes:
    """``String.compareTo`` order: by UTF-16 code units."""
    return text.encode("utf-16-be")
