"""``kompakt kafka-delete-records``: Kafka's ``kafka-delete-records.sh`` (``DeleteRecordsCommand``).

Reads Kafka's offset JSON file (``{"partitions": [{"topic": "t", "partition": 0, "offset": 3}],
"version": 1}``), moves each partition's log start offset up to that offset (DeleteRecords, which
kompakt serves as Kafka does: ``-1`` means the high watermark) and prints Kafka's lines::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 3

Kafka prints the partitions in the order of its admin client's result map, an immutable map
whose iteration order is salted afresh in every JVM, so no script can rely on it; kompakt prints
them sorted by topic and partition. A failed partition is ``partition: t-0	error: <message>``.
A partition named twice is refused before anything is
deleted, as Kafka refuses it.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import TimeoutError as FutureTimeoutError
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kompakt.cli.cluster import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, DEFAULT_TIMEOUT_S, Cluster
from kompakt.cli.kafka_java import exception_text, out, topic_partition_text
from kompakt.cli.kafka_tools import ToolParser, tool
from kompakt.cli.output import CliError, CliUsageError, bootstrap_value

EARLIEST_VERSION = 1
MAX_FILE_BYTES = 64 * 1024 * 1024
"""An offset file larger than this is not one: refused before it is read."""


def parse_offset_json(text: str) -> list[tuple[str, int, int]]:
    """The ``(topic, partition, offset)`` entries of Kafka's offset JSON, in file order."""
    try:
        data = json.loads(text)
    except ValueError:
        raise CliError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise CliError("The input string is not a valid JSON object")
    version = data.get("version", EARLIEST_VERSION)
    if version != EARLIEST_VERSION:
        raise CliError(f"Not supported version field value {version}")
    partitions = data.get("partitions")
    if partitions is None:
        raise CliError("Missing partitions field")
    if not isinstance(partitions, list):
        raise CliError("Expected an array for the partitions field")
    entries: list[tuple[str, int, int]] = []
    for item in partitions:
        try:
            topic, partition, offset = item["topic"], item["partition"], item["offset"]
        except (KeyError, TypeError):
            raise CliError(f"Each partition needs topic, partition and offset, got {item!r}") from None
        if not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(offset, int):
            raise CliError(
                f"Each partition needs a string topic and integer partition and offset, got {item!r}"
            )
        entries.append((topic, partition, offset))
    return entries


def _parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-delete-records",
        description="This tool helps to delete records of the given partitions down to the specified "
        "offset (Kafka's DeleteRecordsCommand).",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="HOST:PORT[,...] (default $KOMPAKT_BOOTSTRAP or 127.0.0.1:9092)",
    )
    parser.add_argument("--offset-json-file", help="REQUIRED: The JSON file with offset per partition.")
    parser.add_argument("--command-config", help="Not supported: kompakt's tools connect in plaintext.")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="kompakt: seconds to wait.")
    return parser


@tool("kafka-delete-records", "Kafka's kafka-delete-records.sh: --offset-json-file")
def kafka_delete_records(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    missing = [n for n in ("bootstrap_server", "offset_json_file") if not getattr(args, n)]
    if missing:
        raise CliUsageError(
            "Missing required argument(s): " + ", ".join(f"--{n.replace('_', '-')}" for n in missing)
        )
    if args.command_config:
        raise CliUsageError("--command-config is not supported: kompakt's tools connect in plaintext")
    path = Path(args.offset_json_file)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CliError(f"{path}: larger than {MAX_FILE_BYTES} bytes, not an offset file")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    entries = parse_offset_json(text)
    keys = [(t, p) for t, p, _ in entries]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise CliError(
            "Offset json file contains duplicate topic partitions: "
            + ",".join(topic_partition_text(t, p) for t, p in duplicates)
        )
    cluster = Cluster(str(bootstrap_value(args.bootstrap_server)), args.timeout)
    delete_records(cluster, entries)


def delete_records(cluster: Cluster, entries: list[tuple[str, int, int]]) -> None:
    admin = cluster.admin()
    cluster.metadata(admin)
    out("Executing records delete operation")
    futures: dict[Any, Any] = admin.delete_records(
        [TopicPartition(t, p, o) for t, p, o in entries], request_timeout=cluster.timeout_s
    )
    out("Records delete operation completed:")
    by_key = {(tp.topic, tp.partition): future for tp, future in futures.items()}
    for topic, partition in sorted(by_key):
        text = topic_partition_text(topic, partition)
        try:
            result = by_key[(topic, partition)].result(timeout=cluster.timeout_s + 5.0)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            reason = exception_text(error.name()) if isinstance(error, KafkaError) else str(exc)
            out(f"partition: {text}\terror: {reason}")
            continue
        except FutureTimeoutError:
            out(f"partition: {text}\terror: {exception_text('REQUEST_TIMED_OUT')}")
            continue
        out(f"partition: {text}\tlow_watermark: {result.low_watermark}")
