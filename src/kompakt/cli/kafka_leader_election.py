"""``kompakt kafka-leader-election``: Kafka's ``kafka-leader-election.sh`` (``LeaderElectionCommand``).

kompakt is one broker: every partition's only replica is its leader, so no election is ever
needed. The tool takes Kafka's flags and gives the answer Kafka's own tool gives on a one-broker
Kafka cluster, where the controller answers ELECTION_NOT_NEEDED:

* named partitions (``--topic T --partition P`` or ``--path-to-json-file``) that exist:
  ``Valid replica already elected for partitions T-P, ...``;
* ``--all-topic-partitions``: nothing (the controller leaves out partitions that already have their
  leader);
* a partition that does not exist: ``Error completing leader election (PREFERRED) for partition:
  T-P: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such topic as T`` (or
  ``No such partition as T-P``), then ``N replica(s) could not be elected`` and exit code 1.

No ElectLeaders request is sent (kompakt does not serve it); the partitions are checked against
the cluster's metadata, so the answer is about the cluster named by ``--bootstrap-server``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from kompakt.cli.cluster import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, DEFAULT_TIMEOUT_S, Cluster
from kompakt.cli.kafka_java import (
    hash_order,
    out,
    topic_partition_hash,
    topic_partition_text,
)
from kompakt.cli.kafka_tools import ToolParser, tool
from kompakt.cli.output import CliError, CliUsageError, bootstrap_value

ELECTION_TYPES = ("preferred", "unclean")
UNKNOWN = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
MAX_FILE_BYTES = 64 * 1024 * 1024


def _parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-leader-election",
        description="This tool attempts to elect a new leader for a set of topic partitions "
        "(Kafka's LeaderElectionCommand); on one broker no election is ever needed.",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="HOST:PORT[,...] (default $KOMPAKT_BOOTSTRAP or 127.0.0.1:9092)",
    )
    parser.add_argument("--admin.config", dest="admin_config", help="Not supported: plaintext only.")
    parser.add_argument("--path-to-json-file", help='{"partitions": [{"topic": "foo", "partition": 1}]}')
    parser.add_argument("--topic", help="Name of topic for which to perform an election.")
    parser.add_argument("--partition", type=int, help="Partition id; REQUIRED if --topic is specified.")
    parser.add_argument("--all-topic-partitions", action="store_true")
    parser.add_argument(
        "--election-type", type=str.lower, choices=ELECTION_TYPES, help="preferred or unclean"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="kompakt: seconds to wait.")
    return parser


def _json_partitions(path: Path) -> list[tuple[str, int]]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CliError(f"{path}: larger than {MAX_FILE_BYTES} bytes, not an election file")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except ValueError:
        raise CliError("Replica election data is empty") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise CliError('Replica election data is missing "partitions" field')
    items = data["partitions"]
    if not isinstance(items, list):
        raise CliError('Replica election data "partitions" is not an array')
    partitions: list[tuple[str, int]] = []
    for item in items:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("topic"), str)
            or not isinstance(item.get("partition"), int)
        ):
            raise CliError(f"Each partition needs a string topic and an integer partition, got {item!r}")
        partitions.append((item["topic"], item["partition"]))
    duplicates = {p for p in partitions if partitions.count(p) > 1}
    if duplicates:
        listed = ", ".join(topic_partition_text(*p) for p in sorted(duplicates))
        raise CliError(f"Replica election data contains duplicate partitions: [{listed}]")
    return partitions


def _validate(args: argparse.Namespace) -> None:
    named = (("bootstrap-server", args.bootstrap_server), ("election-type", args.election_type))
    missing = [flag for flag, value in named if not value]
    if missing:
        raise CliUsageError("Missing required option(s): " + ", ".join(missing))
    chosen = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise CliUsageError(
            "One and only one of the following options is required: topic, all-topic-partitions, "
            "path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        raise CliUsageError("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise CliUsageError("Option partition is only allowed if topic is used")
    if args.admin_config:
        raise CliUsageError("--admin.config is not supported: kompakt's tools connect in plaintext")


@tool("kafka-leader-election", "Kafka's kafka-leader-election.sh: one broker, so no election is needed")
def kafka_leader_election(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    _validate(args)
    requested: list[tuple[str, int]] | None = None
    if args.topic is not None:
        requested = [(args.topic, args.partition)]
    elif args.path_to_json_file is not None:
        requested = _json_partitions(Path(args.path_to_json_file))
    cluster = Cluster(str(bootstrap_value(args.bootstrap_server)), args.timeout)
    metadata = cluster.metadata(cluster.admin())
    if requested is None:
        return  # every partition already has its only replica as leader: the controller lists none
    hosted = {
        (name, p) for name, topic in metadata.topics.items() if topic.error is None for p in topic.partitions
    }
    # The tool's own HashSet (elected already) and HashMap (failed), filled from the result.
    noop = hash_order([p for p in requested if p in hosted], lambda k: topic_partition_hash(*k))
    failed = hash_order([p for p in requested if p not in hosted], lambda k: topic_partition_hash(*k))
    election = args.election_type.upper()
    if noop:
        out(
            "Valid replica already elected for partitions "
            + ", ".join(topic_partition_text(*p) for p in noop)
        )
    topics = {name for name, topic in metadata.topics.items() if topic.error is None}
    for topic, partition in failed:
        text = topic_partition_text(topic, partition)
        # The KRaft controller's messages for the two ways a partition is not there.
        reason = f"No such partition as {text}" if topic in topics else f"No such topic as {topic}"
        out(f"Error completing leader election ({election}) for partition: {text}: {UNKNOWN}{reason}")
    if failed:
        raise CliError(f"{len(failed)} replica(s) could not be elected")
