"""``kompakt group list|describe|reset-offsets`` against any Kafka-compatible cluster.

``describe`` joins three answers a user otherwise has to assemble by hand: the group's state and
members (DescribeGroups), its committed offsets (OffsetFetch) and the partitions' end offsets
(ListOffsets), giving the lag per partition. ``reset-offsets`` follows Kafka's own tool: a dry run
unless ``--execute``, and only on a group with no active members, because a live member would
overwrite the new offsets with its next commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import typer
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from rich.text import Text

from kompakt.cli.cluster import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_TIMEOUT_S,
    KAFKA_ADMIN,
    BootstrapOption,
    Cluster,
    OutputOption,
    TimeoutOption,
    parse_timestamp_ms,
)
from kompakt.cli.output import CliError, CliUsageError, OutputFormat, console, emit, emit_json

group_app = typer.Typer(
    help="List and describe consumer groups, and reset their committed offsets.",
    no_args_is_help=True,
)

_INACTIVE = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)


def register(app: typer.Typer) -> None:
    """Attach ``kompakt group``."""
    app.add_typer(group_app, name="group")


def _state_name(state: Any) -> str:
    return str(getattr(state, "name", state))


@group_app.command("list")
def list_command(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List the cluster's consumer groups with their states."""
    cluster = Cluster(bootstrap, timeout)
    admin = cluster.admin()
    cluster.metadata(admin)
    result = cluster.wait(admin.list_consumer_groups(request_timeout=timeout), "cannot list groups")
    rows = [
        {"group": g.group_id, "state": _state_name(g.state), "simple": bool(g.is_simple_consumer_group)}
        for g in sorted(result.valid, key=lambda g: g.group_id)
    ]
    emit(rows, output, columns=["group", "state", "simple"])


def _describe_group(cluster: Cluster, admin: Any, group: str) -> Any:
    futures = admin.describe_consumer_groups([group], request_timeout=cluster.timeout_s)
    description = cluster.wait(futures[group], f"cannot describe group {group!r}")
    return description


def _committed(cluster: Cluster, admin: Any, group: str) -> dict[tuple[str, int], int]:
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=cluster.timeout_s
    )
    result = cluster.wait(futures[group], f"cannot fetch the offsets of group {group!r}")
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions or []
        if tp.error is None and tp.offset >= 0
    }


def _offsets(
    cluster: Cluster, admin: Any, partitions: Iterable[tuple[str, int]], spec: Any
) -> dict[tuple[str, int], int]:
    """Offsets of one kind (earliest, latest, for a timestamp) for each partition."""
    request = {TopicPartition(t, p): spec for t, p in partitions}
    if not request:
        return {}
    futures = admin.list_offsets(request, request_timeout=cluster.timeout_s)
    return {
        (tp.topic, tp.partition): int(cluster.wait(f, f"cannot list offsets of {tp.topic}").offset)
        for tp, f in futures.items()
    }


@group_app.command("describe")
def describe_command(
    group: Annotated[str, typer.Argument(help="Consumer group id.")],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """State, protocol, members with assignments, and committed / end offsets with lag."""
    info = group_info(Cluster(bootstrap, timeout), group)
    if output is OutputFormat.JSON:
        emit_json(info)
        return
    members = info["members"]
    console.print(
        Text(
            f"group {group}: state {info['state']}, protocol {info['protocol'] or '-'}, "
            f"coordinator {info['coordinator'] or '-'}, {len(members)} members"
        )
    )
    if members:
        emit(
            _member_rows(info, verbose=True),
            output,
            columns=["member_id", "client_id", "host", "assignment"],
            title="members",
        )
    emit(
        info["offsets"],
        output,
        columns=["topic", "partition", "committed", "end", "lag", "member_id"],
        title="offsets",
    )


def group_info(cluster: Cluster, group: str) -> dict[str, Any]:
    """What ``describe`` shows of one group: state, members and their assignments, and per
    partition the committed offset, the end offset and the lag; a group that is neither known
    nor has offsets is a :class:`CliError`."""
    admin = cluster.admin()
    cluster.metadata(admin)
    description = _describe_group(cluster, admin, group)
    committed = _committed(cluster, admin, group)
    if description.state == ConsumerGroupState.DEAD and not committed:
        raise CliError(f"consumer group {group!r} does not exist")
    owner: dict[tuple[str, int], str] = {}
    members = []
    for member in description.members:
        assigned = sorted((tp.topic, tp.partition) for tp in (member.assignment.topic_partitions or []))
        for tp in assigned:
            owner[tp] = member.member_id
        members.append(
            {
                "member_id": member.member_id,
                "client_id": member.client_id,
                "host": member.host,
                "assignment": [{"topic": t, "partition": p} for t, p in assigned],
            }
        )
    partitions = sorted(set(committed) | set(owner))
    ends = _offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.latest())
    offsets = []
    for topic, part in partitions:
        current = committed.get((topic, part))
        end = ends.get((topic, part))
        offsets.append(
            {
                "topic": topic,
                "partition": part,
                "committed": current,
                "end": end,
                "lag": None if current is None or end is None else max(0, end - current),
                "member_id": owner.get((topic, part)),
            }
        )
    coordinator = description.coordinator
    return {
        "group": group,
        "state": _state_name(description.state),
        "protocol": description.partition_assignor or None,
        "simple": bool(description.is_simple_consumer_group),
        "coordinator": None if coordinator is None else f"{coordinator.host}:{coordinator.port}",
        "coordinator_id": None if coordinator is None else coordinator.id,
        "members": members,
        "offsets": offsets,
    }


def _member_rows(info: dict[str, Any], *, verbose: bool) -> list[dict[str, Any]]:
    rows = []
    for m in info["members"]:
        row = {**m, "group": info["group"], "partitions": len(m["assignment"])}
        if verbose:
            row["assignment"] = ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"])
        else:
            del row["assignment"]
        rows.append(row)
    return rows


def describe_view(
    groups: list[str], view: str, *, verbose: bool, bootstrap: str, timeout: float, output: OutputFormat
) -> None:
    """``kafka-consumer-groups --describe`` with ``--offsets`` (the default), ``--members``
    (``--verbose`` adds each member's assignment) or ``--state``: one table over the groups,
    with the rows and columns Kafka's ``ConsumerGroupCommand`` prints for that view."""
    cluster = Cluster(bootstrap, timeout)
    infos = [group_info(cluster, group) for group in groups]
    if view == "state":
        rows = [
            {
                "group": i["group"],
                "coordinator": f"{i['coordinator']} ({i['coordinator_id']})" if i["coordinator"] else None,
                "assignment_strategy": i["protocol"],
                "state": i["state"],
                "members": len(i["members"]),
            }
            for i in infos
        ]
        columns = ["group", "coordinator", "assignment_strategy", "state", "members"]
    elif view == "members":
        rows = [row for i in infos for row in _member_rows(i, verbose=verbose)]
        columns = ["group", "member_id", "host", "client_id", "partitions"] + (
            ["assignment"] if verbose else []
        )
    else:
        rows = [{"group": i["group"], **o} for i in infos for o in i["offsets"]]
        columns = ["group", "topic", "partition", "committed", "end", "lag", "member_id"]
    if output is OutputFormat.JSON:
        emit_json(rows)
        return
    if view == "members":
        for i in infos:
            if not i["members"]:
                console.print(Text(f"Consumer group '{i['group']}' has no active members."))
    if rows:
        emit(rows, output, columns=columns)


def topic_specs(cluster: Cluster, admin: Any, topics: list[str]) -> list[tuple[str, int]]:
    """``T`` (every partition) or ``T:0,2`` (those partitions), as Kafka's ``--topic`` accepts."""
    result: list[tuple[str, int]] = []
    meta = cluster.metadata(admin)
    for spec in topics:
        name, sep, parts = spec.partition(":")
        tmeta = meta.topics.get(name)
        if tmeta is None or tmeta.error is not None:
            raise CliError(f"topic {name!r} does not exist")
        available = sorted(tmeta.partitions)
        if not sep:
            result += [(name, p) for p in available]
            continue
        try:
            wanted = [int(p) for p in parts.split(",") if p.strip()]
        except ValueError:
            raise CliUsageError(f"--topic expects TOPIC or TOPIC:P1,P2, got {spec!r}") from None
        missing = [p for p in wanted if p not in available]
        if missing:
            raise CliError(f"topic {name!r} has no partition {missing[0]}")
        result += [(name, p) for p in wanted]
    return sorted(set(result))


@group_app.command("reset-offsets")
def reset_offsets_command(
    group: Annotated[str, typer.Argument(help="Consumer group id.")],
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", "-t", help="TOPIC or TOPIC:P1,P2; repeatable."),
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has committed offsets for.")
    ] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="The log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="The end offset.")] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", help="This offset (clamped to the partition's range).")
    ] = None,
    to_datetime: Annotated[
        str | None,
        typer.Option("--to-datetime", help="First offset at or after MS or an ISO date-time (naive = UTC)."),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Apply the change (without it, only show the plan).")
    ] = False,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="Move the committed offsets by N (clamped to the range).")
    ] = None,
    by_duration: Annotated[
        str | None,
        typer.Option("--by-duration", help="First offset at or after now minus an ISO duration (P1DT2H)."),
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Move a group's committed offsets; a dry run unless --execute, and only for an empty group."""
    from kompakt.cli import reset_shift

    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None]
    chosen += [shift_by is not None, by_duration is not None]
    if sum(chosen) != 1:
        raise CliUsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by, "
            "--by-duration"
        )
    relative = reset_shift.Relative.of(shift_by, by_duration)
    if bool(topic) == all_topics:
        raise CliUsageError("give --topic (repeatable) or --all-topics")
    at_ms = None if to_datetime is None else parse_timestamp_ms(to_datetime, "--to-datetime")
    cluster = Cluster(bootstrap, timeout)
    admin = cluster.admin()
    cluster.metadata(admin)
    description = _describe_group(cluster, admin, group)
    if description.state not in _INACTIVE or description.members:
        raise CliError(
            f"assignments can only be reset if the group {group!r} is inactive, "
            f"but the current state is {_state_name(description.state)}"
        )
    committed = _committed(cluster, admin, group)
    if all_topics:
        partitions = sorted(committed)
        if not partitions:
            raise CliError(f"group {group!r} has no committed offsets to reset")
    else:
        partitions = topic_specs(cluster, admin, topic or [])
    earliest = _offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.earliest())
    latest = _offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.latest())
    if to_earliest:
        target = earliest
    elif to_latest:
        target = latest
    elif to_offset is not None:
        target = {tp: min(max(to_offset, earliest[tp]), latest[tp]) for tp in partitions}
    elif relative is not None:
        target = relative.target(
            partitions,
            committed,
            earliest,
            latest,
            lambda at_ms: _offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.for_timestamp(at_ms)),
            console.file if output is OutputFormat.TABLE else None,
        )
    else:
        assert at_ms is not None
        found = _offsets(cluster, admin, partitions, KAFKA_ADMIN.OffsetSpec.for_timestamp(at_ms))
        # No record at or after the time: the end, as Kafka's tool does.
        target = {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}
    plan = [
        {"topic": t, "partition": p, "current": committed.get((t, p)), "new": target[(t, p)]}
        for t, p in partitions
    ]
    if execute:
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, target[(t, p)]) for t, p in partitions]
        )
        futures = admin.alter_consumer_group_offsets([request], request_timeout=timeout)
        result = cluster.wait(futures[group], f"cannot reset the offsets of group {group!r}")
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                error: KafkaError = tp.error
                raise CliError(f"cannot reset {tp.topic}-{tp.partition}: {error.name()}: {error.str()}")
    if output is OutputFormat.JSON:
        emit_json({"group": group, "executed": execute, "partitions": plan})
        return
    title = (
        f"offsets of group {group} reset"
        if execute
        else f"dry run: offsets group {group} would get (nothing changed; add --execute)"
    )
    emit(plan, output, columns=["topic", "partition", "current", "new"], title=title)
