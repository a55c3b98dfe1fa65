"""``kompakt topic create|list|describe|alter|delete`` against any Kafka-compatible cluster.

Config names are Kafka's and are passed to the broker untouched: the broker is the one authority
on what a topic accepts, so a rejected name or value comes back with the broker's own message
(kompakt's broker names the topic-level config when given a broker name such as
``log.cleaner.min.cleanable.ratio``). ``alter`` uses IncrementalAlterConfigs, so configs that are
not mentioned keep their values, unlike the legacy AlterConfigs which replaces the whole set.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from confluent_kafka import TopicCollection
from rich.table import Table
from rich.text import Text

from kompakt.cli.cluster import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_TIMEOUT_S,
    KAFKA_ADMIN,
    BootstrapOption,
    Cluster,
    OutputOption,
    TimeoutOption,
    parse_pairs,
)
from kompakt.cli.output import CliUsageError, OutputFormat, console, emit, emit_json

topic_app = typer.Typer(
    help="Create, list, describe, alter and delete topics on a Kafka-compatible cluster.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Attach ``kompakt topic``."""
    app.add_typer(topic_app, name="topic")


def source_name(source: Any) -> str:
    """A config source as Kafka names it (``DYNAMIC_TOPIC_CONFIG``); librdkafka gives a number."""
    try:
        return str(KAFKA_ADMIN.ConfigSource(int(source)).name)
    except (ValueError, TypeError):
        return str(source)


@topic_app.command("create")
def create_command(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1, help="Partition count.")] = 1,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", "-r", min=1, help="Replicas per partition.")
    ] = 1,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", help="Topic config name=value (Kafka's names); repeatable."),
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Create a topic."""
    configs = dict(parse_pairs(config or [], "--config"))
    cluster = Cluster(bootstrap, timeout)
    admin = cluster.admin()
    cluster.metadata(admin)
    new_topic = KAFKA_ADMIN.NewTopic(name, partitions, replication_factor, config=configs)
    futures = admin.create_topics(
        [new_topic], operation_timeout=timeout, request_timeout=timeout, validate_only=False
    )
    cluster.wait(futures[name], f"cannot create topic {name!r}")
    row = {
        "topic": name,
        "partitions": partitions,
        "replication_factor": replication_factor,
        "configs": configs,
    }
    if output is OutputFormat.JSON:
        emit_json(row)
    else:
        extra = ", ".join(f"{k}={v}" for k, v in configs.items())
        console.print(
            Text(
                f"created topic {name} ({partitions} partition{'' if partitions == 1 else 's'}"
                + (f"; {extra})" if extra else ")")
            )
        )


@topic_app.command("list")
def list_command(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List the cluster's topics with their partition counts."""
    cluster = Cluster(bootstrap, timeout)
    meta = cluster.metadata(cluster.admin())
    rows = [
        {"topic": name, "partitions": len(t.partitions), "internal": name.startswith("__")}
        for name, t in sorted(meta.topics.items())
    ]
    emit(rows, output, columns=["topic", "partitions", "internal"])


def restore_broker_layer(
    synonyms: list[dict[str, Any]], broker_values: dict[str, tuple[str, str | None]]
) -> list[dict[str, Any]]:
    """Put back the broker's effective layer of each synonym that confluent-kafka dropped.

    librdkafka returns a config's synonyms as a list (``DescribeConfigsSynonym``, in
    ``ConfigEntry.synonyms`` precedence order), but confluent-kafka keys them by name, so the layers
    of one name collapse into the last, ``DEFAULT_CONFIG``: a broker started with
    ``log.cleanup.policy=compact`` in ``server.properties`` would print
    ``synonyms={..., DEFAULT_CONFIG:log.cleanup.policy=delete}``, the opposite of what it does.
    The BROKER resource's own entry for that name carries its effective value and source, so that
    layer goes back in front of the default one (a layer shadowed by it stays lost).
    """
    restored: list[dict[str, Any]] = []
    seen: set[str] = set()
    for synonym in synonyms:
        name = synonym["name"]
        layer = broker_values.get(name)
        if synonym["source"] == "DEFAULT_CONFIG" and name not in seen and layer is not None:
            restored.append({"name": name, "value": layer[1], "source": layer[0]})
        restored.append(synonym)
        seen.add(name)
    return restored


def broker_layers(cluster: Cluster, admin: Any) -> dict[str, tuple[str, str | None]]:
    """The broker's configs that are not at their default, ``{name: (source, value)}``, from
    DescribeConfigs of the lowest broker id (what :func:`restore_broker_layer` puts back)."""
    brokers = sorted(cluster.metadata(admin).brokers)
    if not brokers:
        return {}
    broker = str(brokers[0])
    resource = KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.BROKER, broker)
    futures = admin.describe_configs([resource], request_timeout=cluster.timeout_s)
    entries = cluster.wait(next(iter(futures.values())), f"cannot describe configs of broker {broker}")
    values: dict[str, tuple[str, str | None]] = {}
    for entry in entries.values():
        source = source_name(entry.source)
        if source != "DEFAULT_CONFIG":
            values[entry.name] = (source, entry.value)
    return values


def describe_topic(
    cluster: Cluster, admin: Any, name: str, layers: dict[str, tuple[str, str | None]] | None = None
) -> dict[str, Any]:
    """A topic's partitions and every config with value, source and synonyms (also what
    ``kafka-topics --describe`` and ``kafka-configs --describe`` print), with the broker's layer
    of each synonym restored (``layers``: :func:`broker_layers`, fetched when not given)."""
    layers = broker_layers(cluster, admin) if layers is None else layers
    cluster.metadata(admin)
    described = admin.describe_topics(TopicCollection([name]), request_timeout=cluster.timeout_s)
    description = cluster.wait(described[name], f"cannot describe topic {name!r}")
    resource = KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.TOPIC, name)
    config_futures = admin.describe_configs([resource], request_timeout=cluster.timeout_s)
    entries = cluster.wait(next(iter(config_futures.values())), f"cannot describe configs of {name!r}")
    partitions = [
        {
            "partition": p.id,
            "leader": None if p.leader is None else p.leader.id,
            "replicas": [n.id for n in p.replicas],
            "isr": [n.id for n in p.isr],
        }
        for p in sorted(description.partitions, key=lambda p: p.id)
    ]
    configs = [
        {
            "name": entry.name,
            "value": entry.value,
            "source": source_name(entry.source),
            "is_default": bool(entry.is_default)
            or source_name(entry.source) == KAFKA_ADMIN.ConfigSource.DEFAULT_CONFIG.name,
            "read_only": bool(entry.is_read_only),
            "sensitive": bool(entry.is_sensitive),
            "synonyms": restore_broker_layer(
                [
                    {"name": s.name, "value": s.value, "source": source_name(s.source)}
                    for s in entry.synonyms.values()
                ],
                layers,
            ),
        }
        for entry in sorted(entries.values(), key=lambda e: e.name)
    ]
    return {
        "topic": name,
        "internal": bool(getattr(description, "is_internal", False)),
        "partitions": partitions,
        "configs": configs,
    }


@topic_app.command("describe")
def describe_command(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Partitions with their leaders, and every config with its value and source.

    Configs set on the topic (or inherited from a non-default broker setting) are highlighted,
    because those are the ones that make this topic behave differently from Kafka's defaults.
    """
    cluster = Cluster(bootstrap, timeout)
    info = describe_topic(cluster, cluster.admin(), name)
    if output is OutputFormat.JSON:
        emit_json(info)
        return
    emit(
        [
            {**p, "replicas": ",".join(map(str, p["replicas"])), "isr": ",".join(map(str, p["isr"]))}
            for p in info["partitions"]
        ],
        output,
        columns=["partition", "leader", "replicas", "isr"],
        title=f"topic {name}",
    )
    table = Table(title=f"configs of {name} (non-default in bold)")
    for column in ("name", "value", "source"):
        table.add_column(column, overflow="fold")
    for entry in info["configs"]:
        style = "" if entry["is_default"] else "bold yellow"
        value = "" if entry["value"] is None else str(entry["value"])
        table.add_row(Text(entry["name"], style), Text(value, style), Text(entry["source"], style))
    console.print(table)


@topic_app.command("alter")
def alter_command(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    set_: Annotated[list[str] | None, typer.Option("--set", "-s", help="Set name=value; repeatable.")] = None,
    delete: Annotated[
        list[str] | None,
        typer.Option("--delete", "-d", help="Remove an override (back to the default); repeatable."),
    ] = None,
    append: Annotated[
        list[str] | None,
        typer.Option("--append", help="Append to a list config, name=value; repeatable."),
    ] = None,
    subtract: Annotated[
        list[str] | None,
        typer.Option("--subtract", help="Remove from a list config, name=value; repeatable."),
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Change topic configs with IncrementalAlterConfigs (unmentioned configs are kept)."""
    sets = parse_pairs(set_ or [], "--set")
    appends = parse_pairs(append or [], "--append")
    subtracts = parse_pairs(subtract or [], "--subtract")
    deletes = [d.strip() for d in delete or []]
    if not (sets or deletes or appends or subtracts):
        raise CliUsageError("nothing to change: give --set, --delete, --append or --subtract")
    entries = [
        KAFKA_ADMIN.ConfigEntry(k, v, incremental_operation=KAFKA_ADMIN.AlterConfigOpType.SET)
        for k, v in sets
    ] + [
        KAFKA_ADMIN.ConfigEntry(k, v, incremental_operation=KAFKA_ADMIN.AlterConfigOpType.APPEND)
        for k, v in appends
    ]
    entries += [
        KAFKA_ADMIN.ConfigEntry(k, v, incremental_operation=KAFKA_ADMIN.AlterConfigOpType.SUBTRACT)
        for k, v in subtracts
    ]
    entries += [
        KAFKA_ADMIN.ConfigEntry(k, None, incremental_operation=KAFKA_ADMIN.AlterConfigOpType.DELETE)
        for k in deletes
    ]
    cluster = Cluster(bootstrap, timeout)
    admin = cluster.admin()
    cluster.metadata(admin)
    resource = KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.TOPIC, name, incremental_configs=entries)
    futures = admin.incremental_alter_configs([resource], request_timeout=timeout)
    cluster.wait(next(iter(futures.values())), f"cannot alter topic {name!r}")
    result = {
        "topic": name,
        "set": dict(sets),
        "append": dict(appends),
        "subtract": dict(subtracts),
        "deleted": deletes,
    }
    if output is OutputFormat.JSON:
        emit_json(result)
        return
    changes = [f"set {k}={v}" for k, v in sets] + [f"appended {k}+={v}" for k, v in appends]
    changes += [f"subtracted {k}-={v}" for k, v in subtracts] + [f"deleted {k}" for k in deletes]
    console.print(Text(f"altered topic {name}: " + ", ".join(changes)))


@topic_app.command("delete")
def delete_command(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Delete a topic and its data."""
    cluster = Cluster(bootstrap, timeout)
    admin = cluster.admin()
    cluster.metadata(admin)
    futures = admin.delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
    cluster.wait(futures[name], f"cannot delete topic {name!r}")
    if output is OutputFormat.JSON:
        emit_json({"topic": name, "deleted": True})
    else:
        console.print(Text(f"deleted topic {name}"))
