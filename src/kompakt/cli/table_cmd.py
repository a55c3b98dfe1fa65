"""``kompakt table get|scan|counts|export|diff``: a compacted topic read as a table.

The answer is the latest record per key, as a ``read_committed`` consumer replaying the topic from
its start would end with (tombstoned keys are absent). Every command reads a running kompakt
broker through its admin endpoint (``--admin-url``, the default); with ``--log-dir``, a log
directory on disk (a kompakt data directory or an Apache Kafka log directory, read-only); or with
``kafka://HOST:PORT/TOPIC`` as the topic (or ``--bootstrap HOST:PORT``), a topic on any Kafka
cluster, read by a ``read_committed`` consumer (:mod:`kompakt.table.cluster`), with a progress bar
on a terminal. All three give the same rows. ``table diff`` compares two sources: topics on any
Kafka-compatible cluster, log directories and kompakt backups.

Exit codes: 0, 1 for a key that is absent (``get``) or sources that differ (``diff``) and for
failures, 2 for usage errors.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kompakt.admin.client import DEFAULT_ADMIN_URL, AdminClient
from kompakt.cli.output import (
    CliError,
    CliUsageError,
    OutputFormat,
    bootstrap_value,
    console,
    emit_json,
    emit_table,
)

if TYPE_CHECKING:
    from kompakt.table.cluster import ClusterTopic
    from kompakt.table.partition import PartitionTable
    from kompakt.table.records import TableRecord
    from kompakt.table.service import TableSource

table_app = typer.Typer(help="A compacted topic as a table: look up, scan, count, export, diff.")

UrlOpt = Annotated[
    str, typer.Option("--admin-url", envvar="KOMPAKT_ADMIN_URL", help="The running broker's admin endpoint.")
]
TokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--admin-token-file",
        envvar="KOMPAKT_ADMIN_TOKEN_FILE",
        help="A file with the admin endpoint's bearer token (or set $KOMPAKT_ADMIN_TOKEN).",
    ),
]
LogDirOpt = Annotated[
    Path | None,
    typer.Option("--log-dir", help="Read a log directory on disk instead (kompakt or Apache Kafka)."),
]
OutputOpt = Annotated[OutputFormat, typer.Option("--output", "-o", help="table or json.")]
PartitionOpt = Annotated[int | None, typer.Option("--partition", "-p", help="One partition only.")]
AsOfOpt = Annotated[
    str | None, typer.Option("--as-of", help="The table as of this time (epoch ms or ISO-8601).")
]
EncodingOpt = Annotated[str, typer.Option("--key-encoding", help="How KEY is given: utf8, base64 or hex.")]
BootstrapOpt = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        "--bootstrap",
        callback=bootstrap_value,
        help="Read the topic from a Kafka cluster (HOST:PORT or kafka://HOST:PORT) with a "
        "read_committed consumer; the same as giving the topic as kafka://HOST:PORT/TOPIC.",
    ),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0.1, help="Seconds a cluster may stay silent (kafka:// sources).")
]


def register(app: typer.Typer) -> None:
    if not any(group.name == "table" for group in app.registered_groups):
        app.add_typer(table_app, name="table")


def _as_of(text: str | None) -> int | None:
    if text is None:
        return None
    from kompakt.table.views import ArgumentError, parse_time_ms

    try:
        return parse_time_ms(text)
    except ArgumentError as exc:
        raise CliUsageError(f"--as-of: {exc}") from None


def _key(text: str, encoding: str) -> bytes:
    from kompakt.table.views import ArgumentError, decode_key

    try:
        return decode_key(text, encoding)
    except ArgumentError as exc:
        raise CliUsageError(str(exc)) from None


def _cluster(
    topic: str, bootstrap: str | None, log_dir: Path | None, timeout_s: float
) -> tuple[str, ClusterTopic | None]:
    """The topic's name and, for ``kafka://HOST:PORT/TOPIC`` or ``--bootstrap``, the cluster to read."""
    from kompakt.table.cluster import SCHEME, ClusterTopic, parse_source

    if topic.startswith(SCHEME):
        try:
            given, name = parse_source(topic)
        except ValueError as exc:
            raise CliUsageError(str(exc)) from None
        if name is None:
            raise CliUsageError(f"{topic!r} names no topic: give kafka://HOST:PORT/TOPIC")
        if bootstrap is not None and bootstrap != given:
            raise CliUsageError(f"give the cluster once: {topic!r} or --bootstrap {bootstrap}")
        topic, bootstrap = name, given
    if bootstrap is None:
        return topic, None
    if log_dir is not None:
        raise CliUsageError("give one source: a cluster (kafka:// or --bootstrap) or --log-dir")
    from kompakt.cli.cluster import Cluster

    config = Cluster(bootstrap, timeout_s).base_config()
    config.pop("error_cb", None)
    return topic, ClusterTopic(bootstrap, topic, timeout_s=timeout_s, config=config)


@contextlib.contextmanager
def _reading(source: ClusterTopic, partitions: Sequence[int], passes: int) -> Iterator[None]:
    """A progress bar on stderr (a terminal only) while ``partitions`` are read ``passes`` times;
    cluster errors become one error line."""
    from kompakt.cli.cluster import progress
    from kompakt.table.cluster import ClusterSourceError

    try:
        total = source.span(partitions) * passes
        with progress(total, redirect_stdout=False) as bar:
            task = bar.add_task(f"reading {source.topic} from {source.bootstrap}", total=total)
            source.on_progress = lambda n: bar.advance(task, n)
            try:
                yield
            finally:
                source.on_progress = None
    except ClusterSourceError as exc:
        raise CliError(str(exc)) from None
    finally:
        source.close()


def _cluster_tables(source: ClusterTopic, partition: int | None) -> list[TableSource]:
    from kompakt.table.cluster import ClusterSourceError

    try:
        tables: list[TableSource] = list(source.tables())
    except ClusterSourceError as exc:
        source.close()
        raise CliError(str(exc)) from None
    if partition is not None and partition not in {t.partition for t in tables}:
        source.close()
        raise CliError(
            f"{source.topic}: partition {partition} is not here "
            f"(have {', '.join(str(t.partition) for t in tables)})"
        )
    return [t for t in tables if partition is None or t.partition == partition]


def _offline(log_dir: Path, topic: str) -> list[PartitionTable]:
    """The topic's tables in ``log_dir``, with a note for each thing a Kafka 4 directory's metadata
    log says about them (partitions on other brokers, a deleted topic, a topic not compacted)."""
    from kompakt.cli.kafka_dir import note
    from kompakt.table.offline import cluster_notes, open_tables

    tables: list[PartitionTable] = list(open_tables(log_dir, topic))
    for text in cluster_notes(log_dir, topic, tables):
        note(text)
    return tables


def _iso(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def _shown(text: str | None, b64: str | None) -> str:
    """A key or value for people: its text, ``base64:…`` when it is not UTF-8, ``null`` for none."""
    if b64 is None:
        return "null"
    return text if text is not None else f"base64:{b64}"


def _row(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "partition": data["partition"],
        "offset": data.get("offset"),
        "timestamp": _iso(data.get("timestamp")),
        "key": _shown(data.get("key"), data.get("key_base64")),
        "value": _shown(data.get("value"), data.get("value_base64")),
        "headers": ", ".join(
            f"{h['key']}={_shown(h['value'], h['value_base64'])}" for h in data.get("headers", [])
        ),
    }


def _as_of_note(data: dict[str, Any]) -> None:
    info = data.get("as_of")
    if info and not info.get("complete", True):
        console.print(
            f"note: the answer may be incomplete: {info.get('reason')}", markup=False, highlight=False
        )


@table_app.command("get")
def get_command(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    key: Annotated[str, typer.Argument(help="The key (UTF-8 text unless --key-encoding says otherwise).")],
    key_encoding: EncodingOpt = "utf8",
    partition: PartitionOpt = None,
    partitioner: Annotated[
        str | None,
        typer.Option(
            "--partitioner",
            help="Where the key lives: murmur2 (the Java client's default), crc32 (librdkafka's), "
            "or any (every partition). Default: murmur2 on a broker or a cluster, any with --log-dir.",
        ),
    ] = None,
    as_of: AsOfOpt = None,
    admin_url: UrlOpt = DEFAULT_ADMIN_URL,
    token_file: TokenFileOpt = None,
    log_dir: LogDirOpt = None,
    bootstrap: BootstrapOpt = None,
    timeout_s: TimeoutOpt = 30.0,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """The latest value of KEY in TOPIC (exit code 1 when the key is absent or tombstoned).

    TOPIC may be kafka://HOST:PORT/TOPIC: only the key's partition is read."""
    key_bytes = _key(key, key_encoding)
    as_of_ms = _as_of(as_of)
    topic, cluster = _cluster(topic, bootstrap, log_dir, timeout_s)
    if cluster is not None:
        from kompakt.table import service
        from kompakt.table.views import ArgumentError

        every = _cluster_tables(cluster, None)
        chosen_by = partitioner or "murmur2"
        try:
            chosen = service.choose_partitions(every, key_bytes, partition, chosen_by, len(every))
            with _reading(cluster, [t.partition for t in chosen], 1):
                data = service.lookup(
                    topic,
                    every,
                    key_bytes,
                    partition=partition,
                    partitioner=chosen_by,
                    partition_count=len(every),
                    as_of_ms=as_of_ms,
                )
        except ArgumentError as exc:
            cluster.close()
            raise CliUsageError(str(exc)) from None
        except LookupError as exc:
            cluster.close()
            raise CliError(f"{topic}: {exc}") from None
    elif log_dir is not None:
        from kompakt.table import service
        from kompakt.table.views import ArgumentError

        try:
            data = service.lookup(
                topic,
                _offline(log_dir, topic),
                key_bytes,
                partition=partition,
                partitioner=partitioner or service.ANY_PARTITION,
                as_of_ms=as_of_ms,
            )
        except ArgumentError as exc:
            raise CliUsageError(str(exc)) from None
        except LookupError as exc:
            raise CliError(f"{topic}: {exc}") from None
    else:
        data = AdminClient(admin_url, token_file=token_file).table_get(
            topic, key_bytes, partition=partition, partitioner=partitioner, as_of=as_of_ms
        )
    if output is OutputFormat.JSON:
        emit_json(data)
    elif data["found"]:
        emit_table([_row(data)], title=f"{topic}: key {_shown(data.get('key'), data.get('key_base64'))}")
        location = data.get("location")
        if location:
            console.print(
                f"in {location['segment']} at byte {location['position']} "
                f"(batch {location['batch_base_offset']}-"
                f"{location['batch_last_offset']}, {location['section']} section)",
                markup=False,
                highlight=False,
            )
    if output is not OutputFormat.JSON:
        _as_of_note(data)
    if not data["found"]:
        shown = _shown(data.get("key"), data.get("key_base64"))
        if data.get("tombstone"):
            raise CliError(
                f"key {shown} is deleted in {topic}-{data['partition']} "
                f"(tombstone at offset {data['offset']})"
            )
        raise CliError(f"key {shown} is not in {topic}-{data['partition']}")


def _remote_rows(client: AdminClient, topic: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Every row of a remote scan, following the page cursors."""
    cursor: dict[str, int] | None = {"partition": 0, "offset": 0}
    while cursor is not None:
        page = client.table_scan(
            topic, from_partition=cursor["partition"], from_offset=cursor["offset"], limit=5000, **params
        )
        yield from page["rows"]
        cursor = page.get("next")
        if "as_of" in page:
            _pending_notes.append(page["as_of"])


_pending_notes: list[dict[str, Any]] = []


def _record_of(row: dict[str, Any]) -> TableRecord:
    from kompakt.table.records import TableRecord

    def raw(b64: str | None) -> bytes | None:
        return None if b64 is None else base64.b64decode(b64)

    key = raw(row["key_base64"])
    assert key is not None
    return TableRecord(
        int(row["partition"]),
        int(row["offset"]),
        int(row["timestamp"]),
        key,
        raw(row["value_base64"]),
        tuple((h["key"], raw(h["value_base64"])) for h in row.get("headers", [])),
    )


def _local_records(
    tables: Sequence[TableSource], prefix: bytes, include_tombstones: bool, as_of_ms: int | None
) -> Iterator[TableRecord]:
    from kompakt.table import service

    infos: list[Any] = []
    yield from service.iter_rows(
        tables, prefix=prefix, include_tombstones=include_tombstones, as_of_ms=as_of_ms, infos=infos
    )
    for _, info in infos:
        _pending_notes.append(info.to_json())


def _local_rows(
    tables: Sequence[TableSource], prefix: bytes, include_tombstones: bool, as_of_ms: int | None
) -> Iterator[dict[str, Any]]:
    from kompakt.table.views import record_json

    for record in _local_records(tables, prefix, include_tombstones, as_of_ms):
        yield record_json(record)


@table_app.command("scan")
def scan_command(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    prefix: Annotated[str, typer.Option("--prefix", help="Only keys starting with this.")] = "",
    key_encoding: Annotated[str, typer.Option("--prefix-encoding", help="utf8, base64 or hex.")] = "utf8",
    include_tombstones: Annotated[
        bool, typer.Option("--include-tombstones", help="Also keys whose latest record is a tombstone.")
    ] = False,
    partition: PartitionOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many rows.")] = None,
    as_of: AsOfOpt = None,
    admin_url: UrlOpt = DEFAULT_ADMIN_URL,
    token_file: TokenFileOpt = None,
    log_dir: LogDirOpt = None,
    bootstrap: BootstrapOpt = None,
    timeout_s: TimeoutOpt = 30.0,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """The latest record of every key, partition by partition in offset order (JSON: one per line).

    TOPIC may be kafka://HOST:PORT/TOPIC (each partition is read twice: the keys, then the rows)."""
    prefix_bytes = _key(prefix, key_encoding) if prefix else b""
    as_of_ms = _as_of(as_of)
    _pending_notes.clear()
    topic, cluster = _cluster(topic, bootstrap, log_dir, timeout_s)
    reading: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if cluster is not None:
        tables = _cluster_tables(cluster, partition)
        reading = _reading(cluster, [t.partition for t in tables], 2)
        rows = _local_rows(tables, prefix_bytes, include_tombstones, as_of_ms)
    elif log_dir is not None:
        local = [t for t in _offline(log_dir, topic) if partition is None or t.partition == partition]
        rows = _local_rows(local, prefix_bytes, include_tombstones, as_of_ms)
    else:
        rows = _remote_rows(
            AdminClient(admin_url, token_file=token_file),
            topic,
            partition=partition,
            prefix=base64.b64encode(prefix_bytes).decode() if prefix_bytes else None,
            prefix_encoding="base64" if prefix_bytes else None,
            include_tombstones=include_tombstones,
            as_of=as_of_ms,
        )
    shown: list[dict[str, Any]] = []
    import json

    with reading:
        for n, row in enumerate(rows):
            if limit is not None and n >= limit:
                break
            if output is OutputFormat.JSON:
                sys.stdout.write(json.dumps(row) + "\n")
            else:
                shown.append(_row(row))
    if output is not OutputFormat.JSON:
        emit_table(shown, title=f"{topic}: {len(shown)} keys")
        for note in _pending_notes[:1]:
            _as_of_note({"as_of": note})


@table_app.command("counts")
def counts_command(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    partition: PartitionOpt = None,
    admin_url: UrlOpt = DEFAULT_ADMIN_URL,
    token_file: TokenFileOpt = None,
    log_dir: LogDirOpt = None,
    bootstrap: BootstrapOpt = None,
    timeout_s: TimeoutOpt = 30.0,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Live keys and tombstones per partition, and the memory the key index takes.

    TOPIC may be kafka://HOST:PORT/TOPIC (the index is built as the broker builds it)."""
    topic, cluster = _cluster(topic, bootstrap, log_dir, timeout_s)
    if cluster is not None:
        from kompakt.table import service

        tables = _cluster_tables(cluster, partition)
        with _reading(cluster, [t.partition for t in tables], 1):
            data = service.counts(topic, tables)
    elif log_dir is not None:
        from kompakt.table import service

        local = [t for t in _offline(log_dir, topic) if partition is None or t.partition == partition]
        data = service.counts(topic, local)
    else:
        data = AdminClient(admin_url, token_file=token_file).table_counts(topic, partition)
    if output is OutputFormat.JSON:
        emit_json(data)
        return
    rows = [
        {
            "partition": p["partition"],
            "live keys": p["live_keys"],
            "tombstones": p["tombstones"],
            "index bytes": p["index_bytes"],
            "bytes/key": p["bytes_per_key"],
            "indexed to": p["indexed_to_offset"],
        }
        for p in data["partitions"]
    ]
    emit_table(rows, title=f"{topic}: {data['live_keys']:,} live keys, {data['tombstones']:,} tombstones")


@table_app.command("export")
def export_command(
    topic: Annotated[str, typer.Argument(help="The topic.")],
    out: Annotated[Path, typer.Option("--out", help="The file to write ('-' for stdout).")],
    fmt: Annotated[str, typer.Option("--format", help="parquet, jsonl or csv.")] = "parquet",
    encoding: Annotated[
        str,
        typer.Option("--encoding", help="Keys and values as utf8, base64, hex, or binary (Parquet only)."),
    ] = "utf8",
    prefix: Annotated[str, typer.Option("--prefix", help="Only keys starting with this (UTF-8).")] = "",
    include_tombstones: Annotated[
        bool, typer.Option("--include-tombstones", help="Also tombstoned keys (value null).")
    ] = False,
    partition: PartitionOpt = None,
    as_of: AsOfOpt = None,
    admin_url: UrlOpt = DEFAULT_ADMIN_URL,
    token_file: TokenFileOpt = None,
    log_dir: LogDirOpt = None,
    bootstrap: BootstrapOpt = None,
    timeout_s: TimeoutOpt = 30.0,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Write the latest record of every key to a Parquet, JSON lines or CSV file.

    TOPIC may be kafka://HOST:PORT/TOPIC (each partition is read twice: the keys, then the rows)."""
    from kompakt.table.export import ExportError, export_records, export_tables

    as_of_ms = _as_of(as_of)
    target: Any = sys.stdout.buffer if str(out) == "-" else out
    _pending_notes.clear()
    topic, cluster = _cluster(topic, bootstrap, log_dir, timeout_s)
    try:
        if cluster is not None:
            sources = _cluster_tables(cluster, partition)
            with _reading(cluster, [t.partition for t in sources], 2):
                stats = export_records(
                    _local_records(sources, prefix.encode(), include_tombstones, as_of_ms),
                    target,
                    fmt=fmt,
                    encoding=encoding,
                )
        elif log_dir is not None:
            tables = [t for t in _offline(log_dir, topic) if partition is None or t.partition == partition]
            stats = export_tables(
                tables,
                target,
                fmt=fmt,
                encoding=encoding,
                prefix=prefix.encode(),
                include_tombstones=include_tombstones,
                as_of_ms=as_of_ms,
            )
        else:
            rows = _remote_rows(
                AdminClient(admin_url, token_file=token_file),
                topic,
                partition=partition,
                prefix=base64.b64encode(prefix.encode()).decode() if prefix else None,
                prefix_encoding="base64" if prefix else None,
                include_tombstones=include_tombstones,
                as_of=as_of_ms,
            )
            stats = export_records((_record_of(r) for r in rows), target, fmt=fmt, encoding=encoding)
    except ExportError as exc:
        raise (
            CliUsageError(str(exc))
            if "unknown" in str(exc) or "--encoding" in str(exc)
            else CliError(str(exc))
        ) from None
    if str(out) == "-":
        return
    if output is OutputFormat.JSON:
        emit_json({"file": str(out), "format": fmt, **stats.to_json()})
        return
    console.print(
        f"wrote {stats.rows:,} rows to {out} ({fmt}, {stats.to_json()['seconds']} s)",
        markup=False,
        highlight=False,
    )
    for note in _pending_notes[:1]:
        _as_of_note({"as_of": note})


def _diff_state(spec: str, topic: str, endpoint_url: str | None, timeout_s: float) -> Any:
    """The state of one diff source: ``kafka://HOST:PORT``, a backup, or a log directory."""
    from kompakt.table import diff

    if spec.startswith("kafka://"):
        return diff.state_of_cluster(spec[len("kafka://") :].rstrip("/"), topic, timeout_s=timeout_s)
    if spec.startswith("s3://") or (Path(spec) / "manifest.json").exists():
        from kompakt.backup.storage import parse_location
        from kompakt.backup.table_source import backup_tables

        root, _, backup_id = spec.rstrip("/").rpartition("/")
        if not backup_id or not root:
            raise CliUsageError(f"{spec!r} should be LOCATION/BACKUP_ID for a backup")
        tables = backup_tables(parse_location(root, endpoint_url=endpoint_url), backup_id, topic)
        return diff.state_of_tables(f"{topic} in backup {spec}", tables)
    path = Path(spec)
    if not path.exists():
        raise CliUsageError(
            f"{spec!r} is not a source: give kafka://HOST:PORT, a backup (LOCATION/BACKUP_ID), "
            "or a log directory"
        )
    return diff.state_of_tables(f"{topic} in {spec}", _offline(path, topic))


@table_app.command("diff")
def diff_command(
    a: Annotated[
        str, typer.Argument(help="kafka://HOST:PORT, a backup LOCATION/BACKUP_ID, or a log directory.")
    ],
    b: Annotated[str, typer.Argument(help="The other source, in the same forms.")],
    topic: Annotated[str, typer.Option("--topic", "-t", help="The topic to compare.")],
    topic_b: Annotated[
        str | None, typer.Option("--topic-b", help="The topic's name in B, if it differs.")
    ] = None,
    by_key: Annotated[
        bool,
        typer.Option(
            "--by-key", help="Compare keys wherever they live (sources with other partition counts)."
        ),
    ] = False,
    examples: Annotated[int, typer.Option("--examples", help="Differing keys to list.")] = 20,
    endpoint_url: Annotated[
        str | None, typer.Option("--endpoint-url", help="S3-compatible endpoint.")
    ] = None,
    timeout_s: Annotated[float, typer.Option("--timeout", help="Seconds a cluster may stay silent.")] = 30.0,
    output: OutputOpt = OutputFormat.TABLE,
) -> None:
    """Whether two sources hold the same latest value for every key (exit code 1 when they differ).

    Offsets, compaction progress, gaps, timestamps and headers are not differences."""
    from kompakt.backup.errors import BackupError
    from kompakt.table.diff import DiffSourceError, compare

    try:
        state_a = _diff_state(a, topic, endpoint_url, timeout_s)
        state_b = _diff_state(b, topic_b or topic, endpoint_url, timeout_s)
    except (DiffSourceError, BackupError) as exc:
        raise CliError(str(exc)) from None
    result = compare(state_a, state_b, by_key=by_key, examples=examples)
    if output is OutputFormat.JSON:
        emit_json(result.to_json())
    else:
        for note in result.notes:
            console.print(f"note: {note}", markup=False, highlight=False)
        if result.examples:
            emit_table(
                [
                    {
                        "difference": d.kind.replace("_", " ").replace(" a", " A").replace(" b", " B"),
                        "partition": "" if d.partition is None else d.partition,
                        "key": _shown(d.to_json()["key"], d.to_json()["key_base64"]),
                    }
                    for d in result.examples
                ],
                title="differences (examples)",
            )
        console.print(
            f"{'equal' if result.equal else 'different'}: A has {result.keys_a:,} live keys, "
            f"B {result.keys_b:,}; {result.only_in_a:,} only in A, {result.only_in_b:,} only in B, "
            f"{result.value_differs:,} with other values",
            markup=False,
            highlight=False,
        )
    if not result.equal:
        raise typer.Exit(1)
