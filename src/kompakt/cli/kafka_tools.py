"""Kafka's own tool spellings: ``kompakt kafka-topics``, ``kafka-configs``, ``kafka-console-producer``,
``kafka-console-consumer``, ``kafka-consumer-groups`` and ``kafka-dump-log``.

People arrive with commands from Kafka's documentation and the compaction guides
(``kafka-topics.sh --bootstrap-server localhost:9092 --create --topic user-profiles --config
cleanup.policy=compact``). Each tool here takes the flags of Kafka 4.1's tool of that name
(``TopicCommand``, ``ConfigCommand``, ``ConsoleProducer``, ``ConsoleConsumerOptions``,
``ConsumerGroupCommandOptions``, ``DumpLogSegments``) and runs kompakt's own command for it, so the
behaviour (errors, null versus empty, tombstones) is the same as ``kompakt topic|produce|...``.
Where Kafka's output is a format people pipe (``--list``, ``--describe``, the console consumer's
``key<TAB>value`` lines), it is Kafka's format; elsewhere it is kompakt's report.

The flags are parsed with :mod:`argparse`, which, like Kafka's joptsimple, accepts ``--flag value``
and ``--flag=value`` and unambiguous prefixes. A Kafka flag kompakt cannot honour (a custom
``--formatter`` class, ``--replica-assignment`` on a single broker) is a usage error that says
so, never silently ignored; flags that only tune Kafka's JVM client (``--max-block-ms``) are
accepted and have no effect. ``--bootstrap-server`` defaults to ``$KOMPAKT_BOOTSTRAP`` or
``127.0.0.1:9092`` (Kafka requires it). ``--output json`` is kompakt's addition.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from confluent_kafka import KafkaException

from kompakt.cli.cluster import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, DEFAULT_TIMEOUT_S, KAFKA_ADMIN, Cluster
from kompakt.cli.output import CliError, CliUsageError, OutputFormat, bootstrap_value, console, emit_json

TOOLS: dict[str, str] = {}
"""Tool name -> one line of help (filled by :func:`_tool`)."""


class _Parser(argparse.ArgumentParser):
    """argparse with kompakt's error convention: a usage error is one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise CliUsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            console.file.write(message)
        raise typer.Exit(status)


def _parser(tool: str, description: str) -> _Parser:
    parser = _Parser(prog=f"kompakt {tool}", description=description, allow_abbrev=True)
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        help="The broker(s) to connect to, HOST:PORT[,...] or kafka://HOST:PORT "
        "(default $KOMPAKT_BOOTSTRAP or 127.0.0.1:9092).",
    )
    parser.add_argument(
        "--command-config",
        help="Kafka's admin-client properties file (SASL, PEM trust store): kafka-configs --entity-type "
        "users only; kompakt's other tools connect in plaintext.",
    )
    parser.add_argument(
        "--output", choices=["table", "json"], default="table", help="kompakt: table or json."
    )
    return parser


def _common(args: argparse.Namespace) -> tuple[str, OutputFormat]:
    if args.command_config:
        raise CliUsageError(
            "--command-config is not supported: kompakt's Kafka-spelled tools connect in plaintext"
        )
    return str(bootstrap_value(args.bootstrap_server)), OutputFormat(args.output)


def _tool(name: str, summary: str) -> Callable[[Callable[[list[str]], None]], Callable[[list[str]], None]]:
    def decorate(fn: Callable[[list[str]], None]) -> Callable[[list[str]], None]:
        TOOLS[name] = summary
        _RUNNERS[name] = fn
        return fn

    return decorate


_RUNNERS: dict[str, Callable[[list[str]], None]] = {}


def run_tool(name: str, argv: Sequence[str]) -> None:
    """Run one Kafka-spelled tool with its command line (for tests and the typer commands)."""
    _RUNNERS[name](list(argv))


def _one_action(args: argparse.Namespace, names: Sequence[str], tool: str) -> str:
    chosen = [n for n in names if getattr(args, n.replace("-", "_"))]
    if len(chosen) != 1:
        flags = ", ".join(f"--{n}" for n in names)
        raise CliUsageError(f"{tool}: give exactly one of {flags}")
    return chosen[0]


def _split_config_list(text: str) -> list[tuple[str, str]]:
    """``k1=v1,k2=[v1,v2],k3=v3`` (ConfigCommand's ``--add-config``); brackets group commas."""
    pairs: list[tuple[str, str]] = []
    for item in re.findall(r"[^,\[\]]+=(?:\[[^\]]*\]|[^,]*)", text):
        name, _, value = item.partition("=")
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((name.strip(), value))
    leftover = re.sub(r"[^,\[\]]+=(?:\[[^\]]*\]|[^,]*)", "", text).strip(", ")
    if leftover or not pairs:
        raise CliUsageError(f"--add-config expects k1=v1,k2=[v1,v2], got {text!r}")
    return pairs


def _properties_file(path: str, option: str) -> dict[str, str]:
    from kompakt.config.defs import parse_properties_file

    try:
        return parse_properties_file(Path(path))
    except OSError as exc:
        raise CliUsageError(f"{option}: cannot read {path}: {exc.strerror or exc}") from None


def _topics_matching(cluster: Cluster, admin: Any, pattern: str | None, exclude_internal: bool) -> list[str]:
    """Topic names, filtered as TopicCommand does: ``--topic`` may be a regular expression
    (a plain name matches itself only), internal topics dropped with ``--exclude-internal``."""
    names = sorted(cluster.metadata(admin).topics)
    if exclude_internal:
        names = [n for n in names if not n.startswith("__")]
    if pattern is None:
        return names
    if pattern in names:
        return [pattern]
    try:
        regex = re.compile(pattern)
    except re.error:
        return []
    return [n for n in names if regex.fullmatch(n)]


# --------------------------------------------------------------------------------------------
# kafka-topics


@_tool("kafka-topics", "Kafka's kafka-topics.sh: --create, --list, --describe, --alter, --delete")
def kafka_topics(argv: list[str]) -> None:
    """TopicCommand's output: ``Created topic X.``, nothing for ``--alter``/``--delete``, the
    describe lines, and a failure as ``Error while executing topic command : ...`` on stdout
    with exit code 1."""
    args = _topics_parser().parse_args(argv)
    bootstrap, output = _common(args)
    action = _one_action(args, ("list", "create", "delete", "alter", "describe"), "kafka-topics")
    _check_topics_args(args, action)
    cluster = Cluster(bootstrap, DEFAULT_TIMEOUT_S)
    if action == "create":
        _create_topic(cluster, args, output)
        return
    admin = cluster.admin()
    names = _topics_matching(cluster, admin, args.topic, args.exclude_internal)
    if args.topic_id:
        names = [n for n, t in _topic_ids(cluster, admin, names).items() if t == args.topic_id]
    if action == "list":
        if output is OutputFormat.JSON:
            emit_json(names)
        else:
            console.file.write("".join(f"{n}\n" for n in names))
        return
    if not names and (args.topic or args.topic_id) and not args.if_exists:
        what = f"Topic '{args.topic}'" if args.topic else f"Topic '{args.topic_id}'"
        _topic_command_failed(f"{what} does not exist as expected", output)
    if action == "delete":
        futures = admin.delete_topics(
            names, operation_timeout=cluster.timeout_s, request_timeout=cluster.timeout_s
        )
        for name in names:
            error = _failure(cluster, futures[name])
            if error is not None:
                _topic_command_failed(error[1], output)
        if output is OutputFormat.JSON:
            emit_json({"deleted": names})
    elif action == "alter":
        for name in names:
            _add_partitions(cluster, admin, name, args.partitions, output)
    else:
        _describe_topics(cluster, admin, names, args, output)


def _failure(cluster: Cluster, future: Any) -> tuple[str, str] | None:
    """``(Kafka error name, the broker's message)`` of a failed admin future, None on success;
    an unreachable cluster is kompakt's one-line error, as everywhere."""
    try:
        cluster.wait(future, "")
    except CliError as exc:
        cause = exc.__cause__ or exc.__context__
        error = cause.args[0] if cause is not None and cause.args else None
        if error is not None and hasattr(error, "name"):
            return error.name(), error.str()
        text = str(exc).removeprefix(": ")
        name, _, message = text.partition(": ")
        return name, message or name
    return None


def _topic_command_failed(message: str, output: OutputFormat) -> NoReturn:
    """TopicCommand's failure: the message on stdout after ``Error while executing topic command
    :``, exit code 1."""
    if output is OutputFormat.JSON:
        emit_json({"error": message})
    else:
        console.file.write(f"Error while executing topic command : {message}\n")
    raise typer.Exit(1)


def _check_topics_args(args: argparse.Namespace, action: str) -> None:
    """TopicCommand's rules on which options go with which action."""
    if args.delete_config:
        raise CliUsageError("--delete-config is no longer supported (Kafka 4.0): use kafka-configs --alter")
    if args.replica_assignment:
        raise CliUsageError("--replica-assignment: kompakt is one broker; leave placement to it")
    if args.topic_id and action != "describe":
        raise CliUsageError("--topic-id is only supported with --describe")
    if args.config and action != "create":
        raise CliUsageError(
            f"--config is only for --create; to change a topic use kafka-configs --alter --add-config "
            f"(kompakt topic alter --set), not --{action}"
        )
    if action in ("create", "delete", "alter") and not args.topic:
        raise CliUsageError(f"kafka-topics --{action} needs --topic")
    if action == "alter" and args.partitions is None:
        raise CliUsageError("kafka-topics --alter needs --partitions (configs: use kafka-configs)")


def _topics_parser() -> _Parser:
    parser = _parser("kafka-topics", "Create, delete, describe or change a topic (Kafka's TopicCommand).")
    for action in ("list", "create", "delete", "alter", "describe"):
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--topic", help="Topic name; with --list/--describe/--alter/--delete a regex too.")
    parser.add_argument("--topic-id", help="Topic id to describe.")
    parser.add_argument("--config", action="append", default=[], help="name=value for --create; repeatable.")
    parser.add_argument("--delete-config", action="append", default=[])
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--replication-factor", type=int)
    parser.add_argument("--replica-assignment")
    for flag in (
        "under-replicated-partitions",
        "unavailable-partitions",
        "under-min-isr-partitions",
        "at-min-isr-partitions",
        "topics-with-overrides",
        "if-exists",
        "if-not-exists",
        "exclude-internal",
    ):
        parser.add_argument(f"--{flag}", action="store_true")
    parser.add_argument("--partition-size-limit-per-response", type=int)
    return parser


def _create_topic(cluster: Cluster, args: argparse.Namespace, output: OutputFormat) -> None:
    from kompakt.cli.cluster import parse_pairs

    configs = dict(parse_pairs(args.config, "--config"))
    admin = cluster.admin()
    existing = cluster.metadata(admin).topics
    if args.topic in existing:
        if args.if_not_exists:
            return
        _topic_command_failed(f"Topic '{args.topic}' already exists.", output)
    partitions = -1 if args.partitions is None else args.partitions
    replication = -1 if args.replication_factor is None else args.replication_factor
    new_topic = KAFKA_ADMIN.NewTopic(args.topic, partitions, replication, config=configs)
    futures = admin.create_topics(
        [new_topic], operation_timeout=cluster.timeout_s, request_timeout=cluster.timeout_s
    )
    error = _failure(cluster, futures[args.topic])
    if error is not None:
        if error[0] == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
            return
        _topic_command_failed(error[1], output)
    if output is OutputFormat.JSON:
        emit_json(
            {
                "topic": args.topic,
                "partitions": partitions,
                "replication_factor": replication,
                "configs": configs,
            }
        )
    else:
        console.file.write(f"Created topic {args.topic}.\n")


def _filter_partitions(info: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """TopicCommand's partition filters (``--under-replicated-partitions`` ...); none given
    keeps every partition."""
    min_isr = next((int(c["value"]) for c in info["configs"] if c["name"] == "min.insync.replicas"), 1)
    tests: list[Callable[[dict[str, Any]], bool]] = []
    if args.under_replicated_partitions:
        tests.append(lambda p: len(p["isr"]) < len(p["replicas"]))
    if args.unavailable_partitions:
        tests.append(lambda p: p["leader"] is None or p["leader"] < 0)
    if args.under_min_isr_partitions:
        tests.append(lambda p: len(p["isr"]) < min_isr)
    if args.at_min_isr_partitions:
        tests.append(lambda p: len(p["isr"]) == min_isr)
    if not tests:
        return info
    return {**info, "partitions": [p for p in info["partitions"] if any(t(p) for t in tests)]}


def _topic_ids(cluster: Cluster, admin: Any, names: list[str]) -> dict[str, str]:
    from confluent_kafka import TopicCollection

    if not names:
        return {}
    found = admin.describe_topics(TopicCollection(names), request_timeout=cluster.timeout_s)
    return {
        name: kafka_uuid(cluster.wait(future, f"cannot describe topic {name!r}").topic_id)
        for name, future in found.items()
    }


def kafka_uuid(value: Any) -> str:
    """A Uuid as Kafka prints it (``Uuid.toString()``): URL-safe base64 without padding, the
    form of ``partition.metadata``; confluent-kafka's ``str()`` is standard base64."""
    return str(value).replace("+", "-").replace("/", "_").rstrip("=")


def _add_partitions(cluster: Cluster, admin: Any, name: str, count: int, output: OutputFormat) -> None:
    futures = admin.create_partitions(
        [KAFKA_ADMIN.NewPartitions(name, count)],
        operation_timeout=cluster.timeout_s,
        request_timeout=cluster.timeout_s,
    )
    error = _failure(cluster, futures[name])
    if error is not None:
        _topic_command_failed(error[1], output)
    if output is OutputFormat.JSON:
        emit_json({"topic": name, "partitions": count})


def _describe_topics(
    cluster: Cluster, admin: Any, names: list[str], args: argparse.Namespace, output: OutputFormat
) -> None:
    """Kafka's describe lines: a topic line with its overridden configs, then one per partition."""
    from kompakt.cli.topic_cmd import broker_layers, describe_topic

    layers = broker_layers(cluster, admin)
    infos = [describe_topic(cluster, admin, name, layers) for name in names]
    if args.topics_with_overrides:
        infos = [i for i in infos if any(c["source"] == "DYNAMIC_TOPIC_CONFIG" for c in i["configs"])]
    infos = [_filter_partitions(i, args) for i in infos]
    ids = _topic_ids(cluster, admin, [i["topic"] for i in infos])
    if output is OutputFormat.JSON:
        emit_json([{**i, "topic_id": ids.get(i["topic"])} for i in infos])
        return
    lines: list[str] = []
    for info in infos:
        # TopicDescription.printDescription: every config not at its default (ConfigEntry.isDefault)
        overrides = ",".join(
            f"{c['name']}={c['value']}" for c in info["configs"] if c["source"] != "DEFAULT_CONFIG"
        )
        parts = info["partitions"]
        replication = len(parts[0]["replicas"]) if parts else 0
        lines.append(
            f"Topic: {info['topic']}\tTopicId: {ids.get(info['topic'], '')}\tPartitionCount: {len(parts)}\t"
            f"ReplicationFactor: {replication}\tConfigs: {overrides}"
        )
        for p in parts:
            replicas = ",".join(map(str, p["replicas"]))
            isr = ",".join(map(str, p["isr"]))
            lines.append(
                f"\tTopic: {info['topic']}\tPartition: {p['partition']}\tLeader: {p['leader']}\t"
                f"Replicas: {replicas}\tIsr: {isr}\tElr: \tLastKnownElr: "
            )
    console.file.write("".join(f"{line}\n" for line in lines))


# --------------------------------------------------------------------------------------------
# kafka-configs


@_tool("kafka-configs", "Kafka's kafka-configs.sh: --describe / --alter --add-config / --delete-config")
def kafka_configs(argv: list[str]) -> None:
    parser = _parser("kafka-configs", "Describe or change topic and broker configs (Kafka's ConfigCommand).")
    parser.add_argument("--bootstrap-controller", help="Treated as --bootstrap-server (kompakt is one node).")
    parser.add_argument("--alter", action="store_true")
    parser.add_argument("--describe", action="store_true")
    parser.add_argument("--all", action="store_true", help="With --describe: every config, defaults too.")
    parser.add_argument("--entity-type", action="append", default=[])
    parser.add_argument("--entity-name", action="append", default=[])
    parser.add_argument("--entity-default", action="store_true")
    parser.add_argument("--add-config", action="append", default=[])
    parser.add_argument("--add-config-file")
    parser.add_argument("--delete-config", action="append", default=[])
    parser.add_argument("--topic")
    parser.add_argument("--broker")
    parser.add_argument("--broker-defaults", action="store_true")
    parser.add_argument("--user", help="Shortcut for --entity-type users --entity-name USER.")
    for unsupported in ("client", "ip", "group", "client-metrics", "broker-logger"):
        parser.add_argument(f"--{unsupported}")
    for unsupported in ("client-defaults", "user-defaults", "ip-defaults"):
        parser.add_argument(f"--{unsupported}", action="store_true")
    args = parser.parse_args(argv)
    if args.bootstrap_controller:
        args.bootstrap_server = args.bootstrap_controller
    command_config, args.command_config = args.command_config, None
    bootstrap, output = _common(args)
    action = _one_action(args, ("alter", "describe"), "kafka-configs")
    _refuse_unsupported_entities(args)
    entity_type, names, default = _entity(args)
    if entity_type == "users":
        from kompakt.cli.scram_cmd import client_properties

        extra = client_properties(command_config) if command_config else {}
        _users(args, Cluster(bootstrap, DEFAULT_TIMEOUT_S, extra=extra), action, names, output)
        return
    if command_config:
        raise CliUsageError(
            "--command-config is supported for --entity-type users only: kompakt's other Kafka-spelled "
            "tools connect in plaintext"
        )
    cluster = Cluster(bootstrap, DEFAULT_TIMEOUT_S)
    if action == "describe":
        if entity_type == "topics":
            _describe_topic_configs(cluster, names, args.all, output)
        else:
            _describe_broker_configs(cluster, names, default, args.all, output)
        return
    sets: list[tuple[str, str]] = []
    for text in args.add_config:
        sets += _split_config_list(text)
    if args.add_config_file:
        sets += list(_properties_file(args.add_config_file, "--add-config-file").items())
    deletes = [n.strip() for text in args.delete_config for n in text.split(",") if n.strip()]
    if not (sets or deletes):
        raise CliUsageError("kafka-configs --alter needs --add-config, --add-config-file or --delete-config")
    if not names and not default:
        raise CliUsageError("kafka-configs --alter needs --entity-name (or --entity-default for brokers)")
    if entity_type == "topics":
        _alter_topic_configs(cluster, names, sets, deletes, output)
        return
    _alter_broker_configs(cluster, names, default, sets, deletes, output)


def _alter_topic_configs(
    cluster: Cluster, names: list[str], sets: list[tuple[str, str]], deletes: list[str], output: OutputFormat
) -> None:
    """IncrementalAlterConfigs of each topic; ConfigCommand confirms with ``Completed updating
    config for topic X.``"""
    op = KAFKA_ADMIN.AlterConfigOpType
    entries = [KAFKA_ADMIN.ConfigEntry(k, v, incremental_operation=op.SET) for k, v in sets]
    entries += [KAFKA_ADMIN.ConfigEntry(k, None, incremental_operation=op.DELETE) for k in deletes]
    admin = cluster.admin()
    cluster.metadata(admin)
    for name in names:
        resource = KAFKA_ADMIN.ConfigResource(
            KAFKA_ADMIN.ResourceType.TOPIC, name, incremental_configs=entries
        )
        futures = admin.incremental_alter_configs([resource], request_timeout=cluster.timeout_s)
        cluster.wait(next(iter(futures.values())), f"cannot alter topic {name!r}")
        if output is not OutputFormat.JSON:
            console.file.write(f"Completed updating config for topic {name}.\n")
    if output is OutputFormat.JSON:
        emit_json({"topics": names, "set": dict(sets), "deleted": deletes})


def _refuse_unsupported_entities(args: argparse.Namespace) -> None:
    for unsupported in (
        "client",
        "ip",
        "group",
        "client_metrics",
        "broker_logger",
        "client_defaults",
        "user_defaults",
        "ip_defaults",
    ):
        if getattr(args, unsupported):
            raise CliUsageError(
                f"--{unsupported.replace('_', '-')}: kompakt's kafka-configs handles topics, brokers "
                "and users"
            )


def _users(
    args: argparse.Namespace, cluster: Cluster, action: str, names: list[str], output: OutputFormat
) -> None:
    """``--entity-type users``: SCRAM credentials (:mod:`kompakt.cli.scram_cmd`)."""
    from kompakt.cli import scram_cmd

    if action == "describe":
        scram_cmd.describe_users(cluster, names, output)
        return
    sets = [pair for text in args.add_config for pair in _split_config_list(text)]
    deletes = [n.strip() for text in args.delete_config for n in text.split(",") if n.strip()]
    if args.add_config_file:
        raise CliUsageError("--add-config-file: give SCRAM credentials with --add-config")
    if not (sets or deletes):
        raise CliUsageError("kafka-configs --alter needs --add-config or --delete-config")
    if not names:
        raise CliUsageError("kafka-configs --alter --entity-type users needs --entity-name")
    scram_cmd.alter_users(cluster, names, sets, deletes, output)


def _entity(args: argparse.Namespace) -> tuple[str, list[str], bool]:
    """``(entity type, names, default?)`` from ``--entity-type/--entity-name`` or the shortcuts."""
    types = list(args.entity_type)
    names = list(args.entity_name)
    default = bool(args.entity_default or args.broker_defaults)
    if args.topic:
        types.append("topics")
        names.append(args.topic)
    if args.broker:
        types.append("brokers")
        names.append(args.broker)
    if args.broker_defaults:
        types.append("brokers")
    if args.user:
        types.append("users")
        names.append(args.user)
    found = sorted(set(types))
    if len(found) != 1:
        raise CliUsageError(
            "kafka-configs needs one --entity-type (topics, brokers or users), or --topic / --broker / --user"
        )
    entity_type = found[0]
    if entity_type not in ("topics", "brokers", "users"):
        raise CliUsageError(
            f"--entity-type {entity_type}: kompakt's kafka-configs handles topics, brokers and users"
        )
    if default and entity_type != "brokers":
        raise CliUsageError("--entity-default applies to brokers here")
    return entity_type, names, default


def _synonyms(entry: dict[str, Any]) -> str:
    inner = ", ".join(f"{s['source']}:{s['name']}={s['value']}" for s in entry["synonyms"])
    return "{" + inner + "}"


def _describe_topic_configs(cluster: Cluster, names: list[str], show_all: bool, output: OutputFormat) -> None:
    from kompakt.cli.topic_cmd import broker_layers, describe_topic

    admin = cluster.admin()
    if not names:
        names = _topics_matching(cluster, admin, None, exclude_internal=False)
    results = []
    layers = broker_layers(cluster, admin)
    existing = set(cluster.metadata(admin).topics)
    for name in names:
        if name not in existing:
            if output is not OutputFormat.JSON:
                console.file.write(f"The topic '{name}' doesn't exist and doesn't have dynamic config.\n")
            continue
        info = describe_topic(cluster, admin, name, layers)
        entries = (
            info["configs"]
            if show_all
            else [c for c in info["configs"] if c["source"] == "DYNAMIC_TOPIC_CONFIG"]
        )
        results.append((name, entries))
    if output is OutputFormat.JSON:
        emit_json(dict(results))
        return
    lines = []
    for name, entries in results:
        lines.append(f"{'All' if show_all else 'Dynamic'} configs for topic {name} are:")
        for c in entries:
            value = "null" if c["value"] is None else c["value"]
            lines.append(
                f"  {c['name']}={value} sensitive={str(c['sensitive']).lower()} synonyms={_synonyms(c)}"
            )
    console.file.write("".join(f"{line}\n" for line in lines))


def _broker_ids(cluster: Cluster, admin: Any) -> list[str]:
    return [str(b) for b in sorted(cluster.metadata(admin).brokers)]


def _describe_broker_configs(
    cluster: Cluster, names: list[str], default: bool, show_all: bool, output: OutputFormat
) -> None:
    """ConfigCommand's broker describe: without ``--all`` only the entries whose source is the
    resource's own dynamic layer (DYNAMIC_BROKER_CONFIG for a broker id, DYNAMIC_DEFAULT_BROKER_CONFIG
    for ``--entity-default``), so a broker with no dynamic configs prints the header alone."""
    from kompakt.cli.topic_cmd import restore_broker_layer, source_name

    results: list[tuple[str, list[dict[str, Any]]]] = []
    if default:
        from kompakt.cli.wire_configs import describe_default

        rows = [
            {
                "name": c.name,
                "value": c.value,
                "source": c.source,
                "sensitive": c.sensitive,
                "synonyms": [{"name": n, "value": v, "source": src} for n, v, src in c.synonyms],
            }
            for c in describe_default(cluster.bootstrap, cluster.timeout_s)
            if show_all or c.source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        ]
        results.append(("", rows))
    else:
        admin = cluster.admin()
        brokers = names or _broker_ids(cluster, admin)
        resources = [KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.BROKER, b) for b in brokers]
        for resource, future in admin.describe_configs(resources, request_timeout=cluster.timeout_s).items():
            entries = cluster.wait(future, f"cannot describe configs of broker {resource.name}")
            rows = []
            for entry in sorted(entries.values(), key=lambda e: e.name):
                source = source_name(entry.source)
                if not show_all and source != "DYNAMIC_BROKER_CONFIG":
                    continue
                synonyms = [
                    {"name": s.name, "value": s.value, "source": source_name(s.source)}
                    for s in entry.synonyms.values()
                ]
                own = {} if source == "DEFAULT_CONFIG" else {entry.name: (source, entry.value)}
                rows.append(
                    {
                        "name": entry.name,
                        "value": entry.value,
                        "source": source,
                        "sensitive": bool(entry.is_sensitive),
                        "synonyms": restore_broker_layer(synonyms, own),
                    }
                )
            results.append((resource.name, rows))
    if output is OutputFormat.JSON:
        emit_json({("<default>" if default else name): rows for name, rows in results})
        return
    lines = []
    for name, rows in results:
        if default:
            lines.append("Default configs for brokers in the cluster are:")
        else:
            lines.append(f"{'All' if show_all else 'Dynamic'} configs for broker {name} are:")
        for c in rows:
            value = "null" if c["value"] is None else c["value"]
            lines.append(
                f"  {c['name']}={value} sensitive={str(c['sensitive']).lower()} synonyms={_synonyms(c)}"
            )
    console.file.write("".join(f"{line}\n" for line in lines))


def _alter_broker_configs(
    cluster: Cluster,
    names: list[str],
    default: bool,
    sets: list[tuple[str, str]],
    deletes: list[str],
    output: OutputFormat,
) -> None:
    """IncrementalAlterConfigs on BROKER resources; ``--entity-default`` is the cluster-default
    resource (an empty name), sent by :mod:`kompakt.cli.wire_configs` since librdkafka cannot
    name it."""
    if default:
        from kompakt.cli.wire_configs import alter_default

        alter_default(cluster.bootstrap, sets, deletes, cluster.timeout_s)
        if output is OutputFormat.JSON:
            emit_json({"brokers": "<default>", "set": dict(sets), "deleted": deletes})
        else:
            console.file.write("Completed updating default config for brokers in the cluster.\n")
        return
    admin = cluster.admin()
    op = KAFKA_ADMIN.AlterConfigOpType
    entries = [KAFKA_ADMIN.ConfigEntry(k, v, incremental_operation=op.SET) for k, v in sets]
    entries += [KAFKA_ADMIN.ConfigEntry(k, None, incremental_operation=op.DELETE) for k in deletes]
    for name in names:
        resource = KAFKA_ADMIN.ConfigResource(
            KAFKA_ADMIN.ResourceType.BROKER, name, incremental_configs=entries
        )
        futures = admin.incremental_alter_configs([resource], request_timeout=cluster.timeout_s)
        cluster.wait(next(iter(futures.values())), f"cannot alter the configs of broker {name}")
    if output is OutputFormat.JSON:
        emit_json({"brokers": names, "set": dict(sets), "deleted": deletes})
        return
    console.file.write("".join(f"Completed updating config for broker {name}.\n" for name in names))


# --------------------------------------------------------------------------------------------
# kafka-console-producer

_PRODUCER_FLAGS = {
    # flag -> producer property (ConsoleProducer.ConsoleProducerOptions.producerProps)
    "batch_size": "batch.size",
    "max_partition_memory_bytes": "batch.size",
    "timeout": "linger.ms",
    "request_timeout_ms": "request.timeout.ms",
    "message_send_max_retries": "retries",
    "retry_backoff_ms": "retry.backoff.ms",
    "max_memory_bytes": "buffer.memory",
    "socket_buffer_size": "send.buffer.bytes",
    "metadata_expiry_ms": "metadata.max.age.ms",
}
_LINE_READER = "org.apache.kafka.tools.LineMessageReader"


@_tool("kafka-console-producer", "Kafka's kafka-console-producer.sh: stdin lines to a topic")
def kafka_console_producer(argv: list[str]) -> None:
    from kompakt.cli.produce_cmd import send_stdin_lines

    parser = _parser("kafka-console-producer", "Send stdin lines to a topic (Kafka's ConsoleProducer).")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--property", action="append", default=[], help="Line reader property k=v.")
    parser.add_argument("--reader-property", action="append", default=[], help="The same as --property.")
    parser.add_argument("--reader-config")
    parser.add_argument("--producer-property", action="append", default=[])
    parser.add_argument("--producer.config", dest="producer_config")
    parser.add_argument("--compression-codec", nargs="?", const="gzip")
    parser.add_argument("--request-required-acks")
    parser.add_argument("--sync", action="store_true")
    parser.add_argument("--line-reader", default=_LINE_READER)
    parser.add_argument("--max-block-ms", type=int)
    for flag in _PRODUCER_FLAGS:
        parser.add_argument(f"--{flag.replace('_', '-')}", type=int)
    args = parser.parse_args(argv)
    bootstrap, output = _common(args)
    if args.line_reader != _LINE_READER:
        raise CliUsageError(f"--line-reader {args.line_reader}: only Kafka's LineMessageReader is available")
    properties: list[str] = []
    if args.reader_config:
        properties += [f"{k}={v}" for k, v in _properties_file(args.reader_config, "--reader-config").items()]
    properties += args.property + args.reader_property
    producer: list[str] = []
    if args.producer_config:
        producer += [
            f"{k}={v}" for k, v in _properties_file(args.producer_config, "--producer.config").items()
        ]
    for flag, name in _PRODUCER_FLAGS.items():
        if getattr(args, flag) is not None:
            producer.append(f"{name}={getattr(args, flag)}")
    if args.compression_codec is not None:
        producer.append(f"compression.type={args.compression_codec}")
    if args.sync:
        producer += ["linger.ms=0", "max.in.flight.requests.per.connection=1"]
    producer += args.producer_property  # --producer-property wins, as in Kafka
    acks = "all"
    explicit = [p.partition("=")[2] for p in producer if p.startswith("acks=")]
    if args.request_required_acks is not None:
        acks = args.request_required_acks
    if explicit:
        acks = explicit[-1]
    producer = [p for p in producer if not p.startswith("acks=")]
    send_stdin_lines(
        args.topic,
        key_separator=None,
        null_marker=None,
        header=None,
        partition=None,
        acks=acks,
        prop=properties,
        producer_property=producer,
        bootstrap=bootstrap,
        timeout=DEFAULT_TIMEOUT_S,
        output=output,
        report_counts=output is OutputFormat.JSON,
    )


# --------------------------------------------------------------------------------------------
# kafka-console-consumer

_FORMATTER = "org.apache.kafka.tools.consumer.DefaultMessageFormatter"
_FORMATTER_ALIASES = {_FORMATTER, "kafka.tools.DefaultMessageFormatter", "DefaultMessageFormatter"}


@_tool("kafka-console-consumer", "Kafka's kafka-console-consumer.sh: print a topic's records")
def kafka_console_consumer(argv: list[str]) -> None:
    from kompakt.cli.consume_cmd import KafkaMessageFormatter, consume
    from kompakt.cli.output import err_console

    args = _consumer_parser().parse_args(argv)
    bootstrap, output = _common(args)
    _check_consumer_args(args)
    formatter_props = _properties(
        args.formatter_config, "--formatter-config", args.property + args.formatter_property, "--property"
    )
    formatter = KafkaMessageFormatter.configure(formatter_props)
    consumer_props = _properties(
        args.consumer_config, "--consumer.config", args.consumer_property, "--consumer-property"
    )
    if args.isolation_level:
        consumer_props["isolation.level"] = args.isolation_level
    group = args.group or consumer_props.pop("group.id", None)
    from_beginning, offset = _start_offset(args)
    consumed = consume(
        args.topic if args.topic is not None else args.include,
        pattern=args.include is not None,
        from_beginning=from_beginning,
        offset=offset,
        partition=args.partition,
        group=group,
        renderer=formatter,
        output=output,
        max_messages=args.max_messages,
        idle_timeout_s=None if args.timeout_ms is None else args.timeout_ms / 1000,
        consumer_config=consumer_props,
        bootstrap=bootstrap,
        timeout_s=DEFAULT_TIMEOUT_S,
    )
    err_console.print(f"Processed a total of {consumed} messages", markup=False, highlight=False)


def _consumer_parser() -> _Parser:
    parser = _parser(
        "kafka-console-consumer", "Print records (Kafka's ConsoleConsumer and DefaultMessageFormatter)."
    )
    parser.add_argument("--topic")
    parser.add_argument("--include", help="A regular expression of topics to consume.")
    parser.add_argument("--partition", type=int)
    parser.add_argument(
        "--offset", default=None, help="earliest, latest or a non-negative offset (with --partition)."
    )
    parser.add_argument("--from-beginning", action="store_true")
    parser.add_argument("--max-messages", type=int)
    parser.add_argument("--timeout-ms", type=int)
    parser.add_argument("--group")
    parser.add_argument("--property", action="append", default=[], help="Formatter property k=v.")
    parser.add_argument("--formatter-property", action="append", default=[], help="The same as --property.")
    parser.add_argument("--formatter", default=_FORMATTER)
    parser.add_argument("--formatter-config")
    parser.add_argument("--consumer-property", action="append", default=[])
    parser.add_argument("--consumer.config", dest="consumer_config")
    parser.add_argument("--isolation-level", choices=["read_committed", "read_uncommitted"])
    parser.add_argument("--skip-message-on-error", action="store_true")
    parser.add_argument("--key-deserializer")
    parser.add_argument("--value-deserializer")
    parser.add_argument("--enable-systest-events", action="store_true")
    return parser


def _check_consumer_args(args: argparse.Namespace) -> None:
    if (args.topic is None) == (args.include is None):
        raise CliUsageError("kafka-console-consumer needs exactly one of --topic and --include")
    if args.formatter not in _FORMATTER_ALIASES:
        raise CliUsageError(
            f"--formatter {args.formatter}: only Kafka's DefaultMessageFormatter is available"
        )
    for option in ("key_deserializer", "value_deserializer"):
        value = getattr(args, option)
        if value and not value.endswith(("StringDeserializer", "ByteArrayDeserializer")):
            raise CliUsageError(f"--{option.replace('_', '-')} {value}: records print as bytes (UTF-8 text)")
    if args.partition is not None and args.include is not None:
        raise CliUsageError("--partition needs --topic")
    if args.offset is not None and args.partition is None:
        raise CliUsageError("--offset needs --partition")
    if args.from_beginning and args.offset is not None:
        raise CliUsageError("--from-beginning and --offset cannot be given together")


def _properties(path: str | None, file_option: str, items: list[str], option: str) -> dict[str, str]:
    """A properties file, then ``k=v`` items over it (Kafka's ``--x.config`` and ``--x-property``)."""
    props: dict[str, str] = {} if path is None else dict(_properties_file(path, file_option))
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise CliUsageError(f"{option} expects name=value, got {item!r}")
        props[name.strip()] = value
    return props


def _start_offset(args: argparse.Namespace) -> tuple[bool, int | None]:
    """``(from_beginning, offset)`` from ``--from-beginning`` and ``--offset earliest|latest|N``."""
    if args.offset is None or args.offset == "latest":
        return bool(args.from_beginning), None
    if args.offset == "earliest":
        return True, None
    if not args.offset.isdigit():
        raise CliUsageError(
            f"--offset expects earliest, latest or a non-negative number, got {args.offset!r}"
        )
    return False, int(args.offset)


# --------------------------------------------------------------------------------------------
# kafka-consumer-groups


@_tool(
    "kafka-consumer-groups", "Kafka's kafka-consumer-groups.sh: --list, --describe, --reset-offsets, --delete"
)
def kafka_consumer_groups(argv: list[str]) -> None:
    """ConsumerGroupCommand's output, byte for byte: one group a line for ``--list``, the
    ``%-Ns`` column layouts of ``--describe`` (offsets, ``--members``, ``--state``, ``--verbose``),
    the reset plan table, and the deletion lines; ``--output json`` is kompakt's data instead."""
    args = _groups_parser().parse_args(argv)
    bootstrap, output = _common(args)
    action = _one_action(
        args, ("list", "describe", "delete", "reset-offsets", "delete-offsets"), "kafka-consumer-groups"
    )
    timeout = DEFAULT_TIMEOUT_S if args.timeout is None else max(0.1, args.timeout / 1000)
    _check_groups_args(args, action)
    cluster = Cluster(bootstrap, timeout)
    if action == "list":
        _list_groups(cluster, args, output)
        return
    groups = list(args.group)
    if args.all_groups:
        groups = [g for g, _, _ in _group_listings(cluster)]
    if not groups:
        raise CliUsageError(f"kafka-consumer-groups --{action} needs --group (or --all-groups)")
    if action == "describe":
        views = [v for v in ("members", "offsets", "state") if getattr(args, v) not in (None, False)]
        if len(views) > 1:
            raise CliUsageError("kafka-consumer-groups --describe takes one of --members, --offsets, --state")
        _describe_groups(cluster, sorted(set(groups)), views[0] if views else "offsets", args.verbose, output)
        return
    if action == "delete":
        _delete_groups(cluster, groups, output)
        return
    if action == "delete-offsets":
        _delete_offsets(cluster, groups, args.topic, output)
        return
    if output is OutputFormat.JSON:  # kompakt's data, as `kompakt group reset-offsets` gives it
        from kompakt.cli import group_cmd

        for group in groups:
            group_cmd.reset_offsets_command(
                group,
                topic=args.topic or None,
                all_topics=args.all_topics,
                to_earliest=args.to_earliest,
                to_latest=args.to_latest,
                to_offset=args.to_offset,
                to_datetime=args.to_datetime,
                shift_by=args.shift_by,
                by_duration=args.by_duration,
                execute=args.execute,
                bootstrap=bootstrap,
                timeout=timeout,
                output=output,
            )
        return
    _reset_offsets(cluster, groups, args, output)


def _groups_parser() -> _Parser:
    parser = _parser(
        "kafka-consumer-groups",
        "List, describe, reset or delete consumer groups (Kafka's ConsumerGroupCommand).",
    )
    for action in ("list", "describe", "delete", "reset-offsets", "delete-offsets"):
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--all-groups", action="store_true")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--all-topics", action="store_true")
    parser.add_argument("--to-earliest", action="store_true")
    parser.add_argument("--to-latest", action="store_true")
    parser.add_argument("--to-offset", type=int)
    parser.add_argument("--to-datetime")
    for unsupported in ("to-current", "export"):
        parser.add_argument(f"--{unsupported}", action="store_true")
    parser.add_argument("--shift-by", type=int)
    parser.add_argument("--by-duration")
    parser.add_argument("--from-file")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--execute", action="store_true")
    for view in ("members", "offsets", "verbose"):
        parser.add_argument(f"--{view}", action="store_true")
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        help="With --describe: the group's state; with --list: show (and filter by) states.",
    )
    parser.add_argument("--timeout", type=int, help="Milliseconds to wait for the cluster.")
    parser.add_argument("--type", nargs="?", const="", default=None)
    parser.add_argument("--validate-regex")
    return parser


def _check_groups_args(args: argparse.Namespace, action: str) -> None:
    for unsupported in ("to_current", "export", "from_file"):
        if getattr(args, unsupported):
            raise CliUsageError(
                f"--{unsupported.replace('_', '-')} is not supported by kompakt's reset-offsets"
            )
    if action == "delete-offsets" and not args.topic:
        raise CliUsageError("kafka-consumer-groups --delete-offsets needs --topic TOPIC[:P,...]")
    if args.dry_run and args.execute:
        raise CliUsageError("give one of --dry-run and --execute")
    if args.state and action != "list":
        raise CliUsageError("--state takes a value only with --list")


def _result(cluster: Cluster, future: Any) -> Any:
    """An admin future's result; Kafka errors raise :class:`KafkaException` for the caller to
    print as Kafka's tool does, a cluster that does not answer is kompakt's one-line error."""
    from concurrent.futures import TimeoutError as FutureTimeoutError

    try:
        return future.result(timeout=cluster.timeout_s + 5.0)
    except FutureTimeoutError:
        raise cluster.unreachable() from None


def _kafka_error(exc: KafkaException) -> tuple[str, str]:
    """``(Kafka error name, message)`` of a failed admin call."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return error.name(), error.str()
    return type(exc).__name__, str(exc)


def _kafka_state(state: Any) -> str:
    from kompakt.cli.kafka_format import GROUP_STATES

    name = str(getattr(state, "name", state)).upper()
    return GROUP_STATES.get(name, "Unknown")


def _group_listings(cluster: Cluster) -> list[tuple[str, str, str]]:
    """``(group id, type, state)`` of every consumer group, by id."""
    admin = cluster.admin()
    cluster.metadata(admin)
    listing = cluster.wait(
        admin.list_consumer_groups(request_timeout=cluster.timeout_s), "cannot list groups"
    )
    rows = []
    for g in listing.valid:
        kind = getattr(g, "type", None)
        type_name = str(getattr(kind, "name", "CLASSIC")).capitalize() if kind is not None else "Classic"
        rows.append((g.group_id, type_name if type_name != "Unknown" else "Classic", _kafka_state(g.state)))
    return sorted(rows)


def _list_groups(cluster: Cluster, args: argparse.Namespace, output: OutputFormat) -> None:
    from kompakt.cli.kafka_format import groups_listing

    rows = _group_listings(cluster)
    if args.state:
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        rows = [r for r in rows if r[2].lower() in wanted]
    if args.type:
        kinds = {t.strip().lower() for t in args.type.split(",") if t.strip()}
        rows = [r for r in rows if r[1].lower() in kinds]
    if output is OutputFormat.JSON:
        emit_json([{"group": g, "type": t, "state": s} for g, t, s in rows])
        return
    console.file.write(groups_listing(rows, args.type is not None, args.state is not None))


def _describe_groups(
    cluster: Cluster, groups: list[str], view: str, verbose: bool, output: OutputFormat
) -> None:
    """``describeGroups``: per group (sorted, as Kafka's TreeMap), the note about its state on
    stderr and the view's table on stdout."""
    from kompakt.cli import kafka_format as kf
    from kompakt.cli.output import err_console

    if output is OutputFormat.JSON:  # kompakt's data, as `kompakt group` gives it
        from kompakt.cli import group_cmd

        group_cmd.describe_view(
            groups,
            view,
            verbose=verbose,
            bootstrap=cluster.bootstrap,
            timeout=cluster.timeout_s,
            output=output,
        )
        return
    admin = cluster.admin()
    cluster.metadata(admin)
    futures = admin.describe_consumer_groups(groups, request_timeout=cluster.timeout_s)
    data: list[dict[str, Any]] = []
    for group in groups:
        try:
            description = _result(cluster, futures[group])
        except KafkaException as exc:  # Kafka prints any failure as one Error line
            name, text = _kafka_error(exc)
            console.file.write(
                kf.error_line("Executing consumer group command failed due to " + kf.java_error(name, text))
            )
            return
        state = _kafka_state(description.state)
        committed = _committed_offsets(cluster, admin, group)
        if state == "Dead" and not committed:
            console.file.write(
                kf.error_line(
                    "Executing consumer group command failed due to "
                    + kf.java_error("GROUP_ID_NOT_FOUND", f"Group {group} not found.")
                )
            )
            return
        coordinator = description.coordinator
        members = [
            kf.Member(
                group=group,
                consumer_id=m.member_id,
                host=m.host,
                client_id=m.client_id,
                group_instance_id=m.group_instance_id or "",
                assignment=[(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])],
            )
            for m in description.members
        ]
        data.append(
            {
                "group": group,
                "state": state,
                "coordinator": None
                if coordinator is None
                else f"{coordinator.host}:{coordinator.port}  ({coordinator.id})",
                "strategy": description.partition_assignor or "",
                "members": members,
                "offsets": _offset_rows(cluster, admin, group, members, committed),
            }
        )
    for d in data:
        stdout, stderr = kf.no_members_note(d["group"], d["state"])
        if stderr:
            err_console.file.write(stderr)
            err_console.file.flush()
        console.file.write(stdout)
        if view == "offsets":
            # printOffsets prints no table for a group without rows (shouldPrintMemberState)
            if d["state"] != "Dead" and d["offsets"]:
                console.file.write(kf.offsets_table(d["offsets"], verbose))
        elif view == "members":
            # printMembers prints the header whatever the group's state
            console.file.write(kf.members_table(d["group"], d["members"], verbose))
        else:
            console.file.write(
                kf.state_table(
                    d["group"], d["coordinator"] or "", d["strategy"], d["state"], len(d["members"]), verbose
                )
            )


def _committed_offsets(
    cluster: Cluster, admin: Any, group: str
) -> dict[tuple[str, int], tuple[int, int | None]]:
    """``(topic, partition) -> (committed offset, leader epoch)`` of ``group``."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=cluster.timeout_s
    )
    result = cluster.wait(futures[group], f"cannot fetch the offsets of group {group!r}")
    out: dict[tuple[str, int], tuple[int, int | None]] = {}
    for tp in result.topic_partitions or []:
        if tp.error is None and tp.offset >= 0:
            epoch = getattr(tp, "leader_epoch", None)
            out[(tp.topic, tp.partition)] = (tp.offset, epoch if epoch is not None and epoch >= 0 else None)
    return out


def _end_offsets(
    cluster: Cluster, admin: Any, partitions: Iterable[tuple[str, int]], spec: Any
) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    request = {TopicPartition(t, p): spec for t, p in partitions}
    if not request:
        return {}
    futures = admin.list_offsets(request, request_timeout=cluster.timeout_s)
    found: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = int(future.result(timeout=cluster.timeout_s + 5.0).offset)
        except Exception:  # noqa: BLE001, S112 - Kafka shows an unknown end offset as "-"
            continue
    return found


def _offset_rows(
    cluster: Cluster,
    admin: Any,
    group: str,
    members: list[Any],
    committed: dict[tuple[str, int], tuple[int, int | None]],
) -> list[Any]:
    """``collectGroupsOffsets``: the members with partitions (most partitions first, each
    member's partitions by number), then the committed partitions no member holds."""
    from kompakt.cli import kafka_format as kf

    holders = sorted((m for m in members if m.assignment), key=lambda m: -len(m.assignment))
    assigned = {tp for m in holders for tp in m.assignment}
    unassigned = sorted(tp for tp in committed if tp not in assigned)
    ends = _end_offsets(cluster, admin, sorted(assigned) + unassigned, KAFKA_ADMIN.OffsetSpec.latest())

    def row(tp: tuple[str, int], consumer: str, host: str, client: str) -> Any:
        offset, epoch = committed.get(tp, (None, None))
        return kf.OffsetRow(group, tp[0], tp[1], offset, ends.get(tp), consumer, host, client, epoch)

    rows = [
        row(tp, m.consumer_id, m.host, m.client_id)
        for m in holders
        for tp in sorted(m.assignment, key=lambda tp: tp[1])
    ]
    rows += [row(tp, kf.MISSING, kf.MISSING, kf.MISSING) for tp in unassigned]
    return rows


def _offsets_at(
    cluster: Cluster, admin: Any, partitions: list[tuple[str, int]], at_ms: int
) -> dict[tuple[str, int], int]:
    """The first offset at or after ``at_ms`` of each partition (-1: none)."""
    return _end_offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.for_timestamp(at_ms))


def _reset_offsets(
    cluster: Cluster, groups: list[str], args: argparse.Namespace, output: OutputFormat
) -> None:
    """``resetOffsets``: the plan for each group, committed with ``--execute``; without
    ``--execute`` or ``--dry-run`` Kafka warns on stderr that nothing was done."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    from kompakt.cli import kafka_format as kf
    from kompakt.cli import reset_shift
    from kompakt.cli.cluster import parse_timestamp_ms
    from kompakt.cli.group_cmd import topic_specs
    from kompakt.cli.output import err_console

    chosen = [args.to_earliest, args.to_latest, args.to_offset is not None, args.to_datetime is not None]
    chosen += [args.shift_by is not None, args.by_duration is not None]
    if sum(chosen) != 1:
        raise CliUsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by, "
            "--by-duration"
        )
    relative = reset_shift.Relative.of(args.shift_by, args.by_duration)
    if bool(args.topic) == args.all_topics:
        raise CliUsageError("give --topic (repeatable) or --all-topics")
    at_ms = None if args.to_datetime is None else parse_timestamp_ms(args.to_datetime, "--to-datetime")
    admin = cluster.admin()
    cluster.metadata(admin)
    plan: list[tuple[str, str, int, int]] = []
    for group in groups:
        description = cluster.wait(
            admin.describe_consumer_groups([group], request_timeout=cluster.timeout_s)[group],
            f"cannot describe group {group!r}",
        )
        state = _kafka_state(description.state)
        if state not in ("Empty", "Dead") or description.members:
            raise CliError(
                f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                f"{state}."
            )
        committed = _committed_offsets(cluster, admin, group)
        partitions = sorted(committed) if args.all_topics else topic_specs(cluster, admin, args.topic)
        earliest = _end_offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.earliest())
        latest = _end_offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.latest())
        if args.to_earliest:
            target = earliest
        elif args.to_latest:
            target = latest
        elif args.to_offset is not None:
            target = {tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in partitions}
        elif relative is not None:
            target = relative.target(
                partitions,
                {tp: offset for tp, (offset, _) in committed.items()},
                earliest,
                latest,
                functools.partial(_offsets_at, cluster, admin, partitions),
                console.file,
            )
        else:
            assert at_ms is not None
            found = _end_offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.for_timestamp(at_ms))
            target = {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}
        if args.execute:
            request = ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, target[(t, p)]) for t, p in partitions]
            )
            result = cluster.wait(
                admin.alter_consumer_group_offsets([request], request_timeout=cluster.timeout_s)[group],
                f"cannot reset the offsets of group {group!r}",
            )
            for tp in result.topic_partitions or []:
                if tp.error is not None:
                    raise CliError(
                        f"cannot reset {tp.topic}-{tp.partition}: {tp.error.name()}: {tp.error.str()}"
                    )
        plan += [(group, t, p, target[(t, p)]) for t, p in partitions]
    if output is OutputFormat.JSON:
        emit_json(
            {
                "executed": bool(args.execute),
                "partitions": [{"group": g, "topic": t, "partition": p, "new": n} for g, t, p, n in plan],
            }
        )
        return
    if not (args.execute or args.dry_run):
        err_console.file.write(kf.RESET_DRY_RUN_WARNING)
        err_console.file.flush()
    console.file.write(kf.reset_table(plan))


def _delete_groups(cluster: Cluster, groups: list[str], output: OutputFormat) -> None:
    """``deleteGroups``: every group is tried; failures are listed, as Kafka does, with the Java
    client's exception text (the exit code stays 0, as Kafka's)."""
    from kompakt.cli import kafka_format as kf

    admin = cluster.admin()
    cluster.metadata(admin)
    futures = admin.delete_consumer_groups(groups, request_timeout=cluster.timeout_s)
    deleted: list[str] = []
    failed: list[tuple[str, str]] = []
    for group, future in futures.items():
        try:
            _result(cluster, future)
            deleted.append(group)
        except KafkaException as exc:  # reported per group, as Kafka's tool does
            failed.append((group, kf.java_error(_kafka_error(exc)[0])))
    if output is OutputFormat.JSON:
        emit_json({"deleted": sorted(deleted), "failed": dict(failed)})
        return
    console.file.write(kf.delete_groups_result(deleted, failed))


_DELETE_OFFSETS_GROUP_ERRORS = (
    "INVALID_GROUP_ID",
    "GROUP_ID_NOT_FOUND",
    "GROUP_AUTHORIZATION_FAILED",
    "NON_EMPTY_GROUP",
)
_DELETE_OFFSETS_PARTITION_ERRORS = (
    "GROUP_SUBSCRIBED_TO_TOPIC",
    "TOPIC_AUTHORIZATION_FAILED",
    "UNKNOWN_TOPIC_OR_PARTITION",
)


def _delete_offsets(cluster: Cluster, groups: list[str], topics: list[str], output: OutputFormat) -> None:
    """OffsetDelete (KIP-496) of the group's committed offsets on ``--topic T[:P,...]``; the
    broker refuses partitions the group's members still subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
    Kafka's tool takes one ``--group``."""
    from kompakt.cli import kafka_format as kf
    from kompakt.cli.group_cmd import topic_specs
    from kompakt.cli.wire_client import delete_offsets

    if len(groups) != 1:
        raise CliUsageError("kafka-consumer-groups --delete-offsets takes one --group")
    group = groups[0]
    partitions = topic_specs(cluster, cluster.admin(), topics)
    group_error, results = delete_offsets(cluster.bootstrap, group, partitions, cluster.timeout_s)
    if output is OutputFormat.JSON:
        first = group_error or next((r.error for r in results if r.error), None)
        rows = [
            {"topic": r.topic, "partition": r.partition, "status": r.error or "Successful"}
            for r in sorted(results, key=lambda r: (r.topic, r.partition))
        ]
        emit_json([{"group": group, "error": group_error, "ok": first is None, "partitions": rows}])
        if first is not None:
            raise CliError(f"could not delete offsets of {group}: {first}")
    else:
        # DeleteConsumerGroupOffsetsResult.all() fails with the first partition's error too
        group_error = group_error or next((r.error for r in results if r.error), None)
        if group_error is None:
            console.file.write(f"Request succeeded for deleting offsets from group {group}.\n")
        elif group_error in _DELETE_OFFSETS_GROUP_ERRORS:
            console.file.write(kf.error_line(kf.JAVA_ERRORS.get(group_error, ("", group_error))[1]))
        elif group_error in _DELETE_OFFSETS_PARTITION_ERRORS:
            console.file.write(
                kf.error_line("Encountered some partition-level error, see the follow-up details.")
            )
        else:
            console.file.write(kf.error_line(f"Encountered some unknown error: {group_error}"))
        table: list[tuple[str, int, str | None]] = [
            (r.topic, r.partition, None if r.error is None else kf.JAVA_ERRORS.get(r.error, ("", r.error))[1])
            for r in results
        ]
        console.file.write(kf.delete_offsets_table(table))


# --------------------------------------------------------------------------------------------
# kafka-dump-log


@_tool("kafka-dump-log", "Kafka's kafka-dump-log.sh: --files with --print-data-log")
def kafka_dump_log(argv: list[str]) -> None:
    from kompakt.cli.log_cmd import dump_command, verify_command

    parser = _Parser(
        prog="kompakt kafka-dump-log", description="Dump log segments (Kafka's DumpLogSegments)."
    )
    parser.add_argument("--files", required=True, help="Comma-separated segment, index or partition paths.")
    parser.add_argument("--print-data-log", action="store_true")
    parser.add_argument("--deep-iteration", action="store_true")
    parser.add_argument("--verify-index-only", action="store_true")
    parser.add_argument("--index-sanity-check", action="store_true")
    parser.add_argument("--max-message-size", type=int)
    parser.add_argument("--max-bytes", type=int)
    parser.add_argument("--skip-record-metadata", action="store_true")
    for decoder in (
        "offsets-decoder",
        "transaction-log-decoder",
        "cluster-metadata-decoder",
        "remote-log-metadata-decoder",
        "share-group-state-decoder",
    ):
        parser.add_argument(f"--{decoder}", action="store_true")
    parser.add_argument("--key-decoder-class")
    parser.add_argument("--value-decoder-class")
    parser.add_argument("--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    output = OutputFormat(args.output)
    if args.offsets_decoder or args.transaction_log_decoder:
        from kompakt.cli import kafka_dump_decoders as decoders

        parse = decoders.parse_offsets_record if args.offsets_decoder else decoders.parse_transaction_record
        decoders.dump_decoded([p.strip() for p in args.files.split(",") if p.strip()], parse)
        return
    for decoder in (
        "remote_log_metadata_decoder",
        "share_group_state_decoder",
        "key_decoder_class",
        "value_decoder_class",
    ):
        if getattr(args, decoder):
            raise CliUsageError(
                f"--{decoder.replace('_', '-')}: kompakt prints keys and values as text (or base64)"
            )
    given = [p.strip() for p in args.files.split(",") if p.strip()]
    if output is OutputFormat.TABLE and not (args.verify_index_only or args.index_sanity_check):
        logs = [p for p in given if p.endswith(".log")]
        for shown in logs:
            _dump_log_kafka_format(shown, args)
        given = [p for p in given if not p.endswith(".log")]
        if not given:
            return
    paths = [Path(p) for p in given]
    records = args.print_data_log or args.deep_iteration or args.cluster_metadata_decoder
    for path in _dump_paths(paths):
        if args.verify_index_only or args.index_sanity_check:
            verify_command(path, output=output)
        else:
            dump_command(
                path,
                records=records,
                offsets_only=False,
                max_batches=None,
                cluster_metadata_decoder=args.cluster_metadata_decoder,
                output=output,
            )


def _dump_log_kafka_format(shown: str, args: argparse.Namespace) -> None:
    """DumpLogSegments' lines for one ``.log`` file: the batch lines, and with
    ``--deep-iteration`` / ``--print-data-log`` one ``| offset: ...`` line per record."""
    from kompakt.cli.kafka_format import dump_log_lines
    from kompakt.cli.output import err_console

    try:
        data = Path(shown).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if args.max_bytes is not None:
        data = data[: max(0, args.max_bytes)]
    print_data = bool(args.print_data_log or args.cluster_metadata_decoder)
    stdout, stderr = dump_log_lines(
        shown,
        data,
        deep=print_data or bool(args.deep_iteration),
        print_data=print_data,
        metadata=bool(args.cluster_metadata_decoder),
        skip_record_metadata=bool(args.skip_record_metadata),
    )
    console.file.write(stdout)
    if stderr:
        err_console.file.write(stderr)


def _dump_paths(paths: Iterable[Path]) -> list[Path]:
    """Index files name their segment (Kafka dumps an index against its log); kompakt's dump reads
    the segment, so ``.index``/``.timeindex`` become their ``.log``."""
    out: list[Path] = []
    for path in paths:
        if path.suffix in (".index", ".timeindex", ".txnindex"):
            path = path.with_suffix(".log")
        if path not in out:
            out.append(path)
    return out


# --------------------------------------------------------------------------------------------
# registration


def register(app: typer.Typer) -> None:
    """Attach every Kafka-spelled tool, under its name and (hidden) its ``.sh`` name."""
    settings = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}
    registered = {command.name for command in app.registered_commands}
    for name, summary in TOOLS.items():
        if name in registered:
            continue

        def command(ctx: typer.Context, _name: str = name) -> None:
            run_tool(_name, ctx.args)

        command.__doc__ = f"{summary} (Kafka's flags; --help lists them)."
        app.command(name, context_settings=settings, add_help_option=False)(command)
        app.command(f"{name}.sh", context_settings=settings, add_help_option=False, hidden=True)(command)


# --------------------------------------------------------------------------------------------
# for the tools in their own modules (kafka_acls, kafka_get_offsets, kafka_transactions, ...)

ToolParser = _Parser
"""argparse with kompakt's error convention (a usage error is one line, exit code 2)."""
tool = _tool
"""Register a Kafka-spelled tool: ``@tool("kafka-x", "one line of help")`` on ``fn(argv)``."""
properties_file = _properties_file
"""A Java properties file (``--producer.config``, ``--consumer.config``) as a dict; errors name the option."""
