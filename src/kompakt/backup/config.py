"""The YAML files of ``kompakt backup`` and ``kompakt restore``, parsed and checked up front.

The shape is OSO kafka-backup's (``mode``, ``backup_id``, ``source``/``target``, ``storage``,
``backup``/``restore``, ``offset_storage``, ``metrics``), and every key of OSO's configuration
reference is accepted, so an OSO file runs as it is:

* keys that mean the same thing here do the same thing (``topic_mapping``, ``time_window_*``,
  ``source_partitions``, ``partition_mapping``, ``create_topics``, ``consumer_groups`` with
  ``reset_consumer_offsets``, ``consumer_group_strategy``, ``include_original_offset_header``
  with OSO's binary ``x-original-*`` headers, rate limits, ``produce_*``, ``dry_run``,
  ``offset_report``, ``security``, ``fetch_max_bytes``, ``segment_max_records`` ...);
* keys that only tune OSO's own engine (``checkpoint_state``, ``offset_storage``, ``metrics``,
  the restore's ``max_concurrent_partitions`` ...) are accepted with a note saying they have no
  effect (the backup's ``max_concurrent_partitions`` acts: that many partitions are read at once);
* a value kompakt cannot honour (``storage.backend: azure``, ``start_offset: specific``,
  ``purge_topics: true``, ``repartitioning``) is an error, never silently ignored;
* an unknown key is an error with a "did you mean" hint (OSO only warns, which lets a typo
  such as ``consumer_group_stratgy`` restore without the setting).

``${VAR}`` is replaced by the environment variable, as OSO does; an unset variable is an error
here (OSO substitutes an empty string). Where kompakt's defaults differ from OSO's they are listed
in ``docs/backup-format.md`` (``create_topics`` true, ``consumer_group_snapshot`` true,
``segment_max_bytes`` 64 MiB). Every mistake is reported with the path of the offending key before
anything connects or writes, because a backup that fails half-way for a typo is worse than one that
never starts.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kompakt.backup.errors import BackupConfigError
from kompakt.backup.storage import FilesystemStorage, S3Storage, Storage
from kompakt.clock import parse_time_ms
from kompakt.config.defs import closest

BACKUP_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
COMPRESSIONS = ("zstd", "lz4", "none")


def _get(
    section: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...], default: Any
) -> Any:
    value = section.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise BackupConfigError(f"{where}.{key} must be {names}, got {value!r}")
    return value


def _section(raw: Mapping[str, Any], key: str, where: str = "") -> dict[str, Any]:
    path = f"{where}.{key}" if where else key
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BackupConfigError(f"{path} must be a mapping")
    return value


def _check_keys(
    section: Mapping[str, Any],
    allowed: set[str],
    where: str,
    *,
    inert: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> None:
    """Unknown keys are an error with the nearest known key; ``inert`` keys (OSO's, with no
    effect here) are accepted with a note saying why."""
    inert = inert or {}
    known = sorted(allowed | set(inert))
    unknown = sorted(set(section) - set(known))
    if unknown:
        named = []
        for key in unknown:
            hint = closest(str(key), known)
            named.append(f"{key} (did you mean {hint}?)" if hint else str(key))
        raise BackupConfigError(f"{where or 'config'}: unknown key(s) {', '.join(named)}")
    if notes is not None:
        for key, why in inert.items():
            if section.get(key) is not None:
                notes.append(f"{where + '.' if where else ''}{key} has no effect in kompakt: {why}")


def _bool(section: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    return bool(_get(section, key, where, bool, default))


_SECURITY_KEYS = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_ca_location": "ssl.ca.location",
    "ssl_certificate_location": "ssl.certificate.location",
    "ssl_key_location": "ssl.key.location",
    "ssl_key_password": "ssl.key.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "sasl_keytab_path": "sasl.kerberos.keytab",
}


def _security(section: Mapping[str, Any], where: str, notes: list[str]) -> dict[str, str]:
    """OSO's ``security`` section as librdkafka settings (the same names Kafka's clients use)."""
    raw = _section(section, "security", where)
    path = f"{where}.security"
    _check_keys(
        raw,
        set(_SECURITY_KEYS),
        path,
        inert={"sasl_krb5_config_path": "librdkafka reads krb5.conf from $KRB5_CONFIG; set that instead"},
        notes=notes,
    )
    out: dict[str, str] = {}
    for key, name in _SECURITY_KEYS.items():
        value = raw.get(key)
        if value is not None:
            if not isinstance(value, str | int):
                raise BackupConfigError(f"{path}.{key} must be a string, got {value!r}")
            out[name] = str(value)
    return out


def _connection(section: Mapping[str, Any], where: str, notes: list[str]) -> dict[str, str]:
    raw = _section(section, "connection", where)
    path = f"{where}.connection"
    _check_keys(
        raw,
        {"tcp_keepalive", "tcp_nodelay"},
        path,
        inert={
            "keepalive_time_secs": "librdkafka uses the system's keepalive timers",
            "keepalive_interval_secs": "librdkafka uses the system's keepalive timers",
            "connections_per_broker": "librdkafka keeps one connection per broker",
        },
        notes=notes,
    )
    out: dict[str, str] = {}
    if raw.get("tcp_keepalive") is not None:
        out["socket.keepalive.enable"] = str(_bool(raw, "tcp_keepalive", path, True)).lower()
    if raw.get("tcp_nodelay") is not None:
        out["socket.nagle.disable"] = str(_bool(raw, "tcp_nodelay", path, True)).lower()
    return out


_OFFSET_STORAGE = {
    "offset_storage": "kompakt keeps a backup's resume offsets in its manifest, so every run after "
    "the first is incremental without a separate database",
    "metrics": "kompakt's backup and restore report progress on stderr and have no metrics endpoint",
}


def _bootstrap(section: Mapping[str, Any], where: str) -> str:
    value = section.get("bootstrap_servers")
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return ",".join(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise BackupConfigError(f"{where}.bootstrap_servers is required (a host:port string or list)")


def _client_config(section: Mapping[str, Any], where: str, notes: list[str]) -> dict[str, str]:
    """librdkafka settings: OSO's ``security`` and ``connection``, then kompakt's ``client_config``
    (which wins: it names librdkafka's settings directly)."""
    out = _security(section, where, notes)
    out.update(_connection(section, where, notes))
    raw = _get(section, "client_config", where, dict, {})
    out.update({str(k): str(v) for k, v in raw.items()})
    return out


@dataclass(frozen=True)
class StorageConfig:
    backend: str = "filesystem"
    path: str = "./backups"
    bucket: str = ""
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    path_style: bool = False

    def open(self) -> Storage:
        """The backend this section describes (boto3 is needed only for s3)."""
        if self.backend == "s3":
            return S3Storage(
                self.bucket,
                self.prefix,
                endpoint_url=self.endpoint_url,
                region=self.region,
                access_key=self.access_key,
                secret_key=self.secret_key,
                path_style=self.path_style,
            )
        if self.prefix:
            return FilesystemStorage(Path(self.path) / self.prefix.strip("/"))
        return FilesystemStorage(self.path)


def parse_storage(raw: Mapping[str, Any], notes: list[str] | None = None) -> StorageConfig:
    section = _section(raw, "storage")
    notes = [] if notes is None else notes
    backend = _get(section, "backend", "storage", str, "filesystem")
    if backend in ("azure", "gcs", "memory"):
        raise BackupConfigError(
            f"storage.backend {backend} is not supported by kompakt: use filesystem or s3 "
            "(an S3-compatible endpoint works for MinIO, Ceph and GCS's XML API)"
        )
    if backend not in ("filesystem", "s3"):
        raise BackupConfigError(f"storage.backend must be filesystem or s3, got {backend!r}")
    keys = {"backend", "path", "prefix"}
    if backend == "s3":
        keys |= {"bucket", "endpoint", "endpoint_url", "region", "access_key", "secret_key", "path_style"}
    inert = {"allow_http": "the endpoint's scheme (http:// or https://) decides"} if backend == "s3" else {}
    _check_keys(section, keys, "storage", inert=inert, notes=notes)
    if backend == "s3" and not section.get("bucket"):
        raise BackupConfigError("storage.bucket is required for the s3 backend")
    endpoint = _get(section, "endpoint_url", "storage", str, None) or _get(
        section, "endpoint", "storage", str, None
    )
    return StorageConfig(
        backend=backend,
        path=str(_get(section, "path", "storage", str, "./backups")),
        bucket=str(_get(section, "bucket", "storage", str, "")),
        prefix=str(_get(section, "prefix", "storage", str, "")),
        endpoint_url=endpoint,
        region=_get(section, "region", "storage", str, None),
        access_key=_get(section, "access_key", "storage", str, None),
        secret_key=_get(section, "secret_key", "storage", str, None),
        path_style=_bool(section, "path_style", "storage", False),
    )


@dataclass(frozen=True)
class TopicSelection:
    """Names or glob patterns (``orders``, ``events-*``); internal topics only when asked."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    include_internal: bool = False
    internal_topics: tuple[str, ...] = ()
    """Internal topics named one by one (OSO's ``backup.internal_topics``)."""

    def matches(self, topic: str) -> bool:
        if topic in self.internal_topics:
            return not any(fnmatch.fnmatchcase(topic, p) for p in self.exclude)
        if topic.startswith("__") and not self.include_internal:
            return False
        if not any(fnmatch.fnmatchcase(topic, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(topic, p) for p in self.exclude)

    def literal_names(self) -> list[str]:
        """Included entries without glob characters: these must exist, or the backup fails."""
        return [p for p in self.include if not any(c in p for c in "*?[")] + list(self.internal_topics)


@dataclass(frozen=True)
class BackupConfig:
    backup_id: str
    bootstrap_servers: str
    topics: TopicSelection
    storage: StorageConfig
    compression: str = "zstd"
    compression_level: int | None = None
    start_offset: str = "earliest"
    continuous: bool = False
    poll_interval_ms: int = 1000
    checkpoint_interval_ms: int = 10_000
    segment_max_bytes: int = 64 * 1024 * 1024
    batch_max_bytes: int = 1024 * 1024
    consumer_group_snapshot: bool = True
    #: Register as a reader while running (commit the backed-up position of each compacted
    #: partition as group ``kompakt-backup-<backup_id>``, deleted at the end): a kompakt broker
    #: then keeps the tombstones the backup has not copied yet (kompakt.broker.readers).
    register_reader: bool = True
    timeout_s: float = 10.0
    client_config: dict[str, str] = field(default_factory=dict)
    fetch_max_bytes: int | None = None
    segment_max_records: int | None = None
    source_cluster_id: str | None = None
    max_concurrent_partitions: int = 4
    """Partitions read at the same time (OSO's key): each by its own thread and connection."""
    notes: tuple[str, ...] = ()
    """What the file asked for that has no effect here (OSO keys), for the CLI to print."""


def _backup_id(raw: Mapping[str, Any]) -> str:
    value = raw.get("backup_id")
    if not isinstance(value, str) or not BACKUP_ID.match(value):
        raise BackupConfigError("backup_id is required: letters, digits, '.', '_' or '-' (at most 200)")
    return value


def parse_backup_config(raw: Mapping[str, Any]) -> BackupConfig:
    """A ``backup.yaml`` document, already loaded."""
    notes: list[str] = []
    _check_keys(
        raw, {"mode", "backup_id", "source", "storage", "backup"}, "", inert=_OFFSET_STORAGE, notes=notes
    )
    if raw.get("mode", "backup") != "backup":
        raise BackupConfigError(f"mode must be backup in a backup config, got {raw.get('mode')!r}")
    source = _section(raw, "source")
    _check_keys(
        source,
        {"bootstrap_servers", "topics", "client_config", "timeout_s", "security", "connection"},
        "source",
    )
    topics_raw = _section(source, "topics", "source")
    _check_keys(topics_raw, {"include", "exclude", "include_internal"}, "source.topics")
    include = _get(topics_raw, "include", "source.topics", list, ["*"]) or ["*"]
    exclude = _get(topics_raw, "exclude", "source.topics", list, [])
    if not all(isinstance(p, str) and p for p in include + exclude):
        raise BackupConfigError("source.topics.include/exclude must be non-empty lists of names or patterns")
    section = _section(raw, "backup")
    _check_keys(
        section,
        {
            "compression",
            "compression_level",
            "start_offset",
            "continuous",
            "stop_at_current_offsets",
            "poll_interval_ms",
            "checkpoint_interval_ms",
            "checkpoint_interval_secs",
            "segment_max_bytes",
            "segment_max_records",
            "batch_max_bytes",
            "consumer_group_snapshot",
            "include_internal_topics",
            "internal_topics",
            "fetch_max_bytes",
            "source_cluster_id",
            "register_reader",
            "max_concurrent_partitions",
        },
        "backup",
        inert={
            "segment_max_interval_ms": "a file is closed at each checkpoint of a continuous run and at "
            "the end of a run",
            "sync_interval_secs": "the manifest is written at every checkpoint",
            "include_offset_headers": "a backup keeps every record at its original offset (the files are "
            "Kafka batches), so no header is needed",
        },
        notes=notes,
    )
    compression = _get(section, "compression", "backup", str, "zstd").lower()
    if compression not in COMPRESSIONS:
        raise BackupConfigError(
            f"backup.compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}"
        )
    start = section.get("start_offset", "earliest")
    if isinstance(start, dict) or start == "specific":
        raise BackupConfigError(
            "backup.start_offset: specific offsets are not supported; use earliest or latest "
            "(a later run with the same backup_id resumes where the last one stopped)"
        )
    if start not in ("earliest", "latest"):
        raise BackupConfigError(f"backup.start_offset must be earliest or latest, got {start!r}")
    continuous = _bool(section, "continuous", "backup", False)
    snapshot = section.get("stop_at_current_offsets")
    if continuous and snapshot:
        raise BackupConfigError("backup.continuous and backup.stop_at_current_offsets cannot both be true")
    segment_max = int(_get(section, "segment_max_bytes", "backup", int, 64 * 1024 * 1024))
    batch_max = int(_get(section, "batch_max_bytes", "backup", int, 1024 * 1024))
    if segment_max < 1024 or batch_max < 1024:
        raise BackupConfigError("backup.segment_max_bytes and batch_max_bytes must be at least 1024")
    checkpoint_ms = int(_get(section, "checkpoint_interval_ms", "backup", int, 10_000))
    if section.get("checkpoint_interval_secs") is not None:
        checkpoint_ms = int(_get(section, "checkpoint_interval_secs", "backup", int, 10)) * 1000
    internal = _get(section, "internal_topics", "backup", list, [])
    if not all(isinstance(t, str) and t for t in internal):
        raise BackupConfigError("backup.internal_topics must be a list of topic names")
    include_internal = _bool(topics_raw, "include_internal", "source.topics", False) or _bool(
        section, "include_internal_topics", "backup", False
    )
    records_max = _get(section, "segment_max_records", "backup", int, None)
    if records_max is not None and records_max < 1:
        raise BackupConfigError("backup.segment_max_records must be at least 1")
    concurrent = int(_get(section, "max_concurrent_partitions", "backup", int, 4))
    if concurrent < 1:
        raise BackupConfigError("backup.max_concurrent_partitions must be at least 1")
    client_config = _client_config(source, "source", notes)
    return BackupConfig(
        backup_id=_backup_id(raw),
        bootstrap_servers=_bootstrap(source, "source"),
        topics=TopicSelection(tuple(include), tuple(exclude), include_internal, tuple(internal)),
        storage=parse_storage(raw, notes),
        compression=compression,
        compression_level=_get(section, "compression_level", "backup", int, None),
        start_offset=start,
        continuous=continuous,
        poll_interval_ms=int(_get(section, "poll_interval_ms", "backup", int, 1000)),
        checkpoint_interval_ms=checkpoint_ms,
        segment_max_bytes=segment_max,
        batch_max_bytes=min(batch_max, segment_max),
        consumer_group_snapshot=_bool(section, "consumer_group_snapshot", "backup", True),
        register_reader=_bool(section, "register_reader", "backup", True),
        timeout_s=float(_get(source, "timeout_s", "source", (int, float), 10.0)),
        client_config=client_config,
        fetch_max_bytes=_get(section, "fetch_max_bytes", "backup", int, None),
        segment_max_records=records_max,
        source_cluster_id=_get(section, "source_cluster_id", "backup", str, None),
        max_concurrent_partitions=concurrent,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class ErasureConfig:
    """Keys whose every record is dropped, or replaced by one tombstone (``on_match``)."""

    keys: frozenset[bytes] = frozenset()
    on_match: str = "drop"

    @property
    def active(self) -> bool:
        return bool(self.keys)


def _parse_key(text: str) -> bytes:
    """``base64:...`` for binary keys, else the UTF-8 text itself."""
    if text.startswith("base64:"):
        import base64
        import binascii

        try:
            return base64.b64decode(text[len("base64:") :], validate=True)
        except binascii.Error:
            raise BackupConfigError(f"restore.erasure: invalid base64 key {text!r}") from None
    return text.encode("utf-8")


def parse_erasure(section: Mapping[str, Any], base_dir: Path) -> ErasureConfig:
    _check_keys(section, {"keys", "keys_file", "on_match"}, "restore.erasure")
    keys = _get(section, "keys", "restore.erasure", list, [])
    found = {_parse_key(str(k)) for k in keys}
    keys_file = _get(section, "keys_file", "restore.erasure", str, None)
    if keys_file is not None:
        path = Path(keys_file).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise BackupConfigError(f"restore.erasure.keys_file {path}: {exc.strerror or exc}") from None
        found |= {
            _parse_key(line.rstrip("\r")) for line in lines if line.strip() and not line.startswith("#")
        }
    on_match = _get(section, "on_match", "restore.erasure", str, "drop")
    if on_match not in ("drop", "tombstone"):
        raise BackupConfigError(f"restore.erasure.on_match must be drop or tombstone, got {on_match!r}")
    return ErasureConfig(frozenset(found), on_match)


def _time_ms(section: Mapping[str, Any], key: str) -> int | None:
    """Epoch milliseconds, or an ISO-8601 date-time (with an offset, or taken as UTC); YAML may
    already have read it as an int or a datetime."""
    value = section.get(key)
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return parse_time_ms(value)
        except ValueError as exc:
            raise BackupConfigError(f"restore.{key}: {exc}") from None
    raise BackupConfigError(f"restore.{key} must be epoch ms or ISO-8601, got {value!r}")


GROUP_STRATEGIES = ("skip", "header-based", "timestamp-based", "cluster-scan", "manual")
OSO_OFFSET_HEADERS = ("x-original-offset", "x-original-timestamp", "x-source-partition")
"""OSO's original-position headers: offset and timestamp as little-endian int64, the source
partition as little-endian int32 (``restore::helpers::inject_offset_headers``)."""


@dataclass(frozen=True)
class RestoreConfig:
    backup_id: str
    storage: StorageConfig
    bootstrap_servers: str | None = None
    data_dir: str | None = None
    topics: tuple[str, ...] = ()
    topic_selection: TopicSelection | None = None
    """OSO's ``target.topics`` include/exclude, applied to the backup's topics."""
    topic_mapping: dict[str, str] = field(default_factory=dict)
    create_topics: bool = True
    default_replication_factor: int = -1
    time_window_start: int | None = None
    time_window_end: int | None = None
    source_partitions: frozenset[int] | None = None
    partition_mapping: dict[int, int] = field(default_factory=dict)
    record_original_offsets: bool = False
    """kompakt's header ``kompakt.original.offset`` (decimal text)."""
    oso_offset_headers: bool = False
    """OSO's ``x-original-offset``/``x-original-timestamp``/``x-source-partition`` (binary)."""
    consumer_groups: str = "skip"
    """``skip``, ``snapshot`` (commit the translated offsets) or ``manual`` (report them only)."""
    group_names: frozenset[str] | None = None
    """Only these snapshot groups (OSO's ``consumer_groups`` list); None means all of them."""
    erasure: ErasureConfig = field(default_factory=ErasureConfig)
    allow_policy_mismatch: bool = False
    allow_incomplete: bool = False
    producer_compression: str | None = None
    """None: batches are produced with the codec they were stored with; a codec: with that one."""
    produce_batch_size: int | None = None
    produce_acks: int = -1
    produce_timeout_ms: int | None = None
    rate_limit_bytes_per_sec: int | None = None
    rate_limit_records_per_sec: int | None = None
    dry_run: bool = False
    offset_report: str | None = None
    timeout_s: float = 10.0
    client_config: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def offline(self) -> bool:
        return self.data_dir is not None

    def target_topic(self, source: str) -> str:
        return self.topic_mapping.get(source, source)

    def target_partition(self, source: int) -> int:
        return self.partition_mapping.get(source, source)


def _int_map(section: Mapping[str, Any], key: str) -> dict[int, int]:
    raw = _get(section, key, "restore", dict, {})
    try:
        mapping = {int(k): int(v) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise BackupConfigError(f"restore.{key} must map partition numbers to partition numbers") from None
    if any(k < 0 or v < 0 for k, v in mapping.items()):
        raise BackupConfigError(f"restore.{key}: partition numbers are never negative")
    return mapping


def _groups(section: Mapping[str, Any], notes: list[str]) -> tuple[str, frozenset[str] | None]:
    """``(mode, names)`` from kompakt's ``consumer_groups: skip|snapshot`` or OSO's keys.

    OSO: ``consumer_groups`` lists groups, ``reset_consumer_offsets`` (or ``auto_consumer_groups``,
    every group of the backup's snapshot) asks for their offsets to be reset, and
    ``consumer_group_strategy`` says how. kompakt translates each committed offset exactly (to the
    first restored record at or after it, from the delivery reports), so ``header-based``,
    ``timestamp-based`` and ``cluster-scan`` all get that translation; ``manual`` reports it
    without committing; ``skip`` resets nothing.
    """
    strategy = _get(section, "consumer_group_strategy", "restore", str, "skip")
    if strategy not in GROUP_STRATEGIES:
        raise BackupConfigError(
            f"restore.consumer_group_strategy must be one of {', '.join(GROUP_STRATEGIES)}, got {strategy!r}"
        )
    value = section.get("consumer_groups")
    if isinstance(value, str):
        if value not in ("skip", "snapshot"):
            raise BackupConfigError(f"restore.consumer_groups must be skip or snapshot, got {value!r}")
        return value, None
    if value is not None and not (isinstance(value, list) and all(isinstance(g, str) and g for g in value)):
        raise BackupConfigError("restore.consumer_groups must be skip, snapshot or a list of group ids")
    listed = frozenset(value or [])
    auto = _bool(section, "auto_consumer_groups", "restore", False)
    reset = _bool(section, "reset_consumer_offsets", "restore", False) or auto
    if not reset:
        if listed:
            notes.append(
                "restore.consumer_groups lists groups but reset_consumer_offsets is false: no offsets are "
                "reset (as in OSO kafka-backup)"
            )
        return "skip", None
    if strategy == "skip":
        notes.append("restore.consumer_group_strategy is skip: no consumer offsets are reset")
        return "skip", None
    if not listed and not auto:
        notes.append(
            "restore.reset_consumer_offsets is true but no consumer_groups are listed: nothing to reset"
        )
        return "skip", None
    if strategy in ("timestamp-based", "cluster-scan", "header-based"):
        notes.append(
            f"consumer_group_strategy {strategy}: kompakt commits each group's offset translated exactly "
            "(the first restored record at or after the committed offset)"
        )
    return ("manual" if strategy == "manual" else "snapshot"), (None if auto else listed)


def _target_topics(target: Mapping[str, Any]) -> TopicSelection | None:
    """OSO's ``target.topics`` include/exclude, applied to the backup's topics."""
    topics_raw = _section(target, "topics", "target")
    _check_keys(topics_raw, {"include", "exclude"}, "target.topics")
    if not topics_raw:
        return None
    include = _get(topics_raw, "include", "target.topics", list, ["*"]) or ["*"]
    exclude = _get(topics_raw, "exclude", "target.topics", list, [])
    if not all(isinstance(p, str) and p for p in include + exclude):
        raise BackupConfigError("target.topics.include/exclude must be lists of names or patterns")
    return TopicSelection(tuple(include), tuple(exclude), include_internal=True)


def _refuse_unsupported(section: Mapping[str, Any]) -> None:
    if section.get("repartitioning"):
        raise BackupConfigError(
            "restore.repartitioning is not supported by kompakt: records keep their partition "
            "(use partition_mapping to move whole partitions)"
        )
    if _bool(section, "purge_topics", "restore", False):
        raise BackupConfigError(
            "restore.purge_topics is not supported by kompakt: restore into empty or new topics"
        )


def _restore_numbers(
    section: Mapping[str, Any], data_dir: str | None, notes: list[str]
) -> tuple[list[int] | None, dict[int, int], int, bool]:
    """``source_partitions``, ``partition_mapping``, ``produce_acks`` and whether OSO's headers
    are asked for, checked; the positive-number keys checked too."""
    partitions = section.get("source_partitions")
    if partitions is not None and not (
        isinstance(partitions, list)
        and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions)
    ):
        raise BackupConfigError("restore.source_partitions must be a list of partition numbers")
    partition_mapping = _int_map(section, "partition_mapping")
    if data_dir is not None and partition_mapping:
        raise BackupConfigError(
            "restore.partition_mapping needs a restore through the protocol: an offline restore keeps "
            "every partition at its own offsets"
        )
    acks = int(_get(section, "produce_acks", "restore", int, -1))
    if acks not in (-1, 0, 1):
        raise BackupConfigError(f"restore.produce_acks must be -1, 0 or 1, got {acks}")
    oso_headers = _bool(section, "include_original_offset_header", "restore", False) or (
        section.get("consumer_group_strategy") == "header-based"
    )
    for key in (
        "produce_batch_size",
        "produce_timeout_ms",
        "rate_limit_records_per_sec",
        "rate_limit_bytes_per_sec",
    ):
        value = _get(section, key, "restore", int, None)
        if value is not None and value < 1:
            raise BackupConfigError(f"restore.{key} must be at least 1 (leave it out for no limit)")
    if data_dir is not None:
        for key in (
            "rate_limit_records_per_sec",
            "rate_limit_bytes_per_sec",
            "produce_batch_size",
            "produce_acks",
        ):
            if section.get(key) is not None:
                notes.append(f"restore.{key} has no effect on an offline restore (nothing is produced)")
    return partitions, partition_mapping, acks, oso_headers


def parse_restore_config(raw: Mapping[str, Any], base_dir: Path | None = None) -> RestoreConfig:
    """A ``restore.yaml`` document, already loaded; relative files are taken from ``base_dir``."""
    notes: list[str] = []
    _check_keys(
        raw, {"mode", "backup_id", "target", "storage", "restore"}, "", inert=_OFFSET_STORAGE, notes=notes
    )
    if raw.get("mode", "restore") != "restore":
        raise BackupConfigError(f"mode must be restore in a restore config, got {raw.get('mode')!r}")
    target = _section(raw, "target")
    _check_keys(
        target,
        {"bootstrap_servers", "data_dir", "client_config", "timeout_s", "security", "connection", "topics"},
        "target",
    )
    data_dir = _get(target, "data_dir", "target", str, None)
    has_bootstrap = target.get("bootstrap_servers") is not None
    if (data_dir is None) == (not has_bootstrap):
        raise BackupConfigError(
            "target needs exactly one of bootstrap_servers (restore through the protocol) "
            "or data_dir (offline restore into a stopped data directory)"
        )
    selection = _target_topics(target)
    section = _section(raw, "restore")
    _check_keys(
        section,
        {
            "topics",
            "topic_mapping",
            "create_topics",
            "default_replication_factor",
            "time_window_start",
            "time_window_end",
            "source_partitions",
            "partition_mapping",
            "record_original_offsets",
            "include_original_offset_header",
            "consumer_groups",
            "consumer_group_strategy",
            "reset_consumer_offsets",
            "auto_consumer_groups",
            "erasure",
            "allow_policy_mismatch",
            "allow_incomplete",
            "producer_compression",
            "produce_batch_size",
            "produce_acks",
            "produce_timeout_ms",
            "rate_limit_records_per_sec",
            "rate_limit_bytes_per_sec",
            "dry_run",
            "offset_report",
            "repartitioning",
            "purge_topics",
        },
        "restore",
        inert={
            "max_concurrent_partitions": "one idempotent producer restores the partitions in order",
            "checkpoint_state": "a restore is checked whole before it writes; an interrupted one is "
            "re-run into emptied topics",
            "checkpoint_interval_secs": "see checkpoint_state",
        },
        notes=notes,
    )
    _refuse_unsupported(section)
    mapping = _get(section, "topic_mapping", "restore", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()):
        raise BackupConfigError("restore.topic_mapping must map topic names to topic names")
    groups, group_names = _groups(section, notes)
    start, end = _time_ms(section, "time_window_start"), _time_ms(section, "time_window_end")
    if start is not None and end is not None and end < start:
        raise BackupConfigError("restore.time_window_end is before restore.time_window_start")
    producer_compression = _get(section, "producer_compression", "restore", str, None)
    if producer_compression is not None and producer_compression not in (
        "none",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    ):
        raise BackupConfigError(f"restore.producer_compression: unknown codec {producer_compression!r}")
    topics = _get(section, "topics", "restore", list, [])
    partitions, partition_mapping, acks, oso_headers = _restore_numbers(section, data_dir, notes)
    replication = int(_get(section, "default_replication_factor", "restore", int, -1))
    return RestoreConfig(
        backup_id=_backup_id(raw),
        storage=parse_storage(raw, notes),
        bootstrap_servers=_bootstrap(target, "target") if has_bootstrap else None,
        data_dir=data_dir,
        topics=tuple(str(t) for t in topics),
        topic_selection=selection,
        topic_mapping=dict(mapping),
        create_topics=_bool(section, "create_topics", "restore", True),
        default_replication_factor=replication,
        time_window_start=start,
        time_window_end=end,
        source_partitions=None if partitions is None else frozenset(partitions),
        partition_mapping=partition_mapping,
        record_original_offsets=_bool(section, "record_original_offsets", "restore", False),
        oso_offset_headers=oso_headers,
        consumer_groups=groups,
        group_names=group_names,
        erasure=parse_erasure(_section(section, "erasure", "restore"), base_dir or Path.cwd()),
        allow_policy_mismatch=_bool(section, "allow_policy_mismatch", "restore", False),
        allow_incomplete=_bool(section, "allow_incomplete", "restore", False),
        producer_compression=producer_compression,
        produce_batch_size=_get(section, "produce_batch_size", "restore", int, None),
        produce_acks=acks,
        produce_timeout_ms=_get(section, "produce_timeout_ms", "restore", int, None),
        rate_limit_bytes_per_sec=_get(section, "rate_limit_bytes_per_sec", "restore", int, None),
        rate_limit_records_per_sec=_get(section, "rate_limit_records_per_sec", "restore", int, None),
        dry_run=_bool(section, "dry_run", "restore", False),
        offset_report=_get(section, "offset_report", "restore", str, None),
        timeout_s=float(_get(target, "timeout_s", "target", (int, float), 10.0)),
        client_config=_client_config(target, "target", notes),
        notes=tuple(notes),
    )


_ENV = re.compile(r"\$\{([^}]*)\}")


def expand_env(text: str, where: str) -> str:
    """``${VAR}`` replaced by the environment variable, as OSO kafka-backup does; an unset
    variable is an error (OSO substitutes an empty string, which turns a missing secret into a
    failed login, or a ``backup_id`` of ``prod-backup-`` into a different backup)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise BackupConfigError(f"{where}: environment variable {name} is not set (used as ${{{name}}})")
        return found

    return _ENV.sub(value, text)


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file or bad syntax is a config error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BackupConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    text = "\n".join(
        expand_env(line, f"{path}:{number}") if "${" in line and not line.lstrip().startswith("#") else line
        for number, line in enumerate(text.splitlines(), start=1)
    )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BackupConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise BackupConfigError(f"{path} must hold a YAML mapping")
    return data


def load_backup_config(path: Path) -> BackupConfig:
    return parse_backup_config(load_yaml(path))


def load_restore_config(path: Path) -> RestoreConfig:
    return parse_restore_config(load_yaml(path), path.parent)
