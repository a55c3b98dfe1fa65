"""Topic and config administration shared by the admin handlers (sans-IO, on top of LogManager).

The handlers for CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs only translate wire shapes; every rule lives here so the rules are tested
once and read in one place. A failing operation raises :class:`AdminError` carrying Kafka's error
code and message, which the handler puts on that one topic or resource: Kafka answers admin
requests per item, never by failing the whole request.

kompakt is a single broker, so the rules that involve other brokers collapse: a replication factor
other than 1 cannot be satisfied, and a manual replica assignment may only name this broker.

Dynamic broker configs (AlterConfigs on a BROKER resource) and group configs (on a GROUP
resource) are persisted before they are installed (:mod:`kompakt.config.dynamic`), because kompakt
has no controller quorum to hold them as Kafka does; the broker reads them back at start-up.

Concurrency: admin handlers run in worker threads and several may run at once. Every mutation goes
through :data:`ADMIN_LOCK` so read-modify-write sequences (incremental alters, the broker config
swap and its listeners) never interleave. Admin requests are rare; one lock costs nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kompakt import errors
from kompakt.broker.context import Broker
from kompakt.broker.error_codes import KafkaCodedError, error_code_for
from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigSource, ConfigType
from kompakt.config.describe import (
    ConfigEntry,
    ConfigSynonym,
    describe_broker_config,
    describe_group_config,
    describe_topic_config,
)
from kompakt.config.dynamic import save_dynamic_configs
from kompakt.config.tables import BROKER_CONFIGS, TOPIC_CONFIGS
from kompakt.log.config import LogConfig
from kompakt.log.files import atomic_write_bytes
from kompakt.log.manager import LogManager
from kompakt.log.topic_store import validate_topic_name
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)

__all__ = [
    "ADMIN_LOCK",
    "OFFSETS_TOPIC",
    "AdminError",
    "ConfigOp",
    "CreatedTopic",
    "OpType",
    "ResourceType",
    "TopicDeletedHook",
    "alter_broker",
    "alter_resource",
    "alter_topic",
    "apply_incremental",
    "as_admin_error",
    "broker_target",
    "create_partitions",
    "create_topic",
    "delete_topic",
    "describe_broker",
    "describe_group",
    "describe_topic",
    "topic_name_for_id",
]

#: The internal topic the offset store writes; it cannot be deleted through DeleteTopics.
OFFSETS_TOPIC = "__consumer_offsets"
#: Available brokers, for Kafka's replication-factor message.
_BROKERS = 1
ZERO_UUID = uuid.UUID(int=0)

#: Serializes admin mutations (see the module docstring).
ADMIN_LOCK = threading.RLock()

#: ``hook(topic, partitions)``: called before a deleted topic's partitions are removed.
TopicDeletedHook = Callable[[str, Sequence[int]], None]


class ResourceType:
    """Kafka's ``ConfigResource.Type`` ids."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32


class OpType:
    """IncrementalAlterConfigs operation ids (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class AdminError(KafkaCodedError):
    """One topic's or resource's failure: the Kafka error code and message it is answered with."""


def as_admin_error(exc: BaseException) -> AdminError:
    """``exc`` as the per-item error Kafka would answer (AdminError passes through); the code
    comes from the one error map. A failure kompakt did not raise on purpose is logged with its
    traceback."""
    if isinstance(exc, AdminError):
        return exc
    code = error_code_for(exc)
    if code is ErrorCode.unknown_server_error or not isinstance(exc, errors.KompaktError):
        log.exception("Unexpected admin failure", exc_info=exc)
    return AdminError(code, str(exc))


def _unknown_topic() -> AdminError:
    return AdminError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")


def _null_values(configs: Iterable[tuple[str, str | None]], what: str) -> None:
    nulls = [name for name, value in configs if value is None]
    if nulls:
        raise AdminError(ErrorCode.invalid_config, f"Null value not supported for {what}: {','.join(nulls)}")


def _validate_broker_ids(broker_ids: Sequence[int], node_id: int) -> None:
    """A manual assignment on a one-broker cluster: exactly this broker, once."""
    if not broker_ids:
        raise AdminError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for broker_id in broker_ids:
        if broker_id != node_id:
            raise AdminError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, "
                "but no such broker is registered.",
            )
        if broker_id in seen:
            raise AdminError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        seen.add(broker_id)


# ----------------------------------------------------------------------------------------------
# CreateTopics


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """A created (or, with validate_only, creatable) topic as CreateTopics v5+ reports it."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: list[ConfigEntry]


def _collision(name: str, existing: Iterable[str]) -> str | None:
    """Kafka refuses names that differ only by '.' versus '_' (they collide in metric names)."""
    folded = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == folded:
            return other
    return None


def create_topic(
    log_manager: LogManager,
    broker_config: BrokerConfig,
    node_id: int,
    name: str,
    num_partitions: int,
    replication_factor: int,
    assignments: Sequence[tuple[int, Sequence[int]]],
    configs: Sequence[tuple[str, str | None]],
    *,
    validate_only: bool,
) -> CreatedTopic:
    """Validate one CreateTopics entry and, unless ``validate_only``, create the topic.

    Checks in Kafka's order: name, existence and collisions, partitions and replication factor
    (or the manual assignment), then configs. ``-1`` means the broker default for both counts.
    """
    try:
        validate_topic_name(name)
    except errors.InvalidTopicError as exc:
        raise AdminError(ErrorCode.invalid_topic_exception, str(exc)) from None
    with ADMIN_LOCK:
        topics = log_manager.topics()
        if name in topics:
            raise AdminError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        other = _collision(name, topics)
        if other is not None:
            raise AdminError(
                ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}"
            )
        if assignments:
            if replication_factor != -1:
                raise AdminError(
                    ErrorCode.invalid_request,
                    "Replication factor was not set to -1 but a manual partition assignment was specified.",
                )
            if num_partitions != -1:
                raise AdminError(
                    ErrorCode.invalid_request,
                    "Number of partitions was not set to -1 but a manual partition assignment was specified.",
                )
            for expected, (index, broker_ids) in enumerate(sorted(assignments, key=lambda a: a[0])):
                if index != expected:
                    raise AdminError(
                        ErrorCode.invalid_replica_assignment,
                        "Partitions should be created in increasing order.",
                    )
                _validate_broker_ids(broker_ids, node_id)
            partitions = len(assignments)
            replicas = len(assignments[0][1])
        else:
            partitions = broker_config.num_partitions if num_partitions == -1 else num_partitions
            if partitions < 1:
                raise AdminError(
                    ErrorCode.invalid_partitions,
                    "Number of partitions was set to an invalid non-positive value.",
                )
            replicas = (
                broker_config.default_replication_factor if replication_factor == -1 else replication_factor
            )
            if replicas < 1:
                raise AdminError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            if replicas > _BROKERS:
                raise AdminError(
                    ErrorCode.invalid_replication_factor,
                    f"Replication factor: {replicas} larger than available brokers: {_BROKERS}.",
                )
        _null_values(configs, "topic configs")
        overrides = {key: value for key, value in configs if value is not None}
        try:
            LogConfig.from_overrides(overrides, broker_config)
        except errors.ConfigError as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        described = describe_topic_config(overrides, broker_config)
        if validate_only:
            return CreatedTopic(name, ZERO_UUID, partitions, replicas, described)
        try:
            meta = log_manager.create_topic(name, partitions, overrides)
        except Exception as exc:  # noqa: BLE001 - any failure answers this topic only
            raise as_admin_error(exc) from exc
        return CreatedTopic(name, meta.topic_id, partitions, replicas, described)


# ----------------------------------------------------------------------------------------------
# DeleteTopics and CreatePartitions


def topic_name_for_id(log_manager: LogManager, topic_id: uuid.UUID) -> str:
    """The name of the topic with ``topic_id``; UNKNOWN_TOPIC_ID when there is none."""
    for name, meta in log_manager.topics().items():
        if meta.topic_id == topic_id:
            return name
    raise AdminError(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")


def delete_topic(
    log_manager: LogManager,
    broker_config: BrokerConfig,
    name: str,
    hooks: Iterable[TopicDeletedHook] = (),
) -> uuid.UUID:
    """Delete one topic; return its id.

    Every hook is called with the topic and its partitions *before* the log manager renames the
    partition directories, so the cleaner can abort an in-progress clean first (Kafka aborts
    cleaning inside ``LogManager.asyncDelete`` for the same reason). A hook failure is logged and
    does not stop the deletion: the topic is gone from the client's point of view either way.
    """
    if not broker_config.delete_topic_enable:
        raise AdminError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
    if name == OFFSETS_TOPIC:
        # Deliberate difference: Kafka's broker would delete it; kompakt's offset store lives in it.
        raise AdminError(
            ErrorCode.invalid_topic_exception,
            f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion.",
        )
    with ADMIN_LOCK:
        meta = log_manager.topics().get(name)
        if meta is None:
            raise _unknown_topic()
        partitions = list(range(meta.partitions))
        for hook in hooks:
            try:
                hook(name, partitions)
            except Exception:  # noqa: BLE001 - a listener must not block the deletion
                log.exception("on_topic_deleted hook failed for %s", name)
        try:
            log_manager.delete_topic(name)
        except Exception as exc:  # noqa: BLE001
            raise as_admin_error(exc) from exc
        return meta.topic_id


def create_partitions(
    log_manager: LogManager,
    node_id: int,
    name: str,
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    *,
    validate_only: bool,
) -> None:
    """Grow ``name`` to ``count`` partitions (never shrink), optionally only validating."""
    with ADMIN_LOCK:
        meta = log_manager.topics().get(name)
        if meta is None:
            raise _unknown_topic()
        if count < meta.partitions:
            raise AdminError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {meta.partitions} partitions, "
                f"which is higher than the requested {count}.",
            )
        if count == meta.partitions:
            raise AdminError(ErrorCode.invalid_partitions, f"Topic already has {meta.partitions} partitions.")
        if assignments is not None:
            added = count - meta.partitions
            if len(assignments) != added:
                raise AdminError(
                    ErrorCode.invalid_replica_assignment,
                    f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                    "assignment(s) were specified.",
                )
            for broker_ids in assignments:
                _validate_broker_ids(broker_ids, node_id)
        if validate_only:
            return
        try:
            log_manager.create_partitions(name, count)
        except Exception as exc:  # noqa: BLE001
            raise as_admin_error(exc) from exc


# ----------------------------------------------------------------------------------------------
# DescribeConfigs


def _filter(entries: list[ConfigEntry], keys: Sequence[str] | None) -> list[ConfigEntry]:
    if keys is None:
        return entries
    wanted = set(keys)
    return [entry for entry in entries if entry.name in wanted]


def describe_topic(
    log_manager: LogManager, broker_config: BrokerConfig, name: str, keys: Sequence[str] | None
) -> list[ConfigEntry]:
    """Every config of topic ``name`` (or only ``keys``), with sources and synonyms."""
    try:
        validate_topic_name(name)
    except errors.InvalidTopicError as exc:
        raise AdminError(ErrorCode.invalid_topic_exception, str(exc)) from None
    meta = log_manager.topics().get(name)
    if meta is None:
        raise AdminError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    return _filter(describe_topic_config(meta.configs, broker_config), keys)


def broker_target(name: str, node_id: int) -> bool:
    """Whether a BROKER resource name means the cluster default (``""``) or this broker.

    Returns True for the cluster default; raises INVALID_REQUEST for another or a malformed id.
    """
    if name == "":
        return True
    try:
        broker_id = int(name)
    except ValueError:
        raise AdminError(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != node_id:
        raise AdminError(
            ErrorCode.invalid_request, f"Unexpected broker id, expected {node_id}, but received {name}"
        )
    return False


def describe_broker(
    broker_config: BrokerConfig, node_id: int, name: str, keys: Sequence[str] | None
) -> list[ConfigEntry]:
    """This broker's configs, or with name ``""`` only the dynamic cluster defaults (as Kafka)."""
    if not broker_target(name, node_id):
        return _filter(describe_broker_config(broker_config), keys)
    entries = []
    for key in sorted(broker_config.dynamic_default):
        definition = BROKER_CONFIGS[key]
        value = definition.format(definition.parse(broker_config.dynamic_default[key]))
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        entries.append(
            ConfigEntry(
                name=key,
                value=value,
                source=source,
                is_default=False,
                read_only=False,
                sensitive=definition.type is ConfigType.PASSWORD,
                synonyms=(ConfigSynonym(key, value, source),),
                type=definition.type,
                documentation=definition.doc,
            )
        )
    return _filter(entries, keys)


def describe_group(broker: Broker, name: str, keys: Sequence[str] | None) -> list[ConfigEntry]:
    """Every config of group ``name`` (or only ``keys``), its own or the broker's (Kafka's
    ``ConfigHelper``: a group needs no members to be described)."""
    if not name:
        raise AdminError(ErrorCode.invalid_request, "Group name must not be empty")
    return _filter(describe_group_config(broker.group_configs.overrides_of(name), broker.broker_config), keys)


# ----------------------------------------------------------------------------------------------
# AlterConfigs and IncrementalAlterConfigs


@dataclass(frozen=True, slots=True)
class ConfigOp:
    """One IncrementalAlterConfigs operation (legacy AlterConfigs entries are all SET)."""

    name: str
    op: int
    value: str | None


def _reject_duplicates(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise AdminError(ErrorCode.invalid_request, "Error due to duplicate config keys")


def _list_default(name: str, *, topic: bool) -> str:
    """The built-in default of a list config, as the base for APPEND/SUBTRACT (Kafka's rule)."""
    definition = TOPIC_CONFIGS[name].definition if topic else BROKER_CONFIGS[name]
    formatted = definition.format(definition.default)
    return formatted or ""


def _config_type(name: str, *, topic: bool) -> ConfigType | None:
    if topic:
        tdef = TOPIC_CONFIGS.get(name)
        return None if tdef is None else tdef.definition.type
    definition = BROKER_CONFIGS.get(name)
    return None if definition is None else definition.type


def apply_incremental(
    current: Mapping[str, str], ops: Sequence[ConfigOp], *, topic: bool
) -> dict[str, str | None]:
    """The changes ``ops`` make to the override layer ``current``: name -> new value, None = removed.

    APPEND adds the values not already present and SUBTRACT removes every occurrence, starting from
    the current override or, without one, the config's built-in default (Kafka's KIP-339 rule).
    Both are only allowed on LIST configs.
    """
    _reject_duplicates([op.name for op in ops])
    changes: dict[str, str | None] = {}
    for op in ops:
        if op.op == OpType.SET:
            if op.value is None:
                raise AdminError(ErrorCode.invalid_config, f"Null value not supported for : {op.name}")
            changes[op.name] = op.value
        elif op.op == OpType.DELETE:
            changes[op.name] = None
        elif op.op in (OpType.APPEND, OpType.SUBTRACT):
            verb = "append" if op.op == OpType.APPEND else "subtract"
            config_type = _config_type(op.name, topic=topic)
            if config_type is None:
                kind = "topic" if topic else "broker"
                raise AdminError(ErrorCode.invalid_config, f"Unknown {kind} config name: {op.name}")
            if config_type is not ConfigType.LIST:
                raise AdminError(
                    ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {op.name}"
                )
            base = current.get(op.name)
            if base is None:
                base = _list_default(op.name, topic=topic)
            values = [part.strip() for part in base.split(",") if part.strip()]
            operand = [part.strip() for part in (op.value or "").split(",") if part.strip()]
            if op.op == OpType.APPEND:
                values.extend(v for v in operand if v not in values)
            else:
                values = [v for v in values if v not in operand]
            changes[op.name] = ",".join(values)
        else:
            raise AdminError(ErrorCode.invalid_request, f"Unknown alter config operation type {op.op}")
    return changes


def _merge(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    merged = dict(current)
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def alter_topic(
    log_manager: LogManager,
    broker_config: BrokerConfig,
    name: str,
    changes: Mapping[str, str | None] | None,
    *,
    replace: Mapping[str, str] | None = None,
    validate_only: bool,
) -> dict[str, str]:
    """Apply ``changes`` to (or ``replace`` the whole of) a topic's overrides; return the new set.

    The new overrides are validated as a whole first; the logs pick them up at their next roll or
    cleaning pass (:meth:`LogManager.alter_topic_config`).
    """
    with ADMIN_LOCK:
        meta = log_manager.topics().get(name)
        if meta is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        overrides = dict(replace) if replace is not None else _merge(meta.configs, changes or {})
        try:
            LogConfig.from_overrides(overrides, broker_config)
        except errors.ConfigError as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        if not validate_only:
            try:
                log_manager.alter_topic_config(name, overrides)
            except Exception as exc:  # noqa: BLE001
                raise as_admin_error(exc) from exc
        return overrides


def alter_broker(
    broker_config: BrokerConfig,
    node_id: int,
    name: str,
    changes: Mapping[str, str | None] | None,
    *,
    replace: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """The broker config after a dynamic update of this broker (or, name ``""``, the cluster default).

    Only dynamic keys are accepted (the dynamic cleaner keys, ``message.max.bytes``, the ``log.*``
    topic-default synonyms, and the Kafka configs kompakt accepts without acting on them that Kafka
    lets AlterConfigs change); ``log.cleaner.threads`` follows Kafka's update rule. The caller
    persists and installs the result (see :func:`alter_resource`).
    """
    cluster_default = broker_target(name, node_id)
    layer = broker_config.dynamic_default if cluster_default else broker_config.dynamic
    if replace is not None:
        updates: dict[str, str | None] = {key: None for key in layer if key not in replace}
        updates.update(replace)
    else:
        updates = dict(changes or {})
    try:
        return broker_config.with_dynamic(updates, cluster_default=cluster_default)
    except errors.ConfigError as exc:
        # Kafka 4.1's controller validates broker configs (``DynamicBrokerConfig.validateConfigs``)
        # and answers every failure there with INVALID_REQUEST, not INVALID_CONFIG.
        raise AdminError(ErrorCode.invalid_request, str(exc)) from None


# ----------------------------------------------------------------------------------------------
# One AlterConfigs / IncrementalAlterConfigs resource, end to end


def _group_ops(current: Mapping[str, str], ops: Sequence[ConfigOp]) -> dict[str, str]:
    """A group's configs after ``ops``, as Kafka 4.1's broker checks them and its controller applies
    them (``ConfigAdminManager.preprocess``, ``ConfigurationControlManager``): SET and DELETE;
    APPEND and SUBTRACT are refused, since no group config is a list."""
    _reject_duplicates([op.name for op in ops])
    nulls = [op.name for op in ops if op.op != OpType.DELETE and op.value is None]
    if nulls:
        raise AdminError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    result = dict(current)
    for op in ops:
        if op.op == OpType.SET and op.value is not None:
            result[op.name] = op.value
        elif op.op == OpType.DELETE:
            result.pop(op.name, None)
        elif op.op in (OpType.APPEND, OpType.SUBTRACT):
            verb = "APPEND" if op.op == OpType.APPEND else "SUBTRACT"
            raise AdminError(
                ErrorCode.invalid_config, f"Can't {verb} to key {op.name} because its type is not LIST."
            )
        else:
            raise AdminError(ErrorCode.invalid_request, f"Unknown alter config operation type {op.op}")
    return result


def _alter_group(
    broker: Broker,
    name: str,
    *,
    ops: Sequence[ConfigOp] | None,
    replace: Sequence[tuple[str, str | None]] | None,
    validate_only: bool,
) -> None:
    """One GROUP resource: the group's new configs are validated against the broker's bounds
    (Kafka's ``GroupConfigManager.validate``), persisted with the other dynamic configs, then
    installed; the coordinator reads them at the group's next heartbeat."""
    if replace is not None:
        _reject_duplicates([key for key, _ in replace])
        nulls = [key for key, value in replace if value is None]
        if nulls:
            raise AdminError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    with ADMIN_LOCK:
        current = broker.group_configs
        if ops is not None:
            overrides = _group_ops(current.overrides_of(name), ops)
        else:
            overrides = {key: value for key, value in replace or () if value is not None}
        if not name:
            raise AdminError(ErrorCode.invalid_request, "Default group resources are not allowed.")
        try:
            updated = current.with_group(name, overrides, broker.broker_config)
        except errors.ConfigError as exc:
            raise AdminError(ErrorCode.invalid_config, str(exc)) from None
        if validate_only:
            return
        if broker.log_manager is not None:
            save_dynamic_configs(
                broker.log_manager.data_dir, broker.broker_config, updated, write=atomic_write_bytes
            )
        broker.group_configs = updated


def alter_resource(
    broker: Broker,
    resource_type: int,
    name: str,
    *,
    ops: Sequence[ConfigOp] | None = None,
    replace: Sequence[tuple[str, str | None]] | None = None,
    validate_only: bool,
) -> None:
    """Apply one resource of an alter request: ``ops`` (incremental) or ``replace`` (legacy).

    A broker or group change is persisted before it is installed (:meth:`Broker.update_broker_config`
    then tells the config listeners, e.g. the cleaner), so a crash never loses an acknowledged
    change. A topic change goes through the log manager.
    """
    if resource_type == ResourceType.GROUP:
        _alter_group(broker, name, ops=ops, replace=replace, validate_only=validate_only)
        return
    if resource_type not in (ResourceType.TOPIC, ResourceType.BROKER):
        if resource_type == ResourceType.BROKER_LOGGER:
            raise AdminError(ErrorCode.invalid_request, "kompakt has no dynamically configurable loggers.")
        raise AdminError(ErrorCode.invalid_request, f"Unexpected resource type {resource_type}.")
    topic = resource_type == ResourceType.TOPIC
    replaced: dict[str, str] | None = None
    if replace is not None:
        _reject_duplicates([key for key, _ in replace])
        _null_values(replace, "topic configs" if topic else "broker configs")
        replaced = {key: value for key, value in replace if value is not None}
    with ADMIN_LOCK:
        if topic:
            meta = broker.logs.topics().get(name)
            if meta is None:
                raise AdminError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
            changes = apply_incremental(meta.configs, ops, topic=True) if ops is not None else None
            alter_topic(
                broker.logs,
                broker.broker_config,
                name,
                changes,
                replace=replaced,
                validate_only=validate_only,
            )
            return
        current = broker.broker_config
        cluster_default = broker_target(name, broker.node_id)
        layer = current.dynamic_default if cluster_default else current.dynamic
        changes = apply_incremental(layer, ops, topic=False) if ops is not None else None
        new = alter_broker(current, broker.node_id, name, changes, replace=replaced)
        if validate_only:
            return
        if broker.log_manager is not None:
            save_dynamic_configs(
                broker.log_manager.data_dir, new, broker.group_configs, write=atomic_write_bytes
            )
        broker.update_broker_config(new)
