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
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer

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
    from kompakt.cli import topic_cmd

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
        raise CliError(f"topic {args.topic or args.topic_id!r} does not exist")
    if action == "delete":
        for name in names:
            topic_cmd.delete_command(name, bootstrap=bootstrap, timeout=DEFAULT_TIMEOUT_S, output=output)
    elif action == "alter":
        for name in names:
            _add_partitions(cluster, admin, name, args.partitions, output)
    else:
        _describe_topics(cluster, admin, names, args, output)


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
        raise CliError(
            f"cannot create topic {args.topic!r}: TOPIC_ALREADY_EXISTS: Topic '{args.topic}' already exists."
        )
    partitions = -1 if args.partitions is None else args.partitions
    replication = -1 if args.replication_factor is None else args.replication_factor
    new_topic = KAFKA_ADMIN.NewTopic(args.topic, partitions, replication, config=configs)
    futures = admin.create_topics(
        [new_topic], operation_timeout=cluster.timeout_s, request_timeout=cluster.timeout_s
    )
    cluster.wait(futures[args.topic], f"cannot create topic {args.topic!r}")
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
        name: str(cluster.wait(future, f"cannot describe topic {name!r}").topic_id)
        for name, future in found.items()
    }


def _add_partitions(cluster: Cluster, admin: Any, name: str, count: int, output: OutputFormat) -> None:
    futures = admin.create_partitions(
        [KAFKA_ADMIN.NewPartitions(name, count)],
        operation_timeout=cluster.timeout_s,
        request_timeout=cluster.timeout_s,
    )
    cluster.wait(futures[name], f"cannot alter topic {name!r}")
    if output is OutputFormat.JSON:
        emit_json({"topic": name, "partitions": count})
    else:
        console.file.write(f"Altered topic {name}: {count} partitions.\n")


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
        overrides = ",".join(
            f"{c['name']}={c['value']}" for c in info["configs"] if c["source"] == "DYNAMIC_TOPIC_CONFIG"
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
        from kompakt.cli import topic_cmd

        for name in names:
            topic_cmd.alter_command(
                name,
                set_=[f"{k}={v}" for k, v in sets],
                delete=deletes,
                append=None,
                subtract=None,
                bootstrap=bootstrap,
                timeout=DEFAULT_TIMEOUT_S,
                output=output,
            )
        return
    _alter_broker_configs(cluster, names, default, sets, deletes, output)


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
    for name in names:
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
    from kompakt.cli.topic_cmd import restore_broker_layer, source_name

    admin = cluster.admin()
    brokers = names or _broker_ids(cluster, admin)
    resources = [
        KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.BROKER, b) for b in brokers[:1] if default
    ] or [KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.BROKER, b) for b in brokers]
    if default:
        _note_default(brokers[:1])
    wanted = {"DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}
    results: list[tuple[str, list[dict[str, Any]]]] = []
    for resource, future in admin.describe_configs(resources, request_timeout=cluster.timeout_s).items():
        entries = cluster.wait(future, f"cannot describe configs of broker {resource.name}")
        rows = []
        for entry in sorted(entries.values(), key=lambda e: e.name):
            source = source_name(entry.source)
            if not show_all and source not in wanted:
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


def _note_default(brokers: list[str]) -> None:
    from kompakt.cli.output import err_console

    err_console.print(
        "note: --entity-default: librdkafka cannot address the cluster-default resource, so this is "
        f"broker {', '.join(brokers)} (kompakt is one broker: the same thing)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _alter_broker_configs(
    cluster: Cluster,
    names: list[str],
    default: bool,
    sets: list[tuple[str, str]],
    deletes: list[str],
    output: OutputFormat,
) -> None:
    """IncrementalAlterConfigs on BROKER resources. librdkafka cannot name the cluster-default
    resource (an empty name), so ``--entity-default`` updates every broker instead; kompakt is
    one broker, where the two are the same."""
    admin = cluster.admin()
    targets = list(names)
    if default:
        targets = _broker_ids(cluster, admin)
        _note_default(targets)
    op = KAFKA_ADMIN.AlterConfigOpType
    entries = [KAFKA_ADMIN.ConfigEntry(k, v, incremental_operation=op.SET) for k, v in sets]
    entries += [KAFKA_ADMIN.ConfigEntry(k, None, incremental_operation=op.DELETE) for k in deletes]
    for name in targets:
        resource = KAFKA_ADMIN.ConfigResource(
            KAFKA_ADMIN.ResourceType.BROKER, name, incremental_configs=entries
        )
        futures = admin.incremental_alter_configs([resource], request_timeout=cluster.timeout_s)
        cluster.wait(next(iter(futures.values())), f"cannot alter the configs of broker {name}")
    if output is OutputFormat.JSON:
        emit_json({"brokers": targets, "set": dict(sets), "deleted": deletes})
        return
    what = "the default config for brokers" if default else f"config for broker {', '.join(targets)}"
    changes = [f"set {k}={v}" for k, v in sets] + [f"deleted {k}" for k in deletes]
    console.file.write(f"Completed updating {what}: {', '.join(changes)}.\n")


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
    from kompakt.cli.produce_cmd import produce_command

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
    produce_command(
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
    from kompakt.cli import group_cmd

    args = _groups_parser().parse_args(argv)
    bootstrap, output = _common(args)
    action = _one_action(
        args, ("list", "describe", "delete", "reset-offsets", "delete-offsets"), "kafka-consumer-groups"
    )
    timeout = DEFAULT_TIMEOUT_S if args.timeout is None else max(0.1, args.timeout / 1000)
    _check_groups_args(args, action)
    if action == "list":
        group_cmd.list_command(bootstrap=bootstrap, timeout=timeout, output=output)
        return
    groups = list(args.group)
    if args.all_groups:
        groups = _all_groups(bootstrap, timeout)
    if not groups:
        raise CliUsageError(f"kafka-consumer-groups --{action} needs --group (or --all-groups)")
    if action == "describe":
        views = [v for v in ("members", "offsets", "state") if getattr(args, v)]
        if len(views) > 1:
            raise CliUsageError("kafka-consumer-groups --describe takes one of --members, --offsets, --state")
        group_cmd.describe_view(
            groups,
            views[0] if views else "offsets",
            verbose=args.verbose,
            bootstrap=bootstrap,
            timeout=timeout,
            output=output,
        )
        return
    if action == "delete":
        _delete_groups(Cluster(bootstrap, timeout), groups, output)
        return
    if action == "delete-offsets":
        _delete_offsets(Cluster(bootstrap, timeout), groups, args.topic, output)
        return
    for group in groups:
        group_cmd.reset_offsets_command(
            group,
            topic=args.topic or None,
            all_topics=args.all_topics,
            to_earliest=args.to_earliest,
            to_latest=args.to_latest,
            to_offset=args.to_offset,
            to_datetime=args.to_datetime,
            execute=args.execute,
            bootstrap=bootstrap,
            timeout=timeout,
            output=output,
        )


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
    for unsupported in ("shift-by", "by-duration", "from-file"):
        parser.add_argument(f"--{unsupported}")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--execute", action="store_true")
    for view in ("members", "offsets", "state", "verbose"):
        parser.add_argument(f"--{view}", action="store_true")
    parser.add_argument("--timeout", type=int, help="Milliseconds to wait for the cluster.")
    parser.add_argument("--type")
    parser.add_argument("--validate-regex")
    return parser


def _check_groups_args(args: argparse.Namespace, action: str) -> None:
    for unsupported in ("to_current", "export", "shift_by", "by_duration", "from_file"):
        if getattr(args, unsupported):
            raise CliUsageError(
                f"--{unsupported.replace('_', '-')} is not supported by kompakt's reset-offsets"
            )
    if action == "delete-offsets" and not args.topic:
        raise CliUsageError("kafka-consumer-groups --delete-offsets needs --topic TOPIC[:P,...]")
    if args.dry_run and args.execute:
        raise CliUsageError("give one of --dry-run and --execute")


def _all_groups(bootstrap: str, timeout: float) -> list[str]:
    cluster = Cluster(bootstrap, timeout)
    admin = cluster.admin()
    cluster.metadata(admin)
    listing = cluster.wait(admin.list_consumer_groups(request_timeout=timeout), "cannot list groups")
    return sorted(g.group_id for g in listing.valid)


def _delete_groups(cluster: Cluster, groups: list[str], output: OutputFormat) -> None:
    admin = cluster.admin()
    cluster.metadata(admin)
    futures = admin.delete_consumer_groups(groups, request_timeout=cluster.timeout_s)
    for group, future in futures.items():
        cluster.wait(future, f"cannot delete group {group!r}")
    if output is OutputFormat.JSON:
        emit_json({"deleted": sorted(groups)})
    else:
        console.file.write(
            "Deletion of requested consumer groups ("
            + ", ".join(f"'{g}'" for g in groups)
            + ") was successful.\n"
        )


def _delete_offsets(cluster: Cluster, groups: list[str], topics: list[str], output: OutputFormat) -> None:
    """OffsetDelete (KIP-496) of the groups' committed offsets on ``--topic T[:P,...]``; the
    broker refuses partitions the group's members still subscribe to (GROUP_SUBSCRIBED_TO_TOPIC)."""
    from kompakt.cli.group_cmd import topic_specs
    from kompakt.cli.output import emit
    from kompakt.cli.wire_client import delete_offsets

    partitions = topic_specs(cluster, cluster.admin(), topics)
    reports: list[dict[str, Any]] = []
    failed: list[str] = []
    for group in groups:
        group_error, results = delete_offsets(cluster.bootstrap, group, partitions, cluster.timeout_s)
        rows = [
            {"topic": r.topic, "partition": r.partition, "status": r.error or "Successful"}
            for r in sorted(results, key=lambda r: (r.topic, r.partition))
        ]
        first = group_error or next((r.error for r in results if r.error), None)
        if first is not None:
            failed.append(f"{group}: {first}")
        reports.append({"group": group, "error": group_error, "ok": first is None, "partitions": rows})
    if output is OutputFormat.JSON:
        emit_json(reports)
    else:
        for report in reports:
            verdict = "succeeded" if report["ok"] else "failed"
            console.file.write(f"Request {verdict} for deleting offsets from group {report['group']}.\n")
            if report["error"]:
                console.file.write(f"Error: {report['error']}\n")
            if report["partitions"]:
                emit(report["partitions"], output, columns=["topic", "partition", "status"])
    if failed:
        raise CliError("could not delete offsets of " + "; ".join(failed))


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
    for decoder in (
        "offsets_decoder",
        "transaction_log_decoder",
        "remote_log_metadata_decoder",
        "share_group_state_decoder",
        "key_decoder_class",
        "value_decoder_class",
    ):
        if getattr(args, decoder):
            raise CliUsageError(
                f"--{decoder.replace('_', '-')}: kompakt prints keys and values as text (or base64)"
            )
    paths = [Path(p.strip()) for p in args.files.split(",") if p.strip()]
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
