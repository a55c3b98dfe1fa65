"""The broker-level settings the offline tools (``log explain``, ``log compact``, the static map) apply.

A topic without its own ``cleanup.policy`` takes the broker's ``log.cleanup.policy``; the same goes
for every topic config with a ``log.*`` synonym, and the cleaner settings (threads, dedupe buffer)
are broker configs outright. Kafka's compaction guide compacts a whole cluster with
``log.cleanup.policy=compact`` in ``server.properties``, so a tool that ignores the broker's file
explains that guide's first example wrongly ("cleanup.policy is delete").

The values are layered, each one remembered with where it came from so the report can say it:

1. ``--server-properties FILE`` (the broker's static configs; Kafka settings kompakt does not act
   on, such as SASL or KRaft details of a Kafka broker, are skipped and listed in a note, and a
   name Kafka 4.1 does not know either is skipped with a "did you mean": a misspelt
   ``log.cleanup.policy`` would otherwise change the verdict without a word);
2. a Kafka 4 directory's metadata log (``__cluster_metadata-0``): the dynamic broker configs of
   ``ConfigRecord`` BROKER records, the cluster default (``--entity-default``, resource ``""``)
   under this node's own (resource ``"<node.id>"`` of ``meta.properties``), as Kafka layers
   ``DYNAMIC_DEFAULT_BROKER_CONFIG`` under ``DYNAMIC_BROKER_CONFIG``, both over the static file;
3. a kompakt data directory's ``kompakt-broker-dynamic.json`` (dynamic broker configs set with
   ``kafka-configs --entity-type brokers --alter``);
4. with ``--bootstrap``, the cluster's broker values: DescribeConfigs of the BROKER resource,
   every entry whose source is not ``DEFAULT_CONFIG``;
5. ``--broker-config k=v``, which wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kompakt.cli.output import CliError, CliUsageError
from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import closest, parse_properties_file
from kompakt.config.dynamic import DYNAMIC_BROKER_CONFIG_FILE, load_dynamic_broker_config
from kompakt.config.tables import BROKER_CONFIGS, KOMPAKT_BROKER_CONFIGS, TOPIC_CONFIGS
from kompakt.errors import ConfigError
from kompakt.log.cluster_metadata import ClusterMetadata


@dataclass
class BrokerDefaults:
    """A broker config for the offline tools, with the origin of every value that is set."""

    config: BrokerConfig
    origins: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    """``server.properties`` names of Kafka broker configs kompakt does not act on (ignored)."""
    unknown: list[str] = field(default_factory=list)
    """``server.properties`` names no Kafka 4.1 broker has, each with its "did you mean" (ignored)."""


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliUsageError(f"{option} expects name=value, got {item!r}")
        result[name.strip()] = value.strip()
    return result


def _server_properties(path: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """The file's settings kompakt acts on, the Kafka ones it does not, and the unknown ones."""
    try:
        props = parse_properties_file(path)
    except OSError as exc:
        raise CliUsageError(f"--server-properties: cannot read {path}: {exc.strerror or exc}") from None
    known = {k: v for k, v in props.items() if k in KOMPAKT_BROKER_CONFIGS}
    inert = sorted(k for k in props if k in BROKER_CONFIGS and k not in KOMPAKT_BROKER_CONFIGS)
    unknown = []
    for name in sorted(k for k in props if k not in BROKER_CONFIGS):
        suggestion = closest(name, list(BROKER_CONFIGS))
        unknown.append(f"{name} (did you mean {suggestion}?)" if suggestion else name)
    return known, inert, unknown


def _data_dir_dynamic(data_dir: Path | None) -> dict[str, tuple[str, str]]:
    """The dynamic broker configs a kompakt broker persisted in its data directory."""
    if data_dir is None:
        return {}
    if not (data_dir / DYNAMIC_BROKER_CONFIG_FILE).is_file():
        return {}
    loaded = load_dynamic_broker_config(data_dir, BrokerConfig())
    origin = f"{DYNAMIC_BROKER_CONFIG_FILE} (dynamic"
    values = {k: (v, f"{origin}, cluster default)") for k, v in loaded.dynamic_default.items()}
    values.update({k: (v, f"{origin}, this broker)") for k, v in loaded.dynamic.items()})
    return values


def resolve_broker_defaults(
    *,
    server_properties: Path | None = None,
    data_dir: Path | None = None,
    cluster: Mapping[str, tuple[str, str]] | None = None,
    broker_config_items: list[str] | None = None,
    cluster_metadata: ClusterMetadata | None = None,
) -> BrokerDefaults:
    """The layered broker config (see the module docstring); bad values are usage errors naming
    where they came from."""
    values: dict[str, str] = {}
    origins: dict[str, str] = {}
    skipped: list[str] = []
    unknown: list[str] = []
    if server_properties is not None:
        known, skipped, unknown = _server_properties(server_properties)
        for name, value in known.items():
            values[name] = value
            origins[name] = f"server.properties {server_properties}"
    from_metadata = {} if cluster_metadata is None else cluster_metadata.broker_overrides()
    layers: list[Mapping[str, tuple[str, str]]] = [
        {k: v for k, v in from_metadata.items() if k in KOMPAKT_BROKER_CONFIGS},
        _data_dir_dynamic(data_dir),
        cluster or {},
    ]
    layers.append(
        {k: (v, "--broker-config") for k, v in _pairs(broker_config_items, "--broker-config").items()}
    )
    for layer in layers:
        for name, (value, origin) in layer.items():
            values[name] = value
            origins[name] = origin
    try:
        config = BrokerConfig.from_properties(values)
    except ConfigError as exc:
        sources = sorted({origins[n] for n in values})
        raise CliUsageError(f"broker configs ({', '.join(sources)}): {exc}") from None
    return BrokerDefaults(config, origins, skipped, unknown)


@dataclass(frozen=True)
class ClusterConfigs:
    """What a running cluster says about a log directory's topics and its broker."""

    topics: dict[str, dict[str, str]]
    """Each known topic's own overrides (DescribeConfigs source ``DYNAMIC_TOPIC_CONFIG``)."""
    broker: dict[str, tuple[str, str]]
    """The broker's non-default values kompakt acts on, as ``{name: (value, origin)}``."""
    unknown_topics: tuple[str, ...] = ()
    """Topics the cluster does not know (deleted since, or another cluster's directory)."""
    notes: tuple[str, ...] = ()


def cluster_configs(
    bootstrap: str,
    topics: list[str],
    timeout_s: float = 10.0,
    *,
    node_id: int | None = None,
    cluster_id: str | None = None,
) -> ClusterConfigs:
    """From a running cluster: each topic's own overrides, and the broker's non-default values.

    The broker's values come from DescribeConfigs of the BROKER resource of ``node_id`` (the
    directory's own broker, from its ``meta.properties``): brokers of one cluster may differ
    (``kafka-configs --entity-type brokers --entity-name 2 --alter``), and a topic without an
    override takes the value of the broker whose directory it is. Without it, or when the
    cluster has no such broker, the lowest broker id the metadata lists, with a note. Only the
    names kompakt acts on are kept. A topic the cluster does not know is listed, not fatal: a
    broker's directory may hold a topic deleted since.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    from kompakt.cli.cluster import Cluster

    # The shared client settings route librdkafka's own log lines into logging (shown with
    # --debug), so a note of theirs never lands among the report's lines.
    admin = AdminClient(Cluster(bootstrap, timeout_s).base_config())
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise CliError(f"cannot reach the cluster at {bootstrap}: {exc.args[0]}") from None
    notes: list[str] = []
    if cluster_id is not None and metadata.cluster_id and metadata.cluster_id != cluster_id:
        notes.append(
            f"the directory belongs to cluster {cluster_id}, the one at {bootstrap} is "
            f"{metadata.cluster_id}: its configs may not be this directory's"
        )
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    broker_ids = sorted(metadata.brokers)
    if broker_ids:
        chosen = node_id if node_id in broker_ids else broker_ids[0]
        if node_id is not None and node_id != chosen:
            notes.append(
                f"the directory's node.id {node_id} is not a broker of the cluster at {bootstrap} "
                f"(brokers {', '.join(map(str, broker_ids))}): broker configs are broker {chosen}'s"
            )
        resources.append(ConfigResource(ResourceType.BROKER, str(chosen)))
    topic_values: dict[str, dict[str, str]] = {}
    broker_values: dict[str, tuple[str, str]] = {}
    unknown: list[str] = []
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
        try:
            entries: dict[str, Any] = future.result(timeout=timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if (
                resource.restype == ResourceType.TOPIC
                and isinstance(error, KafkaError)
                and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            ):
                unknown.append(resource.name)
                continue
            raise CliError(
                f"describe configs of {resource.name or 'the broker'} at {bootstrap} failed: {error}"
            ) from None
        if resource.restype == ResourceType.BROKER:
            for name, entry in entries.items():
                source = ConfigSource(int(entry.source))
                if (
                    name in KOMPAKT_BROKER_CONFIGS
                    and entry.value is not None
                    and source != ConfigSource.DEFAULT_CONFIG
                ):
                    origin = f"cluster {bootstrap}, broker {resource.name} ({source.name})"
                    broker_values[name] = (str(entry.value), origin)
            continue
        topic_values[resource.name] = {
            name: entry.value
            for name, entry in entries.items()
            if name in TOPIC_CONFIGS
            and entry.value is not None
            and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        }
    return ClusterConfigs(topic_values, broker_values, tuple(sorted(unknown)), tuple(notes))
