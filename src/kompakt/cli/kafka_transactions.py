"""``kompakt kafka-transactions``: Kafka's ``kafka-transactions.sh`` (``TransactionsCommand``).

The subcommands an operator uses to look at transactions and recover from a hanging one, with
Kafka 4.1's flags and its tab-separated, padded tables (``ToolsUtils.prettyPrintTable``):

* ``list [--duration-filter MS] [--transactional-id-pattern RE]``: TransactionalId, Coordinator,
  ProducerId, TransactionState (ListTransactions, asked of every broker);
* ``describe --transactional-id ID``: the coordinator's view (DescribeTransactions), with
  ``TransactionDurationMs`` measured against this machine's clock as Kafka's tool does;
* ``describe-producers --topic T --partition P [--broker-id B]``: the partition's active producers
  (DescribeProducers);
* ``find-hanging (--topic T [--partition P] | --broker-id B) [--max-transaction-timeout MIN]``:
  open transactions on the partitions older than the timeout that the coordinator no longer knows;
* ``abort --topic T --partition P (--start-offset O | --producer-id .. --producer-epoch ..
  --coordinator-epoch ..)``: write the abort marker (WriteTxnMarkers, to the partition leader).

confluent-kafka's Python admin client has none of these calls, so they go over kompakt's own
bounds-checked connection (:mod:`kompakt.cli.wire_client`). kompakt's broker does not serve
WriteTxnMarkers (its coordinator aborts a transaction that outlives its timeout by itself), so
``abort`` against kompakt fails with Kafka's message for a broker without the API; against a Kafka
cluster it aborts. Errors are Kafka's lines (``Failed to ...: <reason>. Enable debug logging for
additional detail.``) on stderr with exit code 1.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import typer

from kompakt.cli.cluster import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, DEFAULT_TIMEOUT_S, Cluster
from kompakt.cli.kafka_java import hash_order, pretty_table, topic_partition_hash, topic_partition_text
from kompakt.cli.kafka_tools import ToolParser, tool
from kompakt.cli.output import CliError, CliUsageError, bootstrap_value
from kompakt.cli.wire_client import Connection
from kompakt.protocol import codec
from kompakt.records.schema_reader import SchemaReader

WRITE_TXN_MARKERS, FIND_COORDINATOR = 27, 10
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
TRANSACTION_KEY_TYPE = 1
MAX_BATCH_SIZE = 500
"""Partitions per DescribeProducers request in ``find-hanging``, as Kafka's tool batches them."""

#: Kafka's exception messages (``Errors``) for the answers these calls get.
_MESSAGES = {
    "transactional_id_not_found": "The transactionalId could not be found",
    "coordinator_not_available": "The coordinator is not available.",
    "not_coordinator": "This is not the correct coordinator.",
    "coordinator_load_in_progress": "The coordinator is loading and hence can't process requests.",
    "unknown_topic_or_partition": "This server does not host this topic-partition.",
    "not_leader_or_follower": (
        "For requests intended only for the leader, this error indicates that the broker is not the "
        "current leader. For requests intended for any replica, this error indicates that the broker "
        "is not a replica of the topic partition."
    ),
    "transactional_id_authorization_failed": "Transactional Id authorization failed.",
    "topic_authorization_failed": "Topic authorization failed.",
    "cluster_authorization_failed": "Cluster authorization failed.",
    "invalid_request": (
        "This most likely occurs because of a request being malformed by the client library or the "
        "message was sent to an incompatible broker. See the broker logs for more details."
    ),
}


def _fail(message: str) -> NoReturn:
    """``printErrorAndExit``: the message on stderr, exit code 1."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    raise typer.Exit(1)


def _fail_with(message: str, reason: str) -> NoReturn:
    _fail(f"{message}: {reason}. Enable debug logging for additional detail.")


def _reason(error: Any) -> str:
    name = str(error.name)
    return _MESSAGES.get(name, name.upper())


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class _Client:
    """The cluster as the tool needs it: brokers from metadata, one connection per broker."""

    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        self.cluster = Cluster(bootstrap, timeout_s)
        self.admin = self.cluster.admin()
        self.metadata = self.cluster.metadata(self.admin)
        self.brokers = {int(b.id): (str(b.host), int(b.port)) for b in self.metadata.brokers.values()}

    def connect(self, broker: int) -> Connection:
        host, port = self.brokers[broker]
        return Connection(host, port, self.cluster.timeout_s, client_id="kafka-transactions")

    def leader(self, topic: str, partition: int) -> int | None:
        meta = self.metadata.topics.get(topic)
        if meta is None or meta.error is not None or partition not in meta.partitions:
            return None
        leader = int(meta.partitions[partition].leader)
        return leader if leader in self.brokers else None

    def coordinator(self, transactional_id: str) -> int:
        for broker in sorted(self.brokers):
            try:
                conn = self.connect(broker)
            except CliError:
                continue
            with conn:
                version = conn.version(FIND_COORDINATOR, range(4, 7))
                answer = conn.call(
                    FIND_COORDINATOR,
                    version,
                    {"key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [transactional_id]},
                )
            found = answer.coordinators[0]
            if found.error_code != codec.ErrorCode.none:
                raise _CallError(_reason(found.error_code))
            return int(found.node_id)
        raise self.cluster.unreachable()

    def describe_producers(
        self, broker: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], Any]:
        """Each partition's answer (its active producers, or an error reason string)."""
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        request = {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        with self.connect(broker) as conn:
            answer = conn.call(DESCRIBE_PRODUCERS, conn.version(DESCRIBE_PRODUCERS, range(0, 1)), request)
        results: dict[tuple[str, int], Any] = {}
        for topic in answer.topics:
            for part in topic.partitions:
                key = (str(topic.name), int(part.partition_index))
                if part.error_code != codec.ErrorCode.none:
                    results[key] = str(part.error_message or _reason(part.error_code))
                    continue
                results[key] = [
                    ProducerState(
                        int(p.producer_id),
                        int(p.producer_epoch),
                        int(p.last_sequence),
                        int(p.last_timestamp),
                        int(p.coordinator_epoch),
                        int(p.current_txn_start_offset),
                    )
                    for p in part.active_producers
                ]
        return results

    def list_transactions(
        self, broker: int, duration_ms: int, pattern: str | None, producer_ids: list[int]
    ) -> list[tuple[str, int, str]]:
        with self.connect(broker) as conn:
            version = conn.version(LIST_TRANSACTIONS, range(0, 3))
            if pattern is not None and version < 2:
                raise _CallError("The broker does not support filtering on the transactional id pattern")
            answer = conn.call(
                LIST_TRANSACTIONS,
                version,
                {
                    "state_filters": [],
                    "producer_id_filters": producer_ids,
                    "duration_filter": duration_ms,
                    "transactional_id_pattern": pattern,
                },
            )
        if answer.error_code != codec.ErrorCode.none:
            raise _CallError(_reason(answer.error_code))
        return [
            (str(s.transactional_id), int(s.producer_id), str(s.transaction_state))
            for s in answer.transaction_states
        ]

    def describe_transaction(self, transactional_id: str) -> tuple[int, TransactionDescription]:
        coordinator = self.coordinator(transactional_id)
        with self.connect(coordinator) as conn:
            version = conn.version(DESCRIBE_TRANSACTIONS, range(0, 1))
            correlation = conn.send(DESCRIBE_TRANSACTIONS, version, {"transactional_ids": [transactional_id]})
            # Read by hand: kio refuses the -1 start time of a transaction that has not started.
            states = _describe_transactions_v0(conn.receive_frame("DescribeTransactions"), correlation)
        if not states:
            raise CliError(f"DescribeTransactions at broker {coordinator} answered no transaction")
        error, state = states[0]
        if error == codec.ErrorCode.transactional_id_not_found.value:
            raise _CallError(
                f"DescribeTransactions request for transactionalId `{transactional_id}` failed because the "
                "ID could not be found"
            )
        if error != 0:
            raise _CallError(_reason(codec.ErrorCode(error)))
        return coordinator, state


@dataclass(frozen=True)
class TransactionDescription:
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


class _FrameError(CliError):
    """A DescribeTransactions answer that is not one."""


def _describe_transactions_v0(
    frame: memoryview, correlation: int
) -> list[tuple[int, TransactionDescription]]:
    """DescribeTransactions v0's response (a flexible version: header v1, compact arrays and
    strings, tagged fields), every length checked by :class:`SchemaReader` before it is taken."""
    reader = SchemaReader(bytes(frame), _FrameError)
    if reader.i32() != correlation:
        raise _FrameError("DescribeTransactions answered another request's correlation id")
    reader.tagged_fields()
    reader.i32()  # throttle_time_ms
    states: list[tuple[int, TransactionDescription]] = []
    for _ in range(reader.compact_array_count(min_element_size=28)):
        error = reader.i16()
        reader.compact_string()  # transactional_id
        state = reader.compact_string()
        timeout_ms, start_ms, producer_id, epoch = reader.i32(), reader.i64(), reader.i64(), reader.i16()
        partitions: list[tuple[str, int]] = []
        for _ in range(reader.compact_array_count(min_element_size=3)):
            topic = reader.compact_string()
            partitions += [
                (topic, reader.i32()) for _ in range(reader.compact_array_count(min_element_size=4))
            ]
            reader.tagged_fields()
        reader.tagged_fields()
        states.append(
            (error, TransactionDescription(state, timeout_ms, start_ms, producer_id, epoch, partitions))
        )
    return states


class _CallError(Exception):
    """A call the broker answered with an error: the reason, as Kafka's exception message."""


# --------------------------------------------------------------------------------------------
# subcommands


def _list(client: _Client, args: argparse.Namespace) -> None:
    duration = -1 if args.duration_filter is None else args.duration_filter
    rows: list[list[str]] = []
    try:
        for broker in sorted(client.brokers):
            for transactional_id, producer_id, state in client.list_transactions(
                broker, duration, args.transactional_id_pattern, []
            ):
                rows.append([transactional_id, str(broker), str(producer_id), state])
    except (_CallError, CliError) as exc:
        _fail_with("Failed to list transactions", str(exc))
    pretty_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


def _describe(client: _Client, args: argparse.Namespace) -> None:
    transactional_id = args.transactional_id
    try:
        coordinator, state = client.describe_transaction(transactional_id)
    except (_CallError, CliError) as exc:
        _fail_with(f"Failed to describe transaction state of transactional-id `{transactional_id}`", str(exc))
    start_ms = state.transaction_start_time_ms
    if start_ms >= 0:
        start_text, duration_text = str(start_ms), str(int(time.time() * 1000) - start_ms)
    else:
        start_text = duration_text = "None"
    partitions = state.partitions
    row = [
        str(coordinator),
        transactional_id,
        str(state.producer_id),
        str(state.producer_epoch),
        state.transaction_state,
        str(state.transaction_timeout_ms),
        start_text,
        duration_text,
        ",".join(
            topic_partition_text(*tp) for tp in hash_order(partitions, lambda k: topic_partition_hash(*k))
        ),
    ]
    pretty_table(
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [row],
    )


def _producers_of(client: _Client, topic: str, partition: int, broker: int | None) -> list[ProducerState]:
    """The partition's active producers, from ``broker`` or the leader; a Kafka-shaped error."""
    target = broker if broker is not None else client.leader(topic, partition)
    where = f"broker {broker}" if broker is not None else "leader"
    failure = (
        f"Failed to describe producers for partition {topic_partition_text(topic, partition)} on {where}"
    )
    if target is None or target not in client.brokers:
        _fail_with(failure, _MESSAGES["unknown_topic_or_partition"])
    try:
        answer = client.describe_producers(target, [(topic, partition)]).get((topic, partition))
    except CliError as exc:
        _fail_with(failure, str(exc))
    if not isinstance(answer, list):
        _fail_with(failure, str(answer or _MESSAGES["unknown_topic_or_partition"]))
    return answer


def _describe_producers(client: _Client, args: argparse.Namespace) -> None:
    producers = _producers_of(client, args.topic, args.partition, args.broker_id)
    rows = [
        [
            str(p.producer_id),
            str(p.producer_epoch),
            str(p.coordinator_epoch),
            str(p.last_sequence),
            str(p.last_timestamp),
            str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None",
        ]
        for p in producers
    ]
    pretty_table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        rows,
    )


def _hanging_candidates(
    client: _Client, partitions: list[tuple[str, int]], broker: int | None, max_timeout_ms: int
) -> list[tuple[tuple[str, int], ProducerState]]:
    now = int(time.time() * 1000)
    candidates: list[tuple[tuple[str, int], ProducerState]] = []
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        target = broker if broker is not None else client.leader(*tp)
        if target is not None:
            by_leader.setdefault(target, []).append(tp)
    for target, tps in sorted(by_leader.items()):
        for start in range(0, len(tps), MAX_BATCH_SIZE):
            batch = tps[start : start + MAX_BATCH_SIZE]
            try:
                answers = client.describe_producers(target, batch)
            except CliError as exc:
                _fail_with(
                    f"Failed to describe producers for {len(batch)} partitions on broker "
                    + ("Optional.empty" if broker is None else f"Optional[{broker}]"),
                    str(exc),
                )
            for tp in batch:
                for producer in answers.get(tp) or []:
                    open_txn = isinstance(producer, ProducerState) and producer.current_txn_start_offset >= 0
                    if open_txn and now - producer.last_timestamp > max_timeout_ms:
                        candidates.append((tp, producer))
    return candidates


def _find_hanging(client: _Client, args: argparse.Namespace) -> None:
    if args.topic is None and args.broker_id is None:
        _fail(
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
            "search"
        )
    if args.partition is not None and args.topic is None:
        _fail("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * 60_000
    if args.topic is not None and args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        topics = [args.topic] if args.topic is not None else list(client.metadata.topics)
        partitions = [
            (t, p)
            for t in topics
            if (meta := client.metadata.topics.get(t)) is not None and meta.error is None
            for p in sorted(meta.partitions)
            if args.broker_id is None or args.broker_id in meta.partitions[p].replicas
        ]
    candidates = _hanging_candidates(client, partitions, args.broker_id, max_timeout_ms)
    hanging: list[tuple[tuple[str, int], ProducerState]] = []
    if candidates:
        producer_ids = sorted({p.producer_id for _, p in candidates})
        transactional_ids: dict[int, str] = {}
        for broker in sorted(client.brokers):
            try:
                listed = client.list_transactions(broker, -1, None, producer_ids)
            except (_CallError, CliError) as exc:
                _fail_with(f"Failed to list transactions for {len(producer_ids)} producers", str(exc))
            transactional_ids.update({pid: tid for tid, pid, _ in listed if pid in producer_ids})
        for tp, producer in candidates:
            transactional_id = transactional_ids.get(producer.producer_id)
            if transactional_id is None:
                hanging.append((tp, producer))
                continue
            try:
                _, state = client.describe_transaction(transactional_id)
            except _CallError:
                hanging.append((tp, producer))
                continue
            pending = set(state.partitions)
            if tp not in pending:
                hanging.append((tp, producer))
    now = int(time.time() * 1000)
    pretty_table(
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ],
        [
            [
                tp[0],
                str(tp[1]),
                str(p.producer_id),
                str(p.producer_epoch),
                str(p.coordinator_epoch),
                str(p.current_txn_start_offset),
                str(p.last_timestamp),
                str((now - p.last_timestamp) // 60_000),
            ]
            for tp, p in hanging
        ],
    )


def _abort(client: _Client, args: argparse.Namespace) -> None:
    topic, partition = args.topic, args.partition
    tp_text = topic_partition_text(topic, partition)
    if args.start_offset is None and args.producer_id is None:
        _fail(
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
            "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    if args.start_offset is None:
        if args.producer_epoch is None:
            _fail("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            _fail("Missing required argument --coordinator-epoch")
        producer_id, epoch, coordinator_epoch = (
            args.producer_id,
            args.producer_epoch,
            max(args.coordinator_epoch, 0),
        )
    else:
        found = [
            p
            for p in _producers_of(client, topic, partition, None)
            if p.current_txn_start_offset == args.start_offset
        ]
        if not found:
            _fail(
                f"Could not find any open transactions starting at offset {args.start_offset} "
                f"on partition {tp_text}"
            )
        producer_id, epoch = found[0].producer_id, found[0].producer_epoch
        coordinator_epoch = max(found[0].coordinator_epoch, 0)
    spec = (
        f"AbortTransactionSpec(topicPartition={tp_text}, producerId={producer_id}, "
        f"producerEpoch={epoch}, coordinatorEpoch={coordinator_epoch})"
    )
    leader = client.leader(topic, partition)
    if leader is None:
        _fail_with(f"Failed to abort transaction {spec}", _MESSAGES["unknown_topic_or_partition"])
    try:
        with client.connect(leader) as conn:
            version = conn.version(WRITE_TXN_MARKERS, range(1, 3))
            answer = conn.call(
                WRITE_TXN_MARKERS,
                version,
                {
                    "markers": [
                        {
                            "producer_id": producer_id,
                            "producer_epoch": epoch,
                            "transaction_result": False,
                            "topics": [{"name": topic, "partition_indexes": [partition]}],
                            "coordinator_epoch": coordinator_epoch,
                            "transaction_version": 0,
                        }
                    ]
                },
            )
    except CliError as exc:
        reason = str(exc)
        if "does not serve" in reason:
            reason = (
                f"The node does not support WRITE_TXN_MARKERS ({reason}; kompakt's coordinator aborts a "
                "transaction that outlives its transaction.timeout.ms by itself)"
            )
        _fail_with(f"Failed to abort transaction {spec}", reason)
    for marker in answer.markers:
        for t in marker.topics:
            for p in t.partitions:
                if p.error_code != codec.ErrorCode.none:
                    _fail_with(f"Failed to abort transaction {spec}", _reason(p.error_code))


_COMMANDS: dict[str, Callable[[_Client, argparse.Namespace], None]] = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "abort": _abort,
    "find-hanging": _find_hanging,
}


def _parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-transactions",
        description="This tool is used to analyze the transactional state of producers in the cluster. "
        "It can be used to detect and recover from hanging transactions (Kafka's TransactionsCommand).",
    )
    parser.add_argument(
        "--bootstrap-server", default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP), metavar="host:port"
    )
    parser.add_argument("--command-config", metavar="FILE", help="Not supported: plaintext only.")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="kompakt: seconds to wait.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ToolParser)
    listing = sub.add_parser("list", help="list transactions")
    listing.add_argument("--duration-filter", type=int)
    listing.add_argument("--transactional-id-pattern")
    describe = sub.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True)
    producers = sub.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    producers.add_argument("--broker-id", type=int)
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    abort = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int)
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    hanging = sub.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int)
    hanging.add_argument("--max-transaction-timeout", type=int, default=15)
    hanging.add_argument("--topic")
    hanging.add_argument("--partition", type=int)
    sub.add_parser(
        "forceTerminateTransaction",
        help="Not supported by kompakt: its broker has no transaction-version 2 abort",
    ).add_argument("--transactionalId", required=True)
    return parser


@tool(
    "kafka-transactions",
    "Kafka's kafka-transactions.sh: list, describe, describe-producers, find-hanging, abort",
)
def kafka_transactions(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    if not args.bootstrap_server:
        raise CliUsageError("argument --bootstrap-server is required")
    if args.command_config:
        raise CliUsageError("--command-config is not supported: kompakt's tools connect in plaintext")
    if args.command is None:
        raise CliUsageError(
            "too few arguments: give a COMMAND (list, describe, describe-producers, abort, find-hanging)"
        )
    if args.command == "forceTerminateTransaction":
        raise CliUsageError("forceTerminateTransaction is not supported by kompakt")
    if args.command == "list" and args.transactional_id_pattern is not None:
        try:
            re.compile(args.transactional_id_pattern)
        except re.error as exc:
            raise CliUsageError(f"--transactional-id-pattern: {exc}") from None
    client = _Client(str(bootstrap_value(args.bootstrap_server)), args.timeout)
    _COMMANDS[args.command](client, args)
