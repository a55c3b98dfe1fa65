"""The manifest: the one JSON document that says what a backup holds (format version 1).

The manifest is the commit point of a backup. Data files are written first; the manifest is
rewritten (atomically) after each file is committed and once more when the run ends, so

* every file the manifest lists exists and has the recorded sha256, and a file it does not list
  is ignored (an interrupted write, to be overwritten by the next run);
* ``status`` is ``complete`` only after a run reached its goal; a run that fails or is interrupted
  leaves ``incomplete`` with everything committed so far, and the next run with the same
  ``backup_id`` resumes from each partition's ``end_offset`` (the offset store).

The full field list is in ``docs/backup-format.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kompakt.backup.errors import CorruptBackupError
from kompakt.backup.storage import Storage

FORMAT_NAME = "kompakt-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STATUS_COMPLETE = "complete"
STATUS_INCOMPLETE = "incomplete"


@dataclass
class FileEntry:
    """One backup segment: batches covering ``first_offset..last_offset`` of one partition."""

    path: str
    first_offset: int
    last_offset: int
    records: int
    tombstones: int
    size: int
    sha256: str
    min_timestamp: int
    max_timestamp: int
    run: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> FileEntry:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__})


@dataclass
class PartitionEntry:
    """A partition's covered range ``[start_offset, end_offset)``, its gaps and files."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    log_start_offset: int
    records: int = 0
    tombstones: int = 0
    bytes: int = 0
    gaps: list[list[int]] = field(default_factory=list)
    files: list[FileEntry] = field(default_factory=list)

    def add_gap(self, first: int, last: int) -> None:
        """Record the missing offsets ``first..last`` (inclusive), merging with the previous gap."""
        if last < first:
            return
        if self.gaps and self.gaps[-1][1] + 1 >= first:
            self.gaps[-1][1] = max(self.gaps[-1][1], last)
        else:
            self.gaps.append([first, last])

    @property
    def gap_offsets(self) -> int:
        return sum(last - first + 1 for first, last in self.gaps)

    def to_json(self) -> dict[str, Any]:
        raw = {k: v for k, v in self.__dict__.items() if k != "files"}
        raw["files"] = [f.to_json() for f in self.files]
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> PartitionEntry:
        entry = cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k != "files"})
        entry.files = [FileEntry.from_json(f) for f in raw["files"]]
        return entry


@dataclass
class TopicEntry:
    """A topic's partition count and configs as the source had them.

    ``configs`` holds only the topic's own overrides (what must be re-created); ``cleanup_policy``
    and ``delete_retention_ms`` are the effective values, defaults included, because restore
    compares the policy and the tombstone horizons need the retention.
    """

    name: str
    partitions: int
    configs: dict[str, str]
    cleanup_policy: str
    delete_retention_ms: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TopicEntry:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__})


@dataclass
class RunEntry:
    """One backup run (incremental runs append one each)."""

    run: int
    started_ms: int
    finished_ms: int | None
    mode: str
    status: str
    records: int = 0
    bytes: int = 0
    ranges: dict[str, list[int]] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunEntry:
        values: dict[str, Any] = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**values)


@dataclass
class Manifest:
    backup_id: str
    created_ms: int
    updated_ms: int
    status: str
    source: dict[str, Any]
    compression: str
    topics: dict[str, TopicEntry] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionEntry] = field(default_factory=dict)
    consumer_groups: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    consumer_groups_ms: int | None = None
    runs: list[RunEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "backup_id": self.backup_id,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "status": self.status,
            "source": self.source,
            "compression": self.compression,
            "topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
            "partitions": [p.to_json() for _, p in sorted(self.partitions.items())],
            "consumer_groups": self.consumer_groups,
            "consumer_groups_ms": self.consumer_groups_ms,
            "runs": [r.to_json() for r in self.runs],
        }

    @classmethod
    def from_json(cls, raw: Any) -> Manifest:
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
            raise CorruptBackupError("not a kompakt backup manifest")
        version = raw.get("version")
        if version != FORMAT_VERSION:
            raise CorruptBackupError(
                f"backup format version {version} is not supported "
                f"(this kompakt reads version {FORMAT_VERSION})"
            )
        try:
            partitions = [PartitionEntry.from_json(p) for p in raw["partitions"]]
            return cls(
                backup_id=raw["backup_id"],
                created_ms=raw["created_ms"],
                updated_ms=raw["updated_ms"],
                status=raw["status"],
                source=raw["source"],
                compression=raw["compression"],
                topics={name: TopicEntry.from_json(t) for name, t in raw["topics"].items()},
                partitions={(p.topic, p.partition): p for p in partitions},
                consumer_groups=raw.get("consumer_groups", {}),
                consumer_groups_ms=raw.get("consumer_groups_ms"),
                runs=[RunEntry.from_json(r) for r in raw.get("runs", [])],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptBackupError(f"malformed manifest: {exc!r}") from None

    def encode(self) -> bytes:
        return (json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n").encode("utf-8")

    # ------------------------------------------------------------------ summaries

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions.values())

    def summary(self) -> dict[str, Any]:
        return {
            "backup_id": self.backup_id,
            "status": self.status,
            "topics": len(self.topics),
            "partitions": len(self.partitions),
            "records": self.records,
            "bytes": self.bytes,
            "runs": len(self.runs),
            "compression": self.compression,
            "updated_ms": self.updated_ms,
        }


def manifest_key(backup_id: str) -> str:
    return f"{backup_id}/{MANIFEST}"


def load_manifest(storage: Storage, backup_id: str) -> Manifest:
    """Read and parse ``<backup_id>/manifest.json``; a missing one names the location."""
    key = manifest_key(backup_id)
    if not storage.exists(key):
        raise CorruptBackupError(f"no backup {backup_id!r} in {storage.describe()} (no {key})")
    data = storage.get(key)
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise CorruptBackupError(f"{storage.describe()}/{key} is not valid JSON: {exc}") from None
    return Manifest.from_json(raw)


def save_manifest(storage: Storage, manifest: Manifest) -> None:
    storage.put(manifest_key(manifest.backup_id), manifest.encode())


def list_backups(storage: Storage) -> list[str]:
    """Backup ids under a storage root: every ``<id>/manifest.json``."""
    ids = []
    for key in storage.list(""):
        parts = key.split("/")
        if len(parts) == 2 and parts[1] == MANIFEST:
            ids.append(parts[0])
    return sorted(ids)
