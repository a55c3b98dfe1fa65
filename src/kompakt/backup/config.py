"""The YAML files of ``kompakt backup`` and ``kompakt restore``, parsed and checked up front.

The shape follows OSO kafka-backup's example files (``backup_id``, ``source``/``target``,
``storage``, ``backup``/``restore`` sections) so that existing files need few changes. Every
mistake is reported with the path of the offending key before anything connects or writes,
because a backup that fails half-way for a typo is worse than one that never starts.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kompakt.backup.errors import BackupConfigError
from kompakt.backup.storage import FilesystemStorage, S3Storage, Storage

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


def _check_keys(section: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise BackupConfigError(f"{where or 'config'}: unknown key(s) {', '.join(unknown)}")


def _bootstrap(section: Mapping[str, Any], where: str) -> str:
    value = section.get("bootstrap_servers")
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return ",".join(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise BackupConfigError(f"{where}.bootstrap_servers is required (a host:port string or list)")


def _client_config(section: Mapping[str, Any], where: str) -> dict[str, str]:
    raw = _get(section, "client_config", where, dict, {})
    return {str(k): str(v) for k, v in raw.items()}


@dataclass(frozen=True)
class StorageConfig:
    backend: str = "filesystem"
    path: str = "./backups"
    bucket: str = ""
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None

    def open(self) -> Storage:
        """The backend this section describes (boto3 is needed only for s3)."""
        if self.backend == "s3":
            return S3Storage(self.bucket, self.prefix, endpoint_url=self.endpoint_url, region=self.region)
        return FilesystemStorage(self.path)


def parse_storage(raw: Mapping[str, Any]) -> StorageConfig:
    section = _section(raw, "storage")
    _check_keys(section, {"backend", "path", "bucket", "prefix", "endpoint_url", "region"}, "storage")
    backend = _get(section, "backend", "storage", str, "filesystem")
    if backend not in ("filesystem", "s3"):
        raise BackupConfigError(f"storage.backend must be filesystem or s3, got {backend!r}")
    if backend == "s3" and not section.get("bucket"):
        raise BackupConfigError("storage.bucket is required for the s3 backend")
    return StorageConfig(
        backend=backend,
        path=str(_get(section, "path", "storage", str, "./backups")),
        bucket=str(_get(section, "bucket", "storage", str, "")),
        prefix=str(_get(section, "prefix", "storage", str, "")),
        endpoint_url=_get(section, "endpoint_url", "storage", str, None),
        region=_get(section, "region", "storage", str, None),
    )


@dataclass(frozen=True)
class TopicSelection:
    """Names or glob patterns (``orders``, ``events-*``); internal topics only when asked."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    include_internal: bool = False

    def matches(self, topic: str) -> bool:
        if topic.startswith("__") and not self.include_internal:
            return False
        if not any(fnmatch.fnmatchcase(topic, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(topic, p) for p in self.exclude)

    def literal_names(self) -> list[str]:
        """Included entries without glob characters: these must exist, or the backup fails."""
        return [p for p in self.include if not any(c in p for c in "*?[")]


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


def _backup_id(raw: Mapping[str, Any]) -> str:
    value = raw.get("backup_id")
    if not isinstance(value, str) or not BACKUP_ID.match(value):
        raise BackupConfigError("backup_id is required: letters, digits, '.', '_' or '-' (at most 200)")
    return value


def parse_backup_config(raw: Mapping[str, Any]) -> BackupConfig:
    """A ``backup.yaml`` document, already loaded."""
    _check_keys(raw, {"mode", "backup_id", "source", "storage", "backup"}, "")
    if raw.get("mode", "backup") != "backup":
        raise BackupConfigError(f"mode must be backup in a backup config, got {raw.get('mode')!r}")
    source = _section(raw, "source")
    _check_keys(source, {"bootstrap_servers", "topics", "client_config", "timeout_s"}, "source")
    topics_raw = _section(source, "topics", "source")
    _check_keys(topics_raw, {"include", "exclude", "include_internal"}, "source.topics")
    include = _get(topics_raw, "include", "source.topics", list, ["*"])
    exclude = _get(topics_raw, "exclude", "source.topics", list, [])
    if not include or not all(isinstance(p, str) and p for p in include + exclude):
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
            "segment_max_bytes",
            "batch_max_bytes",
            "consumer_group_snapshot",
            "register_reader",
        },
        "backup",
    )
    compression = _get(section, "compression", "backup", str, "zstd").lower()
    if compression not in COMPRESSIONS:
        raise BackupConfigError(
            f"backup.compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}"
        )
    start = _get(section, "start_offset", "backup", str, "earliest")
    if start not in ("earliest", "latest"):
        raise BackupConfigError(f"backup.start_offset must be earliest or latest, got {start!r}")
    continuous = bool(_get(section, "continuous", "backup", bool, False))
    snapshot = section.get("stop_at_current_offsets")
    if continuous and snapshot:
        raise BackupConfigError("backup.continuous and backup.stop_at_current_offsets cannot both be true")
    segment_max = int(_get(section, "segment_max_bytes", "backup", int, 64 * 1024 * 1024))
    batch_max = int(_get(section, "batch_max_bytes", "backup", int, 1024 * 1024))
    if segment_max < 1024 or batch_max < 1024:
        raise BackupConfigError("backup.segment_max_bytes and batch_max_bytes must be at least 1024")
    return BackupConfig(
        backup_id=_backup_id(raw),
        bootstrap_servers=_bootstrap(source, "source"),
        topics=TopicSelection(
            tuple(include),
            tuple(exclude),
            bool(_get(topics_raw, "include_internal", "source.topics", bool, False)),
        ),
        storage=parse_storage(raw),
        compression=compression,
        compression_level=_get(section, "compression_level", "backup", int, None),
        start_offset=start,
        continuous=continuous,
        poll_interval_ms=int(_get(section, "poll_interval_ms", "backup", int, 1000)),
        checkpoint_interval_ms=int(_get(section, "checkpoint_interval_ms", "backup", int, 10_000)),
        segment_max_bytes=segment_max,
        batch_max_bytes=min(batch_max, segment_max),
        consumer_group_snapshot=bool(_get(section, "consumer_group_snapshot", "backup", bool, True)),
        register_reader=bool(_get(section, "register_reader", "backup", bool, True)),
        timeout_s=float(_get(source, "timeout_s", "source", (int, float), 10.0)),
        client_config=_client_config(source, "source"),
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
    """Epoch milliseconds, or an ISO-8601 date-time (with an offset, or taken as UTC)."""
    value = section.get(key)
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise BackupConfigError(f"restore.{key} must be epoch ms or ISO-8601, got {value!r}") from None
        if parsed.tzinfo is None:
            from datetime import UTC

            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    raise BackupConfigError(f"restore.{key} must be epoch ms or ISO-8601, got {value!r}")


@dataclass(frozen=True)
class RestoreConfig:
    backup_id: str
    storage: StorageConfig
    bootstrap_servers: str | None = None
    data_dir: str | None = None
    topics: tuple[str, ...] = ()
    topic_mapping: dict[str, str] = field(default_factory=dict)
    create_topics: bool = True
    time_window_start: int | None = None
    time_window_end: int | None = None
    record_original_offsets: bool = False
    consumer_groups: str = "skip"
    erasure: ErasureConfig = field(default_factory=ErasureConfig)
    allow_policy_mismatch: bool = False
    allow_incomplete: bool = False
    producer_compression: str = "none"
    timeout_s: float = 10.0
    client_config: dict[str, str] = field(default_factory=dict)

    @property
    def offline(self) -> bool:
        return self.data_dir is not None

    def target_topic(self, source: str) -> str:
        return self.topic_mapping.get(source, source)


def parse_restore_config(raw: Mapping[str, Any], base_dir: Path | None = None) -> RestoreConfig:
    """A ``restore.yaml`` document, already loaded; relative files are taken from ``base_dir``."""
    _check_keys(raw, {"mode", "backup_id", "target", "storage", "restore"}, "")
    if raw.get("mode", "restore") != "restore":
        raise BackupConfigError(f"mode must be restore in a restore config, got {raw.get('mode')!r}")
    target = _section(raw, "target")
    _check_keys(target, {"bootstrap_servers", "data_dir", "client_config", "timeout_s"}, "target")
    data_dir = _get(target, "data_dir", "target", str, None)
    has_bootstrap = target.get("bootstrap_servers") is not None
    if (data_dir is None) == (not has_bootstrap):
        raise BackupConfigError(
            "target needs exactly one of bootstrap_servers (restore through the protocol) "
            "or data_dir (offline restore into a stopped data directory)"
        )
    section = _section(raw, "restore")
    _check_keys(
        section,
        {
            "topics",
            "topic_mapping",
            "create_topics",
            "time_window_start",
            "time_window_end",
            "record_original_offsets",
            "include_original_offset_header",
            "consumer_groups",
            "erasure",
            "allow_policy_mismatch",
            "allow_incomplete",
            "producer_compression",
        },
        "restore",
    )
    mapping = _get(section, "topic_mapping", "restore", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()):
        raise BackupConfigError("restore.topic_mapping must map topic names to topic names")
    groups = _get(section, "consumer_groups", "restore", str, "skip")
    if groups not in ("skip", "snapshot"):
        raise BackupConfigError(f"restore.consumer_groups must be skip or snapshot, got {groups!r}")
    start, end = _time_ms(section, "time_window_start"), _time_ms(section, "time_window_end")
    if start is not None and end is not None and end < start:
        raise BackupConfigError("restore.time_window_end is before restore.time_window_start")
    producer_compression = _get(section, "producer_compression", "restore", str, "none")
    if producer_compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise BackupConfigError(f"restore.producer_compression: unknown codec {producer_compression!r}")
    original = section.get("record_original_offsets", section.get("include_original_offset_header", False))
    topics = _get(section, "topics", "restore", list, [])
    return RestoreConfig(
        backup_id=_backup_id(raw),
        storage=parse_storage(raw),
        bootstrap_servers=_bootstrap(target, "target") if has_bootstrap else None,
        data_dir=data_dir,
        topics=tuple(str(t) for t in topics),
        topic_mapping=dict(mapping),
        create_topics=bool(_get(section, "create_topics", "restore", bool, True)),
        time_window_start=start,
        time_window_end=end,
        record_original_offsets=bool(original),
        consumer_groups=groups,
        erasure=parse_erasure(_section(section, "erasure", "restore"), base_dir or Path.cwd()),
        allow_policy_mismatch=bool(_get(section, "allow_policy_mismatch", "restore", bool, False)),
        allow_incomplete=bool(_get(section, "allow_incomplete", "restore", bool, False)),
        producer_compression=producer_compression,
        timeout_s=float(_get(target, "timeout_s", "target", (int, float), 10.0)),
        client_config=_client_config(target, "target"),
    )


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file or bad syntax is a config error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BackupConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
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
