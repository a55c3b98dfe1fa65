"""``kompakt log dump|verify|repair|explain|compact``: offline tools over kompakt or Apache Kafka log files.

dump, verify, explain and a dry-run repair only read files (no lock, no recovery), so they work on a
live broker's directory and on a damaged one. compact and ``repair --execute`` rewrite files and
therefore take the directory's lock: a directory held by a running broker is refused.

kompakt directories carry their topic configs in ``kompakt-topics.json``; a Kafka 4 directory in
its metadata log, ``__cluster_metadata-0`` (read by :mod:`kompakt.cli.kafka_dir`), which is KRaft's
log, not a topic: dump and verify read it, the other commands leave it out. An older Kafka
directory's configs are given with ``--config k=v`` (or explain reads them from a running cluster
with ``--bootstrap``); ``--config`` wins everywhere.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from kompakt.cleaner.readers import FixedPositions
from kompakt.cli.broker_defaults import (
    BrokerDefaults,
    ClusterConfigs,
    cluster_configs,
    resolve_broker_defaults,
)
from kompakt.cli.kafka_dir import load_metadata, note, note_hidden_internal, stray_partitions
from kompakt.cli.output import (
    CliError,
    CliUsageError,
    OutputFormat,
    bootstrap_value,
    console,
    emit_json,
    emit_table,
    err_console,
)
from kompakt.cli.warmup_cmd import announce_kernel_compile
from kompakt.config.broker import BrokerConfig
from kompakt.config.tables import TOPIC_CONFIGS
from kompakt.errors import ConfigError, LogDirectoryError
from kompakt.inspect.log_files import (
    BatchInfo,
    LogTarget,
    PartitionDir,
    RecordInfo,
    SegmentTail,
    is_empty_internal,
    iter_segment,
    metadata_payload,
    resolve_target,
    topic_partitions,
    verify_target,
)
from kompakt.log.cluster_metadata import TOPIC_ORIGIN
from kompakt.log.config import LogConfig
from kompakt.log.topic_store import CorruptTopicStoreError, TopicStore

log_app = typer.Typer(
    help="Offline tools for log directories (kompakt or Apache Kafka).", no_args_is_help=True
)

OutputOpt = Annotated[OutputFormat, typer.Option("--output", "-o", help="table or json.")]
ConfigOpt = Annotated[
    list[str] | None, typer.Option("--config", help="A topic config k=v (repeatable); wins over stored ones.")
]
BrokerConfigOpt = Annotated[
    list[str] | None, typer.Option("--broker-config", help="A broker config k=v (repeatable).")
]
ServerPropertiesOpt = Annotated[
    Path | None,
    typer.Option(
        "--server-properties",
        help="The broker's server.properties: its log.* defaults (log.cleanup.policy=compact, ...) "
        "and cleaner settings apply; --broker-config wins over it.",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the ``log`` group (idempotent, so tests may build the app more than once)."""
    if any(group.name == "log" for group in app.registered_groups):
        return
    app.add_typer(log_app, name="log")


# --------------------------------------------------------------------------------------------
# Shared helpers


def _target(path: Path, *, snapshots: bool = False) -> LogTarget:
    try:
        return resolve_target(path, snapshots=snapshots)
    except LogDirectoryError as exc:
        raise CliUsageError(str(exc)) from None


def _topic_partitions(target: LogTarget) -> tuple[PartitionDir, ...]:
    """The topics' partitions of ``target``; naming KRaft's metadata log itself is a usage error."""
    partitions = topic_partitions(target)
    if target.partitions and not partitions and target.kind != "data":
        raise CliUsageError(
            f"{target.path} is KRaft's metadata log, not a topic: kompakt log dump "
            "--cluster-metadata-decoder shows its records"
        )
    return partitions


def parse_pairs(items: list[str] | None, option: str) -> dict[str, str]:
    """``k=v`` pairs; anything else is a usage error naming the option."""
    result: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliUsageError(f"{option} expects name=value, got {item!r}")
        result[name.strip()] = value.strip()
    return result


def stored_topic_configs(data_dir: Path | None) -> dict[str, dict[str, str]]:
    """Topic overrides kompakt stored in ``kompakt-topics.json`` (none for a Kafka directory)."""
    if data_dir is None:
        return {}
    try:
        return {name: dict(meta.configs) for name, meta in TopicStore(data_dir).load().items()}
    except CorruptTopicStoreError as exc:
        raise CliError(str(exc)) from None


def render_bytes(data: bytes | None) -> str | None:
    """UTF-8 text when it is text, else ``base64:...``; None stays None (a null, not empty)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def _show(value: str | None) -> str:
    """For tables: null as ``null``, strings quoted so an empty value reads ``""``, and every
    character a terminal would act on rather than print escaped (``\x00``, ``\n``, ``\x1b``):
    a control record's key is four bytes of valid UTF-8, and printed raw it moves the cursor."""
    if value is None:
        return "null"
    return '"' + "".join(c if c.isprintable() else repr(c)[1:-1] for c in value) + '"'


def iso(ms: int | None) -> str:
    from kompakt.inspect.explain import iso_ms

    return iso_ms(ms)


# --------------------------------------------------------------------------------------------
# dump


def _record_dict(r: RecordInfo, *, metadata: bool = False, is_control: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": render_bytes(r.key),
        "value": render_bytes(r.value),
        "headers": [{"key": k, "value": render_bytes(v)} for k, v in r.headers],
    }
    if metadata:
        row["payload"] = metadata_payload(r, is_control=is_control)
    return row


def _batch_dict(b: BatchInfo, offsets_only: bool, metadata: bool = False) -> dict[str, Any]:
    if offsets_only:
        return {
            "base_offset": b.base_offset,
            "last_offset": b.last_offset,
            "count": b.count,
            "position": b.position,
        }
    row: dict[str, Any] = {
        "segment": b.segment.name,
        "position": b.position,
        "size": b.size,
        "magic": b.magic,
        "base_offset": b.base_offset,
        "last_offset": b.last_offset,
        "count": b.count,
        "crc": b.crc,
        "crc_valid": b.crc_valid,
        "codec": b.codec,
        "timestamp_type": b.timestamp_type,
        "base_timestamp": b.base_timestamp,
        "max_timestamp": b.max_timestamp,
        "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch,
        "base_sequence": b.base_sequence,
        "partition_leader_epoch": b.partition_leader_epoch,
        "is_transactional": b.is_transactional,
        "is_control": b.is_control,
        "control_type": b.control_type,
        "delete_horizon_ms": b.delete_horizon_ms,
    }
    if b.error:
        row["error"] = b.error
    if b.records is not None:
        row["records"] = [_record_dict(r, metadata=metadata, is_control=b.is_control) for r in b.records]
    return row


@log_app.command("dump")
def dump_command(
    path: Annotated[Path, typer.Argument(help="A segment file, a partition directory or a data directory.")],
    records: Annotated[bool, typer.Option("--records", help="Also show every record.")] = False,
    offsets_only: Annotated[bool, typer.Option("--offsets-only", help="Only batch offsets.")] = False,
    max_batches: Annotated[
        int | None, typer.Option("--max-batches", help="Stop after N batches per partition.")
    ] = None,
    cluster_metadata_decoder: Annotated[
        bool,
        typer.Option(
            "--cluster-metadata-decoder",
            help="Decode the records of KRaft's metadata log (__cluster_metadata-0, its segments and "
            ".checkpoint snapshots) as Kafka's dump tool does; implies --records.",
        ),
    ] = False,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Show batches (and with --records, records) like Kafka's dump-log tool."""
    target = _target(path, snapshots=True)
    if max_batches is not None and max_batches < 0:
        raise CliUsageError("--max-batches must be >= 0")
    if cluster_metadata_decoder and not offsets_only:
        records = True
    result: list[dict[str, Any]] = []
    for part in target.partitions:
        segments = (target.segment,) if target.segment is not None else part.segments
        batches: list[dict[str, Any]] = []
        tails: list[dict[str, Any]] = []
        for segment in segments:
            if segment is None:
                continue
            for item in iter_segment(segment.path, with_records=records and not offsets_only):
                if max_batches is not None and len(batches) >= max_batches:
                    break
                if isinstance(item, SegmentTail):
                    tails.append(
                        {
                            "segment": item.segment.name,
                            "position": item.position,
                            "bytes": item.length,
                            "reason": "zero padding" if item.all_zero else item.reason,
                        }
                    )
                else:
                    batches.append(_batch_dict(item, offsets_only, cluster_metadata_decoder))
        result.append({"partition": part.name, "path": str(part.path), "batches": batches, "trailing": tails})
    if output is OutputFormat.JSON:
        emit_json(result)
        return
    for entry in result:
        _dump_table(entry, records and not offsets_only, offsets_only, cluster_metadata_decoder)


def _payload_text(payload: Any) -> str:
    if payload is None:
        return ""
    return payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))


def _dump_table(entry: dict[str, Any], records: bool, offsets_only: bool, metadata: bool = False) -> None:
    if offsets_only:
        emit_table(entry["batches"], title=f"{entry['partition']} ({entry['path']})")
    else:
        rows = []
        for b in entry["batches"]:
            flags = [f for f, on in (("txn", b["is_transactional"]), ("control", b["is_control"])) if on]
            rows.append(
                {
                    "segment": int(b["segment"][:20]),
                    "position": b["position"],
                    "offsets": f"{b['base_offset']}..{b['last_offset']}",
                    "count": b["count"],
                    "size": b["size"],
                    "crc": "ok" if b["crc_valid"] else "BAD",
                    "codec": b["codec"],
                    "ts type": {"CREATE_TIME": "create", "LOG_APPEND_TIME": "append"}.get(
                        b["timestamp_type"], "-" if b["timestamp_type"] is None else b["timestamp_type"]
                    ),
                    "max timestamp": b["max_timestamp"],
                    "producer": f"{b['producer_id']}/{b['producer_epoch']}/{b['base_sequence']}",
                    "flags": ",".join(flags) + (f" {b['control_type']}" if b["control_type"] else ""),
                    "delete horizon": "-" if b["delete_horizon_ms"] is None else iso(b["delete_horizon_ms"]),
                }
            )
        emit_table(rows, title=f"{entry['partition']} ({entry['path']})")
        if records:
            rec_rows = [
                {
                    "offset": r["offset"],
                    "timestamp": r["timestamp"],
                    "key": _show(r["key"]),
                    "value": _payload_text(r["payload"]) if metadata else _show(r["value"]),
                    "headers": ", ".join(f"{h['key']}={_show(h['value'])}" for h in r["headers"]),
                }
                for b in entry["batches"]
                for r in b.get("records", [])
            ]
            value = "payload" if metadata else "value"
            for row in rec_rows:
                row[value] = row.pop("value")
            emit_table(rec_rows, columns=["offset", "timestamp", "key", value, "headers"], title="records")
    for tail in entry["trailing"]:
        console.print(
            f"trailing bytes in {tail['segment']} at byte {tail['position']}: "
            f"{tail['bytes']} bytes ({tail['reason']})",
            markup=False,
        )


# --------------------------------------------------------------------------------------------
# verify


@log_app.command("verify")
def verify_command(
    path: Annotated[Path, typer.Argument(help="A segment file, a partition directory or a data directory.")],
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Check CRCs, framing, offsets, indexes and checkpoints; exit 1 on any defect.

    Also lists the quarantine files beside the segments (bytes recovery or ``log repair`` cut
    off a log): they are not part of the log and not defects, but an operator should know.
    """
    target = _target(path)
    report = verify_target(target)
    defects = report.defects
    quarantine = _quarantine_rows(target)
    if output is OutputFormat.JSON:
        emit_json(
            {
                "ok": report.ok,
                "notes": list(report.notes),
                "quarantine": quarantine,
                "path": str(target.path),
                "partitions": [
                    {
                        "partition": c.partition.name,
                        "segments": len(c.partition.segments),
                        "batches": c.batches,
                        "records": c.records,
                        "bytes": c.bytes,
                        "log_end_offset": c.log_end_offset,
                        "defects": len(c.defects),
                    }
                    for c in report.partitions
                ],
                "defects": [
                    {"file": str(d.file), "position": d.position, "offset": d.offset, "message": d.message}
                    for d in defects
                ],
            }
        )
    else:
        for text in report.notes:
            note(text)
        hidden = []
        if len(report.partitions) > 1:
            hidden = [
                c.partition.name
                for c in report.partitions
                if not c.defects and is_empty_internal(c.partition.topic, c.bytes)
            ]
            note_hidden_internal(hidden)
        emit_table(
            [
                {
                    "partition": c.partition.name,
                    "segments": len(c.partition.segments),
                    "batches": c.batches,
                    "records": c.records,
                    "bytes": c.bytes,
                    "log end offset": c.log_end_offset,
                    "defects": len(c.defects),
                }
                for c in report.partitions
                if c.partition.name not in hidden
            ],
            title=f"verify {target.path}",
        )
        if quarantine:
            emit_table(
                [{k: row[k] for k in ("file", "bytes", "cut_offset", "source")} for row in quarantine],
                title="quarantined bytes (cut off the log by recovery or log repair; not part of it)",
            )
        for defect in defects:
            console.print(f"DEFECT {defect.describe()}", markup=False, highlight=False)
    if defects:
        first = defects[0]
        more = f" (and {len(defects) - 1} more)" if len(defects) > 1 else ""
        raise CliError(f"verification failed: {first.describe()}{more}")
    if output is OutputFormat.TABLE:
        console.print(f"ok: {report.checked_files} segment files verified, no defects", markup=False)


def _quarantine_rows(target: LogTarget) -> list[dict[str, Any]]:
    """The quarantine files of every partition ``target`` covers (of one segment for a file)."""
    from kompakt.log.quarantine import list_quarantine_files

    only = target.segment.path.name if target.segment is not None else None
    return [
        {
            "partition": part.name,
            "file": str(q.path),
            "bytes": q.size,
            "cut_offset": q.cut_offset,
            "source": q.source,
        }
        for part in target.partitions
        for q in list_quarantine_files(part.path)
        if only is None or q.source == only
    ]


# --------------------------------------------------------------------------------------------
# repair


def _move_dict(move: Any) -> dict[str, Any]:
    return {
        "action": move.action,
        "source": str(move.source),
        "target": None if move.target is None else str(move.target),
        "position": move.position,
        "bytes": move.bytes,
        "first_offset": move.first_offset,
    }


@log_app.command("repair")
def repair_command(
    path: Annotated[Path, typer.Argument(help="A partition directory or a data directory.")],
    execute: Annotated[
        bool, typer.Option("--execute", help="Act; without it, only show what would be moved.")
    ] = False,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Cut each log at its first invalid batch, moving the rest into quarantine files beside it.

    The cut crash recovery makes above the recovery point, for damage below it (flushed data,
    which keeps a partition offline until an operator decides): the segment is truncated after
    its last valid batch and every later segment goes, and none of the bytes are deleted (they
    are moved to ``<segment>.corrupt-<offset>`` files, which ``kompakt log verify`` lists). A dry
    run by default; ``--execute`` takes the data directory's lock, so a running broker's
    directory is refused.
    """
    from kompakt.clock import SystemClock
    from kompakt.log.config import LogConfig
    from kompakt.log.manager import lock_data_dir
    from kompakt.log.repair import RepairPlan, execute_repair, plan_repair

    target = _target(path)
    if target.kind == "segment":
        raise CliUsageError("repair needs a partition directory or a data directory, not a segment file")
    stored = stored_topic_configs(target.data_dir)
    broker = BrokerConfig.from_properties({})
    lock_fd: int | None = None
    if execute and target.data_dir is not None:
        try:
            lock_fd = lock_data_dir(target.data_dir)
        except LogDirectoryError as exc:
            raise CliError(str(exc)) from None
    plans: list[tuple[Any, RepairPlan]] = []
    try:
        for part in target.partitions:
            try:
                config = LogConfig.from_overrides(stored.get(part.topic, {}), broker)
            except ConfigError as exc:
                raise CliUsageError(f"{part.name}: {exc}") from None
            if execute:
                plan = execute_repair(
                    part.path,
                    config,
                    topic_partition=part.name,
                    now_ms=SystemClock().now_ms(),
                    data_dir=target.data_dir,
                )
            else:
                plan = plan_repair(part.path, config)
            plans.append((part, plan))
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    verb = ("cut", "moved") if execute else ("would cut", "would move")
    rows = [
        {
            "partition": part.name,
            "path": str(part.path),
            "status": "ok" if plan.cut is None else verb[0],
            "cut": None
            if plan.cut is None
            else {
                "file": str(plan.cut.segment.log_path),
                "position": plan.cut.position,
                "offset": plan.cut.cut_offset,
                "reason": plan.cut.reason,
            },
            "log_end_offset": plan.log_end_offset,
            "moves": [_move_dict(m) for m in plan.moves],
            "pending_files": list(plan.pending_files),
        }
        for part, plan in plans
    ]
    if output is OutputFormat.JSON:
        emit_json({"execute": execute, "path": str(target.path), "partitions": rows})
        return
    emit_table(
        [
            {
                "partition": r["partition"],
                "status": r["status"],
                "cut at": "-"
                if r["cut"] is None
                else f"{Path(r['cut']['file']).name} byte {r['cut']['position']}",
                "log end offset": r["log_end_offset"],
                "files": len(r["moves"]),
                "reason": "" if r["cut"] is None else r["cut"]["reason"],
            }
            for r in rows
        ],
        title=f"repair {target.path}" + ("" if execute else " (dry run)"),
    )
    moves = [dict(m, partition=r["partition"]) for r in rows for m in r["moves"]]
    if moves:
        emit_table(
            [
                {
                    "partition": m["partition"],
                    "action": m["action"] if m["target"] is not None else "drop (all zero)",
                    "from": f"{Path(m['source']).name} byte {m['position']}"
                    if m["action"] == "copy"
                    else Path(m["source"]).name,
                    "to": "-" if m["target"] is None else Path(m["target"]).name,
                    "bytes": m["bytes"],
                    "first offset": m["first_offset"],
                }
                for m in moves
            ],
            title="quarantine " + ("moves" if execute else "moves planned"),
        )
    for r in rows:
        if r["pending_files"] and not execute:
            console.print(
                f"{r['partition']}: interrupted swap or temporary files ({', '.join(r['pending_files'])}); "
                "--execute finishes them first and plans again",
                markup=False,
            )
    cuts = sum(1 for r in rows if r["cut"] is not None)
    moved = sum(m["bytes"] for m in moves if m["target"] is not None)
    if not cuts:
        console.print(
            f"ok: every batch of {len(rows)} partition(s) is valid, nothing to repair", markup=False
        )
    elif execute:
        console.print(f"repaired {cuts} partition(s): {moved} bytes moved to quarantine", markup=False)
    else:
        console.print(
            f"dry run: {cuts} partition(s) to cut, {moved} bytes to move to quarantine; nothing changed "
            "(run again with --execute)",
            markup=False,
        )


# --------------------------------------------------------------------------------------------
# explain


def parse_now(value: str | None) -> int:
    """``--now`` as epoch milliseconds or ISO-8601 (UTC when no zone is given); the system clock
    when not given."""
    from kompakt.clock import SystemClock, parse_time_ms

    if value is None:
        return SystemClock().now_ms()
    try:
        return parse_time_ms(value)
    except ValueError as exc:
        raise CliUsageError(f"--now: {exc}") from None


def _note_skipped(defaults: BrokerDefaults) -> None:
    for names, what in (
        (defaults.skipped, "setting(s) kompakt does not use"),
        (defaults.unknown, "setting(s) unknown to Kafka 4.1"),
    ):
        if names:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            err_console.print(
                f"note: --server-properties: ignored {len(names)} {what}: {shown}",
                markup=False,
                highlight=False,
            )


def cluster_readers(bootstrap: str, topics: list[str], timeout_s: float = 10.0) -> FixedPositions:
    """The committed offsets of every consumer group of a running cluster on ``topics``, as the
    broker's reader hold sees them (named groups that exist hold; ``kompakt-backup.*`` groups are
    registered backups)."""
    from kompakt.backup.errors import BackupError
    from kompakt.backup.kafka import Client
    from kompakt.broker.readers import BACKUP_READER_PREFIX

    client = Client(bootstrap, timeout_s)
    try:
        listing = client.result(
            client.admin.list_consumer_groups(request_timeout=timeout_s), "cannot list groups"
        )
        by_group = client.group_offsets(set(topics))
    except BackupError as exc:
        raise CliError(f"cannot read the consumer groups of {bootstrap}: {exc}") from None
    offsets: dict[tuple[str, int], dict[str, int]] = {}
    registered: dict[tuple[str, int], dict[str, int]] = {}
    for group, per_topic in by_group.items():
        for topic, per_partition in per_topic.items():
            for partition, offset in per_partition.items():
                tp = (topic, int(partition))
                offsets.setdefault(tp, {})[group] = offset
                if group.startswith(BACKUP_READER_PREFIX):
                    registered.setdefault(tp, {})[group] = offset
    return FixedPositions(offsets, registered, known={g.group_id for g in listing.valid})


def _cluster_configs_of(
    bootstrap: str, target: LogTarget, topics: list[str], timeout_s: float
) -> ClusterConfigs:
    """The cluster's configs for the directory's topics and for the directory's own broker (its
    ``meta.properties`` node.id); topics the cluster does not know are said in a note."""
    from kompakt.errors import CorruptCheckpointError
    from kompakt.log.metadata_files import read_meta_properties

    meta = None
    if target.data_dir is not None:
        try:
            meta = read_meta_properties(target.data_dir)
        except CorruptCheckpointError:
            meta = None
    found = cluster_configs(
        bootstrap,
        topics,
        timeout_s,
        node_id=None if meta is None else meta.node_id,
        cluster_id=None if meta is None else meta.cluster_id,
    )
    for text in found.notes:
        note(text)
    if found.unknown_topics:
        note(
            f"the cluster at {bootstrap} does not know topic(s) {', '.join(found.unknown_topics)} "
            "(deleted since, or another cluster's): explained without the cluster's configs"
        )
    return found


@log_app.command("explain")
def explain_command(
    path: Annotated[Path, typer.Argument(help="A partition directory or a data directory.")],
    now: Annotated[
        str | None, typer.Option("--now", help="Explain at this time: epoch ms or ISO-8601.")
    ] = None,
    config: ConfigOpt = None,
    broker_configs: BrokerConfigOpt = None,
    server_properties: ServerPropertiesOpt = None,
    bootstrap: Annotated[
        str | None,
        typer.Option(
            "--bootstrap-server",
            "--bootstrap",
            callback=bootstrap_value,
            help="Read topic and broker configs from a running cluster (HOST:PORT or kafka://HOST:PORT).",
        ),
    ] = None,
    bootstrap_timeout: Annotated[
        float, typer.Option("--bootstrap-timeout", help="Seconds to wait for the cluster.")
    ] = 10.0,
    output: OutputOpt = OutputFormat.TABLE,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write the log map as one self-contained HTML file instead."),
    ] = None,
    summary_only: Annotated[
        bool, typer.Option("--summary", help="Only the one-row-per-partition summary, no details.")
    ] = False,
) -> None:
    """Why a partition is or is not compacting, with the numbers and the event that will change it.

    For a directory of several partitions a summary table comes first, one row per partition."""
    from kompakt.inspect.explain import ConfigInput, explain_partition, source_from_files

    target = _target(path)
    partitions = _topic_partitions(target)
    now_ms = parse_now(now)
    announce_kernel_compile()
    cli_overrides = parse_pairs(config, "--config")
    stored = stored_topic_configs(target.data_dir)
    metadata = load_metadata(target.data_dir)
    stray_partitions(metadata, partitions)
    cluster: dict[str, dict[str, str]] = {}
    cluster_broker: dict[str, tuple[str, str]] = {}
    topics = sorted({p.topic for p in partitions})
    if bootstrap is not None:
        found = _cluster_configs_of(bootstrap, target, topics, bootstrap_timeout)
        cluster, cluster_broker = found.topics, found.broker
    defaults = resolve_broker_defaults(
        server_properties=server_properties,
        data_dir=target.data_dir,
        cluster=cluster_broker,
        broker_config_items=broker_configs,
        cluster_metadata=metadata,
    )
    broker = defaults.config
    _note_skipped(defaults)
    readers: FixedPositions | None = None
    if bootstrap is not None:
        readers = cluster_readers(bootstrap, topics, bootstrap_timeout)
    reports = []
    sources = []
    for part in partitions:
        overrides: dict[str, str] = {}
        origins: dict[str, str] = {}
        for origin, values in (
            ("kompakt-topics.json", stored.get(part.topic, {})),
            (TOPIC_ORIGIN, {} if metadata is None else metadata.topic_overrides(part.topic)),
            (f"cluster {bootstrap}", cluster.get(part.topic, {})),
            ("--config", cli_overrides),
        ):
            for name, value in values.items():
                overrides[name] = value
                origins[name] = origin
        inp = ConfigInput(overrides, origins, broker, "--broker-config", defaults.origins)
        try:
            source = source_from_files(part, target.data_dir)
            if readers is not None:
                named = LogConfig.from_overrides(overrides, broker).kompakt_tombstone_retain_for_groups
                source = dataclasses.replace(
                    source, readers=readers.positions(part.topic, part.partition, named)
                )
            report = explain_partition(source, inp, now_ms)
        except ConfigError as exc:
            raise CliUsageError(f"{part.name}: {exc}") from None
        reports.append(report)
        sources.append(source)
    if output is OutputFormat.JSON and html is None:
        emit_json([r.to_dict() for r in reports])
        return
    # A directory's listing leaves out the internal topics' empty partitions (Kafka makes 50 for
    # __consumer_offsets); one partition asked for by name is always shown.
    shown = list(zip(reports, sources, strict=True))
    if len(reports) > 1:
        note_hidden_internal(
            [f"{r.topic}-{r.partition}" for r in reports if is_empty_internal(r.topic, r.total_bytes)]
        )
        shown = [(r, src) for r, src in shown if not is_empty_internal(r.topic, r.total_bytes)]
    if server_properties is None and bootstrap is None:
        _note_policy_default([r for r, _ in shown])
    if html is not None:
        from kompakt.server.web import export_page

        html.write_text(export_page(shown, now_ms, str(path)), "utf-8")
        console.print(f"wrote the log map of {len(shown)} partitions to {html}", markup=False)
        return
    if len(reports) > 1 or summary_only:
        _explain_summary([r for r, _ in shown])
    if summary_only:
        return
    for report, _ in shown:
        _explain_tables(report)


def _note_policy_default(reports: list[Any]) -> None:
    """Say so when "cleanup.policy is delete" rests on Kafka's default alone: the broker's
    ``log.cleanup.policy`` (Kafka's compaction guide sets it to compact in ``server.properties``)
    is not in a log directory, so offline the verdict is only as right as the broker it is given."""
    names = [
        f"{r.topic}-{r.partition}"
        for r in reports
        if r.verdict == "not compacting: cleanup.policy is delete"
        and any(c.name == "cleanup.policy" and c.source == "Kafka default" for c in r.configs)
    ]
    if names:
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        err_console.print(
            f"note: {shown} take Kafka's default cleanup.policy=delete; if the broker sets "
            "log.cleanup.policy=compact, give its --server-properties FILE or --bootstrap HOST:PORT",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def short_verdict(verdict: str) -> str:
    """The verdict's head, without the numbers behind it: ``not compacting``, ``nothing to
    clean``, ``not eligible until <time>``, ``will be cleaned at the next cleaner pass``."""
    for stop in (": ", ", because", " ("):
        head, sep, _ = verdict.partition(stop)
        if sep:
            verdict = head
    return verdict


def _explain_summary(reports: list[Any]) -> None:
    """One row per partition, before the details: a directory of many partitions is otherwise
    some 50 lines each with nothing to compare them by."""
    rows = [
        {
            "partition": f"{r.topic}-{r.partition}",
            "verdict": short_verdict(r.verdict),
            "dirty": f"{r.dirty_ratio:.2f}",
            "bytes": r.total_bytes,
        }
        for r in reports
    ]
    eligible = sum(1 for r in reports if r.eligible)
    emit_table(rows, title=f"{len(reports)} partitions, {eligible} eligible to clean now")


def _explain_tables(r: Any) -> None:
    title = f"{r.topic}-{r.partition} at {iso(r.now_ms)}"
    console.print(f"\n[bold]{title}[/bold]")
    console.print(f"verdict: {r.verdict}", markup=False, highlight=False)
    emit_table(
        [{"config": c.name, "value": c.value, "source": c.source} for c in r.configs],
        title="effective configs",
    )
    console.print(
        f"log start {r.log_start_offset}, first dirty {r.first_dirty_offset}, first uncleanable "
        f"{r.first_uncleanable_offset}, last stable {r.last_stable_offset}, log end {r.log_end_offset}; "
        f"dirty ratio {r.dirty_ratio:.4f} vs min.cleanable.dirty.ratio "
        f"{r.min_cleanable_dirty_ratio} (must be >)",
        markup=False,
        highlight=False,
    )
    emit_table(
        [
            {"section": s.name, "offsets": f"[{s.first_offset}, {s.end_offset})", "bytes": s.bytes}
            for s in r.sections
        ],
        title="sections",
    )
    emit_table(
        [
            {
                "bound": h.kind,
                "offset": h.offset,
                "until": iso(h.until_ms) if h.until_ms is not None else "-",
                "binding": "yes" if h.binding else "",
                "detail": h.detail,
            }
            for h in r.holds
        ],
        title="what holds the uncleanable part",
    )
    emit_table(
        [
            {
                "segment": s.base_offset,
                "end": s.end_offset,
                "bytes": s.size_bytes,
                "records": s.records,
                "section": s.section,
                "largest ts": iso(s.largest_timestamp_ms),
                "est. earliest ts": iso(s.estimated_earliest_timestamp_ms),
                "max-lag deadline": iso(s.max_lag_deadline_ms),
                "overdue": "yes" if s.overdue else "",
            }
            for s in r.segments
        ],
        title="segments",
    )
    console.print(
        f"max.compaction.lag.ms {r.max_lag.max_compaction_lag_ms}: must-clean ratio "
        f"{r.max_lag.must_clean_ratio:.4f}, overdue by {r.max_lag.delay_ms} ms, deadline "
        f"{iso(r.max_lag.deadline_ms)} ({r.max_lag.deadline_detail})",
        markup=False,
        highlight=False,
    )
    a = r.active
    console.print(
        f"active segment {a.base_offset}: {a.size_bytes} bytes, {a.records} records, age "
        f"{'-' if a.age_ms is None else a.age_ms} ms; rolls {a.rolls}",
        markup=False,
        highlight=False,
    )
    t = r.tombstones
    console.print(
        f"tombstones: {t.total} ({t.live} live): {t.past_horizon} past their horizon, "
        f"{t.stamped_waiting} waiting "
        f"for delete.retention.ms (earliest {iso(t.earliest_waiting_horizon_ms)}), {t.unstamped_cleanable} "
        f"to be stamped at the next clean, {t.unstamped_uncleanable} not cleanable yet",
        markup=False,
        highlight=False,
    )
    if t.listed:
        emit_table(
            [
                {"offset": x.offset, "key": x.key, "horizon": iso(x.delete_horizon_ms), "state": x.state}
                for x in t.listed
            ],
            title="live tombstones",
        )
    if r.readers is not None:
        console.print(f"readers: {r.readers.detail}", markup=False, highlight=False)
        for g in r.readers.groups:
            console.print(f"  {g.detail}", markup=False, highlight=False)
    k, m = r.keys, r.offset_map
    console.print(
        f"keys: {k.live_keys} live keys ({k.live_records} with values) in {k.records} records "
        f"({k.null_key_records} without a key); dirty section: {k.dirty_records} records, "
        f"{k.dirty_distinct_keys} distinct keys; estimated size after compaction "
        f"{r.estimated_bytes_after} of "
        f"{r.total_bytes} bytes",
        markup=False,
        highlight=False,
    )
    console.print(
        f"offset map: {m.dirty_distinct_keys} dirty keys need {m.raw_bytes_needed} bytes at 24 B/slot, "
        f"{m.bytes_needed} at load factor {m.load_factor}; the buffer per thread "
        f"({m.buffer_per_thread} bytes of "
        f"{m.dedupe_buffer_size}, {m.threads} threads) holds {m.keys_per_pass} keys per pass: "
        f"{'fits in one pass' if m.fits else f'{m.passes_needed} passes'}",
        markup=False,
        highlight=False,
    )


# --------------------------------------------------------------------------------------------
# compact


@log_app.command("compact")
def compact_command(
    path: Annotated[Path, typer.Argument(help="A stopped data directory or one partition directory in it.")],
    config: ConfigOpt = None,
    broker_configs: BrokerConfigOpt = None,
    server_properties: ServerPropertiesOpt = None,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Compact a stopped directory with the broker's cleaner code (refuses a directory in use)."""
    from kompakt.cleaner.offline import compact_directory
    from kompakt.clock import SystemClock

    target = _target(path)
    if target.kind == "segment":
        raise CliUsageError("compact needs a data directory or a partition directory, not a segment file")
    partitions = _topic_partitions(target)
    overrides = parse_pairs(config, "--config")
    for name in overrides:
        if name not in TOPIC_CONFIGS:
            raise CliUsageError(f"--config: unknown topic config {name!r}")
    metadata = load_metadata(target.data_dir)
    stray_partitions(metadata, partitions)
    defaults = resolve_broker_defaults(
        server_properties=server_properties,
        data_dir=target.data_dir,
        broker_config_items=broker_configs,
        cluster_metadata=metadata,
    )
    broker = defaults.config
    _note_skipped(defaults)
    announce_kernel_compile()
    quiet = output is OutputFormat.JSON
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TaskProgressColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    ) as progress:
        overall = progress.add_task("partitions", total=len(partitions), detail="")
        current: dict[str, Any] = {}

        def on_partition(log: Any) -> None:
            if "task" in current:
                progress.update(current["task"], completed=current["total"])
            # The offsets a compaction covers: from the log start to the active segment (never cleaned).
            current["start"] = log.log_start_offset
            current["total"] = max(1, log.active_segment.base_offset - log.log_start_offset)
            current["task"] = progress.add_task(f"  {log.name}", total=current["total"], detail="pass 1")
            current["passes"] = 0
            progress.advance(overall)

        def on_pass(log: Any, result: Any) -> None:
            current["passes"] += 1
            progress.update(
                current["task"],
                completed=min(current["total"], result.end_offset - current["start"]),
                detail=f"pass {current['passes']} to offset {result.end_offset}",
            )

        try:
            results = compact_directory(
                target.path,
                clock=SystemClock(),
                broker_config=broker,
                config_overrides=overrides or None,
                on_partition=on_partition,
                on_pass=on_pass,
                cluster_metadata=metadata,
            )
        except ConfigError as exc:
            raise CliUsageError(str(exc)) from None
        except LogDirectoryError as exc:
            raise CliError(str(exc)) from None
        if "task" in current:
            progress.update(current["task"], completed=current["total"])
        progress.update(overall, completed=len(partitions))
    rows = [
        {
            "partition": f"{r.topic}-{r.partition}",
            "bytes_before": r.bytes_before,
            "bytes_after": r.bytes_after,
            "bytes_reclaimed": r.bytes_reclaimed,
            "records_read": r.records_read,
            "records_written": r.records_written,
            "tombstones_removed": r.tombstones_removed,
            "passes": r.passes,
            "seconds": round(r.seconds, 3),
            "end_offset": r.end_offset,
            "invalid_records": r.invalid_records,
            "markers_removed": r.markers_removed,
            "aborted_records_removed": r.aborted_records_removed,
        }
        for r in results
    ]
    if output is OutputFormat.JSON:
        emit_json(rows)
        return
    if not rows:
        console.print("no compacted partitions (cleanup.policy without compact): nothing done", markup=False)
        return
    hidden = [f"{r.topic}-{r.partition}" for r in results if is_empty_internal(r.topic, r.bytes_before)]
    note_hidden_internal(hidden)
    # The table keeps to the columns an operator reads first; JSON has every count.
    shown = [r for r in rows if r["partition"] not in hidden]
    emit_table(shown, columns=list(rows[0])[:10], title=f"compacted {target.path}")


@log_app.command("replay-check")
def replay_check_command(
    source: Annotated[
        str,
        typer.Argument(help="A partition or data directory (kompakt or Kafka), or kafka://HOST:PORT/TOPIC."),
    ],
    app: Annotated[str, typer.Option("--app", help="module:function, replay(records) -> state.")],
    compare: Annotated[
        str | None, typer.Option("--compare", help="module:function, compare(expected, actual) -> bool.")
    ] = None,
    view: Annotated[
        str, typer.Option("--view", help="read_committed, read_uncommitted or log.")
    ] = "read_committed",
    topic: Annotated[str | None, typer.Option("--topic", help="The topic of a data directory.")] = None,
    partition: Annotated[list[int] | None, typer.Option("--partition", help="Only these partitions.")] = None,
    variants: Annotated[int, typer.Option("--variants", help="Variants sampled from a large log.")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="The sample's seed.")] = 0,
    exhaustive: Annotated[
        bool, typer.Option("--exhaustive", help="Check every variant, however many.")
    ] = False,
    kafka_only: Annotated[
        bool, typer.Option("--kafka-only", help="Leave out kompakt's re-clean passes.")
    ] = False,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Replay an application over legal compactions of a log; exit 1 when its state differs.

    Each partition is checked on its own: the app gets one partition's records (the view's) and
    returns a state, which must equal the state of the whole log on every variant.
    """
    import sys

    from kompakt.testing.replay_check import (
        CompactionCheckError,
        check_compaction_safe,
        load_app,
        sources_for,
    )

    if view not in ("read_committed", "read_uncommitted", "log"):
        raise CliUsageError(f"--view must be read_committed, read_uncommitted or log, got {view!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # --app names a module of the current directory, as python -m does
    try:
        replay = load_app(app)
        compare_fn = load_app(compare) if compare is not None else None
        sources = sources_for(source, topic=topic, partitions=partition)
    except CompactionCheckError as exc:
        raise CliUsageError(str(exc)) from None
    announce_kernel_compile()
    reports = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=output is OutputFormat.JSON,
        transient=True,
    ) as progress:
        for log_source in sources:
            task = progress.add_task(f"{log_source.name} variants", total=None)

            def on_progress(done: int, total: int, task: Any = task) -> None:
                progress.update(task, completed=done, total=total)

            try:
                reports.append(
                    check_compaction_safe(
                        log_source,
                        replay,
                        compare=compare_fn,
                        view=view,  # type: ignore[arg-type]
                        max_variants=variants,
                        exhaustive=True if exhaustive else None,
                        seed=seed,
                        kafka_only=kafka_only,
                        on_progress=on_progress,
                    )
                )
            except CompactionCheckError as exc:
                raise CliError(str(exc)) from None
    rows = [
        {
            "partition": r.source,
            "records": r.records,
            "cut_points": r.cut_points,
            "mode": r.mode,
            "variants": r.plans,
            "replayed": r.checked,
            "seconds": round(r.seconds, 2),
            "result": "ok" if r.ok else "DIFFERS",
        }
        for r in reports
    ]
    failed = [r for r in reports if r.failure is not None]
    if output is OutputFormat.JSON:
        emit_json({"ok": not failed, "partitions": rows, "failures": [r.describe() for r in failed]})
    else:
        emit_table(rows, title=f"replay-check {source} ({view})")
        for report in failed:
            console.print(report.describe(), markup=False, highlight=False)
    if failed:
        raise CliError(f"the state differs on a legal compaction of {', '.join(r.source for r in failed)}")


__all__ = ["log_app", "register"]
