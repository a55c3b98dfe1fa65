"""``kompakt kafka-acls``: Kafka's ``kafka-acls.sh`` (``AclCommand``) spelled as Kafka spells it.

Adds, removes and lists ACLs on any Kafka-compatible cluster through the Admin API (CreateAcls,
DescribeAcls, DeleteAcls), with Kafka's flags (``--add``/``--remove``/``--list``,
``--allow-principal``/``--deny-principal``, ``--allow-host``/``--deny-host``, ``--operation``,
``--topic``/``--group``/``--cluster``/``--transactional-id``, ``--resource-pattern-type``,
``--producer``/``--consumer``/``--idempotent``, ``--principal``, ``--force``) and Kafka's output
lines (``Adding ACLs for resource `ResourcePattern(...)`:`` then the entries, and
``Current ACLs for resource ...``), so scripts written against Kafka's tool read the same text.

``--command-config`` takes Kafka's admin-client properties for a secured cluster (read as
``kafka-configs`` reads them, :func:`kompakt.cli.scram_cmd.client_properties`: the security
protocol, the SASL mechanism and credentials of ``sasl.jaas.config``, PEM trust and key stores).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException

from kompakt.cli.cluster import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    DEFAULT_TIMEOUT_S,
    KAFKA_ADMIN,
    Cluster,
    describe_exception,
)
from kompakt.cli.kafka_tools import ToolParser, tool
from kompakt.cli.output import CliError, CliUsageError, console
from kompakt.cli.scram_cmd import client_properties

# confluent-kafka's admin types, untyped for mypy (as kafka_tools reads them).
AclBinding: Any = KAFKA_ADMIN.AclBinding
AclBindingFilter: Any = KAFKA_ADMIN.AclBindingFilter
AclOperation: Any = KAFKA_ADMIN.AclOperation
AclPermissionType: Any = KAFKA_ADMIN.AclPermissionType
ResourcePatternType: Any = KAFKA_ADMIN.ResourcePatternType
ResourceType: Any = KAFKA_ADMIN.ResourceType

CLUSTER_NAME = "kafka-cluster"
_OPERATIONS = {
    "all": AclOperation.ALL, "read": AclOperation.READ, "write": AclOperation.WRITE,
    "create": AclOperation.CREATE, "delete": AclOperation.DELETE, "alter": AclOperation.ALTER,
    "describe": AclOperation.DESCRIBE, "clusteraction": AclOperation.CLUSTER_ACTION,
    "describeconfigs": AclOperation.DESCRIBE_CONFIGS, "alterconfigs": AclOperation.ALTER_CONFIGS,
    "idempotentwrite": AclOperation.IDEMPOTENT_WRITE,
}  # fmt: skip
_PATTERN_TYPES = {
    "literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED,
    "any": ResourcePatternType.ANY, "match": ResourcePatternType.MATCH,
}  # fmt: skip
#: (resource type, name, pattern type)
Resource = tuple[Any, str, Any]
#: (principal, host, operation, permission)
Entry = tuple[str, str, Any, Any]


def _out(text: str) -> None:
    """One of Kafka's lines, verbatim (tabs and long lines as Kafka prints them, not wrapped)."""
    console.file.write(text + "\n")
    console.file.flush()


def _pattern_text(resource: Resource) -> str:
    rtype, name, ptype = resource
    # confluent-kafka calls resource type 4 BROKER; Kafka (and its tool's output) calls it CLUSTER.
    type_name = "CLUSTER" if rtype == ResourceType.BROKER else rtype.name
    return f"ResourcePattern(resourceType={type_name}, name={name}, patternType={ptype.name})"


def _entry_text(entry: Entry) -> str:
    principal, host, operation, permission = entry
    return (
        f"(principal={principal}, host={host}, operation={operation.name}, permissionType={permission.name})"
    )


def _parser() -> ToolParser:
    parser = ToolParser(
        prog="kompakt kafka-acls", description="Kafka's kafka-acls: add, remove and list ACLs."
    )
    parser.add_argument("--bootstrap-server", default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP))
    parser.add_argument("--bootstrap-controller", help="Not supported: kompakt has no separate controllers.")
    parser.add_argument(
        "--command-config", help="Admin client properties (security.protocol, SASL credentials)."
    )
    for action in ("add", "remove", "list"):
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--delegation-token", action="append", default=[])
    parser.add_argument("--user-principal", action="append", default=[])
    parser.add_argument("--resource-pattern-type", default=None)
    parser.add_argument("--allow-principal", action="append", default=[])
    parser.add_argument("--deny-principal", action="append", default=[])
    parser.add_argument("--principal", action="append", default=[])
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--deny-host", action="append", default=[])
    parser.add_argument("--operation", action="append", default=[])
    parser.add_argument("--producer", action="store_true")
    parser.add_argument("--consumer", action="store_true")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="kompakt: seconds to wait.")
    return parser


def _resources(args: argparse.Namespace, pattern_type: ResourcePatternType) -> list[Resource]:
    found: list[Resource] = [(ResourceType.TOPIC, name, pattern_type) for name in args.topic]
    found += [(ResourceType.GROUP, name, pattern_type) for name in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, name, pattern_type) for name in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.BROKER, CLUSTER_NAME, pattern_type))
    if args.delegation_token or args.user_principal:
        raise CliUsageError(
            "kafka-acls: --delegation-token and --user-principal are not supported by kompakt"
        )
    return found


def _operations(args: argparse.Namespace) -> list[Any]:
    names = args.operation or (["all"] if not (args.producer or args.consumer) else [])
    operations = []
    for name in names:
        operation = _OPERATIONS.get(name.replace("-", "").replace("_", "").lower())
        if operation is None:
            raise CliUsageError(f"kafka-acls: unknown --operation {name!r} (one of {', '.join(_OPERATIONS)})")
        operations.append(operation)
    return operations


def _principals(args: argparse.Namespace) -> list[tuple[str, Any]]:
    for principal in (*args.allow_principal, *args.deny_principal, *args.principal):
        if ":" not in principal:
            raise CliUsageError(f"kafka-acls: principal {principal!r} must be TYPE:NAME, e.g. User:alice")
    return [(p, AclPermissionType.ALLOW) for p in args.allow_principal] + [
        (p, AclPermissionType.DENY) for p in args.deny_principal
    ]


def _entries(args: argparse.Namespace, operations: Iterable[Any]) -> list[Entry]:
    """Kafka's ``getAcls``: every principal × host × operation; hosts default to ``*``."""
    entries: list[Entry] = []
    for principal, permission in _principals(args):
        hosts = (args.allow_host if permission == AclPermissionType.ALLOW else args.deny_host) or ["*"]
        for host in hosts:
            entries += [(principal, host, op, permission) for op in operations]
    return entries


def _bindings_to_add(args: argparse.Namespace) -> dict[Resource, list[Entry]]:
    """``AclCommand.getResourceToAcls``, with the ``--producer``/``--consumer`` conveniences."""
    pattern_type = _PATTERN_TYPES.get((args.resource_pattern_type or "literal").lower())
    if pattern_type not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
        raise CliUsageError("kafka-acls: --add/--remove take --resource-pattern-type LITERAL or PREFIXED")
    if not (args.producer or args.consumer):
        resources = _resources(args, pattern_type)
        if not resources:
            raise CliUsageError(
                "kafka-acls: give a resource: --topic, --group, --cluster or --transactional-id"
            )
        operations = _operations(args)
        return {resource: _entries(args, operations) for resource in resources}
    chosen: dict[Resource, list[Entry]] = defaultdict(list)
    topics = [(ResourceType.TOPIC, name, pattern_type) for name in args.topic]
    if not topics:
        raise CliUsageError("kafka-acls: --producer and --consumer need --topic")
    if args.producer:
        for topic in topics:
            chosen[topic] += _entries(args, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
        for txn in args.transactional_id:
            chosen[(ResourceType.TRANSACTIONAL_ID, txn, pattern_type)] += _entries(
                args, [AclOperation.WRITE, AclOperation.DESCRIBE]
            )
        if args.idempotent:
            chosen[(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL)] += _entries(
                args, [AclOperation.IDEMPOTENT_WRITE]
            )
    if args.consumer:
        if not args.group:
            raise CliUsageError("kafka-acls: --consumer needs --group")
        for topic in topics:
            chosen[topic] += _entries(args, [AclOperation.READ, AclOperation.DESCRIBE])
        for group in args.group:
            chosen[(ResourceType.GROUP, group, pattern_type)] += _entries(args, [AclOperation.READ])
    # --producer and --consumer both grant DESCRIBE on the topic: each entry once.
    return {resource: list(dict.fromkeys(entries)) for resource, entries in chosen.items()}


def _binding(resource: Resource, entry: Entry) -> Any:
    return AclBinding(resource[0], resource[1], resource[2], entry[0], entry[1], entry[2], entry[3])


def _wait(cluster: Cluster, future: Any, what: str) -> Any:
    try:
        return future.result(timeout=cluster.timeout_s)
    except KafkaException as exc:
        raise CliError(f"{what} failed: {describe_exception(exc)}") from None
    except TimeoutError as exc:
        raise cluster.unreachable(exc) from None


def _list(cluster: Cluster, admin: Any, selectors: list[Any]) -> None:
    """``Current ACLs for resource ...`` for every resource the filters select."""
    by_resource: dict[Resource, list[Entry]] = defaultdict(list)
    for selector in selectors:
        for b in _wait(
            cluster, admin.describe_acls(selector, request_timeout=cluster.timeout_s), "DescribeAcls"
        ):
            entry = (b.principal, b.host, b.operation, b.permission_type)
            resource = (b.restype, b.name, b.resource_pattern_type)
            if entry not in by_resource[resource]:
                by_resource[resource].append(entry)
    for resource, entries in by_resource.items():
        lines = "\n".join(f"\t{_entry_text(e)}" for e in entries)
        _out(f"Current ACLs for resource `{_pattern_text(resource)}`: \n {lines} \n")


def _filters(args: argparse.Namespace, default_pattern: str) -> list[Any]:
    pattern_type = _PATTERN_TYPES.get((args.resource_pattern_type or default_pattern).lower())
    if pattern_type is None:
        raise CliUsageError("kafka-acls: --resource-pattern-type is one of LITERAL, PREFIXED, ANY, MATCH")
    principals = args.principal or [None]
    resources: list[tuple[ResourceType, str | None, ResourcePatternType]] = list(
        _resources(args, pattern_type)
    )
    if not resources:
        resources = [(ResourceType.ANY, None, ResourcePatternType.ANY)]
    return [
        AclBindingFilter(rtype, name, ptype, principal, None, AclOperation.ANY, AclPermissionType.ANY)
        for rtype, name, ptype in resources
        for principal in principals
    ]


@tool("kafka-acls", "Add, remove and list ACLs")
def kafka_acls(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise CliUsageError("kafka-acls: give exactly one of --add, --remove, --list")
    if args.bootstrap_controller:
        raise CliUsageError("kafka-acls: --bootstrap-controller is not supported; use --bootstrap-server")
    extra = client_properties(args.command_config) if args.command_config else {}
    cluster = Cluster(str(args.bootstrap_server), args.timeout, extra=extra)
    admin = cluster.admin()
    action = actions[0]
    if action == "list":
        _list(cluster, admin, _filters(args, "literal"))  # AclCommand: LITERAL unless given
        return
    to_change = _bindings_to_add(args)
    if action == "add":
        if any(not entries for entries in to_change.values()):
            raise CliUsageError(
                "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
            )
        for resource, entries in to_change.items():
            lines = "\n".join(f"\t{_entry_text(e)}" for e in entries)
            _out(f"Adding ACLs for resource `{_pattern_text(resource)}`: \n {lines} \n")
            bindings = [_binding(resource, e) for e in dict.fromkeys(entries)]
            for future in admin.create_acls(bindings, request_timeout=cluster.timeout_s).values():
                _wait(cluster, future, "CreateAcls")
        _list(cluster, admin, [_resource_filter(r) for r in to_change])
        return
    for resource, entries in to_change.items():
        if not args.force and not _confirm(resource, entries):
            continue
        if entries:
            selectors = [
                AclBindingFilter(resource[0], resource[1], resource[2], p, h, op, perm)
                for p, h, op, perm in entries
            ]
        else:
            selectors = [_resource_filter(resource)]
        for future in admin.delete_acls(selectors, request_timeout=cluster.timeout_s).values():
            _wait(cluster, future, "DeleteAcls")
    _list(cluster, admin, [_resource_filter(r) for r in to_change])


def _resource_filter(resource: Resource) -> Any:
    return AclBindingFilter(
        resource[0], resource[1], resource[2], None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def _confirm(resource: Resource, entries: list[Entry]) -> bool:
    if entries:
        listed = "\n".join(f"\t{_entry_text(e)}" for e in entries)
        where = _pattern_text(resource)
        question = f"Are you sure you want to remove ACLs: \n {listed} \n from resource `{where}`? y/n"
    else:
        question = f"Are you sure you want to delete all ACLs for resource `{_pattern_text(resource)}`? (y/n)"
    _out(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")
