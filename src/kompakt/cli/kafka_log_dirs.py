"""``kompakt kafka-log-dirs``: Kafka's ``kafka-log-dirs.sh --describe`` (``LogDirsCommand``).

Asks each broker (all of them, or ``--broker-list``) for its log directories (DescribeLogDirs) and
prints Kafka's three lines: ``Querying brokers for log directories information``, ``Received log
directory information from brokers 1`` and the JSON document, with ``--topic-list`` keeping only
those topics' partitions. The JSON is Kafka's byte for byte: no spaces, and every object's keys in
the order of the ``HashMap`` Kafka's tool builds it from (``{"brokers":[...],"version":1}``,
partitions in ``TopicPartition`` hash order), see :mod:`kompakt.cli.kafka_java`.

confluent-kafka's Python admin client has no DescribeLogDirs, so the request goes over kompakt's
own bounds-checked connection (:mod:`kompakt.cli.wire_client`) to each broker's advertised
address, as Kafka's admin client sends it to each broker.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from kompakt.cli.cluster import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, DEFAULT_TIMEOUT_S, Cluster
from kompakt.cli.kafka_java import hash_order, int_hash, out, string_hash, topic_partition_hash
from kompakt.cli.kafka_tools import ToolParser, tool
from kompakt.cli.output import CliError, CliUsageError, bootstrap_value
from kompakt.cli.wire_client import Connection
from kompakt.protocol import codec

DESCRIBE_LOG_DIRS = 35
#: Kafka's exception class for each error a log directory can carry (``Errors`` names them).
_ERROR_CLASSES = {
    "kafka_storage_error": "org.apache.kafka.common.errors.KafkaStorageException",
    "cluster_authorization_failed": "org.apache.kafka.common.errors.ClusterAuthorizationException",
    "unknown_server_error": "org.apache.kafka.common.errors.UnknownServerException",
}


@dataclass(frozen=True)
class Replica:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDir:
    path: str
    error: str | None
    replicas: list[Replica]


def _java_map(entries: dict[str, Any]) -> dict[str, Any]:
    """A JSON object with its keys in the order of Java's ``HashMap`` of them."""
    return {key: entries[key] for key in hash_order(entries, string_hash)}


def describe_log_dirs(host: str, port: int, timeout_s: float) -> list[LogDir]:
    with Connection(host, port, timeout_s) as conn:
        version = conn.version(DESCRIBE_LOG_DIRS, range(1, 5))
        answer = conn.call(DESCRIBE_LOG_DIRS, version, {"topics": None})
    if getattr(answer, "error_code", codec.ErrorCode.none) != codec.ErrorCode.none:
        raise CliError(f"DescribeLogDirs to {host}:{port}: {answer.error_code.name.upper()}")
    dirs: list[LogDir] = []
    for result in answer.results:
        error = None
        if result.error_code != codec.ErrorCode.none:
            name = result.error_code.name
            error = _ERROR_CLASSES.get(name, f"org.apache.kafka.common.errors.{name}")
        replicas = [
            Replica(
                str(t.name),
                int(p.partition_index),
                int(p.partition_size),
                int(p.offset_lag),
                bool(p.is_future_key),
            )
            for t in result.topics
            for p in t.partitions
        ]
        dirs.append(LogDir(str(result.log_dir), error, replicas))
    return dirs


def log_dirs_json(by_broker: dict[int, list[LogDir]], topics: set[str]) -> str:
    """Kafka's JSON document for the brokers' log directories (``formatAsJson``)."""

    def replicas(log_dir: LogDir) -> list[dict[str, Any]]:
        # The admin client's map of the answer, then the tool's filtered copy: two HashMaps.
        keyed = {(r.topic, r.partition): r for r in log_dir.replicas}
        order = hash_order(keyed, lambda k: topic_partition_hash(*k))
        kept = [k for k in order if not topics or k[0] in topics]
        return [
            _java_map(
                {
                    "partition": f"{t}-{p}",
                    "size": keyed[(t, p)].size,
                    "offsetLag": keyed[(t, p)].offset_lag,
                    "isFuture": keyed[(t, p)].is_future,
                }
            )
            for t, p in hash_order(kept, lambda k: topic_partition_hash(*k))
        ]

    def broker_dirs(dirs: list[LogDir]) -> list[dict[str, Any]]:
        keyed = {d.path: d for d in dirs}
        return [
            _java_map({"logDir": path, "error": keyed[path].error, "partitions": replicas(keyed[path])})
            for path in hash_order(keyed, string_hash)
        ]

    document = _java_map(
        {
            "version": 1,
            "brokers": [
                _java_map({"broker": broker, "logDirs": broker_dirs(by_broker[broker])})
                for broker in hash_order(by_broker, int_hash)
            ],
        }
    )
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def _parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-log-dirs",
        description="This tool helps to query log directory usage on the specified brokers "
        "(Kafka's LogDirsCommand).",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="HOST:PORT[,...] (default $KOMPAKT_BOOTSTRAP or 127.0.0.1:9092)",
    )
    parser.add_argument("--describe", action="store_true", help="Describe the log directories.")
    parser.add_argument("--topic-list", default="", help='"topic1,topic2,topic3"; all topics if not given')
    parser.add_argument("--broker-list", default="", help='"0,1,2"; all brokers if not given')
    parser.add_argument("--command-config", help="Not supported: kompakt's tools connect in plaintext.")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="kompakt: seconds to wait.")
    return parser


@tool("kafka-log-dirs", "Kafka's kafka-log-dirs.sh: --describe [--topic-list] [--broker-list]")
def kafka_log_dirs(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    missing = [n for n in ("bootstrap_server", "describe") if not getattr(args, n)]
    if missing:
        raise CliUsageError(
            "Missing required argument(s): " + ", ".join(f"--{n.replace('_', '-')}" for n in missing)
        )
    if args.command_config:
        raise CliUsageError("--command-config is not supported: kompakt's tools connect in plaintext")
    topics = {t for t in args.topic_list.split(",") if t}
    try:
        wanted = {int(b) for b in args.broker_list.split(",") if b}
    except ValueError:
        raise CliUsageError(
            f"--broker-list expects broker ids like 0,1,2, got {args.broker_list!r}"
        ) from None
    cluster = Cluster(str(bootstrap_value(args.bootstrap_server)), args.timeout)
    metadata = cluster.metadata(cluster.admin())
    brokers = {int(b.id): (str(b.host), int(b.port)) for b in metadata.brokers.values()}
    missing_brokers = wanted - set(brokers)
    if missing_brokers:
        raise CliError(
            "ERROR: The given brokers do not exist from --broker-list: "
            + ",".join(str(b) for b in hash_order(missing_brokers, int_hash))
            + ". Current existent brokers: "
            + ",".join(str(b) for b in hash_order(brokers, int_hash))
        )
    chosen = [b for b in hash_order(brokers, int_hash) if not wanted or b in wanted]
    out("Querying brokers for log directories information")
    by_broker = {b: describe_log_dirs(*brokers[b], cluster.timeout_s) for b in chosen}
    out("Received log directory information from brokers " + ",".join(str(b) for b in chosen))
    out(log_dirs_json(by_broker, topics))
